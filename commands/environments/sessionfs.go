package environments

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"

	"lathe/commands/core"

	"lathe/runtime/confine"
	"lathe/runtime/remotefs"
	"lathe/runtime/sandbox"
	"lathe/runtime/watch"
)

// SessionFS is a Session's file root, all the file routes, tree changes,
// Git path checks and the write reconciler need of it. Every name is
// relative to the root and resolved inside it: a path that leaves it fails
// with an error isEscape recognises. Under the local provider it is the
// checkout on the host (localFS, on os.Root); under the remote provider it
// is the clone inside the sandbox (remoteFS, through one helper process).
type SessionFS interface {
	// Lstat describes name itself, a symlink included.
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	// ReadDir lists the directory name (following symlinks inside the
	// root), at most max+1 entries so the caller sees it was cut off; it
	// fails with ENOTDIR for anything but a directory.
	ReadDir(name string, max int) ([]fs.FileInfo, error)
	// ReadRegular opens name following symlinks inside the root, without
	// blocking on a FIFO, and returns what it is; for a regular file also
	// its first limit+1 bytes.
	ReadRegular(name string, limit int64) ([]byte, fs.FileInfo, error)
	// Replace atomically replaces the regular file target (not a symlink)
	// with data, keeping old's mode and, where allowed, owner.
	Replace(target string, old fs.FileInfo, data []byte) (fs.FileInfo, error)
	Mkdir(name string, perm fs.FileMode) error
	// CreateFile creates an empty file; an existing entry is fs.ErrExist.
	CreateFile(name string, perm fs.FileMode) error
	Rename(from, to string) error
	// Remove removes a file, symlink or empty folder; with all a folder
	// and everything in it.
	Remove(name string, all bool) error
	Close() error
}

// SameFile reports whether two infos describe the same file (device and
// inode), for either implementation.
func SameFile(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// LocalFS is the host checkout through os.Root.
type LocalFS struct{ R *os.Root }

func (l LocalFS) Lstat(name string) (fs.FileInfo, error)    { return l.R.Lstat(name) }
func (l LocalFS) Readlink(name string) (string, error)      { return l.R.Readlink(name) }
func (l LocalFS) Mkdir(name string, perm fs.FileMode) error { return l.R.Mkdir(name, perm) }
func (l LocalFS) Rename(from, to string) error              { return l.R.Rename(from, to) }
func (l LocalFS) Close() error                              { return l.R.Close() }

func (l LocalFS) ReadDir(name string, max int) ([]fs.FileInfo, error) {
	// O_DIRECTORY refuses anything else without opening it, and O_NONBLOCK
	// keeps a FIFO swapped in meanwhile from blocking the open.
	dir, err := l.R.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	var out []fs.FileInfo
	for len(out) <= max {
		// A File opened in a Root stats its entries with fstatat on its own
		// descriptor (no symlink following, no path re-resolution).
		batch, err := dir.ReadDir(256)
		for _, de := range batch {
			if fi, ierr := de.Info(); ierr == nil { // else removed since listed
				out = append(out, fi)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (l LocalFS) ReadRegular(name string, limit int64) ([]byte, fs.FileInfo, error) {
	f, err := l.R.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fi, err
	}
	// The file may grow after the stat: read one byte past the limit.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	return data, fi, err
}

func (l LocalFS) Replace(target string, old fs.FileInfo, data []byte) (fs.FileInfo, error) {
	return ReplaceFile(l.R, target, old, data)
}

func (l LocalFS) CreateFile(name string, perm fs.FileMode) error {
	f, err := l.R.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	return f.Close()
}

func (l LocalFS) Remove(name string, all bool) error {
	if all {
		return l.R.RemoveAll(name)
	}
	return l.R.Remove(name)
}

// remoteFS is the clone inside a remote Session's sandbox, through its
// helper (runtime/remotefs).
type remoteFS struct {
	ctx context.Context
	c   *remotefs.Client
}

func (r remoteFS) call(req remotefs.Request, body []byte) (remotefs.Reply, []byte, error) {
	rep, out, err := r.c.Call(r.ctx, req, body)
	var pe *fs.PathError
	switch {
	case err == nil, errors.As(err, &pe): // the helper's own answer about the file
	case errors.Is(err, sandbox.ErrNotFound): // the container went behind Lathe's back
		err = fmt.Errorf("%w: the sandbox is gone: %s", core.ErrConflict, err.Error())
	default: // reaching the helper failed: the engine, not the file (an ENOENT dialing it is no missing file)
		err = fmt.Errorf("%w: the sandbox's file helper: %s", core.ErrUnavailable, err.Error())
	}
	return rep, out, err
}

func (r remoteFS) info(req remotefs.Request, body []byte) (fs.FileInfo, error) {
	rep, _, err := r.call(req, body)
	if err != nil {
		return nil, err
	}
	if rep.Info == nil {
		return nil, errors.New("the file helper answered without the file's metadata")
	}
	return rep.Info.FileInfo(), nil
}

func (r remoteFS) Lstat(name string) (fs.FileInfo, error) {
	return r.info(remotefs.Request{Op: "lstat", Path: name}, nil)
}

func (r remoteFS) Readlink(name string) (string, error) {
	rep, _, err := r.call(remotefs.Request{Op: "readlink", Path: name}, nil)
	return rep.Link, err
}

func (r remoteFS) ReadDir(name string, max int) ([]fs.FileInfo, error) {
	rep, _, err := r.call(remotefs.Request{Op: "readdir", Path: name, Max: max}, nil)
	if err != nil {
		return nil, err
	}
	out := make([]fs.FileInfo, len(rep.Entries))
	for i, e := range rep.Entries {
		out[i] = e.FileInfo()
	}
	return out, nil
}

func (r remoteFS) ReadRegular(name string, limit int64) ([]byte, fs.FileInfo, error) {
	rep, data, err := r.call(remotefs.Request{Op: "read", Path: name, Limit: limit}, nil)
	if err != nil {
		return nil, nil, err
	}
	if rep.Info == nil {
		return nil, nil, errors.New("the file helper answered without the file's metadata")
	}
	return data, rep.Info.FileInfo(), nil
}

func (r remoteFS) Replace(target string, old fs.FileInfo, data []byte) (fs.FileInfo, error) {
	req := remotefs.Request{Op: "replace", Path: target, Perm: uint32(old.Mode().Perm())}
	if st, ok := old.Sys().(*syscall.Stat_t); ok {
		req.UID, req.GID = st.Uid, st.Gid
		req.Perm = st.Mode & 0o7777
	}
	return r.info(req, data)
}

func (r remoteFS) Mkdir(name string, perm fs.FileMode) error {
	_, _, err := r.call(remotefs.Request{Op: "mkdir", Path: name, Perm: uint32(perm.Perm())}, nil)
	return err
}

func (r remoteFS) CreateFile(name string, perm fs.FileMode) error {
	_, _, err := r.call(remotefs.Request{Op: "create", Path: name, Perm: uint32(perm.Perm())}, nil)
	return err
}

func (r remoteFS) Rename(from, to string) error {
	_, _, err := r.call(remotefs.Request{Op: "rename", Path: from, To: to}, nil)
	return err
}

func (r remoteFS) Remove(name string, all bool) error {
	_, _, err := r.call(remotefs.Request{Op: "remove", Path: name, All: all}, nil)
	return err
}

func (r remoteFS) Close() error { return nil } // the helper outlives one request

// fileHelpers holds the file helper of each remote Session's live
// sandbox: one long-lived process per sandbox, closed when the Session's
// live sandbox changes or goes (setLive).
type fileHelpers struct {
	mu sync.Mutex
	by map[string]fileHelper
}

type fileHelper struct {
	sb sandbox.Sandbox
	c  *remotefs.Client
}

// get returns the helper of id's sandbox sb rooted at root, making it
// (and closing one of an older sandbox) when needed.
func (h *fileHelpers) get(id string, sb sandbox.Sandbox, root string) *remotefs.Client {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, ok := h.by[id]; ok {
		if cur.sb == sb {
			return cur.c
		}
		go cur.c.Close()
	}
	if h.by == nil {
		h.by = map[string]fileHelper{}
	}
	c := remotefs.New(sb, root)
	h.by[id] = fileHelper{sb: sb, c: c}
	return c
}

// drop forgets id's helper unless it serves sb, the Session's live
// sandbox, and closes it in the background: a call in flight ends first.
func (h *fileHelpers) drop(id string, sb sandbox.Sandbox) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, ok := h.by[id]; ok && (sb == nil || cur.sb != sb) {
		go cur.c.Close()
		delete(h.by, id)
	}
}

// ReconcileRoot is the root a cut-off write is checked in: the host
// checkout, or under the remote provider the clone in the Session's live
// sandbox through a helper of its own (none live: the clone cannot be read).
func (s *Sandboxes) ReconcileRoot(id, workingDir string) (SessionFS, error) {
	if !s.Opts.RemoteSandbox {
		root, err := os.OpenRoot(workingDir)
		if err != nil {
			return nil, err
		}
		return LocalFS{R: root}, nil
	}
	sb := s.LiveSandbox(id)
	if sb == nil {
		return nil, errors.New("the clone lives in the Session's sandbox, which is not running")
	}
	c := remotefs.New(sb, workingDir)
	return remoteOnce{remoteFS{ctx: context.Background(), c: c}}, nil
}

// remoteOnce is a remoteFS whose helper ends with it.
type remoteOnce struct{ remoteFS }

func (r remoteOnce) Close() error {
	r.c.Close()
	return nil
}

// watchCheckout follows the checkout of sb: the host directory with
// runtime/watch, or under the remote provider the clone, through inotify
// in a helper in the sandbox (remotefs.Watch; it polls where it cannot).
func (s *Sandboxes) watchCheckout(sb sandbox.Sandbox, dir string, notify func()) (interface{ Close() }, error) {
	if s.Remote().on() {
		return remotefs.Watch(sb, dir, remotefs.PollInterval, checkoutDebounce, notify), nil
	}
	return watch.Start(dir, checkoutDebounce, notify)
}

// IsEscape reports whether err says a path resolved outside its os.Root.
func IsEscape(err error) bool {
	if confine.Escapes(err) {
		return true
	}
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// OutsideRoot is the refusal of a path that resolves outside the root. It
// names neither the link's target nor whether that exists.
func OutsideRoot(rel string) error {
	return fmt.Errorf("%w: path %q resolves outside the session root", core.ErrForbidden, rel)
}

// ReplaceFile atomically replaces the regular file target (not a symlink)
// with data: a temporary file in its directory, same mode and owner, synced,
// then renamed over it, then the directory synced.
func ReplaceFile(root *os.Root, target string, old fs.FileInfo, data []byte) (fs.FileInfo, error) {
	dir, base := ".", target
	if i := strings.LastIndexByte(target, '/'); i >= 0 {
		dir, base = target[:i], target[i+1:]
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + base + ".lathe-" + hex.EncodeToString(rnd[:]) + ".tmp"
	if dir != "." {
		tmp = dir + "/" + tmp
	}
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := writeTemp(f, old, data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, target)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return nil, err
	}
	if d, err := root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0); err == nil {
		_ = d.Sync() // the rename is durable once the directory is
		d.Close()
	}
	return fi, nil
}

// writeTemp fills the temporary file f with data, gives it old's owner
// and mode, and syncs it.
func writeTemp(f *os.File, old fs.FileInfo, data []byte) (fs.FileInfo, error) {
	if _, err := f.Write(data); err != nil {
		return nil, err
	}
	if st, ok := old.Sys().(*syscall.Stat_t); ok {
		// Best effort: only root may give a file away. Chown before chmod,
		// as chown clears the set-id bits.
		_ = f.Chown(int(st.Uid), int(st.Gid))
	}
	if err := f.Chmod(old.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return f.Stat()
}
