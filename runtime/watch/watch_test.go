package watch_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"lathe/runtime/polltest"
	"lathe/runtime/watch"
)

// waitNotified polls n until it passes want, or fails after a deadline.
func waitNotified(t *testing.T, n *atomic.Int32, want int32, what string) {
	t.Helper()
	polltest.Until(t, "a notice after "+what, func() bool { return n.Load() >= want }, polltest.Within(10*time.Second))
}

func TestWatchFollowsTheTree(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".git", "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	w, err := watch.Start(root, 20*time.Millisecond, func() { n.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitNotified(t, &n, 1, "a file write")
	// A burst is one notice once it is quiet.
	before := n.Load()
	for i := range 20 {
		_ = os.WriteFile(filepath.Join(root, "a.txt"), []byte{byte(i)}, 0o644)
	}
	waitNotified(t, &n, before+1, "a burst")
	if got := n.Load(); got > before+2 {
		t.Errorf("a burst of 20 writes gave %d notices", got-before)
	}
	// A new directory is followed: a write inside it is seen.
	if err := os.MkdirAll(filepath.Join(root, "src", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitNotified(t, &n, n.Load()+1, "a new directory")
	before = n.Load()
	if err := os.WriteFile(filepath.Join(root, "src", "deep", "b.go"), []byte("package b"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitNotified(t, &n, before+1, "a write in a new directory")
	// .git itself is watched (git add rewrites the index there).
	before = n.Load()
	if err := os.WriteFile(filepath.Join(root, ".git", "index"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitNotified(t, &n, before+1, "an index write")

}
