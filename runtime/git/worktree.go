package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Home is a Workspace's repository, on the host, seen from the Workspace
// folder: its worktrees and the merges of their branches back home
// (merge.go). Open it with OpenHome.
type Home struct {
	r   *Repo
	dir string
}

// OpenHome opens the repository whose main worktree is dir, on the host,
// as the owner of dir.
func OpenHome(dir string) (*Home, error) {
	r, err := OpenHost(dir)
	if err != nil {
		return nil, err
	}
	return &Home{r: r, dir: dir}, nil
}

// Errors of worktrees and merges.
var (
	// ErrDetached: the Workspace has no current branch to merge into.
	ErrDetached = errors.New("the Workspace folder is on a detached HEAD, not a branch")
	// ErrNoBranch: a worktree's branch does not exist.
	ErrNoBranch = errors.New("no such branch")
)

// IsRepository reports whether dir is the top of a Git worktree with a
// commit, seen on the host.
func (h *Home) IsRepository(ctx context.Context) bool {
	_, err := h.rev(ctx, "HEAD^{commit}")
	return err == nil
}

// rev resolves a revision to its object name.
func (h *Home) rev(ctx context.Context, rev string) (string, error) {
	res, err := h.r.run(ctx, maxSmallOutput, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", rev)
	out, err := res.ok("rev-parse", err)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// BranchHead is the commit a branch (a short name) points at; ok is false
// when there is no such branch.
func (h *Home) BranchHead(ctx context.Context, branch string) (commit string, ok bool, err error) {
	res, err := h.r.run(ctx, maxSmallOutput, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", "refs/heads/"+branch+"^{commit}")
	if err != nil {
		return "", false, err
	}
	if res.code != 0 {
		return "", false, nil
	}
	return strings.TrimSpace(string(res.out)), true, nil
}

// Current is the Workspace's current branch (refs/heads/…) and its commit.
func (h *Home) Current(ctx context.Context) (ref, commit string, err error) {
	res, err := h.r.run(ctx, maxSmallOutput, nil, "symbolic-ref", "-q", "HEAD")
	if err != nil {
		return "", "", err
	}
	ref = strings.TrimSpace(string(res.out))
	if res.code != 0 || !strings.HasPrefix(ref, "refs/heads/") {
		return "", "", ErrDetached
	}
	commit, err = h.rev(ctx, ref+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("%w: %s has no commit yet", ErrDetached, ref)
	}
	return ref, commit, nil
}

// Worktree is one entry of `git worktree list`.
type Worktree struct {
	Path   string
	Head   string
	Branch string // refs/heads/…; empty when detached
	Bare   bool
}

// registries orders, per Workspace, the daemon's changes to the
// repository's worktree registry and its reads of it. Git writes an
// entry's files one after another, and a reader that meets an entry half
// written dies ("failed to read .../commondir"): a Session created while
// another is, or one removed meanwhile, failed at random.
var registries sync.Map // Workspace folder → *sync.Mutex

// registry locks this Home's registry; call the result to unlock it.
func (h *Home) registry() (unlock func()) {
	m, _ := registries.LoadOrStore(filepath.Clean(h.dir), new(sync.Mutex))
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Worktrees lists the repository's worktrees, the main one first.
func (h *Home) Worktrees(ctx context.Context) ([]Worktree, error) {
	defer h.registry()()
	return h.worktrees(ctx)
}

func (h *Home) worktrees(ctx context.Context) ([]Worktree, error) {
	res, err := h.r.run(ctx, maxStatusOutput, nil, "worktree", "list", "--porcelain", "-z")
	out, err := res.ok("worktree", err)
	if err != nil {
		return nil, err
	}
	return ParseWorktrees(out), nil
}

// ParseWorktrees parses `git worktree list --porcelain -z`: attribute
// lines, each NUL-terminated, an empty one between worktrees.
func ParseWorktrees(out []byte) []Worktree {
	var list []Worktree
	var cur *Worktree
	for _, line := range splitNul(out) {
		k, v, _ := strings.Cut(line, " ")
		switch {
		case line == "":
			cur = nil
		case k == "worktree":
			list = append(list, Worktree{Path: v})
			cur = &list[len(list)-1]
		case cur == nil:
		case k == "HEAD":
			cur.Head = v
		case k == "branch":
			cur.Branch = v
		case k == "bare":
			cur.Bare = true
		}
	}
	return list
}

// AddWorktree adds a worktree at dir on a new branch started from the
// Workspace's HEAD, and returns that commit. It is idempotent, so that
// start-up can finish one a stop cut off: a worktree already at dir on
// branch is kept; a partial one is removed and added again on the
// branch, which keeps any commit it already holds.
func (h *Home) AddWorktree(ctx context.Context, dir, branch string) (base string, err error) {
	if base, err = h.rev(ctx, "HEAD^{commit}"); err != nil {
		return "", fmt.Errorf("%w: the Workspace has no commit to start a worktree from: %w", ErrNotRepository, err)
	}
	defer h.registry()()
	list, err := h.worktrees(ctx)
	if err != nil {
		// dir's own registration, cut inside git's add, makes the
		// listing die (dropRegistration).
		if derr := h.dropRegistration(ctx, dir); derr != nil {
			return "", err
		}
		if list, err = h.worktrees(ctx); err != nil {
			return "", err
		}
	}
	for _, w := range list {
		if w.Path == dir && w.Branch == "refs/heads/"+branch {
			if err := MountWorktree(dir); err != nil {
				return "", err
			}
			if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
				return base, nil
			}
		}
	}
	if err := h.removeWorktree(ctx, dir); err != nil {
		return "", err
	}
	head, exists, err := h.BranchHead(ctx, branch)
	if err != nil {
		return "", err
	}
	if overlays(filepath.Dir(dir)) {
		from := base
		if exists {
			from = head
		}
		return base, h.addOnBase(ctx, dir, branch, from, !exists)
	}
	args := append(parallelCheckout(), "worktree", "add", "--quiet")
	if exists {
		args = append(args, "--end-of-options", dir, branch)
	} else {
		args = append(args, "--no-track", "-b", branch, "--end-of-options", dir, base)
	}
	if err := h.mkdirOwned(dir); err != nil {
		return "", err
	}
	res, err := h.r.run(ctx, maxSmallOutput, nil, args...)
	if _, err := res.ok("worktree", err); err != nil {
		return "", err
	}
	return base, nil
}

// mkdirOwned makes dir (and its parents) owned by the user git runs as.
func (h *Home) mkdirOwned(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if host, ok := h.r.ex.(Host); ok && host.AsUser {
		return os.Chown(dir, int(host.UID), int(host.GID))
	}
	return nil
}

// parallelCheckout writes a checkout's files with several workers: a
// checkout waits on the file system, not the CPU, so on a 2-core machine
// four workers add a 50,000-file worktree about three times faster.
func parallelCheckout() []string {
	return []string{"-c", "checkout.workers=4", "-c", "checkout.thresholdForParallelism=100"}
}

// RemoveWorktree removes the worktree at dir and its metadata, whatever
// its state; a missing one is not an error. The branch stays.
func (h *Home) RemoveWorktree(ctx context.Context, dir string) error {
	defer h.registry()()
	return h.removeWorktree(ctx, dir)
}

func (h *Home) removeWorktree(ctx context.Context, dir string) error {
	// An overlay comes off first, so that nothing is removed through it.
	if err := unmountWorktree(dir); err != nil {
		return err
	}
	if err := h.dropRegistration(ctx, dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(overlayDir(dir)); err != nil {
		return err
	}
	res, err := h.r.run(ctx, maxSmallOutput, nil, "worktree", "prune")
	_, err = res.ok("worktree", err)
	return err
}

// dropRegistration removes the registration of the worktree at dir (its
// folder under the common git dir's worktrees/), in whatever state a kill
// left it. `git worktree add` writes `locked` ("initializing") first, then
// `gitdir`, the worktree's `.git`, `HEAD` and `commondir`: cut in between,
// the entry is locked, so `worktree prune` keeps it, and an empty
// commondir makes every git command that reads the worktrees' HEADs die
// (`worktree list`, `branch -d`) in the user's repository. An entry is
// dir's when its gitdir names dir's .git, or, before git wrote that, when
// it has none and bears dir's name (git's name for it, a number added when
// taken; dir's name is a Session ID).
func (h *Home) dropRegistration(ctx context.Context, dir string) error {
	res, err := h.r.run(ctx, maxSmallOutput, nil, "rev-parse", "--path-format=absolute", "--git-path", "worktrees")
	out, err := res.ok("rev-parse", err)
	if err != nil {
		return err
	}
	admin := strings.TrimSpace(string(out))
	entries, err := os.ReadDir(admin)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	want := map[string]bool{filepath.Join(dir, ".git"): true}
	if parent, err := filepath.EvalSymlinks(filepath.Dir(dir)); err == nil {
		want[filepath.Join(parent, filepath.Base(dir), ".git")] = true
	}
	for _, e := range entries {
		entry := filepath.Join(admin, e.Name())
		b, err := os.ReadFile(filepath.Join(entry, "gitdir"))
		gitdir := strings.TrimSpace(string(b))
		ours := err == nil && want[filepath.Clean(gitdir)]
		if !ours && gitdir == "" && (err == nil || errors.Is(err, fs.ErrNotExist)) {
			ours = strings.HasPrefix(e.Name(), filepath.Base(dir))
		}
		if ours {
			if err := os.RemoveAll(entry); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteBranch deletes a branch while it still points at commit.
func (h *Home) DeleteBranch(ctx context.Context, branch, commit string) error {
	res, err := h.r.run(ctx, maxSmallOutput, nil, "update-ref", "-d", "--end-of-options", "refs/heads/"+branch, commit)
	_, err = res.ok("update-ref", err)
	return err
}

// MoveBranch moves a branch from one commit to another, only while it
// still points at from.
func (h *Home) MoveBranch(ctx context.Context, branch, from, to string) error {
	res, err := h.r.run(ctx, maxSmallOutput, nil, "update-ref", "-m", "lathe: merged", "--end-of-options", "refs/heads/"+branch, to, from)
	_, err = res.ok("update-ref", err)
	return err
}

// Unmerged counts the commits of branch that ref lacks.
func (h *Home) Unmerged(ctx context.Context, ref, branch string) (int, error) {
	ahead, _, err := h.aheadBehind(ctx, ref, "refs/heads/"+branch)
	return ahead, err
}

// aheadBehind counts the commits of theirs that ours lacks (ahead) and
// those of ours that theirs lacks (behind).
func (h *Home) aheadBehind(ctx context.Context, ours, theirs string) (ahead, behind int, err error) {
	res, err := h.r.run(ctx, maxSmallOutput, nil, "rev-list", "--left-right", "--count", "--end-of-options", ours+"..."+theirs)
	out, err := res.ok("rev-list", err)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("%w: rev-list --count printed %q", ErrMalformedDiff, clip(string(out)))
	}
	if behind, err = strconv.Atoi(f[0]); err == nil {
		ahead, err = strconv.Atoi(f[1])
	}
	return ahead, behind, err
}

// Uncommitted lists the paths of r's worktree that differ from its HEAD:
// staged, unstaged and untracked (not ignored), one by one.
func Uncommitted(ctx context.Context, r *Repo) ([]string, error) {
	res, err := r.run(ctx, maxStatusOutput, nil, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=none")
	out, err := res.ok("status", err)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range bytes.Split(out, []byte{0}) {
		if len(e) > 3 {
			paths = append(paths, string(e[3:]))
		}
	}
	return paths, nil
}
