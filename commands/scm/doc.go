// Package scm is Source Control in a Session's sandbox: status, stage,
// commit, branch and the Checks, each a session-git-* event, and the status
// of a worktree Session's branch.
package scm
