// Package worktrees keeps a worktree Session's git worktree (branch
// lathe/<id>): its creation and removal on the host, pinned to what Lathe
// recorded, and the merge home that refuses having changed nothing or lands
// whole.
package worktrees
