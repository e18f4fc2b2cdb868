package worktrees

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/scm"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git"
)

// Worktrees merges a worktree Session's branch home, into the Workspace's
// current branch in the Workspace folder (runtime/git/merge.go says how a
// merge either refuses having changed nothing or lands whole).
type Worktrees struct {
	*environments.Sandboxes
	merging *core.SessionLocks // one merge at a time per Workspace (by its ID), its recovery included
}

// Merge strategies.
const (
	StrategyMerge  = "merge"
	StrategySquash = "squash"
)

// maxMergeMessage bounds a merge's commit message.
const maxMergeMessage = 64 << 10

// MergeRequest is POST /api/sessions/{id}/merge.
type MergeRequest struct {
	Strategy *string `json:"strategy" enum:"merge,squash"`
	Message  *string `json:"message"`
}

// MergeResult is the answer of a merge: the new commit of the Workspace's
// current branch and the files it changed there.
type MergeResult struct {
	Commit string          `json:"commit"`
	Branch string          `json:"branch"`
	Files  []git.MergeFile `json:"files"`
}

// Merge merges the Session's branch into the Workspace's current branch,
// in the Workspace folder. It refuses (a FilesError, 409, nothing changed)
// when the worktree has uncommitted changes, a file the merge would change
// is dirty in the Workspace folder or lies there untracked, the merge
// conflicts, or the current branch is checked out in another worktree.
func (s *Worktrees) Merge(ctx context.Context, id string, req MergeRequest) (MergeResult, error) {
	strategy, message, err := req.check()
	if err != nil {
		return MergeResult{}, err
	}
	ss, release, err := s.OwnSession(ctx, id, true)
	if err != nil {
		return MergeResult{}, err
	}
	defer release()
	if ss.Isolation != events.IsolationWorktree {
		return MergeResult{}, fmt.Errorf("%w: session %q is shared: it works in the Workspace folder, so there is nothing to merge", core.ErrInvalid, id)
	}
	if err := s.RefuseLiveTurn(id); err != nil {
		return MergeResult{}, err
	}
	if err := s.RefuseOwned(ss); err != nil { // its own Ways set owns the worktree
		return MergeResult{}, err
	}
	w, ok := s.Store.Workspace(ss.WorkspaceID)
	if !ok {
		return MergeResult{}, fmt.Errorf("%w: workspace %q", core.ErrNotFound, ss.WorkspaceID)
	}
	if o, ok := s.Store.WorkspaceOwner(w.ID); ok {
		return MergeResult{}, fmt.Errorf("%w: Ways set %q owns the Workspace folder until it is kept or discarded", core.ErrConflict, o.AttemptSetID)
	}
	unlock, err := s.merging.Take(ctx, w.ID)
	if err != nil {
		return MergeResult{}, err
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(ctx, scm.GitTimeout)
	defer cancel()
	home, p, err := s.planMerge(ctx, ss, w)
	if err != nil {
		return MergeResult{}, err
	}
	who, err := (&scm.Git{Sandboxes: s.Sandboxes}).Identity(ctx, home)
	if err != nil {
		return MergeResult{}, err
	}
	if !who.Known {
		return MergeResult{}, fmt.Errorf("%w: no commit identity is known, so nothing was merged: %s", core.ErrConflict, scm.IdentityFix)
	}
	if message == "" {
		message = fmt.Sprintf("Merge branch '%s' (Lathe Session %q)", ss.Branch, ss.Name)
		if strategy == StrategySquash {
			message = fmt.Sprintf("Squash branch '%s' (Lathe Session %q)", ss.Branch, ss.Name)
		}
	}
	commit, err := home.Commit(ctx, p, strategy == StrategySquash, message, git.Identity{Name: who.Name, Email: who.Email})
	if err != nil {
		return MergeResult{}, err
	}
	files := mergeFiles(p.Files)
	intent, _ := json.Marshal(events.MergeIntent{Strategy: strategy, Branch: p.Ref, Old: p.Old, Commit: commit, Files: files})
	e, err := s.Intend(ctx, events.EffectWorktreeMerge, id, string(intent), "")
	if err != nil {
		return MergeResult{}, err
	}
	if err := home.Apply(context.WithoutCancel(ctx), p.Ref, p.Old, commit); err != nil {
		_ = e.Settle(ctx, err)
		if errors.Is(err, git.ErrMoved) {
			return MergeResult{}, fmt.Errorf("%w: %v; nothing was merged", core.ErrConflict, err)
		}
		return MergeResult{}, err
	}
	merged := events.SessionMerged{Strategy: strategy, Branch: p.Ref, Old: p.Old, Commit: commit, Files: events.NewMergeFiles(files), Count: len(files)}
	merged.Advanced = advance(context.WithoutCancel(ctx), home, ss.Branch, p, commit)
	if err := e.Settle(ctx, nil, events.New(id, merged)); err != nil {
		return MergeResult{}, err
	}
	return MergeResult{Commit: commit, Branch: scm.ShortRef(p.Ref), Files: p.Files}, nil
}

func (req MergeRequest) check() (strategy, message string, err error) {
	if req.Strategy == nil {
		return "", "", fmt.Errorf("%w: strategy is required: merge or squash", core.ErrInvalid)
	}
	if *req.Strategy != StrategyMerge && *req.Strategy != StrategySquash {
		return "", "", fmt.Errorf("%w: strategy %q must be merge or squash", core.ErrInvalid, *req.Strategy)
	}
	if req.Message != nil {
		message = strings.TrimSpace(*req.Message)
		if len(message) > maxMergeMessage || !utf8.ValidString(message) || strings.ContainsRune(message, 0) {
			return "", "", fmt.Errorf("%w: message must be valid UTF-8 without NUL, at most %d bytes", core.ErrInvalid, maxMergeMessage)
		}
	}
	return *req.Strategy, message, nil
}

// planMerge computes the merge and makes every refusal before anything
// is written.
func (s *Worktrees) planMerge(ctx context.Context, ss projections.Session, w projections.Workspace) (*git.Home, git.MergePlan, error) {
	if err := git.MountWorktree(ss.WorkingDir); err != nil { // after a reboot
		return nil, git.MergePlan{}, err
	}
	home, err := git.OpenHome(w.Path)
	if err != nil {
		return nil, git.MergePlan{}, err
	}
	if _, err := os.Stat(ss.WorkingDir); err != nil {
		return nil, git.MergePlan{}, fmt.Errorf("%w: the Session's worktree %s is gone: %v", core.ErrConflict, ss.WorkingDir, err)
	}
	dirty, err := home.Uncommitted(ctx, ss.WorkingDir)
	if err != nil {
		return nil, git.MergePlan{}, err
	}
	if len(dirty) > 0 {
		return nil, git.MergePlan{}, &FilesError{Msg: "the Session's worktree has uncommitted changes; commit them first", Files: dirty}
	}
	p, err := home.Plan(ctx, ss.Branch)
	if errors.Is(err, git.ErrDetached) {
		return nil, git.MergePlan{}, fmt.Errorf("%w: %v: check out a branch there to merge into", core.ErrConflict, err)
	}
	if err != nil {
		return nil, git.MergePlan{}, err
	}
	switch {
	case p.Ahead == 0:
		return nil, git.MergePlan{}, fmt.Errorf("%w: branch %s has no commit that %s lacks: nothing to merge", core.ErrConflict, ss.Branch, scm.ShortRef(p.Ref))
	case len(p.Conflicts) > 0:
		return nil, git.MergePlan{}, &FilesError{Msg: fmt.Sprintf("the merge into %s conflicts; nothing was changed", scm.ShortRef(p.Ref)), Files: p.Conflicts}
	}
	list, err := home.Worktrees(ctx)
	if err != nil {
		return nil, git.MergePlan{}, err
	}
	for _, wt := range list[min(1, len(list)):] { // the first is the Workspace folder
		if wt.Branch == p.Ref {
			return nil, git.MergePlan{}, &FilesError{Msg: fmt.Sprintf("branch %s is also checked out in another worktree, which a merge would leave behind; nothing was changed", scm.ShortRef(p.Ref)), Files: []string{wt.Path}}
		}
	}
	ref, err := home.Refusal(ctx, p)
	if err != nil {
		return nil, git.MergePlan{}, err
	}
	switch {
	case len(ref.Dirty) > 0:
		return nil, git.MergePlan{}, &FilesError{Msg: "files the merge would change have uncommitted changes in the Workspace folder; nothing was changed", Files: ref.Dirty}
	case len(ref.Untracked) > 0:
		return nil, git.MergePlan{}, &FilesError{Msg: "the merge would overwrite untracked files in the Workspace folder; nothing was changed", Files: ref.Untracked}
	}
	return home, p, nil
}

// advance moves the Session's branch to the merge commit when that
// changes none of its files (the Workspace had nothing the branch lacked),
// so the Session goes on from what was merged; otherwise its status shows
// it behind.
func advance(ctx context.Context, home *git.Home, branch string, p git.MergePlan, commit string) bool {
	if p.Behind != 0 {
		return false
	}
	return home.MoveBranch(ctx, branch, p.Theirs, commit) == nil
}

func mergeFiles(fs []git.MergeFile) []events.MergeFile {
	out := make([]events.MergeFile, len(fs))
	for i, f := range fs {
		out[i] = events.MergeFile{Path: f.Path, Status: f.Status, OrigPath: f.From}
	}
	return out
}

// reconcileMerge finishes or undoes a merge a stop cut off (git.Home.Recover).
func (s *Worktrees) reconcileMerge(ctx context.Context, in events.EffectIntended) (string, []journal.Event) {
	var mi events.MergeIntent
	detail, err := in.Detail.Resolve(s.Opts.Blobs)
	if err == nil {
		err = json.Unmarshal([]byte(detail.Inline), &mi)
	}
	if err != nil {
		return "the merge intent does not decode: " + err.Error(), nil
	}
	ss, ok := s.Store.Session(in.Target)
	if !ok {
		return "the Session is gone; the Workspace was left as it is", nil
	}
	w, ok := s.Store.Workspace(ss.WorkspaceID)
	if !ok {
		return "the Workspace is gone", nil
	}
	home, err := git.OpenHome(w.Path)
	if err != nil {
		return "the Workspace cannot be opened: " + err.Error(), nil
	}
	unlock, err := s.merging.Take(ctx, w.ID)
	if err != nil {
		return "the daemon stopped during the merge, and finishing it was cut off: " + err.Error(), nil
	}
	defer unlock()
	files := make([]git.MergeFile, len(mi.Files))
	for i, f := range mi.Files {
		files[i] = git.MergeFile{Path: f.Path, Status: f.Status, From: f.OrigPath}
	}
	got, err := home.Recover(ctx, mi.Branch, mi.Old, mi.Commit, files)
	if err != nil {
		return "the daemon stopped during the merge, and finishing it failed: " + err.Error(), nil
	}
	switch got {
	case git.Landed, git.Finished:
		merged := events.SessionMerged{Strategy: mi.Strategy, Branch: mi.Branch, Old: mi.Old, Commit: mi.Commit,
			Files: events.NewMergeFiles(mi.Files), Count: len(mi.Files), Recovered: true}
		return "the daemon stopped during the merge; it had landed in full (" + got + ")", []journal.Event{events.New(in.Target, merged)}
	case git.RolledBack:
		return "the daemon stopped during the merge; the Workspace folder was put back as it was before it", nil
	}
	return "the daemon stopped during the merge and the branch has moved since; nothing was changed", nil
}

// NewWorktrees returns the worktree Sessions' merges.
func NewWorktrees(sb *environments.Sandboxes) *Worktrees {
	return &Worktrees{Sandboxes: sb, merging: &core.SessionLocks{}}
}
