package core

import (
	"fmt"
	"path/filepath"
	"strings"

	"lathe/projections"

	"lathe/runtime/confine"
)

// MaxPathBytes is Linux's PATH_MAX, the longest client path accepted
// (confine's bound).
const MaxPathBytes = confine.MaxPathBytes

// CleanPath validates a client path relative to the Session root with the
// one confinement rule that the file commands, git and the Agent's tools
// share (runtime/confine.Rel: no absolute path, no ".." element, no NUL, at
// most PATH_MAX bytes) and returns it clean; "" and "." come back as ".". A
// refusal is ErrInvalid.
func CleanPath(p string) (string, error) {
	rel, err := confine.Rel(p)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return rel, nil
}

// Within reports whether path is dir or lies inside it (both clean).
func Within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// ConfigMasked is where the sandbox of ss would see the daemon's config
// file, when ss's Workspace holds it: each path reads as empty there
// (sandbox.Spec.Masked). The checkout mounted at ss.WorkingDir is the
// Workspace's folder, a worktree Session's worktree or a Ways lane's copy;
// a worktree Session's sandbox sees the Workspace's .git as well.
func (c *Core) ConfigMasked(ss projections.Session) []string {
	w, ok := c.Store.Workspace(ss.WorkspaceID)
	if !ok {
		return nil
	}
	rel, ok := c.ConfigIn(w.Path)
	if !ok {
		return nil
	}
	out := []string{filepath.Join(ss.WorkingDir, rel)}
	if ss.WorkingDir != w.Path {
		out = append(out, filepath.Join(w.Path, rel))
	}
	return out
}

// ConfigIn is the daemon's config file's path relative to dir (a
// canonical path), when dir holds it.
func (c *Core) ConfigIn(dir string) (string, bool) {
	if c.Opts.ConfigFile == "" {
		return "", false
	}
	abs, err := filepath.Abs(c.Opts.ConfigFile) // the daemon's working dir never changes
	if err != nil {
		return "", false
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil || !Within(dir, real) {
		return "", false
	}
	rel, err := filepath.Rel(dir, real)
	return rel, err == nil && rel != "."
}
