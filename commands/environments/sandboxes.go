package environments

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"lathe/commands/core"

	"lathe/runtime/git"

	"lathe/journal/events"

	"lathe/projections"
	"lathe/runtime/sandbox"
)

// Sandboxes owns each Session's live sandbox: it prepares, watches and
// tears down the generations of a Session's environment
// (commands/environments/environment.go), and hands the sandbox of a Ready Session, its
// file root and its Git repository to the capabilities that work in it
// (files, tree changes, Git, tasks, turns, Ways). The capabilities that
// need it embed it; the rest never see a sandbox.
type Sandboxes struct {
	*core.Core
	Connect     core.Connect
	SandboxOpts core.SandboxOptions
	envs        environments
	// turns are the Agent runs of this daemon (commands/turns/turns.go): a live
	// turn refuses environment changes.

}

func NewSandboxes(c *core.Core) *Sandboxes {
	return &Sandboxes{Core: c, Connect: c.Opts.Connect, SandboxOpts: c.Opts.Sandbox, envs: newEnvironments()}
}

// GitRoot reports whether the Session's checkout is the root of a Git
// repository: on the host side of its bind mount, or under the remote
// provider in the clone itself (remote.go), never the host Workspace. A
// snapshot is a process in the sandbox, too dear to spend twice per turn
// where it can only fail. (Git in a Session never looks above the root
// for a repository.)
func (s *Sandboxes) GitRoot(ctx context.Context, sb sandbox.Sandbox, ss projections.Session) bool {
	if s.Remote().on() {
		return s.Remote().gitRoot(ctx, sb, ss)
	}
	_, err := os.Lstat(filepath.Join(ss.WorkingDir, ".git"))
	return err == nil
}

// RefuseLiveTurn is the 409 of an environment or lifecycle change while a
// turn runs in the Session.
func (s *Sandboxes) RefuseLiveTurn(id string) error {
	if t, ok := s.Store.ActiveTurn(id); ok {
		return fmt.Errorf("%w: turn %q is running in session %q; stop it first", core.ErrConflict, t.TurnID, id)
	}
	if ss, ok := s.Store.Session(id); ok {
		return s.RefuseOwned(ss)
	}
	return nil
}

// RefuseOwned is the 409 of a primary surface of a Session whose Workspace
// an unresolved Ways set owns.
func (s *Sandboxes) RefuseOwned(ss projections.Session) error {
	// A worktree Session's checkout is its own: a set of another
	// Session's owns the Workspace folder, not it, and a set of its own
	// owns that checkout only.
	if ss.Isolation == events.IsolationWorktree {
		if a, ok := s.Store.CurrentAttemptSet(ss.ID); ok && a.Worktree && !a.Resolved() {
			return fmt.Errorf("%w: Ways set %q owns the worktree of session %q until it is kept or discarded", core.ErrConflict, a.ID, ss.ID)
		}
		return nil
	}
	if o, ok := s.Store.WorkspaceOwner(ss.WorkspaceID); ok {
		return fmt.Errorf("%w: Ways set %q of session %q owns workspace %q until it is kept or discarded", core.ErrConflict, o.AttemptSetID, o.Session, o.Workspace)
	}
	return nil
}

// Root opens the root of a Session whose environment is Ready: ErrNotFound
// for a missing Session, ErrConflict for any other state. Under the remote
// provider it is the clone inside the sandbox, reached through its file
// helper, and ctx bounds each request; nothing touches the host path.
func (s *Sandboxes) Root(ctx context.Context, id string) (SessionFS, error) {
	sb, ss, err := s.ReadySandbox(id)
	if err != nil {
		return nil, err
	}
	if s.Remote().on() {
		return remoteFS{ctx: ctx, c: s.envs.files.get(id, sb, ss.WorkingDir)}, nil
	}
	root, err := os.OpenRoot(ss.WorkingDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: the working directory of session %q is gone: %v", core.ErrConflict, id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open the root of session %q: %w", id, err)
	}
	return LocalFS{R: root}, nil
}

// OwnReady answers 404 or 409 for a Session that is missing or not Ready,
// before anything waits, then takes its lifecycle lock for a change.
func (s *Sandboxes) OwnReady(ctx context.Context, id string) (release func(), err error) {
	if _, _, err := s.ReadySandbox(id); err != nil {
		return nil, err
	}
	return s.OwnForTask(ctx, id)
}

// Repo returns the Git repository of a Session whose environment is Ready.
func (s *Sandboxes) Repo(id string) (*git.Repo, projections.Session, error) {
	sb, ss, err := s.ReadySandbox(id)
	if err != nil {
		return nil, ss, err
	}
	return git.Open(sb, ss.WorkingDir), ss, nil
}

// OwnForTask takes the Session's lifecycle lock for a task event, waiting a
// little for a lifecycle owner, which would leave the Session not Ready.
func (s *Sandboxes) OwnForTask(ctx context.Context, id string) (func(), error) {
	wctx, cancel := context.WithTimeout(ctx, taskLockWait)
	defer cancel()
	release, err := s.Own(wctx, id, true)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: the environment of session %q is changing; retry once it is ready", core.ErrConflict, id)
	}
	return release, nil
}

// PlanImage is the image a plan names, or the default when it names none.
func (s *Sandboxes) PlanImage(image *string) (string, error) {
	if image == nil {
		return s.Opts.DefaultImage, nil
	}
	if s.Opts.RemoteSandbox {
		return "", fmt.Errorf("%w: image is not supported under the remote sandbox provider", core.ErrInvalid)
	}
	return checkImage(*image)
}

// GitPaths confines each of paths (gitPath), at most maxGitPaths, opening
// the Session root once for them all.
func (s *Sandboxes) GitPaths(id string, paths []string) ([]string, error) {
	if len(paths) > MaxGitPaths {
		return nil, fmt.Errorf("%w: %d paths in one request, over the limit of %d", core.ErrInvalid, len(paths), MaxGitPaths)
	}
	var root SessionFS
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	out := make([]string, len(paths))
	for i, p := range paths {
		if p == "" {
			return nil, fmt.Errorf("%w: path must not be empty", core.ErrInvalid)
		}
		rel, err := core.CleanPath(p)
		if err != nil {
			return nil, err
		}
		if rel != "." {
			if root == nil {
				// Each request of a remote Session's file helper is bounded.
				if root, err = s.Root(context.Background(), id); err != nil {
					return nil, err
				}
			}
			if _, err := root.Lstat(rel); IsEscape(err) {
				return nil, OutsideRoot(rel)
			}
		}
		out[i] = rel
	}
	return out, nil
}

// MaxGitPaths bounds the paths of one stage or unstage request.
const MaxGitPaths = 1000

// SandboxError maps the sandbox's errors (and a timeout) to command classes.
func SandboxError(id string, err error) error {
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return fmt.Errorf("%w: the sandbox of session %q is gone: %v", core.ErrConflict, id, err)
	case errors.Is(err, sandbox.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %v", core.ErrUnavailable, err)
	}
	return err
}

const maxImageLen = 255

const maxSetupLength = 16 << 10

// CheckSetup trims a setup command and bounds it.
func CheckSetup(cmd string) (string, error) {
	cmd = strings.TrimSpace(cmd)
	if len(cmd) > maxSetupLength || strings.ContainsRune(cmd, 0) {
		return "", fmt.Errorf("%w: setup_command must be under %d bytes without NUL", core.ErrInvalid, maxSetupLength)
	}
	return cmd, nil
}

func checkImage(image string) (string, error) {
	image = strings.TrimSpace(image)
	if image == "" || len(image) > maxImageLen || strings.ContainsAny(image, " \t\r\n\x00") {
		return "", fmt.Errorf("%w: image must be an OCI reference without spaces, at most %d characters", core.ErrInvalid, maxImageLen)
	}
	return image, nil
}

// taskLockWait bounds how long a task start waits for a lifecycle owner
// before answering that the environment is changing.
const taskLockWait = 5 * time.Second
