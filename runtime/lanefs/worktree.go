package lanefs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// GitDirs resolves the git directories of the checkout at dir: its own
// (dir/.git, or the directory its .git file names) and the common one
// (the repository's, which a worktree shares). worktree reports a .git
// file.
func GitDirs(dir string) (own, common string, worktree bool, err error) {
	dotGit := filepath.Join(dir, ".git")
	fi, err := os.Lstat(dotGit)
	if err != nil {
		return "", "", false, err
	}
	if fi.IsDir() {
		return dotGit, dotGit, false, nil
	}
	if !fi.Mode().IsRegular() {
		return "", "", false, fmt.Errorf("%s is neither a directory nor a file", dotGit)
	}
	own, err = pointer(dotGit, "gitdir: ", dir)
	if err != nil {
		return "", "", true, err
	}
	common, err = pointer(filepath.Join(own, "commondir"), "", own)
	if errors.Is(err, os.ErrNotExist) {
		common, err = own, nil
	}
	if err == nil {
		var gi os.FileInfo
		if gi, err = os.Stat(filepath.Join(common, "objects")); err == nil && !gi.IsDir() {
			err = fmt.Errorf("%s is not a git directory", common)
		}
	}
	return own, common, true, err
}

// pointer reads the path the small file at path holds after prefix,
// relative to base when it is not absolute.
func pointer(path, prefix, base string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	p, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
	if !ok || p == "" {
		return "", fmt.Errorf("%s does not name a git directory", path)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p), nil
}

// copyWorktreeGit makes to/.git a git directory of its own for a copy of
// the worktree checkout at from; link hard-links the objects (only for a
// copy no one writes).
func copyWorktreeGit(ctx context.Context, from, to string, link bool) error {
	own, common, _, err := GitDirs(from)
	if err != nil {
		return fmt.Errorf("the worktree's git directory: %w", err)
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

// Standalone gives the whole copy at to of the checkout at from a .git
// directory of its own, its objects copied, when from is a worktree (to
// has a copy of its .git file); a copy of a plain checkout needs nothing.
func Standalone(ctx context.Context, from, to string) error {
	fi, err := os.Lstat(filepath.Join(to, ".git"))
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if err := os.Remove(filepath.Join(to, ".git")); err != nil {
		return err
	}
	return copyWorktreeGit(ctx, from, to, false)
}
