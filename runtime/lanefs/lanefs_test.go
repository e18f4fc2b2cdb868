package lanefs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkout makes a small repository-shaped tree.
func checkout(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(src, "a.txt"), "a\n")
	writeFile(t, filepath.Join(src, "-dash.txt"), "dash\n")
	writeFile(t, filepath.Join(src, "dir", "b.txt"), "b\n")
	writeFile(t, filepath.Join(src, "dir", "sub", "deep", "c.txt"), "c\n")
	writeFile(t, filepath.Join(src, ".git", "HEAD"), "ref: refs/heads/main\n")
	writeFile(t, filepath.Join(src, ".git", "objects", "ab", "cdef"), "object\n")
	writeFile(t, filepath.Join(src, ".git", "objects", "pack", "pack-1.pack"), "pack\n")
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "dir", "b.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, p := range []string{filepath.Join(src, "a.txt"), filepath.Join(src, "dir", "sub"), filepath.Join(src, "dir"), src} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "dir", "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(src, 0o750); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestCopyBase: the worktree and .git are copied with modes, times and
// links; the object files are the checkout's own (hard links), every other
// file is a file of its own.
func TestCopyBase(t *testing.T) {
	src := checkout(t)
	dst := filepath.Join(t.TempDir(), "base")
	if err := CopyBase(context.Background(), Source{Dir: src}, dst); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"a.txt", "-dash.txt", "dir/b.txt", "dir/sub/deep/c.txt", ".git/HEAD", ".git/objects/ab/cdef", ".git/objects/pack/pack-1.pack"} {
		if got, want := readFile(t, filepath.Join(dst, rel)), readFile(t, filepath.Join(src, rel)); got != want {
			t.Errorf("%s: %q, want %q", rel, got, want)
		}
		a, _ := os.Stat(filepath.Join(src, rel))
		b, _ := os.Stat(filepath.Join(dst, rel))
		if shared, object := os.SameFile(a, b), strings.HasPrefix(rel, ".git/objects/"); shared != object {
			t.Errorf("%s: shares its inode with the checkout: %v, want %v", rel, shared, object)
		}
		if a.Mode() != b.Mode() {
			t.Errorf("%s: mode %v, want %v", rel, b.Mode(), a.Mode())
		}
	}
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != "a.txt" {
		t.Errorf("link: %q %v", target, err)
	}
	for _, rel := range []string{".", "a.txt", "dir", "dir/sub"} {
		a, _ := os.Stat(filepath.Join(src, rel))
		b, _ := os.Stat(filepath.Join(dst, rel))
		if !a.ModTime().Equal(b.ModTime()) || a.Mode() != b.Mode() {
			t.Errorf("%s: %v %v, want %v %v", rel, b.Mode(), b.ModTime(), a.Mode(), a.ModTime())
		}
	}
	if err := CopyBase(context.Background(), Source{Dir: src}, dst); err == nil {
		t.Error("a second copy onto an existing base succeeded")
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("overlay mounts need root")
	}
}

func lane(dir, base string, i string) Overlay {
	return Overlay{Base: base, Upper: filepath.Join(dir, i, "upper"), Work: filepath.Join(dir, i, "work"), Merged: filepath.Join(dir, i, "merged")}
}

// TestOverlayIsolation: two lanes over one base see the base, and neither
// sees the other's writes or deletions; the base is never written.
func TestOverlayIsolation(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	if err := CopyBase(context.Background(), Source{Dir: checkout(t)}, base); err != nil {
		t.Fatal(err)
	}
	a, b := lane(dir, base, "0"), lane(dir, base, "1")
	for _, o := range []Overlay{a, b} {
		if err := o.Mount(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Unmount() })
	}
	writeFile(t, filepath.Join(a.Merged, "a.txt"), "lane 0\n")
	writeFile(t, filepath.Join(a.Merged, "new.txt"), "new\n")
	if err := os.Remove(filepath.Join(a.Merged, "dir", "b.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(a.Merged, ".git", "objects", "ab", "cdef"), 0o666); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(a.Merged, ".git", "objects", "ab", "cdef"), "rewritten\n")
	for _, root := range []string{b.Merged, base} {
		if got := readFile(t, filepath.Join(root, "a.txt")); got != "a\n" {
			t.Errorf("%s/a.txt: %q", root, got)
		}
		if got := readFile(t, filepath.Join(root, "dir", "b.txt")); got != "b\n" {
			t.Errorf("%s/dir/b.txt: %q", root, got)
		}
		if got := readFile(t, filepath.Join(root, ".git", "objects", "ab", "cdef")); got != "object\n" {
			t.Errorf("%s: the object: %q", root, got)
		}
		if _, err := os.Lstat(filepath.Join(root, "new.txt")); err == nil {
			t.Errorf("%s sees lane 0's new file", root)
		}
	}
	if got := readFile(t, filepath.Join(a.Merged, "a.txt")); got != "lane 0\n" {
		t.Errorf("lane 0 reads back %q", got)
	}
	fi, _ := os.Stat(a.Merged)
	bi, _ := os.Stat(base)
	if fi.Mode() != bi.Mode() {
		t.Errorf("the lane's root has mode %v, the base's %v", fi.Mode(), bi.Mode())
	}
}

// TestOverlayRemount: Mount is idempotent, and a lane unmounted (a reboot)
// mounts again from its base and upper with its writes.
func TestOverlayRemount(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	if err := CopyBase(context.Background(), Source{Dir: checkout(t)}, base); err != nil {
		t.Fatal(err)
	}
	o := lane(dir, base, "0")
	for range 2 {
		if err := o.Mount(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { o.Unmount() })
	writeFile(t, filepath.Join(o.Merged, "a.txt"), "lane\n")
	if err := o.Unmount(); err != nil {
		t.Fatal(err)
	}
	if on, err := Mounted(o.Merged); err != nil || on {
		t.Fatalf("mounted after Unmount: %v %v", on, err)
	}
	if err := o.Unmount(); err != nil {
		t.Fatalf("a second Unmount: %v", err)
	}
	if err := o.Mount(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(o.Merged, "a.txt")); got != "lane\n" {
		t.Errorf("after a remount: %q", got)
	}
	if err := UnmountUnder(dir); err != nil {
		t.Fatal(err)
	}
	if on, _ := Mounted(o.Merged); on {
		t.Error("mounted after UnmountUnder")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}

func TestProbe(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	if err := Probe(dir); err != nil {
		t.Fatalf("overlay on %s: %v", dir, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the probe left %v", entries)
	}

	// A probe a kill cut short, its overlay still mounted, is swept by
	// the next, or at start-up by SweepProbes alone.
	for _, sweep := range []func(string) error{Probe, SweepProbes} {
		stale := filepath.Join(dir, probePrefix+"killed")
		o := Overlay{Base: filepath.Join(stale, "base"), Upper: filepath.Join(stale, "upper"), Work: filepath.Join(stale, "work"), Merged: filepath.Join(stale, "merged")}
		if err := os.MkdirAll(o.Base, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := o.Mount(); err != nil {
			t.Fatal(err)
		}
		if err := sweep(dir); err != nil {
			t.Fatal(err)
		}
		if on, _ := Mounted(o.Merged); on {
			t.Error("an interrupted probe's overlay is still mounted")
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("left %v after an interrupted probe", entries)
		}
	}
}
