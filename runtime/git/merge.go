package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// A merge home runs in three steps, so that it either refuses having
// changed nothing or lands whole:
//
//  1. Plan computes the merged tree without touching the Workspace
//     (`git merge-tree --write-tree`, objects only) and lists what it
//     would change; Refusal checks those paths in the Workspace folder.
//  2. The caller records the plan (record, then act), Commit writes the
//     commit object (still nothing visible), and Apply moves the folder:
//     `git read-tree -m -u old new` checks every path before it writes
//     any (it refuses to overwrite a dirty or untracked file) and writes
//     the index last, in one rename; then the branch moves by
//     compare-and-swap (`update-ref ref new old`).
//  3. A stop between the two leaves the branch at old. Recover, at the
//     next start, tells where it stopped from the branch and the index:
//     the index already the new tree means every file landed, so the
//     branch moves; the index still old means files may be half written,
//     so exactly the planned paths go back to the index (which is old),
//     and the added ones are removed. Either way nothing else is touched.

// MergeFile is one path a merge changes: Status A, M, D or R (From then
// names the old path).
type MergeFile struct {
	Path   string `json:"path"`
	Status string `json:"status"`
	From   string `json:"orig_path,omitempty"`
}

// MergePlan is a merge of a branch into the Workspace's current branch,
// computed without touching the Workspace.
type MergePlan struct {
	Ref       string // the Workspace's current branch, refs/heads/…
	Old       string // its commit
	Theirs    string // the branch's commit
	Tree      string // the merged tree
	Ahead     int    // commits of the branch the Workspace lacks
	Behind    int    // commits of the Workspace the branch lacks
	Files     []MergeFile
	Conflicts []string
}

// Plan computes the merge of branch (a short name) into the current
// branch.
func (h *Home) Plan(ctx context.Context, branch string) (MergePlan, error) {
	ref, old, err := h.Current(ctx)
	if err != nil {
		return MergePlan{}, err
	}
	theirs, ok, err := h.BranchHead(ctx, branch)
	if err != nil {
		return MergePlan{}, err
	}
	if !ok {
		return MergePlan{}, fmt.Errorf("%w: %s", ErrNoBranch, branch)
	}
	p := MergePlan{Ref: ref, Old: old, Theirs: theirs, Files: []MergeFile{}}
	if p.Ahead, p.Behind, err = h.aheadBehind(ctx, old, theirs); err != nil || p.Ahead == 0 {
		p.Tree, _ = h.rev(ctx, old+"^{tree}")
		return p, err
	}
	var out []byte
	var changes []TreeChange
	err = h.content(ctx, scratchSpec{work: h.dir}, func(r *Repo, _ string) error {
		res, err := r.run(ctx, maxStatusOutput, nil, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", "--end-of-options", old, theirs)
		out, err = res.ok("merge-tree", err, 1)
		if err != nil {
			if strings.Contains(res.stderr, "write-tree") || strings.Contains(res.stderr, "usage: git merge-tree") {
				return fmt.Errorf("the host's git is too old to compute a merge without touching the Workspace (git merge-tree --write-tree needs git 2.38 or later): %w", err)
			}
			return err
		}
		f := splitNul(out)
		if len(f) == 0 || objectIDs(f[0]) != nil {
			return fmt.Errorf("%w: merge-tree printed no tree", ErrMalformedDiff)
		}
		p.Tree = f[0]
		for _, c := range f[1:] {
			if c != "" && !slices.Contains(p.Conflicts, c) {
				p.Conflicts = append(p.Conflicts, c)
			}
		}
		changes, err = r.TreeChanges(ctx, old, p.Tree, true)
		return err
	})
	if err != nil {
		return MergePlan{}, err
	}
	for _, c := range changes {
		p.Files = append(p.Files, MergeFile{Path: c.Path, Status: letter(c.Status), From: c.From})
	}
	return p, nil
}

// underAny reports whether p or a folder above it is in set: an
// untracked file in a folder the merge puts a file at.
func underAny(set map[string]bool, p string) bool {
	for ; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if set[p] {
			return true
		}
	}
	return false
}

func letter(status string) string {
	switch status {
	case Added:
		return "A"
	case Deleted:
		return "D"
	case Renamed:
		return "R"
	}
	return "M"
}

// Touched is every path the plan writes or removes, renames' both sides.
func (p MergePlan) Touched() (all, added []string) {
	for _, f := range p.Files {
		all = append(all, f.Path)
		if f.From != "" {
			all = append(all, f.From)
		}
		if f.Status == "A" || f.Status == "R" {
			added = append(added, f.Path)
		}
	}
	return all, added
}

// Refusal is why a merge would change what the Workspace folder holds
// beyond the merge: Dirty paths have uncommitted changes; Untracked paths
// (untracked or ignored files, or a file where the merge needs a folder)
// would be overwritten.
type Refusal struct {
	Dirty     []string
	Untracked []string
}

// Refusal checks the paths the plan touches in the Workspace folder.
func (h *Home) Refusal(ctx context.Context, p MergePlan) (Refusal, error) {
	var out Refusal
	all, added := p.Touched()
	if len(all) == 0 {
		return out, nil
	}
	touched := map[string]bool{}
	for _, p := range all {
		touched[p] = true
	}
	var raw []byte
	err := h.content(ctx, scratchSpec{work: h.dir, head: p.Old, copyIndex: filepath.Join(h.l.gitDir, "index")}, func(r *Repo, _ string) error {
		res, err := r.run(ctx, maxStatusOutput, nil, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=traditional", "--no-renames")
		raw, err = res.ok("status", err)
		return err
	})
	if err != nil {
		return out, err
	}
	for _, e := range splitNul(raw) {
		if len(e) < 4 || !underAny(touched, e[3:]) {
			continue
		}
		switch e[:2] {
		case "??", "!!":
			out.Untracked = append(out.Untracked, e[3:])
		default:
			out.Dirty = append(out.Dirty, e[3:])
		}
	}
	// A merge that adds a/b where an untracked file a lies.
	root, err := os.OpenRoot(h.dir)
	if err != nil {
		return out, err
	}
	defer root.Close()
	for _, a := range added {
		for d := path.Dir(a); d != "."; d = path.Dir(d) {
			if fi, err := root.Lstat(filepath.FromSlash(d)); err == nil && !fi.IsDir() && !slices.Contains(all, d) {
				out.Untracked = append(out.Untracked, d)
			}
		}
	}
	slices.Sort(out.Untracked)
	out.Untracked = slices.Compact(out.Untracked)
	return out, nil
}

// Commit writes the commit of the plan: with the branch as second parent
// (merge), or with the Workspace's commit alone (squash).
func (h *Home) Commit(ctx context.Context, p MergePlan, squash bool, message string, id Identity) (string, error) {
	args := []string{"commit-tree", p.Tree, "-p", p.Old}
	if !squash {
		args = append(args, "-p", p.Theirs)
	}
	var out []byte
	err := h.content(ctx, scratchSpec{work: h.dir}, func(r *Repo, _ string) error {
		res, err := r.exec(ctx, maxSmallOutput, []byte(message), "commit-tree", append([]string{"git",
			"-c", "user.name=" + id.Name, "-c", "user.email=" + id.Email}, args...))
		out, err = res.ok("commit-tree", err)
		return err
	})
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// ErrMoved: the branch or the folder changed between the plan and the
// merge; nothing was changed.
var ErrMoved = errors.New("the Workspace changed while merging")

// Apply moves the Workspace folder, its index and ref from old to commit.
// It waits for a lock another git command holds (locks.go).
func (h *Home) Apply(ctx context.Context, ref, old, commit string) error {
	if err := h.moveTree(ctx, old, commit); err != nil {
		return fmt.Errorf("%w: %w", ErrMoved, err)
	}
	if _, uerr := h.lockedRun(ctx, false, nil, "update-ref", "-m", "lathe: merge", "--end-of-options", ref, commit, old); uerr != nil {
		if berr := h.moveTree(context.WithoutCancel(ctx), commit, old); berr != nil {
			return fmt.Errorf("%w: %w; putting the folder back failed: %w", ErrMoved, uerr, berr)
		}
		return fmt.Errorf("%w: %w", ErrMoved, uerr)
	}
	return nil
}

// moveTree moves the Workspace folder and its index from the tree of from
// to that of to: `git read-tree -m -u` (which checks every path before it
// writes one) on a copy of the index in a scratch git directory, under
// the index's lock, which Lathe takes and commits itself (lockIndex).
func (h *Home) moveTree(ctx context.Context, from, to string) error {
	lk, err := h.lockIndex(ctx, false)
	if err != nil {
		return err
	}
	defer lk.release()
	return h.content(ctx, scratchSpec{work: h.dir, copyIndex: filepath.Join(h.l.gitDir, "index")}, func(r *Repo, index string) error {
		res, err := r.run(ctx, maxSmallOutput, nil, append(parallelCheckout(), "read-tree", "-m", "-u", from, to)...)
		if _, err := res.ok("read-tree", err); err != nil {
			return err
		}
		return lk.commit(index)
	})
}

// Recovery outcomes.
const (
	Landed     = "landed"      // the merge was whole
	Finished   = "finished"    // every file had landed; the branch moved now
	RolledBack = "rolled back" // the folder is as it was before the merge
	Untouched  = "untouched"   // the branch moved elsewhere: nothing done
)

// Recover finishes or undoes a merge a stop cut off, from the branch and
// the index (see the top of this file). files are the planned paths.
func (h *Home) Recover(ctx context.Context, ref, old, commit string, files []MergeFile) (string, error) {
	head, err := h.rev(ctx, ref)
	if err != nil {
		return "", err
	}
	switch head {
	case commit:
		return Landed, nil
	case old:
	default:
		return Untouched, nil
	}
	newTree, err := h.rev(ctx, commit+"^{tree}")
	if err != nil {
		return "", err
	}
	// The killed merge's index.lock, which no process holds, is taken; a
	// git command the user runs meanwhile is waited for (locks.go).
	lk, err := h.lockIndex(ctx, true)
	if err != nil {
		return "", err
	}
	defer lk.release()
	var outcome string
	err = h.content(ctx, scratchSpec{work: h.dir, copyIndex: filepath.Join(h.l.gitDir, "index")}, func(r *Repo, _ string) error {
		res, err := r.run(ctx, maxSmallOutput, nil, "write-tree")
		idx, err := res.ok("write-tree", err)
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(idx)) == newTree {
			if _, err := h.lockedRun(ctx, true, nil, "update-ref", "-m", "lathe: merge, finished at start", "--end-of-options", ref, commit, old); err != nil {
				return err
			}
			outcome = Finished
			return nil
		}
		root, err := os.OpenRoot(h.dir)
		if err != nil {
			return err
		}
		defer root.Close()
		var restore []string
		for _, f := range files {
			switch f.Status {
			case "A":
			case "R":
				restore = append(restore, f.From)
			default:
				restore = append(restore, f.Path)
			}
			if f.Status == "A" || f.Status == "R" {
				if err := root.Remove(filepath.FromSlash(f.Path)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
		}
		if len(restore) > 0 {
			res, err := r.run(ctx, maxSmallOutput, nulList(restore), "checkout-index", "-f", "-q", "-z", "--stdin")
			if _, err := res.ok("checkout-index", err); err != nil {
				return err
			}
		}
		outcome = RolledBack
		return nil
	})
	return outcome, err
}
