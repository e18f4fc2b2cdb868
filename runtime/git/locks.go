package git

import (
	"context"
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
			if err := os.Remove(lock); err != nil && !os.IsNotExist(err) {
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
// directory (the common one, which holds the refs, or the worktree's).
func (h *Home) ownsLock(ctx context.Context, path string) bool {
	res, err := h.r.run(ctx, maxSmallOutput, nil, "rev-parse", "--path-format=absolute", "--git-common-dir", "--git-dir")
	if err != nil || res.code != 0 {
		return false
	}
	for _, d := range strings.Fields(string(res.out)) {
		if rel, err := filepath.Rel(d, path); err == nil && filepath.IsLocal(rel) {
			return true
		}
	}
	return false
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
