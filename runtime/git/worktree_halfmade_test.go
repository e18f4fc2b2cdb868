package git

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/runtime/git/gittest"
	"lathe/runtime/lanefs"
)

// TestRemoveHalfMadeWorktree: a kill -9 can stop an overlay worktree's
// add after any of its steps; the intent's undo (RemoveWorktree) then
// leaves nothing mounted, no folder, no overlay and no registration, and
// a new add at the same path works.
func TestRemoveHalfMadeWorktree(t *testing.T) {
	ctx := context.Background()
	fx := NewOverlayRepo(t, map[string]string{"a.txt": "a\n"})
	h, head, root := fx.Home, fx.Head, fx.Worktrees
	// steps does the add's steps up to n (1: registered, 2: its .git
	// moved into the upper layer, 3: the marker written, 4: mounted).
	steps := func(dir string, n int) {
		t.Helper()
		name := h.baseName(head)
		base := filepath.Dir(worktreeOverlay(dir, name).Base)
		if err := h.ensureBase(ctx, head, base); err != nil {
			t.Fatal(err)
		}
		dotGit, err := h.AddWorktreeOnBase(ctx, dir, "lathe/"+filepath.Base(dir), head, filepath.Join(base, "index"), true)
		if err != nil {
			t.Fatal(err)
		}
		o := worktreeOverlay(dir, name)
		if n >= 2 {
			if err := h.mkdirOwned(o.Upper); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(dotGit, filepath.Join(o.Upper, ".git")); err != nil {
				t.Fatal(err)
			}
		}
		if n >= 3 {
			if err := os.WriteFile(filepath.Join(overlayDir(dir), "base"), []byte(name+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if n >= 4 {
			if err := MountWorktree(dir); err != nil {
				t.Fatal(err)
			}
		}
	}
	for n := 1; n <= 4; n++ {
		dir := filepath.Join(root, "S"+string(rune('0'+n)))
		steps(dir, n)
		if err := h.RemoveWorktree(ctx, dir); err != nil {
			t.Fatalf("undo after step %d: %v", n, err)
		}
		if on, _ := lanefs.Mounted(dir); on {
			t.Errorf("step %d: still mounted", n)
		}
		for _, p := range []string{dir, overlayDir(dir)} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("step %d: %s is left", n, p)
			}
		}
		if got := gittest.Run(t, h.dir, "worktree", "list", "--porcelain"); strings.Contains(got, dir) {
			t.Errorf("step %d: still registered:\n%s", n, got)
		}
		if _, err := h.AddWorktree(ctx, dir, "lathe/"+filepath.Base(dir)); err != nil {
			t.Fatalf("add again after step %d: %v", n, err)
		}
		if got := gittest.Run(t, dir, "status", "--porcelain"); got != "" {
			t.Errorf("step %d: the new worktree's status %q", n, got)
		}
	}
}

// TestRemoveWorktreeCutInsideGit: a kill inside git's own `worktree add`
// leaves its registration locked ("initializing", which `worktree prune`
// skips) and, cut after each of the files git writes in turn, without
// its gitdir or with an empty commondir, which makes every git command
// that reads the worktrees' HEADs die (`worktree list`, `branch -d`). The
// undo removes that registration too, and an add at the same path works,
// after the undo or straight away.
func TestRemoveWorktreeCutInsideGit(t *testing.T) {
	ctx := context.Background()
	fx := NewOverlayRepo(t, map[string]string{"a.txt": "a\n"})
	h, root := fx.Home, fx.Worktrees
	common := strings.TrimSpace(gittest.Run(t, h.dir, "rev-parse", "--path-format=absolute", "--git-common-dir"))
	tests := []struct {
		name  string
		files map[string]string // in the registration; "" an empty file
	}{
		{"locked only", map[string]string{"locked": "initializing"}},
		{"gitdir written", map[string]string{"locked": "initializing", "gitdir": "<dir>/.git\n"}},
		{"commondir empty", map[string]string{"locked": "initializing", "gitdir": "<dir>/.git\n", "HEAD": "ref: refs/heads/x\n", "commondir": ""}},
	}
	for i, tt := range tests {
		// Undone (a failed create), or added straight (start-up finishing
		// the create).
		for j, undo := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s undo %v", tt.name, undo), func(t *testing.T) {
				dir := filepath.Join(root, fmt.Sprintf("C%d%d", i, j))
				adm := filepath.Join(common, "worktrees", filepath.Base(dir))
				if err := os.MkdirAll(adm, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, body := range tt.files {
					if err := os.WriteFile(filepath.Join(adm, name), []byte(strings.ReplaceAll(body, "<dir>", dir)), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if undo {
					if err := h.RemoveWorktree(ctx, dir); err != nil {
						t.Fatalf("undo: %v", err)
					}
					if _, err := os.Lstat(adm); err == nil {
						t.Errorf("the registration %s is left", adm)
					}
					if got := gittest.Run(t, h.dir, "worktree", "list", "--porcelain"); strings.Contains(got, dir) {
						t.Errorf("still registered:\n%s", got)
					}
				}
				if _, err := h.AddWorktree(ctx, dir, "lathe/"+filepath.Base(dir)); err != nil {
					t.Fatalf("add: %v", err)
				}
				if got := gittest.Run(t, h.dir, "worktree", "list", "--porcelain"); !strings.Contains(got, "worktree "+dir+"\n") {
					t.Errorf("not registered after the add:\n%s", got)
				}
				if got := gittest.Run(t, dir, "status", "--porcelain"); got != "" {
					t.Errorf("the new worktree's status %q", got)
				}
			})
		}
	}
}
