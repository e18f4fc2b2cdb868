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
// On the host, git runs as Home runs it (host.go): pinned to the
// Workspace's repository, the folder's tree made in a scratch git
// directory, so no filter the repository names runs. The host steps only
// read the folder, write objects, and write the one ref they name:
// refs/lathe/seed/<id> while a seed is streamed, and the fetched branch.

// transferRef is the shape of the refs a transfer writes for the length of
// one bundle.
var transferRef = regexp.MustCompile(`^refs/lathe/(seed|home)/[0-9A-Za-z]+$`)

// Transfer is the clone's end of a transfer, in a sandbox; the Workspace
// repository's end on the host is its Home.
type Transfer struct{ r *Repo }

// NewTransfer returns the transfer end whose worktree is root, as ex sees
// it.
func NewTransfer(ex Execer, root string) Transfer { return Transfer{r: Open(ex, root)} }

// treeOfWorktree is the clone's shell step (HomeCommit): $tree becomes the
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

// SeedCommit records the Workspace folder as a commit on top of HEAD at
// ref (a refs/lathe/seed/<id> ref), or, when the branch from exists, that
// branch's commit as it is (a Session reopened from the work it brought
// home). The index, HEAD and branches stay as they are: the folder's tree
// is made in a scratch git directory from a copy of the index (content).
// The worktree's files at leaveOut (paths relative to the root, such as
// the daemon's config file) stay out of the uncommitted changes; a tracked
// one keeps its committed content.
func (h *Home) SeedCommit(ctx context.Context, ref, from string, leaveOut ...string) (Seed, error) {
	if !transferRef.MatchString(ref) {
		return Seed{}, fmt.Errorf("seed ref %q is not refs/lathe/seed/<id>", ref)
	}
	if from != "" {
		c, ok, err := h.BranchHead(ctx, from)
		if err != nil {
			return Seed{}, err
		}
		if ok {
			return Seed{Ref: ref, Branch: from, Head: c, Commit: c}, h.setRef(ctx, ref, c)
		}
	}
	res, err := h.r.run(ctx, maxSmallOutput, nil, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil {
		return Seed{}, err
	}
	branch := strings.TrimSpace(string(res.out))
	if res.code != 0 {
		branch = ""
	}
	head, err := h.rev(ctx, "HEAD^{commit}")
	if err != nil {
		head = ""
	}
	var commit string
	err = h.content(ctx, scratchSpec{work: h.dir, copyIndex: filepath.Join(h.l.gitDir, "index")}, func(r *Repo, _ string) error {
		tree, err := worktreeTree(ctx, r, head, leaveOut)
		if err != nil {
			return err
		}
		args := []string{"git", "-c", "user.name=Lathe", "-c", "user.email=lathe@localhost", "commit-tree", tree}
		if head != "" {
			args = append(args, "-p", head)
		}
		res, err := r.exec(ctx, maxSmallOutput, []byte("lathe: the Workspace's uncommitted changes\n"), "commit-tree", args)
		out, err := res.ok("commit-tree", err)
		commit = strings.TrimSpace(string(out))
		if err == nil && !objectID.MatchString(commit) {
			err = fmt.Errorf("git commit-tree printed %q, not a commit", clip(commit))
		}
		return err
	})
	if err != nil {
		return Seed{}, err
	}
	return Seed{Ref: ref, Branch: branch, Head: head, Commit: commit}, h.setRef(ctx, ref, commit)
}

// worktreeTree writes the tree of r's worktree (tracked and untracked
// files, not ignored ones) through r's index, which it changes; the paths
// of leaveOut keep their entry in head (none for an untracked file, or
// when head is empty: an unborn branch).
func worktreeTree(ctx context.Context, r *Repo, head string, leaveOut []string) (string, error) {
	res, err := r.run(ctx, maxSmallOutput, nil, "add", "-A")
	if _, err := res.ok("add", err); err != nil {
		return "", err
	}
	if len(leaveOut) > 0 {
		args := []string{"rm", "-q", "--cached", "--ignore-unmatch", "--"}
		if head != "" {
			args = []string{"reset", "-q", head, "--"}
		}
		for _, p := range leaveOut {
			args = append(args, filepath.ToSlash(p))
		}
		res, err = r.run(ctx, maxSmallOutput, nil, args...)
		if _, err := res.ok("reset", err); err != nil {
			return "", err
		}
	}
	res, err = r.run(ctx, maxSmallOutput, nil, "write-tree")
	out, err := res.ok("write-tree", err)
	tree := strings.TrimSpace(string(out))
	if err == nil && !objectID.MatchString(tree) {
		err = fmt.Errorf("git write-tree printed %q, not a tree", clip(tree))
	}
	return tree, err
}

// setRef points ref at commit.
func (h *Home) setRef(ctx context.Context, ref, commit string) error {
	res, err := h.r.run(ctx, maxSmallOutput, nil, "update-ref", "--end-of-options", ref, commit)
	_, err = res.ok("update-ref", err)
	return err
}

// WriteBundle streams a bundle of ref (SeedCommit's) and its history to w.
func (h *Home) WriteBundle(ctx context.Context, ref string, w io.Writer) error {
	return Transfer{r: h.r}.WriteBundle(ctx, ref, w)
}

// DropRef removes a ref SeedCommit wrote; a missing one is no error.
func (h *Home) DropRef(ctx context.Context, ref string) error {
	return Transfer{r: h.r}.DropRef(ctx, ref)
}

// WriteBundle streams a bundle of ref and its history to w.
func (t Transfer) WriteBundle(ctx context.Context, ref string, w io.Writer) error {
	if !transferRef.MatchString(ref) {
		return fmt.Errorf("bundle ref %q is not refs/lathe/seed|home/<id>", ref)
	}
	return t.stream(ctx, "bundle", nil, w, "git", "bundle", "create", "-q", "-", ref)
}

// DropRef removes a ref SeedCommit or HomeCommit wrote; a missing
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
// checked out. Every object the bundle brings is checked (fsck), as the
// bundle is the clone's, on another host: a malformed tree never enters
// the Workspace's repository. A bundle is fetched over git's file
// transport, the one transport host git allows (hostConfig), for this
// command only.
func (h *Home) FetchBundle(ctx context.Context, path, src, branch string) error {
	if !transferRef.MatchString(src) {
		return fmt.Errorf("bundle ref %q is not refs/lathe/home/<id>", src)
	}
	res, err := h.r.run(ctx, maxSmallOutput, nil, "-c", "protocol.file.allow=always", "-c", "fetch.fsckObjects=true",
		"fetch", "-q", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--no-auto-maintenance",
		"--", path, "+"+src+":refs/heads/"+branch)
	_, err = res.ok("fetch", err)
	return err
}

// Commits resolves each rev to its commit, "" for one that names none.
func (h *Home) Commits(ctx context.Context, revs ...string) ([]string, error) {
	out := make([]string, len(revs))
	for i, rev := range revs {
		res, err := h.r.run(ctx, maxSmallOutput, nil, "rev-parse", "-q", "--verify", "--end-of-options", rev+"^{commit}")
		if err != nil {
			return nil, err
		}
		if c := strings.TrimSpace(string(res.out)); res.code == 0 {
			if !objectID.MatchString(c) {
				return nil, fmt.Errorf("git rev-parse printed %q, not a commit", clip(c))
			}
			out[i] = c
		}
	}
	return out, nil
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
