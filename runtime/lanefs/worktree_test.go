package lanefs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestCopyWorktree: a copy of a worktree checkout, as a base or whole, is
// a repository of its own on the worktree's branch with its index and its
// uncommitted change; a commit there changes neither the Workspace's refs
// nor the worktree's index or HEAD.
func TestCopyWorktree(t *testing.T) {
	for _, tc := range []struct {
		name string
		copy func(ctx context.Context, from, to string) error
	}{
		{"base", CopyBase},
		{"whole", func(ctx context.Context, from, to string) error {
			if err := exec.Command("cp", "-a", "--", from, to).Run(); err != nil {
				return err
			}
			return Standalone(ctx, from, to)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "ws")
			writeFile(t, filepath.Join(ws, "a.txt"), "a\n")
			gitIn(t, ws, "init", "-q", "-b", "main")
			gitIn(t, ws, "add", "-A")
			gitIn(t, ws, "commit", "-qm", "one")
			wt := filepath.Join(t.TempDir(), "wt")
			gitIn(t, ws, "worktree", "add", "-q", "-b", "lathe/s1", wt)
			writeFile(t, filepath.Join(wt, "b.txt"), "b\n")
			gitIn(t, wt, "add", "b.txt")
			gitIn(t, wt, "commit", "-qm", "two")
			writeFile(t, filepath.Join(wt, "a.txt"), "changed\n")
			main, branch := gitIn(t, ws, "rev-parse", "main"), gitIn(t, wt, "rev-parse", "HEAD")
			status := gitIn(t, wt, "status", "--porcelain")

			dst := filepath.Join(t.TempDir(), "copy")
			if err := tc.copy(context.Background(), wt, dst); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Lstat(filepath.Join(dst, ".git")); err != nil || !fi.IsDir() {
				t.Fatalf(".git of the copy: %v, %v; want a directory", fi, err)
			}
			if _, err := os.Lstat(filepath.Join(dst, ".git", "worktrees")); err == nil {
				t.Error("the copy lists the Workspace's worktrees")
			}
			if got := gitIn(t, dst, "symbolic-ref", "HEAD"); got != "refs/heads/lathe/s1" {
				t.Errorf("HEAD of the copy: %s", got)
			}
			if got := gitIn(t, dst, "status", "--porcelain"); got != status {
				t.Errorf("status of the copy %q, want the worktree's %q", got, status)
			}
			gitIn(t, dst, "commit", "-qam", "lane")
			if got := gitIn(t, ws, "rev-parse", "main"); got != main {
				t.Errorf("main moved: %s", got)
			}
			if got := gitIn(t, wt, "rev-parse", "HEAD"); got != branch {
				t.Errorf("the worktree's branch moved: %s", got)
			}
			if got := gitIn(t, wt, "status", "--porcelain"); got != status {
				t.Errorf("the worktree's status %q, want %q", got, status)
			}
		})
	}
}

// TestGitDirs: a plain checkout, a worktree and a broken .git file.
func TestGitDirs(t *testing.T) {
	plain := t.TempDir()
	writeFile(t, filepath.Join(plain, ".git", "objects", "x"), "")
	wt := t.TempDir()
	writeFile(t, filepath.Join(wt, ".git"), "gitdir: "+filepath.Join(plain, ".git", "worktrees", "w")+"\n")
	writeFile(t, filepath.Join(plain, ".git", "worktrees", "w", "commondir"), "../..\n")
	bad := t.TempDir()
	writeFile(t, filepath.Join(bad, ".git"), "nonsense\n")
	for _, tc := range []struct {
		dir, own, common string
		worktree, fails  bool
	}{
		{plain, filepath.Join(plain, ".git"), filepath.Join(plain, ".git"), false, false},
		{wt, filepath.Join(plain, ".git", "worktrees", "w"), filepath.Join(plain, ".git"), true, false},
		{bad, "", "", true, true},
		{t.TempDir(), "", "", false, true},
	} {
		own, common, worktree, err := GitDirs(tc.dir)
		if (err != nil) != tc.fails || own != tc.own || common != tc.common || worktree != tc.worktree {
			t.Errorf("GitDirs(%s) = %q, %q, %v, %v", tc.dir, own, common, worktree, err)
		}
	}
}
