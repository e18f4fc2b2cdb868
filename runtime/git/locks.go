package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Git takes a lock file (index.lock, refs/heads/main.lock) for every
// write of the index or a ref, and a second writer fails at once ("Unable
// to create '….lock': File exists"). In a Workspace folder the second
// writer is often the user's editor, whose `git status` takes the index's
// lock for a moment to refresh it. The merge's steps wait for such a lock
// rather than fail on it; after a stop, the recovery also takes a lock
// that no live process holds open, which the killed merge left.
//
// The Workspace's index Lathe locks and writes itself (lockIndex), as git
// does: index.lock created exclusively beside it, the new index written
// into it and renamed over it. Git resolves a symbolic link at the
// index's path and writes where it points; Lathe's writes are confined to
// the repository's folder (os.Root), so an index a sandbox replaced by a
// link is never followed out of it.

// lockedRun runs git args and, while git reports a lock held by another
// process, runs them again until ctx ends. A stale lock (stale) fails the
// command with git's message, which names it, unless takeStale: then a
// stale lock inside the repository's .git is removed and the command
// runs again at once.
func (h *Home) lockedRun(ctx context.Context, takeStale bool, stdin []byte, args ...string) ([]byte, error) {
	wait := 20 * time.Millisecond
	for {
		res, err := h.r.run(ctx, maxSmallOutput, stdin, args...)
		lock := busyLock(res.stderr)
		if err != nil || res.code == 0 || lock == "" {
			return res.ok(opName(args), err)
		}
		if stale(ctx, lock) {
			if !takeStale || !h.ownsLock(ctx, lock) {
				return res.ok(opName(args), err)
			}
			root, rel, err := h.l.root(lock)
			if err != nil {
				return nil, err
			}
			err = root.Remove(rel)
			root.Close()
			if err != nil && !os.IsNotExist(err) {
				return nil, err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return res.ok(opName(args), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// lockSettle is how long a lock file must stay the same file, held open
// by no process, to be a stopped process's: a live git closes its lock
// and renames it within microseconds.
const lockSettle = 100 * time.Millisecond

// stale reports whether the lock file at path was left by a process that
// stopped: no process holds it open, before and after lockSettle, and it
// is still the same file (inode and change time).
func stale(ctx context.Context, path string) bool {
	a, err := os.Stat(path)
	if err != nil || heldOpen(path) {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(lockSettle):
	}
	b, err := os.Stat(path)
	if err != nil || !os.SameFile(a, b) || heldOpen(path) {
		return false
	}
	sa, oka := a.Sys().(*syscall.Stat_t)
	sb, okb := b.Sys().(*syscall.Stat_t)
	return oka && okb && sa.Ctim == sb.Ctim
}

// busyLock is the lock file git names when it could not create it.
func busyLock(stderr string) string {
	const pre, post = "Unable to create '", "': File exists"
	i := strings.Index(stderr, pre)
	if i < 0 {
		return ""
	}
	rest := stderr[i+len(pre):]
	j := strings.Index(rest, post)
	if j < 0 || !strings.HasSuffix(rest[:j], ".lock") {
		return ""
	}
	return rest[:j]
}

// ownsLock reports whether path lies in the repository's own git
// directories (the common one, which holds the refs, or the checkout's).
func (h *Home) ownsLock(_ context.Context, path string) bool {
	for _, d := range []string{h.l.common, h.l.gitDir} {
		if rel, err := filepath.Rel(d, path); err == nil && filepath.IsLocal(rel) {
			return true
		}
	}
	return false
}

// indexLock is the checkout's index.lock, taken by Lathe.
type indexLock struct {
	root *os.Root
	f    *os.File
	name string // index.lock, relative to root
	done bool
}

// lockIndex takes the checkout's index.lock as git does, waiting while a
// live process holds it until ctx ends; a stale one (stale) fails it
// with git's message, unless takeStale: then it is removed and taken.
func (h *Home) lockIndex(ctx context.Context, takeStale bool) (*indexLock, error) {
	root, rel, err := h.l.root(h.l.gitDir)
	if err != nil {
		return nil, err
	}
	name := filepath.Join(rel, "index.lock")
	path := filepath.Join(h.l.gitDir, "index.lock")
	wait := 20 * time.Millisecond
	for {
		f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			if err := h.host.chown(f); err != nil {
				f.Close()
				_ = root.Remove(name)
				root.Close()
				return nil, err
			}
			return &indexLock{root: root, f: f, name: name}, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			root.Close()
			return nil, err
		}
		busy := &Error{Op: "index.lock", Code: 128, Stderr: "fatal: Unable to create '" + path + "': File exists."}
		if stale(ctx, path) {
			if !takeStale {
				root.Close()
				return nil, busy
			}
			if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				root.Close()
				return nil, err
			}
			continue
		}
		select {
		case <-ctx.Done():
			root.Close()
			return nil, fmt.Errorf("%w: %w", busy, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// commit makes the file index (Lathe's) the checkout's index: its content
// written into the lock, which is renamed over the index.
func (l *indexLock) commit(index string) error {
	src, err := os.Open(index)
	if err != nil {
		return err
	}
	defer src.Close()
	if _, err := io.Copy(l.f, src); err != nil {
		return err
	}
	if err := l.f.Sync(); err != nil {
		return err
	}
	if err := l.root.Rename(l.name, filepath.Join(filepath.Dir(l.name), "index")); err != nil {
		return err
	}
	l.done = true
	return nil
}

// release gives the lock up: removed unless it became the index.
func (l *indexLock) release() {
	l.f.Close()
	if !l.done {
		_ = l.root.Remove(l.name)
	}
	l.root.Close()
}

// heldOpen reports whether a live process has path open, from
// /proc/*/fd. A process the daemon may not inspect (another user's) is
// not seen; git runs as the Workspace's owner, as the daemon's own git
// does.
func heldOpen(path string) bool {
	if p, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		path = filepath.Join(p, filepath.Base(path))
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: treat it as live
	}
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		dir := filepath.Join("/proc", p.Name(), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && l == path {
				return true
			}
		}
	}
	return false
}
