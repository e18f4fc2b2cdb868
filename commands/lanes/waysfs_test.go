package lanes

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/commands/core"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/lanefs"
	"lathe/runtime/polltest"
)

// putFile writes content at p, making its folders: the package tests' one
// file writer.
func putFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileIs reports whether p holds content ("" for: p does not exist).
func fileIs(p, content string) bool {
	b, err := os.ReadFile(p)
	if content == "" {
		return os.IsNotExist(err)
	}
	return err == nil && string(b) == content
}

// mountedUnder lists the mount points at or under dir.
func mountedUnder(t *testing.T, dir string) []string {
	t.Helper()
	m, err := lanefs.MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLaneFiles makes two lanes' files both ways, overlays over one base
// and (forced, as where overlayfs is refused) whole copies: each lane sees
// the checkout as it was, neither sees the Workspace's later writes nor the
// other lane's writes or deletions, an unmounted overlay (a reboot) mounts
// again with its writes, and removal leaves no file and no mount behind.
func TestLaneFiles(t *testing.T) {
	for _, overlay := range []bool{true, false} {
		t.Run(map[bool]string{true: "overlay", false: "copies"}[overlay], func(t *testing.T) {
			if overlay && os.Geteuid() != 0 {
				t.Skip("overlay mounts need root")
			}
			ws := filepath.Join(t.TempDir(), "ws")
			putFile(t, filepath.Join(ws, "a.txt"), "a\n")
			putFile(t, filepath.Join(ws, "dir", "b.txt"), "b\n")
			putFile(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
			putFile(t, filepath.Join(ws, ".git", "objects", "ab", "cd"), "object\n")
			data := t.TempDir()
			var logs polltest.Buffer
			c := &LaneStore{&core.Core{Opts: core.Options{WaysDir: data}, Log: slog.New(slog.NewTextHandler(&logs, nil))}, NewWaysRuntime()}
			c.Ways.fs.noOverlay = !overlay
			const set = "01SET"
			lanes := make([]*projections.Attempt, 2)
			for i := range lanes {
				lanes[i] = &projections.Attempt{AttemptSpec: events.AttemptSpec{Index: i, Copy: LaneCopyPath(data, set, i)}}
				if err := c.laneFiles(context.Background(), set, lanefs.Source{Dir: ws}, lanes[i]); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { laneOverlay(lanes[i]).Unmount() })
			}
			l0, l1 := lanes[0].Copy, lanes[1].Copy
			for _, l := range lanes {
				if got := isOverlayLane(l); got != overlay {
					t.Errorf("lane %d is an overlay: %v", l.Index, got)
				}
				if !fileIs(filepath.Join(l.Copy, "a.txt"), "a\n") || !fileIs(filepath.Join(l.Copy, ".git", "objects", "ab", "cd"), "object\n") {
					t.Errorf("lane %d does not see the checkout", l.Index)
				}
			}
			if n := strings.Count(logs.String(), "overlay mounts are not available"); n != map[bool]int{true: 0, false: 1}[overlay] {
				t.Errorf("the fallback was logged %d times: %s", n, logs.String())
			}

			// The Workspace's later writes reach no lane.
			putFile(t, filepath.Join(ws, "a.txt"), "primary later\n")
			putFile(t, filepath.Join(ws, "primary.txt"), "p\n")
			if err := os.Remove(filepath.Join(ws, "dir", "b.txt")); err != nil {
				t.Fatal(err)
			}
			// Lane 0's writes and deletions reach neither lane 1 nor the
			// Workspace.
			putFile(t, filepath.Join(l0, "a.txt"), "lane 0\n")
			putFile(t, filepath.Join(l0, "lane0.txt"), "0\n")
			if err := os.Remove(filepath.Join(l0, "dir", "b.txt")); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				path, want string
			}{
				{filepath.Join(l1, "a.txt"), "a\n"},
				{filepath.Join(l1, "primary.txt"), ""},
				{filepath.Join(l1, "lane0.txt"), ""},
				{filepath.Join(l1, "dir", "b.txt"), "b\n"},
				{filepath.Join(l0, "primary.txt"), ""},
				{filepath.Join(l0, "a.txt"), "lane 0\n"},
				{filepath.Join(l0, "dir", "b.txt"), ""},
				{filepath.Join(ws, "a.txt"), "primary later\n"},
				{filepath.Join(ws, "lane0.txt"), ""},
			} {
				if !fileIs(c.path, c.want) {
					b, _ := os.ReadFile(c.path)
					t.Errorf("%s holds %q, want %q", strings.TrimPrefix(c.path, data), b, c.want)
				}
			}

			// A reboot unmounts the lanes; using one mounts it again.
			if overlay {
				if err := laneOverlay(lanes[0]).Unmount(); err != nil {
					t.Fatal(err)
				}
				if fileIs(filepath.Join(l0, "lane0.txt"), "0\n") {
					t.Fatal("lane 0 still mounted")
				}
			}
			for range 2 {
				if err := c.MountLane(lanes[0]); err != nil {
					t.Fatal(err)
				}
			}
			if !fileIs(filepath.Join(l0, "lane0.txt"), "0\n") || !fileIs(filepath.Join(l0, "a.txt"), "lane 0\n") {
				t.Error("lane 0 lost its writes over a remount")
			}
			if n := len(mountedUnder(t, data)); n != map[bool]int{true: 2, false: 0}[overlay] {
				t.Errorf("%d mounts for 2 lanes: %v", n, mountedUnder(t, data))
			}

			if err := c.trashSet(set); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(filepath.Join(data, set)); !os.IsNotExist(err) {
				t.Errorf("the set's files are still in place: %v", err)
			}
			if m := mountedUnder(t, data); len(m) != 0 {
				t.Errorf("mounts left: %v", m)
			}
			c.Ways.Cleanup.Wait()
			if entries, _ := os.ReadDir(filepath.Join(data, trashDir)); len(entries) != 0 {
				t.Errorf("the trash holds %v", entries)
			}
			if !fileIs(filepath.Join(ws, "a.txt"), "primary later\n") || !fileIs(filepath.Join(ws, ".git", "objects", "ab", "cd"), "object\n") {
				t.Error("removing the lanes touched the Workspace")
			}
		})
	}
}
