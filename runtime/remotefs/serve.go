package remotefs

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"lathe/runtime/confine"
	"lathe/runtime/sandbox/helper"

	"github.com/fsnotify/fsnotify"
)

// The helper's half of the file RPC: Serve runs in the sandbox, in the
// helper process (`lathe sandbox-helper serve`), one per stream of kind
// helper.KindFiles. Every path resolves in an os.Root of the stream's
// directory: ".." above it and absolute symlinks are escapes, symlinks
// inside are followed, as the local provider's file routes resolve on the
// host.

// maxHeader bounds a request's JSON header.
const maxHeader = 1 << 20

// Serve answers the requests of one stream, rooted at root, until the
// stream ends.
func Serve(st io.ReadWriteCloser, root string) {
	r, err := os.OpenRoot(root)
	if err != nil {
		helper.Refuse(st, err.Error())
		return
	}
	s := &server{root: r, dir: root}
	defer s.close()
	if helper.Ready(st) != nil {
		st.Close()
		return
	}
	in := bufio.NewReaderSize(st, 64<<10)
	for {
		req, body, err := readRequest(in)
		if err != nil {
			st.Close()
			return
		}
		rep, data := s.handle(req, body)
		if err := writeFrame(st, rep, data); err != nil {
			st.Close()
			return
		}
	}
}

func readRequest(r io.Reader) (Request, []byte, error) {
	hdr, err := readPart(r, maxHeader)
	if err != nil {
		return Request{}, nil, err
	}
	body, err := readPart(r, MaxBody)
	if err != nil {
		return Request{}, nil, err
	}
	var req Request
	if err := json.Unmarshal(hdr, &req); err != nil {
		return Request{}, nil, fmt.Errorf("the request: %w", err)
	}
	if req.PathB != nil {
		req.Path = string(req.PathB)
	}
	if req.ToB != nil {
		req.To = string(req.ToB)
	}
	return req, body, nil
}

// readPart reads one length-prefixed part of a frame, of at most max bytes.
func readPart(r io.Reader, max uint32) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > max {
		return nil, fmt.Errorf("a frame part of %d bytes, over the %d-byte bound", size, max)
	}
	b := make([]byte, size)
	_, err := io.ReadFull(r, b)
	return b, err
}

// writeFrame writes hdr as JSON and body, each length-prefixed, in one
// Write: one frame of the helper's session, not one per buffer's worth
// (each a hand-off to the session's writer and back).
func writeFrame(w io.Writer, hdr any, body []byte) error {
	h, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	frame := make([]byte, 0, 8+len(h)+len(body))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(h)))
	frame = append(frame, h...)
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(body)))
	frame = append(frame, body...)
	_, err = w.Write(frame)
	return err
}

// server is one stream's state: its root and, once a wait asked, its
// watch of the tree.
type server struct {
	root  *os.Root
	dir   string
	watch *treeWatch
}

func (s *server) close() {
	if s.watch != nil {
		s.watch.close()
	}
	s.root.Close()
}

func (s *server) handle(req Request, body []byte) (Reply, []byte) {
	rep, data, err := s.op(req, body)
	if err == nil {
		return rep, data
	}
	if isEscape(err) {
		return Reply{Escape: true}, nil
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		errno = syscall.EINVAL // a bad request: said, and the stream serves on
	}
	return Reply{Errno: int(errno), Error: err.Error()}, nil
}

func (s *server) op(req Request, body []byte) (Reply, []byte, error) {
	p := req.Path
	switch req.Op {
	case "lstat":
		fi, err := s.root.Lstat(p)
		if err != nil {
			return Reply{}, nil, err
		}
		return Reply{Info: info(baseName(p), fi)}, nil, nil
	case "readlink":
		link, err := s.root.Readlink(p)
		if err != nil {
			return Reply{}, nil, err
		}
		rep := Reply{Link: link}
		if !utf8.ValidString(link) {
			rep.LinkB = []byte(link)
		}
		return rep, nil, nil
	case "read":
		return s.read(p, req.Limit)
	case "readdir":
		entries, err := s.readdir(p, req.Max)
		return Reply{Entries: entries}, nil, err
	case "replace":
		fi, err := s.replace(p, body, req.Perm, req.UID, req.GID)
		if err != nil {
			return Reply{}, nil, err
		}
		return Reply{Info: info(path.Base(p), fi)}, nil, nil
	case "mkdir":
		return Reply{}, nil, s.root.Mkdir(p, fs.FileMode(req.Perm&0o777))
	case "create":
		f, err := s.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fs.FileMode(req.Perm&0o777))
		if err != nil {
			return Reply{}, nil, err
		}
		return Reply{}, nil, f.Close()
	case "rename":
		if _, err := s.root.Lstat(req.To); err == nil {
			return Reply{}, nil, &fs.PathError{Op: "rename", Path: req.To, Err: syscall.EEXIST}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return Reply{}, nil, err
		}
		return Reply{}, nil, s.root.Rename(p, req.To)
	case "remove":
		return Reply{}, nil, s.remove(p, req.All)
	case "fingerprint":
		fp, err := s.fingerprint(req.Max)
		return Reply{Fingerprint: fp}, nil, err
	case "wait":
		changed, err := s.wait(time.Duration(req.TimeoutMS)*time.Millisecond, req.Max)
		return Reply{Changed: changed}, nil, err
	}
	return Reply{}, nil, fmt.Errorf("unknown op %q: %w", req.Op, syscall.EINVAL)
}

// baseName is what lstat names: the path's last element, "." for the
// root or a path ending in "/".
func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		return "."
	}
	return p
}

// info is the Info of fi under name.
func info(name string, fi fs.FileInfo) *Info {
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st == nil {
		st = &syscall.Stat_t{}
	}
	i := &Info{Name: name, Size: fi.Size(), Mode: st.Mode, MtimeNS: fi.ModTime().UnixNano(),
		Dev: st.Dev, Ino: st.Ino, UID: st.Uid, GID: st.Gid}
	if !utf8.ValidString(name) {
		i.NameB = []byte(name)
	}
	return i
}

// read opens p following symlinks inside the root, without blocking on a
// FIFO, and returns what it is; for a regular file also its first
// limit+1 bytes.
func (s *server) read(p string, limit int64) (Reply, []byte, error) {
	f, err := s.root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return Reply{}, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Reply{}, nil, err
	}
	rep := Reply{Info: info(fi.Name(), fi)}
	if !fi.Mode().IsRegular() {
		return rep, nil, nil
	}
	// Sized by the stat, the read takes one system call and no regrowth
	// (io.ReadAll starts at 512 bytes); a file that grew meanwhile still
	// reads to the bound.
	bound := min(max(limit, 0), MaxBody-1) + 1
	var data bytes.Buffer
	data.Grow(int(min(fi.Size(), bound)) + bytes.MinRead)
	_, err = data.ReadFrom(io.LimitReader(f, bound))
	return rep, data.Bytes(), err
}

// readdir lists the directory p (following symlinks inside the root), at
// most max+1 entries.
func (s *server) readdir(p string, max int) ([]Info, error) {
	dir, err := s.root.OpenFile(p, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	out := []Info{}
	for len(out) <= max {
		batch, err := dir.ReadDir(256)
		for _, de := range batch {
			if len(out) > max {
				break
			}
			if fi, ierr := de.Info(); ierr == nil { // else removed since listed
				out = append(out, *info(de.Name(), fi))
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

// replace writes data to a new file beside p and renames it over p, with
// mode perm and, where allowed, owner uid:gid, synced before and after.
func (s *server) replace(p string, data []byte, perm, uid, gid uint32) (fs.FileInfo, error) {
	tag := make([]byte, 8)
	rand.Read(tag)
	tmp := path.Join(path.Dir(p), "."+path.Base(p)+".lathe-"+hex.EncodeToString(tag)+".tmp")
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := func() (fs.FileInfo, error) {
		defer f.Close()
		if _, err := f.Write(data); err != nil {
			return nil, err
		}
		_ = f.Chown(int(uid), int(gid)) // not root inside: keeps the writer's
		if err := syscall.Fchmod(int(f.Fd()), perm&0o7777); err != nil {
			return nil, &fs.PathError{Op: "chmod", Path: tmp, Err: err}
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
		return f.Stat()
	}()
	if err == nil {
		err = s.root.Rename(tmp, p)
	}
	if err != nil {
		s.root.Remove(tmp)
		return nil, err
	}
	if d, err := s.root.Open(path.Dir(p)); err == nil {
		d.Sync()
		d.Close()
	}
	return fi, nil
}

// remove removes p; a directory only when empty unless all. The root
// itself is never removed.
func (s *server) remove(p string, all bool) error {
	if path.Clean("/"+p) == "/" {
		return &fs.PathError{Op: "remove", Path: p, Err: syscall.EBUSY}
	}
	fi, err := s.root.Lstat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() && all {
		return s.root.RemoveAll(p)
	}
	return s.root.Remove(p)
}

// fingerprint is a hash of the tree's names, sizes, modes and times (a
// directory's name and mode only: its size and time move with git's lock
// files in .git, and every git status takes index.lock), .git's insides
// aside except its top entries (index, HEAD), lock files there aside:
// what the polling Watcher compares. At most max entries (200,000 when 0).
func (s *server) fingerprint(max int) (string, error) {
	if max <= 0 {
		max = 200_000
	}
	sum, count := sha256.New(), 0
	var walk func(dir string) error
	walk = func(dir string) error {
		d, err := s.root.Open(dir)
		if err != nil {
			return nil // gone, or not readable: as it is
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		slices.Sort(names)
		inGit := dir == ".git"
		for _, name := range names {
			if inGit && strings.HasSuffix(name, ".lock") {
				continue
			}
			rel := path.Join(dir, name)
			fi, err := s.root.Lstat(rel)
			if err != nil {
				continue
			}
			st, _ := fi.Sys().(*syscall.Stat_t)
			if fi.IsDir() {
				fmt.Fprintf(sum, "%s\x00%d\n", rel, st.Mode)
			} else {
				fmt.Fprintf(sum, "%s\x00%d\x00%d\x00%d\n", rel, fi.Size(), st.Mode, fi.ModTime().UnixNano())
			}
			if count++; count > max {
				return errTruncated
			}
			if fi.IsDir() && !inGit {
				if err := walk(rel); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("."); err != nil && !errors.Is(err, errTruncated) {
		return "", err
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

var errTruncated = errors.New("truncated")

// wait blocks until something in the tree changed, or for timeout. The
// first call starts the watch: inotify on the root and every directory
// below it, .git itself but not its insides, git's lock files in .git
// aside, as runtime/watch does on the host; new directories as they
// appear; at most maxDirs (ENOSPC past it, and the Watcher polls).
func (s *server) wait(timeout time.Duration, maxDirs int) (bool, error) {
	if s.watch == nil {
		w, err := newTreeWatch(s.dir, maxDirs)
		if err != nil {
			return false, err
		}
		s.watch = w
	}
	return s.watch.wait(timeout)
}

type treeWatch struct {
	w       *fsnotify.Watcher
	dirs    int
	maxDirs int
	once    sync.Once
}

func newTreeWatch(dir string, maxDirs int) (*treeWatch, error) {
	fw, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return nil, err
	}
	w := &treeWatch{w: fw, maxDirs: maxDirs}
	if err := w.addTree(dir); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// addTree watches dir and the directories below it, .git's insides aside.
func (w *treeWatch) addTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // gone meanwhile: its parent's event says so
		}
		if w.dirs >= w.maxDirs {
			return &fs.PathError{Op: "watch", Path: p, Err: fmt.Errorf("more than %d directories to watch: %w", w.maxDirs, syscall.ENOSPC)}
		}
		if err := w.w.Add(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return err // the kernel's watch limit, say
		}
		w.dirs++
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		return nil
	})
}

func (w *treeWatch) wait(timeout time.Duration) (bool, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-w.w.Events:
			seen, err := w.event(ev)
			if err != nil || seen {
				w.drain()
				return seen, err
			}
		case <-w.w.Errors:
			// An overflow or a lost watch: a change may have been missed.
			w.drain()
			return true, nil
		case <-timer.C:
			return false, nil
		}
	}
}

// event says whether ev is a change of the tree, watching a new directory.
func (w *treeWatch) event(ev fsnotify.Event) (bool, error) {
	inGit := filepath.Base(filepath.Dir(ev.Name)) == ".git"
	if inGit && strings.HasSuffix(ev.Name, ".lock") {
		return false, nil
	}
	if ev.Has(fsnotify.Create) && !inGit {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			if err := w.addTree(ev.Name); err != nil {
				return true, err
			}
		}
	}
	return true, nil
}

// drain takes the events already queued: one change comes as several.
func (w *treeWatch) drain() {
	for {
		select {
		case ev := <-w.w.Events:
			if _, err := w.event(ev); err != nil {
				return
			}
		case <-w.w.Errors:
		default:
			return
		}
	}
}

func (w *treeWatch) close() { w.once.Do(func() { w.w.Close() }) }

// isEscape reports whether err says a path resolved outside the root.
func isEscape(err error) bool { return confine.Escapes(err) || errors.Is(err, ErrEscape) }
