package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"syscall"

	"lathe/runtime/sandbox/helper"
)

// The operations of Ways: a hidden commit of the worktree that a ref
// protects, the binary patch between two snapshots, and its application
// to the worktree alone (the index, HEAD and branches stay as they are).

// MaxPatch bounds the patch of one Attempt.
const MaxPatch = 256 << 20

// wayRef is the shape of the refs SnapshotCommit writes.
var wayRef = regexp.MustCompile(`^refs/lathe/ways/[0-9A-Za-z]+$`)

// SnapshotCommit writes the worktree (tracked and untracked files, as
// Snapshot does, through a temporary index) as a commit whose parent is
// HEAD (none on an unborn branch) and points ref at it, so that the commit
// outlives garbage collection until DeleteRef. The user's index, HEAD and
// branches are untouched.
func (r *Repo) SnapshotCommit(ctx context.Context, ref string) (commit, tree string, err error) {
	if !wayRef.MatchString(ref) {
		return "", "", fmt.Errorf("snapshot ref %q is not refs/lathe/ways/<id>", ref)
	}
	tree, err = r.Snapshot(ctx)
	if err != nil {
		return "", "", err
	}
	res, err := r.script(ctx, "snapshot-commit", maxSmallOutput, nil, `set -e
export GIT_AUTHOR_NAME=Lathe GIT_AUTHOR_EMAIL=lathe@localhost GIT_COMMITTER_NAME=Lathe GIT_COMMITTER_EMAIL=lathe@localhost
if head=$(git rev-parse -q --verify HEAD^{commit}); then
  c=$(git commit-tree "$1" -p "$head" -m "lathe: Ways snapshot")
else
  c=$(git commit-tree "$1" -m "lathe: Ways snapshot")
fi
git update-ref "$2" "$c"
echo "$c"
`, tree, ref)
	out, err := res.ok("commit-tree", err)
	if err != nil {
		return "", "", err
	}
	commit = strings.TrimSpace(string(out))
	if !objectID.MatchString(commit) {
		return "", "", fmt.Errorf("git commit-tree printed %q, not a commit", clip(commit))
	}
	return commit, tree, nil
}

// DeleteRef removes a ref SnapshotCommit wrote; a missing one is no error.
func (r *Repo) DeleteRef(ctx context.Context, ref string) error {
	if !wayRef.MatchString(ref) {
		return fmt.Errorf("ref %q is not refs/lathe/ways/<id>", ref)
	}
	res, err := r.run(ctx, maxSmallOutput, nil, "update-ref", "-d", ref)
	_, err = res.ok("update-ref", err)
	return err
}

// Patch is the binary patch (full object names, no rename detection) that
// turns snapshot from into snapshot to.
func (r *Repo) Patch(ctx context.Context, from, to string) ([]byte, error) {
	if !objectID.MatchString(from) || !objectID.MatchString(to) {
		return nil, fmt.Errorf("snapshots must be object IDs, not %q and %q", clip(from), clip(to))
	}
	res, err := r.run(ctx, MaxPatch, nil, "diff", "--no-ext-diff", "--no-textconv", "--binary", "--full-index", "--no-renames", "--no-color", from, to, "--")
	return res.ok("diff", err)
}

// ApplyPatch applies a Patch to the worktree only (no index, no commit).
// git checks every hunk before it writes anything.
func (r *Repo) ApplyPatch(ctx context.Context, patch []byte) error {
	if len(patch) == 0 {
		return nil
	}
	res, err := r.run(ctx, maxSmallOutput, patch, "apply", "--binary", "--whitespace=nowarn", "-")
	_, err = res.ok("apply", err)
	return err
}

// RestorePaths puts paths of the worktree back as they are in snapshot:
// those it has get its content, the others are deleted (by the sandbox
// helper's unlink, never a directory). It undoes a Patch that was applied
// only in part.
func (r *Repo) RestorePaths(ctx context.Context, snapshot string, paths []string) error {
	if !objectID.MatchString(snapshot) {
		return fmt.Errorf("snapshot must be an object ID, not %q", clip(snapshot))
	}
	if len(paths) == 0 {
		return nil
	}
	res, err := r.run(ctx, maxStatusOutput, nil, "ls-tree", "-r", "-z", "--name-only", snapshot)
	out, err := res.ok("ls-tree", err)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, p := range splitNul(out) {
		have[p] = true
	}
	var keep, gone []string
	for _, p := range paths {
		if have[p] {
			keep = append(keep, p)
		} else {
			gone = append(gone, p)
		}
	}
	if len(gone) > 0 {
		argv, err := helper.Argv(ctx, r.ex, UnlinkCommand, r.root)
		if err != nil {
			return err
		}
		res, err := r.exec(ctx, maxSmallOutput, nulList(gone), "unlink", argv)
		if _, err := res.ok("unlink", err); err != nil {
			return err
		}
	}
	if len(keep) > 0 {
		res, err := r.run(ctx, maxSmallOutput, nulList(keep), "restore", "--source="+snapshot, "--worktree", "--pathspec-from-file=-", "--pathspec-file-nul")
		if _, err := res.ok("restore", err); err != nil {
			return err
		}
	}
	return nil
}

// UnlinkCommand is the sandbox helper's command that removes files:
// `unlink ROOT` with NUL-separated paths relative to ROOT on stdin
// removes each that exists and is not a directory (a symlink to one is
// removed), resolving every path inside ROOT (os.Root): RestorePaths'
// step inside the sandbox, which needs nothing of the image.
const UnlinkCommand = "unlink"

// Unlink is the helper command UnlinkCommand.
func Unlink(args []string, stdin io.Reader, _, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: unlink ROOT < NUL-separated paths")
		return 2
	}
	root, err := os.OpenRoot(args[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer root.Close()
	in, err := io.ReadAll(io.LimitReader(stdin, maxStatusOutput+1))
	if err == nil && len(in) > maxStatusOutput {
		err = fmt.Errorf("more than %d bytes of paths", maxStatusOutput)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, p := range splitNul(in) {
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && fi.IsDir()) {
			continue
		}
		if err == nil {
			err = root.Remove(p)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	return 0
}

// Show returns one path's content in a snapshot (tree or commit); ok is
// false when the snapshot has no such file.
func (r *Repo) Show(ctx context.Context, snapshot, p string) (content []byte, ok bool, err error) {
	if !objectID.MatchString(snapshot) {
		return nil, false, fmt.Errorf("snapshot must be an object ID, not %q", clip(snapshot))
	}
	res, err := r.run(ctx, MaxDiffOutput, nil, "cat-file", "blob", snapshot+":"+p)
	if err == nil && res.code != 0 {
		return nil, false, nil
	}
	out, err := res.ok("cat-file", err)
	return out, err == nil, err
}
