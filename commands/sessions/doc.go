// Package sessions creates, edits and deletes Sessions and registers
// Workspaces: the aggregate's own commands, with the worktree to add or
// remove and the environment to start handed in.
package sessions
