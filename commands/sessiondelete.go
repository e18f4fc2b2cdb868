package commands

import (
	"context"
	"fmt"

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
	rec, ok := s.store.Session(id)
	if !ok {
		return Deletion{}, fmt.Errorf("%w: session %q", ErrNotFound, id)
	}
	out := Deletion{ID: id, Deleted: true}
	if rec.Isolation != events.IsolationWorktree {
		return out, s.DeleteSession(ctx, id)
	}
	var removed events.WorktreeRemoved
	_, err := s.endRuntimeWith(ctx, id, events.OwnerDelete, func(projections.Session) []events.Payload {
		return []events.Payload{events.SessionDeleted{}}
	}, runtimeEnd{
		check: func(ss projections.Session) error { return checkDiscard(ctx, s.core, ss, discard) },
		after: func(ss projections.Session) error {
			var err error
			removed, err = removeWorktree(ctx, s.core, ss, discard)
			return err
		},
	})
	if err != nil {
		return Deletion{}, err
	}
	s.locks.forget(id)
	out.KeptBranch = removed.KeptBranch
	return out, nil
}
