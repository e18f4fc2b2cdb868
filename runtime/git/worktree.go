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
// (merge.go), and a remote Session's seed and bring-home (bundle.go). It
// runs git pinned to the repository's layout (host.go). Open it with
// OpenHome.
type Home struct {
	r    *Repo // the ref commands, in the repository
	l    layout
	host Host
	dir  string
	homeConfig
}

// OpenHome opens the repository whose main worktree is dir, its git
// directory dir/.git, on the host, as the owner of dir. Nothing runs
// until a method is called.
func OpenHome(dir string) (*Home, error) {
	dotGit := filepath.Join(dir, ".git")
	return openLayout(dir, layout{common: dotGit, gitDir: dotGit, work: dir})
}

func openLayout(dir string, l layout) (*Home, error) {
	host, err := HostFor(dir)
	if err != nil {
		return nil, err
	}
	return &Home{r: &Repo{ex: pinned{host: host, l: l}, root: l.work, env: l.refEnv()}, l: l, host: host, dir: dir}, nil
}

// FindHome opens the repository whose worktree is dir as git finds it, a
// .git file followed (a linked worktree's, a submodule's): only for a
// Workspace no sandbox writes, the remote provider's, whose Sessions work
// in clones on the engine's host. ErrNotRepository when dir is not the
// top of a worktree.
func FindHome(ctx context.Context, dir string) (*Home, error) {
	host, err := HostFor(dir)
	if err != nil {
		return nil, err
	}
	r := &Repo{ex: host, root: dir, env: hostEnv(dir)}
	res, err := r.run(ctx, maxSmallOutput, nil, "rev-parse", "--path-format=absolute", "--git-common-dir", "--absolute-git-dir")
	if err == nil && res.code != 0 {
		err = fmt.Errorf("%w: %s: %s", ErrNotRepository, dir, res.stderr)
	}
	if err != nil {
		return nil, err
	}
	f := strings.Split(strings.TrimSpace(string(res.out)), "\n")
	if len(f) != 2 || !filepath.IsAbs(f[0]) || !filepath.IsAbs(f[1]) {
		return nil, fmt.Errorf("git rev-parse printed %q, not two git directories", clip(string(res.out)))
	}
	return openLayout(dir, layout{common: filepath.Clean(f[0]), gitDir: filepath.Clean(f[1]), work: dir})
}

// ConfiguredIdentity is the user.name and user.email the repository's
// config sets (Repo.ConfiguredIdentity).
func (h *Home) ConfiguredIdentity(ctx context.Context) (Identity, error) {
	return h.r.ConfiguredIdentity(ctx)
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
	from := base
	if exists {
		from = head
	}
	if overlays(filepath.Dir(dir)) {
		return base, h.addOnBase(ctx, dir, branch, from, !exists)
	}
	return base, h.addChecked(ctx, dir, branch, from, !exists)
}

// addChecked adds the worktree at dir on branch (made from commit when
// newBranch) with its files written: registered without a checkout, then
// the commit's files written and its index made in a scratch git
// directory (content), and the index placed in the registration.
func (h *Home) addChecked(ctx context.Context, dir, branch, commit string, newBranch bool) error {
	if _, err := h.register(ctx, dir, branch, commit, newBranch, false); err != nil {
		return err
	}
	return h.content(ctx, scratchSpec{work: dir}, func(r *Repo, index string) error {
		if err := checkoutInto(ctx, r, commit); err != nil {
			return err
		}
		return h.placeFile(index, filepath.Join(h.adminDir(dir), "index"))
	})
}

// checkoutInto writes the files of commit into r's work tree and its index
// (read-tree, then checkout-index -u, which records each file's stat data
// as it writes it).
func checkoutInto(ctx context.Context, r *Repo, commit string) error {
	res, err := r.run(ctx, maxSmallOutput, nil, "read-tree", "--end-of-options", commit+"^{commit}")
	if _, err := res.ok("read-tree", err); err != nil {
		return err
	}
	res, err = r.run(ctx, maxSmallOutput, nil, append(parallelCheckout(), "checkout-index", "-a", "-u", "-q")...)
	_, err = res.ok("checkout-index", err)
	return err
}

// register registers a worktree at dir on branch (made from commit when
// newBranch) without writing its files (`--no-checkout`; `--lock`, so
// that a prune while its overlay is not mounted keeps it, when locked),
// and answers its .git file's path. Its registration must be the one
// Lathe names for it (adminDir).
func (h *Home) register(ctx context.Context, dir, branch, commit string, newBranch, locked bool) (dotGit string, err error) {
	if err := h.mkdirOwned(dir); err != nil {
		return "", err
	}
	args := []string{"worktree", "add", "--quiet", "--no-checkout"}
	if locked {
		args = append(args, "--lock")
	}
	if newBranch {
		args = append(args, "--no-track", "-b", branch, "--end-of-options", dir, commit)
	} else {
		args = append(args, "--end-of-options", dir, branch)
	}
	// git writes dir/.git too: the jail lets it.
	r := &Repo{ex: pinned{host: h.host, l: h.l, also: []string{dir}}, root: h.r.root, env: h.r.env}
	res, err := r.run(ctx, maxSmallOutput, nil, args...)
	if _, err := res.ok("worktree", err); err != nil {
		return "", err
	}
	b, err := h.l.readConfined(filepath.Join(h.adminDir(dir), "gitdir"), maxSmallOutput)
	if err != nil || !dotGitOf(dir)[filepath.Clean(strings.TrimSpace(string(b)))] {
		return "", fmt.Errorf("git registered the worktree %s elsewhere than %s (%v)", dir, h.adminDir(dir), err)
	}
	return filepath.Join(dir, ".git"), nil
}

// adminDir is the registration of the worktree at dir in the common git
// directory, as Lathe names it: worktrees/<dir's name> (a Session's ID),
// git's own name for it. Host git reads a worktree's HEAD and index only
// there, never by the worktree's .git file, which its sandbox can rewrite.
func (h *Home) adminDir(dir string) string {
	return filepath.Join(h.l.common, "worktrees", filepath.Base(dir))
}

// WorktreeGitDirs are the git directories of the worktree at dir of the
// Workspace folder workspace as Lathe records them (Home.adminDir): its
// registration, own, in the Workspace's .git, common. What reads a
// worktree on the host uses them, never its .git file.
func WorktreeGitDirs(workspace, dir string) (own, common string) {
	common = filepath.Join(workspace, ".git")
	return filepath.Join(common, "worktrees", filepath.Base(dir)), common
}

// mkdirOwned makes dir (and its parents) owned by the user git runs as.
func (h *Home) mkdirOwned(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if h.host.AsUser {
		return os.Chown(dir, int(h.host.UID), int(h.host.GID))
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
	admin := filepath.Join(h.l.common, "worktrees")
	entries, err := os.ReadDir(admin)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	want := dotGitOf(dir)
	for _, e := range entries {
		entry := filepath.Join(admin, e.Name())
		b, err := h.l.readConfined(filepath.Join(entry, "gitdir"), maxSmallOutput)
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

// dotGitOf is the paths git may write as the .git file of a worktree at
// dir: its own, and through its parent's real path.
func dotGitOf(dir string) map[string]bool {
	want := map[string]bool{filepath.Join(dir, ".git"): true}
	if parent, err := filepath.EvalSymlinks(filepath.Dir(dir)); err == nil {
		want[filepath.Join(parent, filepath.Base(dir), ".git")] = true
	}
	return want
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

// Uncommitted lists the paths of the worktree at dir that differ from its
// HEAD: staged, unstaged and untracked (not ignored), one by one. Its HEAD
// and index are read from its registration (adminDir), never through its
// .git file, and its status runs in a scratch git directory (content).
func (h *Home) Uncommitted(ctx context.Context, dir string) ([]string, error) {
	admin := h.adminDir(dir)
	wt, err := openLayout(dir, layout{common: h.l.common, gitDir: admin, work: dir})
	if err != nil {
		return nil, err
	}
	head, err := wt.rev(ctx, "HEAD^{commit}")
	if err != nil {
		return nil, fmt.Errorf("the worktree's HEAD: %w", err)
	}
	var out []byte
	err = h.content(ctx, scratchSpec{work: dir, head: head, copyIndex: filepath.Join(admin, "index")}, func(r *Repo, _ string) error {
		res, err := r.run(ctx, maxStatusOutput, nil, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=none")
		out, err = res.ok("status", err)
		return err
	})
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
