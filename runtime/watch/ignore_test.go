package watch

import "testing"

// git's lock files in .git are not changes of the checkout (a status takes
// and drops index.lock); everything else is, lock-named worktree files too.
func TestIgnoredNames(t *testing.T) {
	for name, want := range map[string]bool{
		"/w/.git/index.lock":        true,
		"/w/.git/HEAD.lock":         true,
		"/w/.git/index":             false,
		"/w/.git/HEAD":              false,
		"/w/yarn.lock":              false,
		"/w/sub/Cargo.lock":         false,
		"/w/.git/refs/heads/x.lock": false, // refs' insides are not watched anyway
	} {
		if got := ignored(name); got != want {
			t.Errorf("ignored(%q) = %v, want %v", name, got, want)
		}
	}
}
