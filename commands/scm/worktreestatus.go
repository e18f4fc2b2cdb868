package scm

import (
	"context"

	"lathe/commands/core"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git"
)

// WorktreeStatus is the worktree part of a worktree Session's git status:
// the Workspace's current branch, the commits the Session's branch has
// that it lacks (Ahead) and the reverse (Behind), and the files a merge
// would change there.
type WorktreeStatus struct {
	BaseBranch string          `json:"base_branch"`
	Ahead      int             `json:"ahead"`
	Behind     int             `json:"behind"`
	Files      []git.MergeFile `json:"files"`
	// Conflicts are the paths a merge would conflict on now.
	Conflicts []string `json:"conflicts,omitempty"`
}

// worktreeStatus is the worktree part of the Session's git status; nil for
// a shared Session, or when the Workspace cannot tell (logged).
func worktreeStatus(ctx context.Context, s *core.Core, ss projections.Session) *WorktreeStatus {
	if ss.Isolation != events.IsolationWorktree {
		return nil
	}
	w, ok := s.Store.Workspace(ss.WorkspaceID)
	if !ok {
		return nil
	}
	home, err := git.OpenHome(w.Path)
	var p git.MergePlan
	if err == nil {
		p, err = home.Plan(ctx, ss.Branch)
	}
	if err != nil {
		s.Log.Warn("worktree status", "session", ss.ID, "err", err)
		return nil
	}
	return &WorktreeStatus{BaseBranch: ShortRef(p.Ref), Ahead: p.Ahead, Behind: p.Behind, Files: p.Files, Conflicts: p.Conflicts}
}

func ShortRef(ref string) string {
	if len(ref) > len("refs/heads/") {
		return ref[len("refs/heads/"):]
	}
	return ref
}
