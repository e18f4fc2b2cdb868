package git

import (
	"strings"
	"testing"
)

func TestBusyLock(t *testing.T) {
	for _, tc := range []struct{ name, stderr, want string }{
		{"index", "fatal: Unable to create '/ws/.git/index.lock': File exists.\n\nAnother git process seems to be running", "/ws/.git/index.lock"},
		{"ref", "fatal: cannot lock ref 'refs/heads/main': Unable to create '/ws/.git/refs/heads/main.lock': File exists.", "/ws/.git/refs/heads/main.lock"},
		{"not a lock file", "fatal: Unable to create '/ws/a.txt': File exists.", ""},
		{"another failure", "fatal: Unable to create '/ws/.git/index.lock': Permission denied", ""},
		{"none", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := busyLock(tc.stderr); got != tc.want {
				t.Errorf("busyLock = %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzBusyLock(f *testing.F) {
	f.Add("fatal: Unable to create '/ws/.git/index.lock': File exists.")
	f.Add("Unable to create '': File exists")
	f.Fuzz(func(t *testing.T, stderr string) {
		if got := busyLock(stderr); got != "" && (!strings.HasSuffix(got, ".lock") || !strings.Contains(stderr, got)) {
			t.Fatalf("busyLock(%q) = %q", stderr, got)
		}
	})
}
