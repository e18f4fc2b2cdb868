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

// copyModes are the two copies of a checkout a lane gets: a base, or a
// whole copy made standalone.
var copyModes = []struct {
	name string
	copy func(ctx context.Context, from Source, to string) error
}{
	{"base", CopyBase},
	{"whole", func(ctx context.Context, from Source, to string) error {
		if err := exec.Command("cp", "-a", "--", from.Dir, to).Run(); err != nil {
			return err
		}
		return Standalone(ctx, from, to)
	}},
}

// TestCopyWorktree: a copy of a worktree checkout, as a base or whole, is
// a repository of its own on the worktree's branch with its index and its
// uncommitted change; a commit there changes neither the Workspace's refs
// nor the worktree's index or HEAD.
func TestCopyWorktree(t *testing.T) {
	for _, tc := range copyModes {
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
			src := Source{Dir: wt, Own: filepath.Join(ws, ".git", "worktrees", "wt"), Common: filepath.Join(ws, ".git")}
			if err := tc.copy(context.Background(), src, dst); err != nil {
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

// TestCopyWorktreeFollowsNoPointer: a worktree's sandbox rewrites its .git
// file to name a folder elsewhere on the host (one holding a secret, laid
// out as a git directory). The lane's copy takes the git directories
// recorded for the worktree, never the folder the file names; with none
// recorded it refuses.
func TestCopyWorktreeFollowsNoPointer(t *testing.T) {
	for _, tc := range copyModes {
		t.Run(tc.name, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "ws")
			writeFile(t, filepath.Join(ws, "a.txt"), "a\n")
			gitIn(t, ws, "init", "-q", "-b", "main")
			gitIn(t, ws, "add", "-A")
			gitIn(t, ws, "commit", "-qm", "one")
			wt := filepath.Join(t.TempDir(), "wt")
			gitIn(t, ws, "worktree", "add", "-q", "-b", "lathe/s1", wt)
			secret := t.TempDir()
			writeFile(t, filepath.Join(secret, "cookie-secret"), "the daemon's\n")
			writeFile(t, filepath.Join(secret, "commondir"), ".\n")
			writeFile(t, filepath.Join(secret, "objects", "x"), "")
			writeFile(t, filepath.Join(wt, ".git"), "gitdir: "+secret+"\n")

			dst := filepath.Join(t.TempDir(), "copy")
			if err := tc.copy(context.Background(), Source{Dir: wt}, dst); err == nil {
				t.Error("a worktree with no recorded git directories was copied")
			}
			dst = filepath.Join(t.TempDir(), "copy")
			src := Source{Dir: wt, Own: filepath.Join(ws, ".git", "worktrees", "wt"), Common: filepath.Join(ws, ".git")}
			if err := tc.copy(context.Background(), src, dst); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dst, ".git", "cookie-secret")); !os.IsNotExist(err) {
				t.Errorf("the copy holds what the rewritten .git file names: %v", err)
			}
			if got := gitIn(t, dst, "symbolic-ref", "HEAD"); got != "refs/heads/lathe/s1" {
				t.Errorf("the copy's HEAD: %q", got)
			}
		})
	}
}
