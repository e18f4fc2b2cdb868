package environments

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git"
	"lathe/runtime/sandbox"
)

// Bringing work home: the clone's current branch is bundled inside the
// sandbox, streamed out over one exec's stdout into a host file, and
// fetched into the Workspace repository as branch lathe/<session_id>
// (forced), with hooks off; the Workspace's working tree, index and
// current branch are never touched. POST /sync brings committed work only
// (409 while the clone has uncommitted changes); a lifecycle that removes
// the runtime brings the uncommitted changes too, as one more commit.
// Either is an effect outside the journal, recorded then made
// (EffectSync), and ends in SessionSynced.

// syncTimeout bounds one bring-home.
const syncTimeout = 5 * time.Minute

// errNotGitWorkspace: the Workspace is no Git repository, so there is no
// branch to bring work home to.
var errNotGitWorkspace = errors.New("the Workspace is not a Git repository")

// SyncResult is the answer of POST /api/sessions/{id}/sync.
type SyncResult struct {
	Branch string `json:"branch"`
	Commit string `json:"commit"`
}

// homeBranch is the Workspace branch a Session's work comes home to.
func homeBranch(sessionID string) string { return "lathe/" + sessionID }

// Sync brings a Ready remote Session's committed work home.
func (s *Environments) Sync(ctx context.Context, id string) (SyncResult, error) {
	if !s.Opts.RemoteSandbox {
		if _, ok := s.Store.Session(id); !ok {
			return SyncResult{}, fmt.Errorf("%w: session %q", core.ErrNotFound, id)
		}
		return SyncResult{}, fmt.Errorf("%w: sync is for the remote sandbox provider; under the local one the Session works in the Workspace itself", core.ErrConflict)
	}
	sb, ss, err := s.ReadySandbox(id)
	if err != nil {
		return SyncResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	synced, err := s.Remote().bringHome(ctx, ss, sb, "")
	switch {
	case errors.Is(err, git.ErrDirty), errors.Is(err, git.ErrNoCommit), errors.Is(err, errNotGitWorkspace):
		return SyncResult{}, fmt.Errorf("%w: %v", core.ErrConflict, err)
	case err != nil:
		return SyncResult{}, err
	}
	return SyncResult{Branch: synced.Branch, Commit: synced.Commit}, nil
}

// maxSyncCommits bounds the commits a git status lists for a sync.
const maxSyncCommits = 50

// SyncStatus is a remote Session's way home in its git status: the
// Workspace branch a sync writes, the Workspace commit the clone is
// compared with (Base: that branch once it exists, else the Workspace's
// HEAD; "" when the clone knows neither), and the commits the clone's
// HEAD has beyond it, read from the clone in one process: Ahead counts
// them all, Commits lists the newest 50, newest first.
type SyncStatus struct {
	Branch     string          `json:"branch"`
	Base       string          `json:"base"`
	BaseCommit string          `json:"base_commit,omitempty"`
	Ahead      int             `json:"ahead"`
	Commits    []git.LogCommit `json:"commits"`
	Truncated  bool            `json:"truncated"`
}

// SyncStatus is what a sync of ss would bring, read from its clone;
// nil under the local provider, for a Workspace that is no Git
// repository, for a clone with no commit, or when git fails (logged).
func (r remote) SyncStatus(ctx context.Context, clone *git.Repo, ss projections.Session) *SyncStatus {
	if !r.on() {
		return nil
	}
	branch := homeBranch(ss.ID)
	host, isRepo, err := hostRepo(ctx, ss)
	if err == nil && !isRepo {
		return nil
	}
	var ws []string
	if err == nil {
		ws, err = host.Commits(ctx, "refs/heads/"+branch, "HEAD")
	}
	var b git.Brought
	if err == nil {
		b, err = git.TransferOf(clone).Brings(ctx, maxSyncCommits, ws...)
	}
	switch {
	case errors.Is(err, git.ErrNoCommit), errors.Is(err, git.ErrNotRepository):
		return nil
	case err != nil:
		r.c.Log.Warn("sync status", "session", ss.ID, "err", err)
		return nil
	}
	out := &SyncStatus{Branch: branch, BaseCommit: b.Base, Ahead: b.Count, Commits: b.Commits, Truncated: len(b.Commits) < b.Count}
	switch {
	case b.Base == "":
	case b.Base == ws[0]:
		out.Base = branch
	default:
		out.Base = "HEAD"
	}
	return out
}

// bringHome fetches the clone's work into the Workspace repository as
// homeBranch: committed work only for POST /sync (reason ""), and the
// uncommitted changes as one more commit for a lifecycle owner.
func (r remote) bringHome(ctx context.Context, ss projections.Session, sb sandbox.Sandbox, reason string) (events.SessionSynced, error) {
	host, isRepo, err := hostRepo(ctx, ss)
	if err != nil {
		return events.SessionSynced{}, err
	}
	if !isRepo {
		return events.SessionSynced{}, errNotGitWorkspace
	}
	clone := git.NewTransfer(sb, ss.WorkingDir)
	ref := "refs/lathe/home/" + ss.ID
	home, err := clone.HomeCommit(ctx, ref, reason != "", "lathe: uncommitted changes of session "+ss.ID+" at "+reason)
	if err != nil {
		return events.SessionSynced{}, err
	}
	defer func() { _ = clone.DropRef(context.WithoutCancel(ctx), ref) }()
	f, err := tempFile(r.c.Opts.Scratch())
	if err != nil {
		return events.SessionSynced{}, err
	}
	defer os.Remove(f.Name())
	err = clone.WriteBundle(ctx, ref, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return events.SessionSynced{}, fmt.Errorf("bundle the clone: %w", err)
	}
	synced := events.SessionSynced{Branch: homeBranch(ss.ID), Commit: home.Commit, Uncommitted: home.Uncommitted, Reason: reason}
	eff, err := r.c.Intend(ctx, events.EffectSync, ss.ID, synced.Branch, "")
	if err != nil {
		return synced, err
	}
	err = host.FetchBundle(ctx, f.Name(), ref, synced.Branch)
	var outcome []journal.Event
	if err == nil {
		outcome = []journal.Event{events.New(ss.ID, synced)}
	}
	if serr := eff.Settle(ctx, err, outcome...); err == nil {
		err = serr
	}
	return synced, err
}
