package git_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/runtime/git"
	"lathe/runtime/git/gittest"
	"lathe/runtime/lanefs"
)

// home is a Workspace repository on the host with one worktree Session's
// branch, for the merge tests.
type home struct {
	t        *testing.T
	dir, wt  string
	branch   string
	h        *git.Home
	identity git.Identity
}

func newHome(t *testing.T, files map[string]string) *home {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	gittest.Repo(t, dir, files)
	h, err := git.OpenHome(dir)
	if err != nil {
		t.Fatal(err)
	}
	hm := &home{t: t, dir: dir, wt: filepath.Join(t.TempDir(), "worktrees", "S1"), branch: "lathe/S1", h: h, identity: git.Identity{Name: "Merger", Email: "m@test"}}
	// Where worktrees are overlays (root), none outlives the test.
	t.Cleanup(func() { _ = lanefs.UnmountUnder(filepath.Dir(hm.wt)) })
	if _, err := h.AddWorktree(hctx(t), hm.wt, hm.branch); err != nil {
		t.Fatal(err)
	}
	return hm
}

func hctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func writeFile(t *testing.T, dir, p, content string) {
	t.Helper()
	gittest.Write(t, dir, map[string]string{p: content})
}

// commitIn commits files (content "" deletes) in dir.
func commitIn(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		if c == "" {
			gittest.Run(t, dir, "rm", "-q", "--", p)
			continue
		}
		writeFile(t, dir, p, c)
	}
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "change")
}

func (hm *home) plan() git.MergePlan {
	hm.t.Helper()
	p, err := hm.h.Plan(hctx(hm.t), hm.branch)
	if err != nil {
		hm.t.Fatal(err)
	}
	return p
}

func (hm *home) merge(squash bool) (git.MergePlan, string) {
	hm.t.Helper()
	p := hm.plan()
	c, err := hm.h.Commit(hctx(hm.t), p, squash, "merge it", hm.identity)
	if err != nil {
		hm.t.Fatal(err)
	}
	if err := hm.h.Apply(hctx(hm.t), p.Ref, p.Old, c); err != nil {
		hm.t.Fatal(err)
	}
	return p, c
}

func TestMergeRefusesAndChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup changes the Workspace folder (and its branch) after the
		// Session committed a.txt, new/b.txt and gone.txt's removal.
		setup     func(hm *home)
		dirty     []string
		untracked []string
		conflicts []string
	}{
		{name: "dirty file the merge changes", setup: func(hm *home) { writeFile(t, hm.dir, "a.txt", "mine\n") }, dirty: []string{"a.txt"}},
		{name: "staged file the merge deletes", setup: func(hm *home) {
			writeFile(t, hm.dir, "gone.txt", "edited\n")
			gittest.Run(t, hm.dir, "add", "gone.txt")
		}, dirty: []string{"gone.txt"}},
		{name: "untracked file the merge adds", setup: func(hm *home) { writeFile(t, hm.dir, "new/b.txt", "mine\n") }, untracked: []string{"new/b.txt"}},
		{name: "ignored file the merge adds", setup: func(hm *home) {
			writeFile(t, hm.dir, ".git/info/exclude", "new/\n")
			writeFile(t, hm.dir, "new/b.txt", "local build output\n")
		}, untracked: []string{"new/b.txt"}},
		{name: "untracked file where the merge needs a folder", setup: func(hm *home) { writeFile(t, hm.dir, "new", "a file\n") }, untracked: []string{"new"}},
		{name: "conflict", setup: func(hm *home) { commitIn(t, hm.dir, map[string]string{"a.txt": "theirs\n"}) }, conflicts: []string{"a.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hm := newHome(t, map[string]string{"a.txt": "a\n", "gone.txt": "g\n", "keep.txt": "k\n"})
			commitIn(t, hm.wt, map[string]string{"a.txt": "session\n", "new/b.txt": "b\n", "gone.txt": ""})
			writeFile(t, hm.dir, "untracked-elsewhere.txt", "survives\n")
			tc.setup(hm)
			before := gittest.State(t, hm.dir)
			p := hm.plan()
			ref, err := hm.h.Refusal(hctx(t), p)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ref.Dirty, tc.dirty) || !slices.Equal(ref.Untracked, tc.untracked) || !slices.Equal(p.Conflicts, tc.conflicts) {
				t.Fatalf("refusal = %+v, conflicts %v; want dirty %v, untracked %v, conflicts %v", ref, p.Conflicts, tc.dirty, tc.untracked, tc.conflicts)
			}
			if after := gittest.State(t, hm.dir); after != before {
				t.Fatalf("planning changed the Workspace:\n%s\n---\n%s", before, after)
			}
			// The last guard: read-tree itself refuses what slipped past
			// (not an ignored file, which git takes as expendable: Refusal
			// alone keeps those).
			if len(tc.dirty)+len(tc.untracked) > 0 && !strings.HasPrefix(tc.name, "ignored") {
				c, err := hm.h.Commit(hctx(t), p, false, "m", hm.identity)
				if err != nil {
					t.Fatal(err)
				}
				if err := hm.h.Apply(hctx(t), p.Ref, p.Old, c); !errors.Is(err, git.ErrMoved) {
					t.Fatalf("Apply over a refused folder: %v, want ErrMoved", err)
				}
				if after := gittest.State(t, hm.dir); after != before {
					t.Fatalf("a refused Apply changed the Workspace:\n%s\n---\n%s", before, after)
				}
			}
		})
	}
}

func TestMergeLandsAndKeepsUntracked(t *testing.T) {
	for _, squash := range []bool{false, true} {
		hm := newHome(t, map[string]string{"a.txt": "a\n", "gone.txt": "g\n", "old.txt": "rename me\n"})
		commitIn(t, hm.wt, map[string]string{"a.txt": "session\n", "new/b.txt": "b\n", "gone.txt": ""})
		gittest.Run(t, hm.wt, "mv", "old.txt", "renamed.txt")
		gittest.Run(t, hm.wt, "commit", "-qm", "rename")
		commitIn(t, hm.dir, map[string]string{"other.txt": "workspace moved on\n"})
		writeFile(t, hm.dir, "notes.txt", "untracked, mine\n")
		writeFile(t, hm.dir, "other.txt", "dirty but not the merge's\n")
		p, c := hm.merge(squash)
		if p.Ahead != 2 || p.Behind != 1 {
			t.Errorf("ahead/behind = %d/%d, want 2/1", p.Ahead, p.Behind)
		}
		var got []string
		for _, f := range p.Files {
			got = append(got, f.Status+" "+f.Path)
		}
		if want := []string{"M a.txt", "D gone.txt", "A new/b.txt", "R renamed.txt"}; !slices.Equal(got, want) {
			t.Errorf("files = %v, want %v", got, want)
		}
		if head := strings.TrimSpace(gittest.Run(t, hm.dir, "rev-parse", "HEAD")); head != c {
			t.Fatalf("HEAD %s, want the merge %s", head, c)
		}
		parents := strings.Fields(gittest.Run(t, hm.dir, "rev-list", "--parents", "-n1", c))
		if wantN := map[bool]int{false: 3, true: 2}[squash]; len(parents) != wantN {
			t.Errorf("squash=%v: commit has %d parents, want %d", squash, len(parents)-1, wantN-1)
		}
		for p, want := range map[string]string{"a.txt": "session\n", "new/b.txt": "b\n", "notes.txt": "untracked, mine\n", "other.txt": "dirty but not the merge's\n", "renamed.txt": "rename me\n"} {
			if b, err := os.ReadFile(filepath.Join(hm.dir, p)); err != nil || string(b) != want {
				t.Errorf("%s = %q, %v; want %q", p, b, err, want)
			}
		}
		if _, err := os.Stat(filepath.Join(hm.dir, "gone.txt")); !os.IsNotExist(err) {
			t.Errorf("gone.txt still there: %v", err)
		}
		if st := gittest.Run(t, hm.dir, "status", "--porcelain"); st != " M other.txt\n?? notes.txt\n" {
			t.Errorf("status after merge = %q", st)
		}
	}
}

func TestMergeRecover(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cut leaves the folder as a stop in the middle would.
		cut  func(hm *home, p git.MergePlan, c string)
		want string
	}{
		{name: "before anything", cut: func(*home, git.MergePlan, string) {}, want: git.RolledBack},
		{name: "half the files written", cut: func(hm *home, p git.MergePlan, c string) {
			writeFile(t, hm.dir, "a.txt", "session\n")
			writeFile(t, hm.dir, "new/b.txt", "b\n")
			writeFile(t, hm.dir, ".git/index.lock", "")
		}, want: git.RolledBack},
		{name: "files and index, not the branch", cut: func(hm *home, p git.MergePlan, c string) {
			gittest.Run(t, hm.dir, "read-tree", "-m", "-u", p.Old, c)
		}, want: git.Finished},
		{name: "all of it", cut: func(hm *home, p git.MergePlan, c string) {
			gittest.Run(t, hm.dir, "read-tree", "-m", "-u", p.Old, c)
			gittest.Run(t, hm.dir, "update-ref", p.Ref, c, p.Old)
		}, want: git.Landed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hm := newHome(t, map[string]string{"a.txt": "a\n", "gone.txt": "g\n"})
			commitIn(t, hm.wt, map[string]string{"a.txt": "session\n", "new/b.txt": "b\n", "gone.txt": ""})
			writeFile(t, hm.dir, "notes.txt", "untracked\n")
			before := gittest.State(t, hm.dir)
			p := hm.plan()
			c, err := hm.h.Commit(hctx(t), p, false, "m", hm.identity)
			if err != nil {
				t.Fatal(err)
			}
			tc.cut(hm, p, c)
			got, err := hm.h.Recover(hctx(t), p.Ref, p.Old, c, p.Files)
			if err != nil || got != tc.want {
				t.Fatalf("Recover = %q, %v; want %q", got, err, tc.want)
			}
			switch got {
			case git.RolledBack:
				if after := gittest.State(t, hm.dir); after != before {
					t.Fatalf("rolled back to another state:\n%s\n---\n%s", before, after)
				}
			default:
				hm2 := gittest.State(t, hm.dir)
				if !strings.Contains(hm2, c) || gittest.Run(t, hm.dir, "status", "--porcelain") != "?? notes.txt\n" {
					t.Fatalf("not merged whole: %s", gittest.Run(t, hm.dir, "status", "--porcelain"))
				}
			}
		})
	}
}

func TestWorktreesIsolatedAndHostGitRunsNoHook(t *testing.T) {
	hm := newHome(t, map[string]string{"a.txt": "a\n"})
	// What an agent with the Workspace's .git mounted could plant: a hook
	// that every ref update would run on the host.
	marker := filepath.Join(t.TempDir(), "ran")
	hook := "#!/bin/sh\ntouch " + marker + "\n"
	for _, name := range []string{"reference-transaction", "post-checkout", "post-commit"} {
		writeFile(t, hm.dir, ".git/hooks/"+name, hook)
		if err := os.Chmod(filepath.Join(hm.dir, ".git/hooks", name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	wt2 := filepath.Join(filepath.Dir(hm.wt), "S2")
	if _, err := hm.h.AddWorktree(hctx(t), wt2, "lathe/S2"); err != nil {
		t.Fatal(err)
	}
	// Both Sessions edit one path; neither sees the other, nor does the Workspace.
	writeFile(t, hm.wt, "a.txt", "one\n")
	writeFile(t, wt2, "a.txt", "two\n")
	for dir, want := range map[string]string{hm.dir: "a\n", hm.wt: "one\n", wt2: "two\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != want {
			t.Errorf("%s/a.txt = %q, want %q", dir, b, want)
		}
	}
	gittest.Run(t, hm.wt, "commit", "-qam", "one")
	hm.merge(false)
	// Idempotent add: an existing worktree is kept as it is.
	if _, err := hm.h.AddWorktree(hctx(t), wt2, "lathe/S2"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(wt2, "a.txt")); string(b) != "two\n" {
		t.Errorf("a second add reset the worktree: %q", b)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("a planted hook ran on the host: %v", err)
	}
	if err := hm.h.RemoveWorktree(hctx(t), wt2); err != nil {
		t.Fatal(err)
	}
	if list, _ := hm.h.Worktrees(hctx(t)); len(list) != 2 {
		t.Errorf("worktrees after remove = %+v", list)
	}
}

// A git command in the Workspace folder at the restart (an editor's
// status, which takes the index's lock to refresh it) must not make the
// recovery fail or leave the folder half merged.
func TestMergeRecoverBesideAnotherGit(t *testing.T) {
	files := map[string]string{}
	for i := range 400 {
		files[fmt.Sprintf("d%d/f%03d.txt", i%8, i)] = "base\n"
	}
	hm := newHome(t, files)
	changed := map[string]string{}
	for p := range files {
		changed[p] = "session\n"
	}
	commitIn(t, hm.wt, changed)
	before := gittest.State(t, hm.dir)
	p := hm.plan()
	c, err := hm.h.Commit(hctx(t), p, false, "m", hm.identity)
	if err != nil {
		t.Fatal(err)
	}
	// Cut: a third of the files written, the killed read-tree's lock left.
	n := 0
	for path := range files {
		if n++; n%3 == 0 {
			writeFile(t, hm.dir, path, "session\n")
		}
	}
	writeFile(t, hm.dir, ".git/index.lock", "")
	stop := editorStatus(hm.dir)
	got, err := hm.h.Recover(hctx(t), p.Ref, p.Old, c, p.Files)
	stop()
	if err != nil || got != git.RolledBack {
		t.Fatalf("Recover = %q, %v; want %q", got, err, git.RolledBack)
	}
	if after := gittest.State(t, hm.dir); after != before {
		t.Fatal("rolled back to another state")
	}
}

// A lock a live process holds open is never taken: the recovery waits
// for it, and fails when its time runs out, having written nothing.
func TestMergeRecoverLeavesALiveLock(t *testing.T) {
	hm := newHome(t, map[string]string{"a.txt": "a\n"})
	commitIn(t, hm.wt, map[string]string{"a.txt": "session\n"})
	p := hm.plan()
	c, err := hm.h.Commit(hctx(t), p, false, "m", hm.identity)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, hm.dir, "a.txt", "session\n")
	lock := filepath.Join(hm.dir, ".git", "index.lock")
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(hctx(t), 300*time.Millisecond)
	defer cancel()
	if got, err := hm.h.Recover(ctx, p.Ref, p.Old, c, p.Files); err == nil {
		t.Fatalf("Recover = %q beside a live lock", got)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the live lock was taken: %v", err)
	}
	f.Close()
	if got, err := hm.h.Recover(hctx(t), p.Ref, p.Old, c, p.Files); err != nil || got != git.RolledBack {
		t.Fatalf("Recover = %q, %v once the lock is left behind", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(hm.dir, "a.txt")); string(b) != "a\n" {
		t.Fatalf("a.txt = %q", b)
	}
}

// A merge beside an editor's status waits for the index's lock.
func TestMergeBesideAnotherGit(t *testing.T) {
	files := map[string]string{}
	for i := range 400 {
		files[fmt.Sprintf("d%d/f%03d.txt", i%8, i)] = "session\n"
	}
	hm := newHome(t, map[string]string{"a.txt": "a\n"})
	commitIn(t, hm.wt, files)
	for range 3 {
		stop := editorStatus(hm.dir)
		hm.merge(false)
		stop()
		commitIn(t, hm.wt, map[string]string{"a.txt": gittest.Run(t, hm.wt, "rev-parse", "HEAD")})
	}
}

// editorStatus runs `git status` in dir in a loop, as an editor does,
// from three processes at once, until the returned stop.
func editorStatus(dir string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				cmd := exec.Command("git", "status", "--porcelain")
				cmd.Dir = dir
				_ = cmd.Run()
			}
		})
	}
	return func() { close(done); wg.Wait() }
}
