package projections

import (
	"fmt"

	"lathe/journal/events"
)

// worktreeAction is the audit line of a worktree Session's git events.
func worktreeAction(p events.Payload) string {
	switch e := p.(type) {
	case events.WorktreeAdded:
		return fmt.Sprintf("added its worktree %s on branch %s", e.Path, e.Branch)
	case events.SessionMerged:
		n := e.Count
		if files, err := events.MergeFilesOf(e.Files, nil); n == 0 && err == nil {
			n = len(files) // an event from before Count, its list inline
		}
		return fmt.Sprintf("merged its branch into %s (%s, %d file(s)) as %.12s", e.Branch, e.Strategy, n, e.Commit)
	case events.WorktreeRemoved:
		if e.KeptBranch != "" {
			return fmt.Sprintf("removed its worktree %s, keeping branch %s", e.Path, e.KeptBranch)
		}
		return fmt.Sprintf("removed its worktree %s and its branch", e.Path)
	}
	return ""
}
