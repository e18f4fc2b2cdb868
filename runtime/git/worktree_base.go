package git

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"lathe/runtime/lanefs"
)

// The building blocks of a cheap worktree checkout (docs/design/git.md,
// "A cheap checkout"): `git worktree add` writes every file of the
// Workspace's HEAD, 50,000 files in seconds. Instead, one read-only base
// checkout per commit (CheckoutBase, made once and shared) is the lower
// layer of an overlay per Session mounted at the worktree's path, and the
// worktree is registered without a checkout, its index a copy of the
// base's (addWorktreeOnBase), whose stat data the overlay's files match,
// so that `git status` there is clean at once without hashing a file.
// AddWorktree takes this way where overlay mounts work (root, and a
// folder that can hold an upper layer), and `git worktree add` elsewhere.
//
// Beside the worktrees (<dir>/..):
//
//	.bases/<uid>-<commit>/         a base per owner and commit ({tree,index}),
//	                               made in <…>.partial-* and renamed into
//	                               place whole; never written
//	.overlays/<name>/{upper,work}  a worktree's overlay; upper holds its
//	                               .git file and every write
//	.overlays/<name>/base          the base's name: the marker that the
//	                               worktree is an overlay (MountWorktree)
//
// A mount outlives a daemon killed under it but not a reboot:
// MountWorktree mounts it again from the marker, and every user of a
// worktree Session's folder calls it first. RemoveWorktree unmounts
// before it removes anything.
//
// A base is a cache of one commit's files, not state: CollectBases
// removes every base no worktree's marker names (after a Session's
// delete and at start-up), from what the folder holds, so that it is
// idempotent and a kill anywhere leaves what the next run collects.

// CheckoutBase writes the files of commit into dir/tree and their index
// into dir/index; dir must not exist. The caller makes it in a temporary
// folder renamed into place, so that a base that exists is whole. It runs
// in a scratch git directory (content): no filter of the repository's runs.
func (h *Home) CheckoutBase(ctx context.Context, commit, dir string) error {
	tree := filepath.Join(dir, "tree")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(tree, 0o755); err != nil {
		return err
	}
	if h.host.AsUser {
		for _, d := range []string{dir, tree} {
			if err := os.Chown(d, int(h.host.UID), int(h.host.GID)); err != nil {
				return err
			}
		}
	}
	return h.content(ctx, scratchSpec{work: tree, index: filepath.Join(dir, "index")}, func(r *Repo, _ string) error {
		return checkoutInto(ctx, r, commit)
	})
}

// AddWorktreeOnBase registers a worktree at dir on a new branch from
// commit without writing its files (`--no-checkout`, locked so that a
// prune while its overlay is not mounted keeps it), gives it a copy of
// the base's index, and answers its .git file's path: the caller moves
// that file into the overlay's upper layer and mounts the overlay at dir.
func (h *Home) AddWorktreeOnBase(ctx context.Context, dir, branch, commit, baseIndex string, newBranch bool) (dotGit string, err error) {
	defer h.registry()()
	return h.addWorktreeOnBase(ctx, dir, branch, commit, baseIndex, newBranch)
}

func (h *Home) addWorktreeOnBase(ctx context.Context, dir, branch, commit, baseIndex string, newBranch bool) (dotGit string, err error) {
	if dotGit, err = h.register(ctx, dir, branch, commit, newBranch, true); err != nil {
		return "", err
	}
	return dotGit, h.placeFile(baseIndex, filepath.Join(h.adminDir(dir), "index"))
}

// overlayDir is the folder of the overlay of the worktree at dir.
func overlayDir(dir string) string {
	return filepath.Join(filepath.Dir(dir), ".overlays", filepath.Base(dir))
}

// worktreeOverlay is the overlay of the worktree at dir on the base
// named name (baseName).
func worktreeOverlay(dir, name string) lanefs.Overlay {
	o := overlayDir(dir)
	return lanefs.Overlay{Base: filepath.Join(filepath.Dir(dir), ".bases", name, "tree"), Upper: filepath.Join(o, "upper"),
		Work: filepath.Join(o, "work"), Merged: dir}
}

// mounting orders the checks and mounts of worktrees' overlays.
var mounting sync.Mutex

// collecting orders the use of bases and their collection: an add holds
// it for reading from making its base to writing its marker, so that
// CollectBases, which holds it for writing, sees no base in the making
// and none used by a worktree without a marker yet.
var collecting sync.RWMutex

// probe is the answer, once per folder of worktrees, whether overlays
// can be mounted there.
var probe struct {
	sync.Mutex
	answers map[string]error
}

// overlays reports whether worktrees in the folder dir get overlays.
func overlays(dir string) bool {
	probe.Lock()
	defer probe.Unlock()
	if probe.answers == nil {
		probe.answers = map[string]error{}
	}
	err, ok := probe.answers[dir]
	if !ok {
		err = lanefs.Probe(filepath.Join(dir, ".overlays"))
		probe.answers[dir] = err
		// Bases a kill cut short; none is being made before this
		// process's first add here.
		partial, _ := filepath.Glob(filepath.Join(dir, ".bases", "*.partial-*"))
		for _, p := range partial {
			_ = os.RemoveAll(p)
		}
	}
	return err == nil
}

// MountWorktree mounts the overlay of the worktree at dir again when a
// reboot left it unmounted; a mounted one, or a worktree that is no
// overlay, needs nothing.
func MountWorktree(dir string) error {
	b, err := os.ReadFile(filepath.Join(overlayDir(dir), "base"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	mounting.Lock()
	defer mounting.Unlock()
	return worktreeOverlay(dir, strings.TrimSpace(string(b))).Mount()
}

// unmountWorktree unmounts whatever is mounted at or under dir.
func unmountWorktree(dir string) error {
	mounting.Lock()
	defer mounting.Unlock()
	return lanefs.UnmountUnder(dir)
}

// addOnBase adds the worktree at dir on branch (made from commit when
// newBranch) as an overlay of commit's base, made first when missing.
func (h *Home) addOnBase(ctx context.Context, dir, branch, commit string, newBranch bool) error {
	collecting.RLock()
	defer collecting.RUnlock()
	name := h.baseName(commit)
	base := filepath.Dir(worktreeOverlay(dir, name).Base)
	if err := h.ensureBase(ctx, commit, base); err != nil {
		return fmt.Errorf("the base checkout: %w", err)
	}
	dotGit, err := h.addWorktreeOnBase(ctx, dir, branch, commit, filepath.Join(base, "index"), newBranch)
	if err != nil {
		return err
	}
	o := worktreeOverlay(dir, name)
	if err := h.mkdirOwned(o.Upper); err != nil {
		return err
	}
	if err := os.Rename(dotGit, filepath.Join(o.Upper, ".git")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(overlayDir(dir), "base"), []byte(name+"\n"), 0o644); err != nil {
		return err
	}
	return MountWorktree(dir)
}

// baseName names the base of commit for this Home's user: a base's files
// are its owner's, and another user's worktree could not write over them.
func (h *Home) baseName(commit string) string {
	if h.host.AsUser {
		return fmt.Sprintf("%d-%s", h.host.UID, commit)
	}
	return commit
}

// ensureBase makes the base of commit at base unless it exists: in a
// temporary folder renamed into place, so that a base that exists is
// whole; two creates that make it at once both succeed.
func (h *Home) ensureBase(ctx context.Context, commit, base string) error {
	if _, err := os.Stat(base); err == nil {
		return nil
	}
	if err := h.mkdirOwned(filepath.Dir(base)); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(base), filepath.Base(base)+".partial-")
	if err != nil {
		return err
	}
	if err := os.Remove(tmp); err != nil {
		return err
	}
	if err := h.CheckoutBase(ctx, commit, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, base); err != nil {
		_ = os.RemoveAll(tmp)
		if _, serr := os.Stat(base); serr == nil {
			return nil
		}
		return err
	}
	return nil
}

// CollectBases removes the bases in the folder of worktrees dir that no
// worktree uses, and answers their names. A worktree uses the base its
// overlay's marker names while its folder exists (an unmounted one after
// a reboot too); an overlay whose worktree folder is gone is what a
// removal cut off left, and goes as well. A base goes by a rename to a
// partial name first, then its removal, so that a kill in the middle
// never leaves a half base under a base's name; partial bases (a make or
// a collection cut off) go too. Idempotent; safe beside adds.
func CollectBases(dir string) (removed []string, err error) {
	collecting.Lock()
	defer collecting.Unlock()
	used := map[string]bool{}
	overlays, err := os.ReadDir(filepath.Join(dir, ".overlays"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var errs []error
	for _, o := range overlays {
		wt := filepath.Join(dir, o.Name())
		if _, err := os.Lstat(wt); errors.Is(err, fs.ErrNotExist) {
			// Its worktree is gone (a delete or an overlay probe a kill
			// cut short): unmount what it left mounted, never remove
			// through a mount.
			if err := lanefs.UnmountUnder(overlayDir(wt)); err != nil {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, os.RemoveAll(overlayDir(wt)))
			continue
		}
		b, err := os.ReadFile(filepath.Join(overlayDir(wt), "base"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err // unsure which base it uses: remove none
		}
		used[strings.TrimSpace(string(b))] = true
	}
	bases, err := os.ReadDir(filepath.Join(dir, ".bases"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, b := range bases {
		if used[b.Name()] {
			continue
		}
		p := filepath.Join(dir, ".bases", b.Name())
		if !strings.Contains(b.Name(), ".partial-") {
			trash := p + ".partial-gc"
			if err := os.RemoveAll(trash); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := os.Rename(p, trash); err != nil {
				errs = append(errs, err)
				continue
			}
			p = trash
			removed = append(removed, b.Name())
		}
		errs = append(errs, os.RemoveAll(p))
	}
	return removed, errors.Join(errs...)
}
