package environments

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git"
	"lathe/runtime/sandbox"
)

// EnsureHooksDir makes the Workspace's .git/hooks exist, owned as .git is,
// so that the sandbox can see it read-only (sessionMounts).
func EnsureHooksDir(ws string) error {
	dir := filepath.Join(ws, ".git", "hooks")
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := os.Stat(filepath.Join(ws, ".git"))
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return os.Lchown(dir, int(st.Uid), int(st.Gid))
	}
	return nil
}

// sessionMounts is what a Session's sandbox sees besides its working dir:
// for a worktree Session, the Workspace's .git read-write (its worktree's
// metadata, objects and refs live there), with .git/config and .git/hooks
// read-only over it, so nothing run inside can plant config or a hook that
// git in the Workspace folder would obey on the host, nor move that
// folder's HEAD or index.
func sessionMounts(s *Sandboxes, ss projections.Session) []sandbox.Mount {
	if ss.Isolation != events.IsolationWorktree {
		return nil
	}
	w, ok := s.Store.Workspace(ss.WorkspaceID)
	if !ok {
		return nil
	}
	gitDir := filepath.Join(w.Path, ".git")
	if err := git.MountWorktree(ss.WorkingDir); err != nil { // after a reboot
		s.Log.Warn("mount the worktree's overlay", "session", ss.ID, "err", err)
	}
	if err := EnsureHooksDir(w.Path); err != nil {
		s.Log.Warn("make the Workspace's .git/hooks", "session", ss.ID, "err", err)
	}
	ms := []sandbox.Mount{{Path: gitDir}}
	// The Workspace folder's own HEAD and index too: nothing inside has
	// reason to move them, and the user's folder follows them.
	for _, name := range []string{"config", "hooks", "HEAD", "index"} {
		if _, err := os.Lstat(filepath.Join(gitDir, name)); err == nil {
			ms = append(ms, sandbox.Mount{Path: filepath.Join(gitDir, name), ReadOnly: true})
		}
	}
	return ms
}
