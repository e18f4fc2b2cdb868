package git

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"lathe/runtime/lanefs"

	"golang.org/x/sys/unix"
)

// TestCollectBases: a base stays while a worktree's marker names it, its
// overlay mounted or not (after a reboot); it goes, with the overlay,
// when a removal was cut off after the worktree folder went; adds racing
// a collection always find their base whole.
func TestCollectBases(t *testing.T) {
	ctx := context.Background()
	fx := NewOverlayRepo(t, map[string]string{"a.txt": "a\n"})
	h, head, root := fx.Home, fx.Head, fx.Worktrees
	if !overlays(root) {
		t.Skip("no overlay mounts here")
	}
	collect := func() []string {
		t.Helper()
		removed, err := CollectBases(root)
		if err != nil {
			t.Fatal(err)
		}
		return removed
	}
	rebooted, cut := filepath.Join(root, "rebooted"), filepath.Join(root, "cut")
	for _, dir := range []string{rebooted, cut} {
		if _, err := h.AddWorktree(ctx, dir, "lathe/"+filepath.Base(dir)); err != nil {
			t.Fatal(err)
		}
	}
	if err := lanefs.UnmountUnder(rebooted); err != nil {
		t.Fatal(err)
	}
	// The removal of cut stopped after its folder went.
	if err := lanefs.UnmountUnder(cut); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(cut); err != nil {
		t.Fatal(err)
	}
	// An overlay probe a kill cut short, still mounted.
	probe := filepath.Join(root, ".overlays", ".overlay-probe-1", "merged")
	if err := os.MkdirAll(probe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(t.TempDir(), probe, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lanefs.UnmountUnder(filepath.Dir(probe)) })
	if got := collect(); len(got) != 0 {
		t.Fatalf("collected %v while an unmounted worktree uses its base", got)
	}
	if m, err := lanefs.MountsUnder(filepath.Dir(probe)); err != nil || len(m) != 0 {
		t.Errorf("the cut probe is still mounted: %v %v", m, err)
	}
	if _, err := os.Stat(filepath.Dir(probe)); !os.IsNotExist(err) {
		t.Errorf("the cut probe's tree stayed: %v", err)
	}
	if _, err := os.Stat(overlayDir(cut)); !os.IsNotExist(err) {
		t.Errorf("the overlay of a removed worktree stayed: %v", err)
	}
	if err := MountWorktree(rebooted); err != nil {
		t.Fatalf("mount again after the collection: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(rebooted, "a.txt")); err != nil || string(b) != "a\n" {
		t.Fatalf("the remounted worktree reads %q, %v", b, err)
	}
	if err := h.RemoveWorktree(ctx, rebooted); err != nil {
		t.Fatal(err)
	}
	if got := collect(); !slices.Equal(got, []string{h.baseName(head)}) {
		t.Fatalf("collected %v, want the base of %s", got, head)
	}

	// Adds and collections at once: every add finds its files.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 4 {
		dir := filepath.Join(root, "race", string(rune('a'+i)))
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := h.AddWorktree(ctx, dir, "lathe/race-"+filepath.Base(dir)); err != nil {
				errs <- err
				return
			}
			if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "a\n" {
				errs <- &os.PathError{Op: "read " + string(b), Path: dir, Err: err}
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := CollectBases(filepath.Join(root, "race")); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
