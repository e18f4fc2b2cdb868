package git

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/runtime/git/gittest"
)

func hostCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// findHome is the Workspace repository at dir, on the host, as the remote
// provider opens it.
func findHome(t testing.TB, dir string) *Home {
	t.Helper()
	h, err := FindHome(hostCtx(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// seedClone streams the seed of host into an empty clone directory, as the
// remote provider does over one exec.
func seedClone(t testing.TB, host, clone, from string) Seed {
	t.Helper()
	h := findHome(t, host)
	seed, err := h.SeedCommit(hostCtx(t), "refs/lathe/seed/T1", from)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(h.WriteBundle(hostCtx(t), seed.Ref, pw)) }()
	if err := NewTransfer(Host{}, clone).CloneBundle(hostCtx(t), pr, seed); err != nil {
		t.Fatal(err)
	}
	if err := h.DropRef(hostCtx(t), seed.Ref); err != nil {
		t.Fatal(err)
	}
	return seed
}

// TestTransfer: the clone holds HEAD on the same branch plus the
// Workspace's uncommitted changes, uncommitted; its work comes home as a
// branch, uncommitted changes as one more commit on request only, and the
// Workspace's worktree, index, HEAD and refs stay as they were.
func TestTransfer(t *testing.T) {
	host, clone := t.TempDir(), t.TempDir()
	gittest.Repo(t, host, map[string]string{"a.txt": "a\n", "gone.txt": "gone\n", "dir/b.txt": "b\n"})
	gittest.Write(t, host, map[string]string{"a.txt": "a changed\n", "new/untracked.txt": "u\n"})
	if err := os.Remove(filepath.Join(host, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, host, "add", "a.txt")
	statusBefore := gittest.Run(t, host, "status", "--porcelain")
	refsBefore := gittest.Run(t, host, "for-each-ref")
	head := strings.TrimSpace(gittest.Run(t, host, "rev-parse", "HEAD"))

	seed := seedClone(t, host, clone, "lathe/T1")
	if seed.Branch != "main" || seed.Head != head {
		t.Errorf("seed = %+v, want branch main at %s", seed, head)
	}
	if got := gittest.Run(t, host, "status", "--porcelain"); got != statusBefore {
		t.Errorf("host status after the seed: %q, want %q", got, statusBefore)
	}
	if got := gittest.Run(t, host, "for-each-ref"); got != refsBefore {
		t.Errorf("host refs after the seed: %q, want %q", got, refsBefore)
	}
	if got := strings.TrimSpace(gittest.Run(t, clone, "symbolic-ref", "--short", "HEAD")); got != "main" {
		t.Errorf("clone branch %q", got)
	}
	if got := strings.TrimSpace(gittest.Run(t, clone, "rev-parse", "HEAD")); got != head {
		t.Errorf("clone HEAD %s, want %s", got, head)
	}
	if got, want := gittest.Run(t, clone, "status", "--porcelain", "--untracked-files=all"), " M a.txt\n D gone.txt\n?? new/untracked.txt\n"; got != want {
		t.Errorf("clone status %q, want %q", got, want)
	}

	c := NewTransfer(Host{}, clone)
	if _, err := c.HomeCommit(hostCtx(t), "refs/lathe/home/T1", false, "m"); !errors.Is(err, ErrDirty) {
		t.Fatalf("home of a dirty clone without changes: %v, want ErrDirty", err)
	}
	gittest.Run(t, clone, "add", "-A")
	gittest.Run(t, clone, "commit", "-q", "-m", "work")
	gittest.Write(t, clone, map[string]string{"late.txt": "late\n"})
	home, err := c.HomeCommit(hostCtx(t), "refs/lathe/home/T1", true, "lathe: uncommitted changes at close")
	if err != nil || !home.Uncommitted {
		t.Fatalf("home = %+v, %v", home, err)
	}
	bundle := filepath.Join(t.TempDir(), "home.bundle")
	f, err := os.Create(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteBundle(hostCtx(t), home.Ref, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	h := findHome(t, host)
	if err := h.FetchBundle(hostCtx(t), bundle, home.Ref, "lathe/T1"); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(gittest.Run(t, host, "rev-parse", "lathe/T1")); got != home.Commit {
		t.Errorf("lathe/T1 = %s, want %s", got, home.Commit)
	}
	if got := gittest.Run(t, host, "show", "lathe/T1:late.txt"); got != "late\n" {
		t.Errorf("late.txt on the branch: %q", got)
	}
	if got := gittest.Run(t, host, "status", "--porcelain"); got != statusBefore {
		t.Errorf("host status after the fetch: %q, want %q", got, statusBefore)
	}
	if got := strings.TrimSpace(gittest.Run(t, host, "symbolic-ref", "--short", "HEAD")); got != "main" {
		t.Errorf("host branch moved to %q", got)
	}

	// Reopen: a new clone starts from the branch brought home.
	again := t.TempDir()
	seed = seedClone(t, host, again, "lathe/T1")
	if seed.Branch != "lathe/T1" || seed.Commit != home.Commit {
		t.Errorf("reopen seed %+v", seed)
	}
	if got := gittest.Run(t, again, "status", "--porcelain", "--untracked-files=all"); got != "" {
		t.Errorf("reopened clone status %q, want clean", got)
	}
	if _, err := os.Stat(filepath.Join(again, "late.txt")); err != nil {
		t.Error(err)
	}
}

// TestTransferUnborn: a repository without a commit seeds an unborn
// branch whose files are all untracked.
func TestTransferUnborn(t *testing.T) {
	host, clone := t.TempDir(), t.TempDir()
	gittest.Run(t, host, "init", "-q", "-b", "trunk")
	gittest.Write(t, host, map[string]string{"x.txt": "x\n"})
	seed := seedClone(t, host, clone, "")
	if seed.Head != "" || seed.Branch != "trunk" {
		t.Errorf("seed %+v", seed)
	}
	if got := gittest.Run(t, clone, "status", "--porcelain", "--untracked-files=all"); got != "?? x.txt\n" {
		t.Errorf("clone status %q", got)
	}
	if _, err := NewTransfer(Host{}, clone).HomeCommit(hostCtx(t), "refs/lathe/home/T2", false, "m"); !errors.Is(err, ErrDirty) {
		t.Errorf("home: %v", err)
	}
}

// TestSeedLeavesOut: a path the seed leaves out (the daemon's config file
// in the Workspace) never reaches the clone, untracked or changed; the
// rest of the uncommitted changes do.
func TestSeedLeavesOut(t *testing.T) {
	host := t.TempDir()
	gittest.Repo(t, host, map[string]string{"a.txt": "a\n", "etc/tracked.yaml": "old\n"})
	gittest.Write(t, host, map[string]string{"a.txt": "a changed\n", "etc/lathe.yaml": "secret\n",
		"etc/tracked.yaml": "secret\n", "etc/other": "o\n"})
	h := findHome(t, host)
	seed, err := h.SeedCommit(hostCtx(t), "refs/lathe/seed/T1", "", "etc/lathe.yaml", "etc/tracked.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := gittest.Run(t, host, "ls-tree", "-r", "--name-only", seed.Commit)
	if want := "a.txt\netc/other\netc/tracked.yaml\n"; got != want {
		t.Errorf("the seed holds %q, want %q", got, want)
	}
	for path, want := range map[string]string{"a.txt": "a changed\n", "etc/tracked.yaml": "old\n"} {
		if got := gittest.Run(t, host, "show", seed.Commit+":"+path); got != want {
			t.Errorf("the seed's %s: %q, want %q", path, got, want)
		}
	}
}
