package git_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/runtime/git"
	"lathe/runtime/git/gittest"
	"lathe/runtime/lanefs"
)

// TestWorktreeOnBase: a worktree registered without a checkout, its index
// the base's, with an overlay of the base mounted at its path, is on its
// branch and clean at once; its writes show in its status and never reach
// the base, which a second worktree on the same base still sees whole.
func TestWorktreeOnBase(t *testing.T) {
	ctx := context.Background()
	fx := git.NewOverlayRepo(t, map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n", "dir/sub/c.sh": "#!/bin/sh\n"}, "dir/sub/c.sh")
	home, head := fx.Home, fx.Head
	base := filepath.Join(t.TempDir(), "base")
	if err := home.CheckoutBase(ctx, head, base); err != nil {
		t.Fatal(err)
	}
	one, two := onBase(t, home, base, head, "s1"), onBase(t, home, base, head, "s2")
	for name, dir := range map[string]string{"s1": one, "s2": two} {
		if got := gittest.Run(t, dir, "status", "--porcelain", "--untracked-files=all"); got != "" {
			t.Errorf("status of %s right after it is made: %q, want clean", name, got)
		}
		if got := strings.TrimSpace(gittest.Run(t, dir, "symbolic-ref", "HEAD")); got != "refs/heads/lathe/"+name {
			t.Errorf("HEAD of %s: %s", name, got)
		}
	}
	if err := os.WriteFile(filepath.Join(one, "a.txt"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Run(t, one, "status", "--porcelain"); got != " M a.txt\n" {
		t.Errorf("status after an edit: %q", got)
	}
	for _, p := range []string{filepath.Join(base, "tree", "a.txt"), filepath.Join(two, "a.txt")} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "a\n" {
			t.Errorf("%s after another worktree's edit: %q, %v", p, b, err)
		}
	}
	if got := gittest.Run(t, two, "status", "--porcelain"); got != "" {
		t.Errorf("the second worktree after the first's edit: %q", got)
	}
}

// onBase adds worktree name on the base at base (CheckoutBase's folder)
// with its overlay mounted, unmounted at the end, and answers its path.
func onBase(tb testing.TB, home *git.Home, base, commit, name string) string {
	tb.Helper()
	tmp := tb.TempDir()
	dir := filepath.Join(tmp, strings.ReplaceAll(name, "/", "-")) // its registration bears its name (Home.adminDir)
	dotGit, err := home.AddWorktreeOnBase(context.Background(), dir, "lathe/"+name, commit, filepath.Join(base, "index"), true)
	if err != nil {
		tb.Fatal(err)
	}
	upper := filepath.Join(tmp, "upper")
	if err := os.Mkdir(upper, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(dotGit, filepath.Join(upper, ".git")); err != nil {
		tb.Fatal(err)
	}
	o := lanefs.Overlay{Base: filepath.Join(base, "tree"), Upper: upper, Work: filepath.Join(tmp, "work"), Merged: dir}
	if err := o.Mount(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = o.Unmount() })
	return dir
}

// BenchmarkWorktreeOnBase50k measures, on a 50,000-file repository in the
// same run, `git worktree add` as Lathe runs it and a worktree on a shared
// base (registered without a checkout, the base's index copied, the
// overlay mounted, then its first `git status`, which must be clean); the
// base itself is made once per commit (base-once-ms).
func BenchmarkWorktreeOnBase50k(b *testing.B) {
	fx := git.NewOverlayRepo(b, gittest.Spread(50_000))
	repo, home, head := fx.Dir, fx.Home, fx.Head
	base := filepath.Join(b.TempDir(), "base")
	start := time.Now()
	if err := home.CheckoutBase(context.Background(), head, base); err != nil {
		b.Fatal(err)
	}
	once := time.Since(start)
	var add, onbase time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		gittest.Run(b, repo, "-c", "checkout.workers=4", "-c", "checkout.thresholdForParallelism=100",
			"worktree", "add", "-q", "-b", fmt.Sprint("plain-", n), filepath.Join(b.TempDir(), "plain"))
		add += time.Since(start)
		start = time.Now()
		dir := onBase(b, home, base, head, fmt.Sprint("s", n))
		if got := gittest.Run(b, dir, "status", "--porcelain"); got != "" {
			b.Fatalf("status on the base: %q", got)
		}
		onbase += time.Since(start)
		n++
	}
	b.ReportMetric(float64(once.Milliseconds()), "base-once-ms")
	b.ReportMetric(float64(add.Milliseconds())/float64(n), "worktree-add-ms")
	b.ReportMetric(float64(onbase.Milliseconds())/float64(n), "on-base-ms")
	b.ReportMetric(float64(onbase)/float64(add), "on-base/add")
}

// TestAddWorktreeOnOverlay: as root, AddWorktree makes an overlay on a
// base, clean at once; a second worktree reuses the base; a lost mount (a
// reboot) comes back with MountWorktree, the worktree's files and index
// intact; AddWorktree again keeps it; RemoveWorktree unmounts and leaves
// neither the folder nor its overlay nor the registration.
func TestAddWorktreeOnOverlay(t *testing.T) {
	ctx := context.Background()
	fx := git.NewOverlayRepo(t, map[string]string{"a.txt": "a\n"})
	repo, home, root := fx.Dir, fx.Home, fx.Worktrees
	one, two := filepath.Join(root, "S1"), filepath.Join(root, "S2")
	for _, dir := range []string{one, two} {
		if _, err := home.AddWorktree(ctx, dir, "lathe/"+filepath.Base(dir)); err != nil {
			t.Fatal(err)
		}
		if on, _ := lanefs.Mounted(dir); !on {
			t.Fatalf("%s is not an overlay", dir)
		}
		if got := gittest.Run(t, dir, "status", "--porcelain"); got != "" {
			t.Errorf("status of a new worktree: %q", got)
		}
	}
	if bases, _ := filepath.Glob(filepath.Join(root, ".bases", "*")); len(bases) != 1 {
		t.Errorf("bases: %v, want one shared", bases)
	}
	if err := os.WriteFile(filepath.Join(one, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, one, "add", "b.txt")
	if err := lanefs.UnmountUnder(one); err != nil { // as a reboot would
		t.Fatal(err)
	}
	if _, err := home.AddWorktree(ctx, one, "lathe/S1"); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Run(t, one, "status", "--porcelain"); got != "A  b.txt\n" {
		t.Errorf("status after the mount came back: %q", got)
	}
	for _, dir := range []string{one, two} {
		if err := home.RemoveWorktree(ctx, dir); err != nil {
			t.Fatal(err)
		}
		if on, _ := lanefs.Mounted(dir); on {
			t.Errorf("%s is still mounted", dir)
		}
		for _, p := range []string{dir, filepath.Join(root, ".overlays", filepath.Base(dir))} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s is left", p)
			}
		}
	}
	if got := gittest.Run(t, repo, "worktree", "list", "--porcelain"); strings.Count(got, "worktree ") != 1 {
		t.Errorf("worktrees left registered:\n%s", got)
	}
}
