package git

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Status reports the branch and every changed, unmerged and untracked path
// (untracked files one by one, -uall), limited to pathspecs when given.
// It never writes the index (--no-optional-locks): a status the workbench
// asks for in the background must not hold index.lock while the user's or
// the Agent's own git command needs it. Refreshed stat data and the
// untracked cache are kept by the next command that writes the index.
func (r *Repo) Status(ctx context.Context, pathspecs ...string) (Status, error) {
	st, _, err := r.status(ctx, pathspecs...)
	return st, err
}

func (r *Repo) status(ctx context.Context, pathspecs ...string) (Status, []byte, error) {
	args := []string{"--no-optional-locks", "status", "--porcelain=v2", "-z", "--branch", "-uall", "--renames", "--ignored=no"}
	if len(pathspecs) > 0 {
		args = append(append(args, "--"), pathspecs...)
	}
	res, err := r.run(ctx, maxStatusOutput, nil, args...)
	out, err := res.ok("status", err)
	if err != nil {
		return Status{}, nil, err
	}
	st, err := ParseStatus(out)
	return st, out, err
}

// StatusToken is Status plus a token naming the state it describes: a hash
// of git's status output (every path and state, and the HEAD and index
// object names of each changed entry) and of a Snapshot of the worktree
// (the content of every tracked and untracked file). A change to what the
// status lists, or to the content behind a listed change, gives another
// token; reading twice with nothing changed gives the same one.
func (r *Repo) StatusToken(ctx context.Context) (Status, string, error) {
	st, token, _, err := r.statusToken(ctx)
	return st, token, err
}

func (r *Repo) statusToken(ctx context.Context) (Status, string, string, error) {
	st, raw, err := r.status(ctx)
	if err != nil {
		return Status{}, "", "", err
	}
	tree, err := r.Snapshot(ctx)
	if err != nil {
		return Status{}, "", "", err
	}
	return st, Token(raw, tree), tree, nil
}

// CheckStatusToken is ErrStatusChanged unless the checkout still has
// token; it returns the Snapshot tree the token covers.
func (r *Repo) CheckStatusToken(ctx context.Context, token string) (string, error) {
	_, now, tree, err := r.statusToken(ctx)
	if err != nil {
		return "", err
	}
	if now != token {
		return "", ErrStatusChanged
	}
	return tree, nil
}

// StageAllExactly stages every change, as Stage(nil) does, and then
// requires the index to hold exactly tree (a Snapshot of the worktree):
// otherwise the worktree changed since, so it puts the index back as it
// was and returns ErrStatusChanged. A commit of the index after it commits
// exactly tree.
func (r *Repo) StageAllExactly(ctx context.Context, tree string) error {
	res, err := r.script(ctx, "stage", maxSmallOutput, nil, `set -e
idx=$(git rev-parse --path-format=absolute --git-path index)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
had=0
if [ -f "$idx" ]; then cp -p "$idx" "$tmp"; had=1; fi
git add -A
if [ "$(git write-tree)" = "$1" ]; then echo same; exit 0; fi
if [ $had = 1 ]; then cp -p "$tmp" "$idx"; else rm -f "$idx"; fi
echo changed
`, tree)
	out, err := res.ok("add", err)
	switch {
	case err != nil:
		return err
	case strings.TrimSpace(string(out)) != "same":
		return ErrStatusChanged
	}
	return nil
}

// Token hashes a raw porcelain-v2 status and a worktree snapshot's tree ID
// into a status token.
func Token(rawStatus []byte, tree string) string {
	h := sha256.New()
	h.Write(rawStatus)
	h.Write([]byte{0})
	h.Write([]byte(tree))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Head is what HEAD names.
type Head struct {
	Commit string `json:"commit"`
	// Branch is the checked-out branch, empty when detached.
	Branch   string `json:"branch"`
	Detached bool   `json:"detached"`
}

// Head reads HEAD's commit and branch. An unborn branch is an *Error.
func (r *Repo) Head(ctx context.Context) (Head, error) {
	res, err := r.script(ctx, "head", maxSmallOutput, nil, `c=$(git rev-parse --verify -q 'HEAD^{commit}') || { echo "HEAD names no commit yet" >&2; exit 1; }
printf '%s\n' "$c"
git symbolic-ref -q HEAD || true
`)
	out, err := res.ok("rev-parse", err)
	if err != nil {
		return Head{}, err
	}
	lines := splitLines(out)
	if len(lines) == 0 || !objectID.MatchString(lines[0]) {
		return Head{}, fmt.Errorf("git rev-parse printed %q, not a commit", clip(string(out)))
	}
	h := Head{Commit: lines[0], Detached: true}
	if len(lines) > 1 {
		h.Branch, h.Detached = strings.TrimPrefix(lines[1], "refs/heads/"), false
	}
	return h, nil
}

var objectID = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// diffFlags make a patch FileDiff.Patch can rebuild and git apply can
// read, whatever the repository's diff config says.
var diffFlags = []string{"--no-color", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/", "--submodule=short"}

// Changes is the diff of one path: its unstaged change (worktree against
// index) or its staged one (index against HEAD).
type Changes struct {
	Path   string
	Staged bool
	// Untracked marks an untracked file, shown as its creation.
	Untracked bool
	// Raw is the patch as git printed it.
	Raw   []byte
	Files []FileDiff
}

// HunkAt finds hunk i, counting the hunks of every file in order.
func (c Changes) HunkAt(i int) (FileDiff, int, error) {
	n := 0
	for _, fd := range c.Files {
		if i >= 0 && i-n < len(fd.Hunks) {
			return fd, i - n, nil
		}
		n += len(fd.Hunks)
	}
	for _, fd := range c.Files {
		if fd.Binary {
			return FileDiff{}, 0, ErrBinary
		}
	}
	return FileDiff{}, 0, fmt.Errorf("%w: %q has %d hunks; there is no hunk %d", ErrNoHunk, c.Path, n, i)
}

// Changes diffs one path. An untracked file's unstaged change is its
// creation (`git diff --no-index /dev/null path`); a staged rename is shown
// from its source, so its hunks are the edits made while renaming.
func (r *Repo) Changes(ctx context.Context, p string, staged bool) (Changes, error) {
	c := Changes{Path: p, Staged: staged}
	var err error
	if staged {
		c.Raw, err = r.diff(ctx, "--cached", "-M", "--", p)
		if err == nil && len(c.Raw) > 0 && bytes.Contains(c.Raw, []byte("\nnew file mode ")) {
			// A path added in the index may be a rename's destination.
			var from string
			if from, err = r.renamedFrom(ctx, p); err == nil && from != "" {
				c.Raw, err = r.diff(ctx, "--cached", "-M", "--", p, from)
			}
		}
	} else {
		c.Raw, err = r.diff(ctx, "--", p)
		if err == nil && len(c.Raw) == 0 {
			c.Untracked, err = r.untrackedFile(ctx, p)
			if c.Untracked {
				c.Raw, err = r.diff(ctx, "--no-index", "--", "/dev/null", p)
			}
		}
	}
	if err != nil {
		return Changes{}, err
	}
	c.Files, err = ParseDiff(c.Raw)
	return c, err
}

// diff runs `git diff` with diffFlags and args. Exit 1 is --no-index's
// "they differ".
func (r *Repo) diff(ctx context.Context, args ...string) ([]byte, error) {
	res, err := r.run(ctx, MaxDiffOutput, nil, append(append([]string{"diff"}, diffFlags...), args...)...)
	codes := []int{}
	if len(args) > 0 && args[0] == "--no-index" {
		codes = append(codes, 1)
	}
	return res.ok("diff", err, codes...)
}

// renamedFrom returns the source of the staged rename whose destination is
// p, or "".
func (r *Repo) renamedFrom(ctx context.Context, p string) (string, error) {
	res, err := r.run(ctx, maxStatusOutput, nil, "diff", "--cached", "-M", "--name-status", "-z", "--no-ext-diff")
	out, err := res.ok("diff", err)
	if err != nil {
		return "", err
	}
	f := splitNul(out)
	for i := 0; i < len(f); {
		if strings.HasPrefix(f[i], "R") || strings.HasPrefix(f[i], "C") {
			if i+2 < len(f) && f[i+2] == p && strings.HasPrefix(f[i], "R") {
				return f[i+1], nil
			}
			i += 3
		} else {
			i += 2
		}
	}
	return "", nil
}

// untrackedFile reports whether p is an untracked, not ignored, file. An
// untracked directory is ErrUntrackedDir. git lists only what it would
// add, so nothing behind a symlink counts.
func (r *Repo) untrackedFile(ctx context.Context, p string) (bool, error) {
	res, err := r.run(ctx, maxStatusOutput, nil, "ls-files", "-z", "--others", "--exclude-standard", "--", p)
	out, err := res.ok("ls-files", err)
	if err != nil {
		return false, err
	}
	switch files := splitNul(out); {
	case len(files) == 0:
		return false, nil
	case len(files) == 1 && files[0] == p:
		return true, nil
	default:
		return false, fmt.Errorf("%w: %q holds %d untracked files", ErrUntrackedDir, p, len(files))
	}
}

// Hunk actions.
const (
	// HunkStage applies an unstaged hunk to the index.
	HunkStage = "stage"
	// HunkUnstage reverts a staged hunk in the index.
	HunkUnstage = "unstage"
	// HunkDiscard reverts an unstaged hunk in the worktree.
	HunkDiscard = "discard"
)

// ApplyHunk stages, unstages or discards hunk index of path's unstaged
// (stage, discard) or staged (unstage) diff, and nothing else: it builds the
// patch of that one hunk (FileDiff.Patch) and applies it with `git apply
// --cached` (stage), `--cached --reverse` (unstage) or `--reverse`
// (discard). When header is not empty, the hunk must still have it, so a
// caller never moves a hunk other than the one it saw. It returns the hunk.
func (r *Repo) ApplyHunk(ctx context.Context, p string, index int, header, action string) (Hunk, error) {
	flags := map[string][]string{HunkStage: {"--cached"}, HunkUnstage: {"--cached", "--reverse"}, HunkDiscard: {"--reverse"}}[action]
	if flags == nil {
		return Hunk{}, fmt.Errorf("unknown hunk action %q", action)
	}
	c, err := r.Changes(ctx, p, action == HunkUnstage)
	if err != nil {
		return Hunk{}, err
	}
	fd, i, err := c.HunkAt(index)
	if err != nil {
		return Hunk{}, err
	}
	h := fd.Hunks[i]
	if header != "" && header != h.Header {
		return Hunk{}, fmt.Errorf("%w: hunk %d of %q is now %q, not %q; list the hunks again", ErrHunkChanged, index, p, clip(h.Header), clip(header))
	}
	patch, err := fd.Patch(i)
	if err != nil {
		return Hunk{}, err
	}
	args := append(append([]string{"apply"}, flags...), "--whitespace=nowarn", "-")
	res, err := r.run(ctx, maxSmallOutput, patch, args...)
	if _, err := res.ok("apply", err); err != nil {
		return Hunk{}, err
	}
	return h, nil
}

// Stage stages paths as they are in the worktree (additions, changes and
// deletions: `git add -A`); no paths stages everything.
func (r *Repo) Stage(ctx context.Context, paths []string) error {
	return r.runPaths(ctx, paths, "add", "-A")
}

// Unstage resets paths in the index to HEAD (on an unborn branch: removes
// them from it), keeping the worktree; no paths unstages everything.
func (r *Repo) Unstage(ctx context.Context, paths []string) error {
	return r.runPaths(ctx, paths, "reset", "-q")
}

// runPaths runs git args limited to paths, which go NUL-separated on stdin
// (--pathspec-from-file), so neither their number nor their bytes matter;
// no paths runs args alone.
func (r *Repo) runPaths(ctx context.Context, paths []string, args ...string) error {
	var stdin []byte
	if len(paths) > 0 {
		args, stdin = append(args, "--pathspec-from-file=-", "--pathspec-file-nul"), nulList(paths)
	}
	res, err := r.run(ctx, maxSmallOutput, stdin, args...)
	_, err = res.ok(args[0], err)
	return err
}

// maxArgvPaths bounds the paths of one `git clean`, whose pathspecs can
// come only as argv.
const maxArgvPaths = 500

// Discard throws away the unstaged changes under p ("" for the whole
// worktree): tracked files return to their index content (`git checkout --
// paths`), untracked files are deleted (`git clean -f -- paths`). Staged
// changes stay. Unmerged paths and nested repositories are left alone. It
// returns the paths it discarded.
func (r *Repo) Discard(ctx context.Context, p string) ([]string, error) {
	var specs []string
	if p != "" {
		specs = []string{p}
	}
	st, err := r.Status(ctx, specs...)
	if err != nil {
		return nil, err
	}
	var tracked, untracked []string
	for _, e := range st.Entries {
		switch {
		case (e.Kind == '1' || e.Kind == '2') && e.Y != '.':
			tracked = append(tracked, e.Path)
		case e.Kind == '?' && !strings.HasSuffix(e.Path, "/"):
			untracked = append(untracked, e.Path)
		}
	}
	if len(tracked) > 0 {
		if err := r.runPaths(ctx, tracked, "checkout", "-q"); err != nil {
			return nil, err
		}
	}
	for i := 0; i < len(untracked); i += maxArgvPaths {
		batch := untracked[i:min(i+maxArgvPaths, len(untracked))]
		res, err := r.run(ctx, maxSmallOutput, nil, append([]string{"clean", "-f", "-q", "--"}, batch...)...)
		if _, err := res.ok("clean", err); err != nil {
			return append(tracked, untracked[:i]...), err
		}
	}
	return append(tracked, untracked...), nil
}

// Checkout switches to ref (a branch, or anything naming a commit, which
// detaches HEAD) and returns the new HEAD. Local changes git would lose make
// it fail with an *Error; a ref that names nothing is ErrUnknownRef.
func (r *Repo) Checkout(ctx context.Context, ref string) (Head, error) {
	res, err := r.run(ctx, maxSmallOutput, nil, "checkout", "-q", ref, "--")
	if _, err := res.ok("checkout", err); err != nil {
		return Head{}, err
	}
	return r.Head(ctx)
}

// Identity is the author and committer a commit gets when the repository
// (or the sandbox's global config) sets none.
type Identity struct{ Name, Email string }

// ConfiguredIdentity is the user.name and user.email git sees in the
// repository (its own config, or the sandbox's global or system config);
// either is "" when unset. Commit uses them over the identity it is given.
func (r *Repo) ConfiguredIdentity(ctx context.Context) (Identity, error) {
	var id Identity
	for _, f := range []struct {
		key string
		to  *string
	}{{"user.name", &id.Name}, {"user.email", &id.Email}} {
		res, err := r.run(ctx, maxSmallOutput, nil, "config", "--get", "-z", f.key)
		out, err := res.ok("config", err, 1) // 1: not set
		if err != nil {
			return Identity{}, err
		}
		*f.to = strings.TrimSuffix(string(out), "\x00")
	}
	return id, nil
}

// Commit is a commit Commit made.
type Commit struct {
	Head
	Subject string   `json:"subject"`
	Paths   []string `json:"paths"`
}

// Commit commits the index, after staging everything when stageAll.
// message "" gets one naming what changed. The repository's own user.name
// and user.email win over id. No hook runs and nothing is signed.
func (r *Repo) Commit(ctx context.Context, message string, stageAll bool, id Identity) (Commit, error) {
	if stageAll {
		if err := r.Stage(ctx, nil); err != nil {
			return Commit{}, err
		}
	}
	res, err := r.run(ctx, maxStatusOutput, nil, "diff", "--cached", "--name-only", "-z", "--no-renames", "--no-ext-diff")
	out, err := res.ok("diff", err)
	if err != nil {
		return Commit{}, err
	}
	paths := splitNul(out)
	if len(paths) == 0 {
		return Commit{}, fmt.Errorf("%w: no change is staged", ErrNothingToCommit)
	}
	if strings.TrimSpace(message) == "" {
		message = "Update " + paths[0]
		if len(paths) > 1 {
			message = fmt.Sprintf("Update %d files", len(paths))
		}
	}
	res, err = r.script(ctx, "commit", maxSmallOutput, []byte(message), `id=()
git config user.name >/dev/null || id+=(-c "user.name=$1")
git config user.email >/dev/null || id+=(-c "user.email=$2")
exec git "${id[@]}" commit -q --no-verify -F -
`, id.Name, id.Email)
	if _, err := res.ok("commit", err); err != nil {
		return Commit{}, err
	}
	h, err := r.Head(ctx)
	if err != nil {
		return Commit{}, err
	}
	subject, _, _ := strings.Cut(strings.TrimSpace(message), "\n")
	return Commit{Head: h, Subject: subject, Paths: paths}, nil
}

// maxBranches bounds a branch listing.
const maxBranches = 5000

// Branches lists local and remote-tracking branches (at most 5000, by
// name) and HEAD; an unborn HEAD has no commit.
func (r *Repo) Branches(ctx context.Context) ([]BranchRef, Head, error) {
	res, err := r.run(ctx, maxStatusOutput, nil, "for-each-ref", "--format="+BranchFormat, fmt.Sprintf("--count=%d", maxBranches), "refs/heads", "refs/remotes")
	out, err := res.ok("for-each-ref", err)
	if err != nil {
		return nil, Head{}, err
	}
	refs, err := ParseBranches(out)
	if err != nil {
		return nil, Head{}, err
	}
	h, err := r.Head(ctx)
	var unborn *Error
	if errors.As(err, &unborn) {
		// HEAD names a branch that has no commit yet.
		res, err := r.run(ctx, maxSmallOutput, nil, "symbolic-ref", "-q", "--short", "HEAD")
		out, err := res.ok("symbolic-ref", err)
		if err != nil {
			return nil, Head{}, err
		}
		return refs, Head{Branch: strings.TrimSpace(string(out))}, nil
	}
	return refs, h, err
}

// Snapshot records the worktree as it is, tracked and untracked files
// alike (not ignored ones), as a tree object, and returns its ID. It uses a
// temporary index seeded from the real one, so the index, HEAD and refs
// stay as they were; only objects are added, which git's gc collects.
func (r *Repo) Snapshot(ctx context.Context) (string, error) {
	res, err := r.script(ctx, "snapshot", maxSmallOutput, nil, `set -e
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
idx=$(git rev-parse --path-format=absolute --git-path index)
# -p keeps the index's mtime, which git's racy-clean check compares with.
if [ -f "$idx" ]; then cp -p "$idx" "$tmp"; else rm -f "$tmp"; fi
GIT_INDEX_FILE=$tmp git add -A
GIT_INDEX_FILE=$tmp git write-tree
`)
	out, err := res.ok("write-tree", err)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(out))
	if !objectID.MatchString(id) {
		return "", fmt.Errorf("git write-tree printed %q, not a tree", clip(id))
	}
	return id, nil
}

// ChangedPaths lists the paths whose content or mode differs between two
// snapshots (tree or commit IDs).
func (r *Repo) ChangedPaths(ctx context.Context, from, to string) ([]string, error) {
	if !objectID.MatchString(from) || !objectID.MatchString(to) {
		return nil, fmt.Errorf("snapshots must be object IDs, not %q and %q", clip(from), clip(to))
	}
	res, err := r.run(ctx, maxStatusOutput, nil, "diff-tree", "-r", "-z", "--name-only", "--no-renames", from, to)
	out, err := res.ok("diff-tree", err)
	if err != nil {
		return nil, err
	}
	return splitNul(out), nil
}
