package worktrees

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"lathe/commands/core"
	"lathe/commands/environments"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git"
)

// Worktree isolation (docs/design/git.md). A worktree Session works in
// its own git worktree of the Workspace repository, on branch
// lathe/<session_id>, in <WorktreesDir>/<session_id>; git runs on the host
// for what spans the Workspace and its worktrees (adding one, merging a
// branch home: commands/worktrees/merge.go, removing one), under runtime/git's safe
// config, as the Workspace's owner.

// FilesError is a 409 that names the files it is about: the body is
// {error, files}.
type FilesError struct {
	Msg   string
	Files []string
}

func (e *FilesError) Error() string { return core.ErrConflict.Error() + ": " + e.Msg }
func (e *FilesError) Unwrap() error { return core.ErrConflict }

// branchOf is a worktree Session's branch.
func branchOf(id string) string { return "lathe/" + id }

// worktreeIntent is the Detail of a worktree-add or worktree-remove intent.
type worktreeIntent struct {
	Workspace string `json:"workspace"` // the Workspace folder
	Path      string `json:"path"`
	Branch    string `json:"branch"`
}

// CheckIsolation validates a create's isolation against the Workspace.
func CheckIsolation(ctx context.Context, s *core.Core, isolation *string, w projections.Workspace) (string, error) {
	if isolation == nil || *isolation == events.IsolationShared {
		return events.IsolationShared, nil
	}
	if *isolation != events.IsolationWorktree {
		return "", fmt.Errorf("%w: isolation %q must be shared or worktree", core.ErrInvalid, *isolation)
	}
	if s.Opts.RemoteSandbox {
		// The checkout is a clone on the engine's host, brought home into the
		// Session's branch, which a worktree has checked out (docs/design/sandbox.md).
		return "", fmt.Errorf("%w: isolation worktree is not supported under the remote sandbox provider; use isolation shared", core.ErrInvalid)
	}
	if s.Opts.WorktreesDir == "" {
		return "", fmt.Errorf("%w: this daemon has no folder for worktrees", core.ErrInvalid)
	}
	if fi, err := os.Lstat(filepath.Join(w.Path, ".git")); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: isolation worktree needs a Git Workspace (a folder with its own .git directory); %s is not one", core.ErrInvalid, w.Path)
	}
	home, err := git.OpenHome(w.Path)
	if err != nil || !home.IsRepository(ctx) {
		return "", fmt.Errorf("%w: isolation worktree needs a Git Workspace with a commit to start from; %s has none", core.ErrInvalid, w.Path)
	}
	return events.IsolationWorktree, nil
}

// AddWorktree makes the worktree of a Session about to be created, recorded
// then acted: its intent before `git worktree add`; the settlement goes in
// the create's own append (createdWith). A stop in between
// leaves an intent whose Session never existed, which start-up undoes.
func AddWorktree(ctx context.Context, s *core.Core, id string, w projections.Workspace, ev *events.SessionCreated) (*core.Effect, events.WorktreeAdded, error) {
	ev.WorkingDir, ev.Branch = filepath.Join(s.Opts.WorktreesDir, id), branchOf(id)
	detail, _ := json.Marshal(worktreeIntent{Workspace: w.Path, Path: ev.WorkingDir, Branch: ev.Branch})
	e, err := s.Intend(ctx, events.EffectWorktreeAdd, id, string(detail), "")
	if err != nil {
		return nil, events.WorktreeAdded{}, err
	}
	home, err := git.OpenHome(w.Path)
	if err == nil {
		err = os.MkdirAll(s.Opts.WorktreesDir, 0o755)
	}
	var base string
	if err == nil {
		base, err = home.AddWorktree(ctx, ev.WorkingDir, ev.Branch)
	}
	if err == nil {
		err = environments.EnsureHooksDir(w.Path)
	}
	if err != nil {
		undoWorktree(context.WithoutCancel(ctx), w.Path, ev.WorkingDir, ev.Branch)
		CollectBases(s, s.Opts.WorktreesDir)
		_ = e.Settle(ctx, err)
		return nil, events.WorktreeAdded{}, fmt.Errorf("%w: adding the Session's worktree failed, so it was not created: %v", core.ErrConflict, err)
	}
	return e, events.WorktreeAdded{Path: ev.WorkingDir, Branch: ev.Branch, Base: base}, nil
}

// undoWorktree removes a worktree and its branch while the branch holds
// nothing but the Workspace's commits.
func undoWorktree(ctx context.Context, ws, dir, branch string) {
	home, err := git.OpenHome(ws)
	if err != nil {
		return
	}
	_ = home.RemoveWorktree(ctx, dir)
	if head, ok, _ := home.BranchHead(ctx, branch); ok {
		if n, err := home.Unmerged(ctx, "HEAD", branch); err == nil && n == 0 {
			_ = home.DeleteBranch(ctx, branch, head)
		}
	}
}

// undo removes the worktree of a create whose append failed, and settles
// its intent.
func UndoAdd(ctx context.Context, e *core.Effect, ws string, ev events.SessionCreated, cause error) {
	undoWorktree(context.WithoutCancel(ctx), ws, ev.WorkingDir, ev.Branch)
	CollectBases(e.Core, filepath.Dir(ev.WorkingDir))
	_ = e.Settle(ctx, cause)
}

// CreatedWith adds a worktree's settlement and outcome to a create's
// append.
func CreatedWith(evs []journal.Event, id string, e *core.Effect, added events.WorktreeAdded) []journal.Event {
	if e == nil {
		return evs
	}
	out := []journal.Event{evs[0], events.New(id, added), events.New(events.EffectsID, events.EffectSettled{Intent: e.Intent.Intent, Outcome: events.EffectDone})}
	return append(out, evs[1:]...)
}

// Reconcilers settle the worktree intents a stop left open.
func (s *Worktrees) Reconcilers() map[string]core.ReconcileEffect {
	return map[string]core.ReconcileEffect{
		events.EffectWorktreeAdd:    s.reconcileWorktreeAdd,
		events.EffectWorktreeMerge:  s.reconcileMerge, // commands/worktrees/merge.go
		events.EffectWorktreeRemove: core.SettledAs("the daemon stopped while removing the worktree folder; delete the Session again to finish"),
	}
}

// reconcileWorktreeAdd undoes a worktree whose Session was never created.
func (s *Worktrees) reconcileWorktreeAdd(ctx context.Context, in events.EffectIntended) (string, []journal.Event) {
	if _, ok := s.Store.Session(in.Target); ok {
		return "the Session was created with its worktree", nil
	}
	var wi worktreeIntent
	if err := json.Unmarshal([]byte(in.Detail.String()), &wi); err != nil || wi.Path == "" || filepath.Dir(wi.Path) != filepath.Clean(s.Opts.WorktreesDir) {
		return "the intent names no worktree of this daemon; nothing was removed", nil
	}
	undoWorktree(ctx, wi.Workspace, wi.Path, wi.Branch)
	return "the daemon stopped before the Session was created; its worktree was removed", nil
}

// CheckDiscard refuses a delete that would throw away uncommitted work
// the request did not name exactly.
func CheckDiscard(ctx context.Context, s *core.Core, ss projections.Session, discard []string) error {
	if _, err := os.Stat(ss.WorkingDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := git.MountWorktree(ss.WorkingDir); err != nil {
		return fmt.Errorf("mount the worktree's overlay (nothing was deleted): %w", err)
	}
	w, ok := s.Store.Workspace(ss.WorkspaceID)
	if !ok {
		return fmt.Errorf("%w: workspace %q", core.ErrNotFound, ss.WorkspaceID)
	}
	home, err := git.OpenHome(w.Path)
	if err != nil {
		return err
	}
	dirty, err := home.Uncommitted(ctx, ss.WorkingDir)
	if err != nil {
		return fmt.Errorf("read the worktree's uncommitted changes (nothing was deleted): %w", err)
	}
	if len(dirty) == 0 {
		return nil
	}
	want := slices.Sorted(slices.Values(discard))
	slices.Sort(dirty)
	if !slices.Equal(slices.Compact(want), dirty) {
		return &FilesError{Msg: fmt.Sprintf("the worktree has %d uncommitted file(s); nothing was deleted: send them as discard_files to throw them away", len(dirty)), Files: dirty}
	}
	return nil
}

// RemoveWorktree removes a deleted Session's worktree folder, recorded
// then acted, and its branch unless it holds commits the Workspace's
// current branch (or HEAD) lacks.
func RemoveWorktree(ctx context.Context, s *core.Core, ss projections.Session, discard []string) (events.WorktreeRemoved, error) {
	w, ok := s.Store.Workspace(ss.WorkspaceID)
	if !ok {
		return events.WorktreeRemoved{}, fmt.Errorf("%w: workspace %q", core.ErrNotFound, ss.WorkspaceID)
	}
	detail, _ := json.Marshal(worktreeIntent{Workspace: w.Path, Path: ss.WorkingDir, Branch: ss.Branch})
	e, err := s.Intend(ctx, events.EffectWorktreeRemove, ss.ID, string(detail), "")
	if err != nil {
		return events.WorktreeRemoved{}, err
	}
	out := events.WorktreeRemoved{Path: ss.WorkingDir, Discarded: discard}
	home, err := git.OpenHome(w.Path)
	if err == nil {
		err = home.RemoveWorktree(ctx, ss.WorkingDir)
	}
	if err == nil {
		out.KeptBranch, err = dropBranch(ctx, home, ss.Branch)
	}
	if err != nil {
		_ = e.Settle(ctx, err)
		return out, fmt.Errorf("remove the worktree (the Session stays; delete it again): %w", err)
	}
	CollectBases(s, filepath.Dir(ss.WorkingDir))
	return out, e.Settle(ctx, nil, events.New(ss.ID, out))
}

// CollectBases removes the shared base checkouts in the folder of
// worktrees dir that no worktree uses any more (git.CollectBases): after
// a worktree Session's delete, and at start-up for what a stop left. A
// base is a cache of a commit's files, rebuilt when needed, so its
// collection is not journaled; a failure is logged and the next
// collection tries again.
func CollectBases(s *core.Core, dir string) {
	if dir == "" || dir == "." {
		return
	}
	removed, err := git.CollectBases(dir)
	if len(removed) > 0 {
		s.Log.Info("collected unused worktree bases", "dir", dir, "bases", removed)
	}
	if err != nil {
		s.Log.Warn("collect unused worktree bases", "dir", dir, "err", err)
	}
}

// dropBranch deletes branch unless it holds commits the Workspace lacks,
// and returns it when kept.
func dropBranch(ctx context.Context, home *git.Home, branch string) (kept string, err error) {
	head, ok, err := home.BranchHead(ctx, branch)
	if err != nil || !ok {
		return "", err
	}
	base := "HEAD"
	if ref, _, err := home.Current(ctx); err == nil {
		base = ref
	}
	n, err := home.Unmerged(ctx, base, branch)
	if err != nil {
		return branch, nil // unsure: keep it
	}
	if n > 0 {
		return branch, nil
	}
	return "", home.DeleteBranch(ctx, branch, head)
}
