package git

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The building blocks of a cheap worktree checkout (docs/design/git.md,
// "A cheap checkout"): `git worktree add` writes every file of the
// Workspace's HEAD, 50,000 files in seconds. Instead, one read-only base
// checkout per commit (CheckoutBase, made once and shared) is the lower
// layer of an overlay per Session mounted at the worktree's path, and the
// worktree is registered without a checkout, its index a copy of the
// base's (AddWorktreeOnBase), whose stat data the overlay's files match,
// so that `git status` there is clean at once without hashing a file.
// They are not wired into Session create yet.

// checkoutBaseScript writes the tree of commit $3 into the folder $1 with
// its index at $2: read-tree then checkout-index -u, which records each
// file's stat data as it writes it.
const checkoutBaseScript = `export GIT_INDEX_FILE="$2"
git read-tree --end-of-options "$3" && git -c checkout.workers=4 -c checkout.thresholdForParallelism=100 --work-tree="$1" checkout-index -a -u -q`

// CheckoutBase writes the files of commit into dir/tree and their index
// into dir/index; dir must not exist. The caller makes it in a temporary
// folder renamed into place, so that a base that exists is whole.
func (h *Home) CheckoutBase(ctx context.Context, commit, dir string) error {
	tree := filepath.Join(dir, "tree")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(tree, 0o755); err != nil {
		return err
	}
	if host, ok := h.r.ex.(Host); ok && host.AsUser {
		for _, d := range []string{dir, tree} {
			if err := os.Chown(d, int(host.UID), int(host.GID)); err != nil {
				return err
			}
		}
	}
	res, err := h.r.script(ctx, "checkout-base", maxSmallOutput, nil, checkoutBaseScript, tree, filepath.Join(dir, "index"), commit+"^{commit}")
	_, err = res.ok("checkout-base", err)
	return err
}

// AddWorktreeOnBase registers a worktree at dir on a new branch from
// commit without writing its files (`--no-checkout`, locked so that a
// prune while its overlay is not mounted keeps it), gives it a copy of
// the base's index, and answers its .git file's path: the caller moves
// that file into the overlay's upper layer and mounts the overlay at dir.
func (h *Home) AddWorktreeOnBase(ctx context.Context, dir, branch, commit, baseIndex string) (dotGit string, err error) {
	if err := h.mkdirOwned(dir); err != nil {
		return "", err
	}
	res, err := h.r.run(ctx, maxSmallOutput, nil, "worktree", "add", "--quiet", "--no-track", "--no-checkout", "--lock",
		"-b", branch, "--end-of-options", dir, commit)
	if _, err := res.ok("worktree", err); err != nil {
		return "", err
	}
	dotGit = filepath.Join(dir, ".git")
	b, err := os.ReadFile(dotGit)
	if err != nil {
		return "", err
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return "", fmt.Errorf("%s does not name the worktree's git directory", dotGit)
	}
	return dotGit, copyIndex(baseIndex, filepath.Join(gitdir, "index"), dotGit)
}

// copyIndex copies the base's index to to (in a temporary file renamed
// into place) with the owner of like.
func copyIndex(from, to, like string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := to + ".lathe-tmp"
	dst, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err = io.Copy(dst, src); err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = chownLike(tmp, like)
	}
	if err == nil {
		err = os.Rename(tmp, to)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// chownLike gives path the owner of like.
func chownLike(path, like string) error {
	fi, err := os.Stat(like)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if err := os.Lchown(path, int(st.Uid), int(st.Gid)); err != nil && os.Geteuid() == 0 {
		return err
	}
	return nil
}
