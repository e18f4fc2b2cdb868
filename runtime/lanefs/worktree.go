package lanefs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// A worktree checkout (a worktree Session's) has a .git file naming its
// own git directory in the Workspace's .git/worktrees/<name>, which
// shares the Workspace's refs, objects and config (its commondir). A lane
// must not write there: its index and HEAD are the Session's, its refs
// the Workspace's. A copy of a worktree checkout therefore gets a .git
// directory of its own: the common directory's files (but its worktrees
// and the Workspace's own HEAD, index and operation state), the objects
// linked as CopyBase links them, and over them the worktree's own files
// (HEAD, index, logs/HEAD…). The copy is then a plain repository on the
// worktree's branch with the worktree's index.

// commonOnly are the entries of a common git directory that belong to its
// main checkout, not to a worktree, and that a copy of a worktree leaves
// out (the worktree's own, where it has them, take their place).
var commonOnly = []string{"objects", "worktrees", "index", "HEAD", "ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD",
	"MERGE_MSG", "MERGE_MODE", "AUTO_MERGE", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD", "BISECT_LOG",
	"sequencer", "rebase-merge", "rebase-apply"}

// worktreeLinks are the entries of a worktree's git directory that tie it
// to its checkout and to the common directory; a copy leaves them out.
var worktreeLinks = []string{"gitdir", "commondir", "locked"}

// Source is a checkout to copy: its folder, and, for a worktree's, the
// git directories Lathe recorded for it (Own, its registration in the
// repository, and Common, the repository's). A worktree's .git file is
// its sandbox's to rewrite, so a copy never follows it: a .git file with
// no recorded git directories is refused.
type Source struct {
	Dir         string
	Own, Common string
}

// copyWorktreeGit makes to/.git a git directory of its own for a copy of
// the worktree checkout from; link hard-links the objects (only for a
// copy no one writes).
func copyWorktreeGit(ctx context.Context, from Source, to string, link bool) error {
	own, common := from.Own, from.Common
	if own == "" || common == "" {
		return fmt.Errorf("%s/.git is a file, and no git directories were recorded for the checkout", from.Dir)
	}
	for _, d := range []string{own, common} {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			return fmt.Errorf("the worktree's git directory %s is not a directory (%v)", d, err)
		}
	}
	dst := filepath.Join(to, ".git")
	if err := mkdirLike(common, dst); err != nil {
		return err
	}
	items, err := names(common, ".", commonOnly...)
	if err != nil {
		return err
	}
	if err := copyItems(ctx, common, dst, items); err != nil {
		return err
	}
	if err := copyObjects(ctx, common, dst, link); err != nil {
		return err
	}
	if own == common {
		return nil
	}
	items, err = names(own, ".", worktreeLinks...)
	if err != nil {
		return err
	}
	return copyItems(ctx, own, dst, items)
}

// Standalone gives the whole copy at to of the checkout from a .git
// directory of its own, its objects copied, when from is a worktree (to
// has a copy of its .git file); a copy of a plain checkout needs nothing.
func Standalone(ctx context.Context, from Source, to string) error {
	fi, err := os.Lstat(filepath.Join(to, ".git"))
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if err := os.Remove(filepath.Join(to, ".git")); err != nil {
		return err
	}
	return copyWorktreeGit(ctx, from, to, false)
}
