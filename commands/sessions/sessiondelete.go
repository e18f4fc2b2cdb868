package sessions

import (
	"context"
	"fmt"

	"lathe/commands/core"
	"lathe/commands/worktrees"

	"lathe/journal/events"
	"lathe/projections"
)

// Deletion is the answer of a forced delete: KeptBranch names a worktree
// Session's branch when it was kept because it holds commits the
// Workspace's current branch lacks.
type Deletion struct {
	ID         string `json:"id"`
	Deleted    bool   `json:"deleted"`
	KeptBranch string `json:"kept_branch,omitempty"`
}

// DeleteSessionConfirmed deletes a Session's record; a worktree Session's
// worktree folder goes with it. Uncommitted work in the worktree is thrown
// away only when discard names exactly those files; otherwise nothing
// changes and the answer is a FilesError naming them.
func (s *Sessions) DeleteSessionConfirmed(ctx context.Context, id string, discard []string) (Deletion, error) {
	rec, ok := s.Store.Session(id)
	if !ok {
		return Deletion{}, fmt.Errorf("%w: session %q", core.ErrNotFound, id)
	}
	out := Deletion{ID: id, Deleted: true}
	if rec.Isolation != events.IsolationWorktree {
		return out, s.DeleteSession(ctx, id)
	}
	var removed events.WorktreeRemoved
	_, err := s.endRuntimeWith(ctx, id, events.OwnerDelete, func(projections.Session) []events.Payload {
		return []events.Payload{events.SessionDeleted{}}
	}, runtimeEnd{
		check: func(ss projections.Session) error { return worktrees.CheckDiscard(ctx, s.Core, ss, discard) },
		after: func(ss projections.Session) error {
			var err error
			removed, err = worktrees.RemoveWorktree(ctx, s.Core, ss, discard)
			return err
		},
	})
	if err != nil {
		return Deletion{}, err
	}
	s.Locks.Forget(id)
	out.KeptBranch = removed.KeptBranch
	return out, nil
}
