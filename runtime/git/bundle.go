package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"lathe/runtime/sandbox"
)

// The transfer of a remote Session's code (CONTRACT.md "The remote sandbox
// provider"): the Workspace repository on the daemon's host is snapshotted
// (HEAD plus its uncommitted changes, tracked and untracked, as Ways
// snapshots it) and streamed as one git bundle into one exec in the
// sandbox, which makes the clone; the clone's work comes back the same
// way, as a bundle streamed out of the sandbox and fetched into the
// Workspace repository as a branch, never touching its working tree,
// index or current branch.
//
// On the host, git runs through HostExec with the same command-line-scope
// config as everywhere (no hook, no fsmonitor, no automatic gc). The host
// steps only read the worktree, write objects, and write the one ref they
// name: refs/lathe/seed/<id> while a seed is streamed, and the fetched
// branch.

// transferRef is the shape of the refs a transfer writes for the length of
// one bundle.
var transferRef = regexp.MustCompile(`^refs/lathe/(seed|home)/[0-9A-Za-z]+$`)

// Transfer is the repository at one end of a transfer: the Workspace
// repository on the host (through HostExec) or the clone in a sandbox.
type Transfer struct{ r *Repo }

// NewTransfer returns the transfer end whose worktree is root, as ex sees
// it.
func NewTransfer(ex Execer, root string) Transfer { return Transfer{r: Open(ex, root)} }

// treeOfWorktree is the shell step both ends share: $tree becomes the
// worktree (tracked and untracked files, not ignored ones) through a
// temporary index seeded from the real one (cp -p keeps the mtime git's
// racy-clean check compares with), and the commits that follow are
// Lathe's.
const treeOfWorktree = `tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
idx=$(git rev-parse --path-format=absolute --git-path index)
if [ -f "$idx" ]; then cp -p "$idx" "$tmp"; else rm -f "$tmp"; fi
GIT_INDEX_FILE=$tmp git add -A
tree=$(GIT_INDEX_FILE=$tmp git write-tree)
export GIT_AUTHOR_NAME=Lathe GIT_AUTHOR_EMAIL=lathe@localhost GIT_COMMITTER_NAME=Lathe GIT_COMMITTER_EMAIL=lathe@localhost
`

// ErrDirty: the clone has uncommitted changes and the caller asked for its
// committed work only.
var ErrDirty = errors.New("the clone has uncommitted changes; commit them first")

// ErrNoCommit: the clone has no commit to bring home.
var ErrNoCommit = errors.New("the clone has no commit yet")

// Seed is what a clone starts from: the commit a bundle carries at Ref,
// checked out on Branch ("" keeps HEAD detached) with HEAD moved back to
// Head ("" for an unborn branch), so that the commit's changes over Head
// show as uncommitted in the clone.
type Seed struct {
	Ref    string
	Branch string
	Head   string
	Commit string
}

// SeedCommit records the worktree as a commit on top of HEAD at ref (a
// refs/lathe/seed/<id> ref), or, when the branch from exists, that
// branch's commit as it is (a Session reopened from the work it brought
// home). The index, HEAD and branches stay as they are. The worktree's
// files at leaveOut (paths relative to the root, such as the daemon's
// config file) stay out of the uncommitted changes; a tracked one keeps
// its committed content.
func (t Transfer) SeedCommit(ctx context.Context, ref, from string, leaveOut ...string) (Seed, error) {
	r := t.r
	if !transferRef.MatchString(ref) {
		return Seed{}, fmt.Errorf("seed ref %q is not refs/lathe/seed/<id>", ref)
	}
	args := []string{ref, from}
	for _, p := range leaveOut {
		args = append(args, filepath.ToSlash(p))
	}
	// "$@" is leaveOut once ref and from are shifted off: their index
	// entries go back to HEAD's (none for an untracked file).
	tree := strings.Replace(treeOfWorktree, "git add -A\n",
		"git add -A\nif [ $# -gt 0 ]; then GIT_INDEX_FILE=$tmp git reset -q -- \"$@\"; fi\n", 1)
	res, err := r.script(ctx, "seed", maxSmallOutput, nil, `set -e
ref=$1 from=$2
shift 2
if [ -n "$from" ] && c=$(git rev-parse -q --verify "refs/heads/$from^{commit}"); then
  git update-ref "$ref" "$c"
  printf '%s\n%s\n%s\n' "$from" "$c" "$c"
  exit 0
fi
branch=$(git symbolic-ref -q --short HEAD || true)
`+tree+`if head=$(git rev-parse -q --verify 'HEAD^{commit}'); then
  c=$(git commit-tree "$tree" -p "$head" -m "lathe: the Workspace's uncommitted changes")
else
  head=
  c=$(git commit-tree "$tree" -m "lathe: the Workspace's uncommitted changes")
fi
git update-ref "$ref" "$c"
printf '%s\n%s\n%s\n' "$branch" "$head" "$c"
`, args...)
	out, err := res.ok("seed", err)
	if err != nil {
		return Seed{}, err
	}
	f := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(f) != 3 || !objectID.MatchString(f[2]) || (f[1] != "" && !objectID.MatchString(f[1])) {
		return Seed{}, fmt.Errorf("the seed step printed %q, not branch, head and commit", clip(string(out)))
	}
	return Seed{Ref: ref, Branch: f[0], Head: f[1], Commit: f[2]}, nil
}

// WriteBundle streams a bundle of ref and its history to w.
func (t Transfer) WriteBundle(ctx context.Context, ref string, w io.Writer) error {
	if !transferRef.MatchString(ref) {
		return fmt.Errorf("bundle ref %q is not refs/lathe/seed|home/<id>", ref)
	}
	return t.stream(ctx, "bundle", nil, w, "git", "bundle", "create", "-q", "-", ref)
}

// DropTransferRef removes a ref SeedCommit or HomeCommit wrote; a missing
// one is no error.
func (t Transfer) DropRef(ctx context.Context, ref string) error {
	r := t.r
	if !transferRef.MatchString(ref) {
		return fmt.Errorf("ref %q is not refs/lathe/seed|home/<id>", ref)
	}
	res, err := r.run(ctx, maxSmallOutput, nil, "update-ref", "-d", ref)
	_, err = res.ok("update-ref", err)
	return err
}

// CloneBundle makes the repository at r's root (an empty directory) a
// clone of the bundle read from bundle, checked out as seed says. It runs
// as one process, which reads the whole bundle before git reads it. The
// bundle's objects go in without a fetch (no connectivity walk, no ref
// but HEAD's), the seed commit's files are written by parallel
// checkout-index (which records each file's stat data), and the index
// then becomes Head's by a one-tree read-tree, which keeps that stat data
// wherever the content is the same: no second pass over the worktree.
func (t Transfer) CloneBundle(ctx context.Context, bundle io.Reader, seed Seed) error {
	if !objectID.MatchString(seed.Commit) || (seed.Head != "" && !objectID.MatchString(seed.Head)) {
		return fmt.Errorf("seed %+v names no commit", seed)
	}
	return t.stream(ctx, "clone", bundle, nil, "bash", "-c", `set -eu
b=$(mktemp)
trap 'rm -f "$b"' EXIT
cat > "$b"
env -u GIT_WORK_TREE git init -q
git bundle unbundle "$b" "$1" >/dev/null
git read-tree --end-of-options "$4"
git -c checkout.workers=4 -c checkout.thresholdForParallelism=100 checkout-index -a -u -q
if [ -n "$2" ]; then
  [ -z "$3" ] || git update-ref "refs/heads/$2" "$3"
  git symbolic-ref HEAD "refs/heads/$2"
elif [ -n "$3" ]; then
  git update-ref --no-deref HEAD "$3"
fi
if [ -z "$3" ]; then
  git read-tree --empty
elif [ "$3" != "$4" ]; then
  git read-tree -m --end-of-options "$3"
fi
`, "lathe-git-clone", seed.Ref, seed.Branch, seed.Head, seed.Commit)
}

// HomeWork is the clone's work as HomeCommit recorded it for one bundle.
type HomeWork struct {
	Ref    string
	Commit string
	// Uncommitted: Commit is the clone's uncommitted changes as one more
	// commit on top of its HEAD.
	Uncommitted bool
}

// HomeCommit points ref (refs/lathe/home/<id>) at the clone's HEAD, or,
// when it has uncommitted changes (tracked or untracked) and
// withChanges, at one more commit on top of HEAD that holds them,
// described by message. ErrDirty when it has such changes and not
// withChanges; ErrNoCommit when there is nothing to bring.
func (t Transfer) HomeCommit(ctx context.Context, ref string, withChanges bool, message string) (HomeWork, error) {
	r := t.r
	if !transferRef.MatchString(ref) {
		return HomeWork{}, fmt.Errorf("home ref %q is not refs/lathe/home/<id>", ref)
	}
	mode := ""
	if withChanges {
		mode = "with-changes"
	}
	res, err := r.script(ctx, "home", maxSmallOutput, nil, `set -e
if [ -n "$(git status --porcelain=v1 --untracked-files=all --ignore-submodules=none)" ]; then
  [ "$2" = with-changes ] || exit 3
`+treeOfWorktree+`  if head=$(git rev-parse -q --verify 'HEAD^{commit}'); then
    c=$(git commit-tree "$tree" -p "$head" -m "$3")
  else
    c=$(git commit-tree "$tree" -m "$3")
  fi
  dirty=1
else
  c=$(git rev-parse -q --verify 'HEAD^{commit}') || exit 4
  dirty=0
fi
git update-ref "$1" "$c"
echo "$dirty $c"
`, ref, mode, message)
	switch {
	case err == nil && res.code == 3:
		return HomeWork{}, ErrDirty
	case err == nil && res.code == 4:
		return HomeWork{}, ErrNoCommit
	}
	out, err := res.ok("home", err)
	if err != nil {
		return HomeWork{}, err
	}
	dirty, commit, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !objectID.MatchString(commit) {
		return HomeWork{}, fmt.Errorf("the home step printed %q, not a commit", clip(string(out)))
	}
	return HomeWork{Ref: ref, Commit: commit, Uncommitted: dirty == "1"}, nil
}

// FetchBundle fetches src from the bundle file at path into the local
// branch (forced), without a hook, FETCH_HEAD or tag, and without touching
// the working tree, index or HEAD: git refuses to fetch into the branch
// checked out.
func (t Transfer) FetchBundle(ctx context.Context, path, src, branch string) error {
	r := t.r
	if !transferRef.MatchString(src) {
		return fmt.Errorf("bundle ref %q is not refs/lathe/home/<id>", src)
	}
	res, err := r.run(ctx, maxSmallOutput, nil, "fetch", "-q", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
		"--", path, "+"+src+":refs/heads/"+branch)
	_, err = res.ok("fetch", err)
	return err
}

// IsRepository tells whether r's root is the top of a Git worktree.
func (t Transfer) IsRepository(ctx context.Context) (bool, error) {
	r := t.r
	res, err := r.run(ctx, maxSmallOutput, nil, "rev-parse", "--show-toplevel")
	if errors.Is(err, ErrNotRepository) || (err == nil && res.code != 0) {
		return false, nil
	}
	return err == nil, err
}

// stream runs argv with stdin and stdout as the caller's streams; a
// non-zero exit is an *Error with the end of stderr.
func (t Transfer) stream(ctx context.Context, op string, stdin io.Reader, stdout io.Writer, argv ...string) error {
	r := t.r
	errb := &limited{max: maxStderr, keepTail: true}
	if stdout == nil {
		stdout = io.Discard
	}
	p, err := r.ex.Exec(ctx, sandbox.ExecSpec{Args: argv, Dir: r.root, Env: r.env, Stdin: stdin, Stdout: stdout, Stderr: errb})
	if err != nil {
		return fmt.Errorf("start git %s: %w", op, err)
	}
	code, err := wait(ctx, p)
	if err != nil {
		return fmt.Errorf("git %s: %w", op, err)
	}
	if code != 0 {
		return &Error{Op: op, Code: code, Stderr: strings.TrimSpace(errb.String())}
	}
	return nil
}

// wait waits for p, and kills it when ctx ends first.
func wait(ctx context.Context, p sandbox.Process) (int, error) {
	code, err := p.Wait(ctx)
	if err != nil && ctx.Err() != nil {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killWait)
		_ = p.Signal(kctx, syscall.SIGKILL)
		cancel()
	}
	return code, err
}
