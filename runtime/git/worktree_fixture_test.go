package git

import (
	"os"
	"path/filepath"
	"testing"

	"lathe/runtime/git/gittest"
	"lathe/runtime/lanefs"
)

// OverlayRepo is the overlay worktree tests' fixture, shared by this
// package's tests and git_test's: a repository whose one commit on main
// holds the files, opened as a Home.
type OverlayRepo struct {
	Home *Home
	Dir  string // the repository's main worktree
	Head string // its one commit
	// Worktrees is an empty folder for the worktrees; every mount under it
	// is undone at the end of the test.
	Worktrees string
}

// NewOverlayRepo makes an OverlayRepo in a new folder, the paths exec
// made executable before the commit. Where overlays cannot mount (not
// root) it skips the test.
func NewOverlayRepo(tb testing.TB, files map[string]string, exec ...string) OverlayRepo {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("overlay mounts need root")
	}
	dir := tb.TempDir()
	gittest.Write(tb, dir, files)
	for _, p := range exec {
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(p)), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	head := gittest.Repo(tb, dir, nil)
	h, err := OpenHome(dir)
	if err != nil {
		tb.Fatal(err)
	}
	worktrees := tb.TempDir()
	tb.Cleanup(func() { _ = lanefs.UnmountUnder(worktrees) })
	return OverlayRepo{Home: h, Dir: dir, Head: head, Worktrees: worktrees}
}
