package git

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"lathe/runtime/git/gittest"
)

// TestBrings: the clone lists the commits it has beyond the first base it
// knows, newest first and bounded, with the Workspace's commits named on
// the host; a base the clone lacks is skipped, none known lists HEAD's
// history, and an unborn HEAD is ErrNoCommit.
func TestBrings(t *testing.T) {
	host, clone := t.TempDir(), t.TempDir()
	gittest.Run(t, host, "init", "-q", "-b", "main")
	gittest.Write(t, host, map[string]string{"a.txt": "a\n"})
	gittest.Run(t, host, "add", "-A")
	gittest.Run(t, host, "commit", "-q", "-m", "first")
	seedClone(t, host, clone, "lathe/T1")
	hostRepo, cloneRepo := findHome(t, host), NewTransfer(Host{}, clone)
	commit := func(dir, subject string) string {
		gittest.Run(t, dir, "commit", "-q", "--allow-empty", "-m", subject)
		return strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD"))
	}
	resolve := func() (home, head string) {
		got, err := hostRepo.Commits(hostCtx(t), "refs/heads/lathe/T1", "HEAD")
		if err != nil || len(got) != 2 {
			t.Fatalf("Commits = %q, %v", got, err)
		}
		return got[0], got[1]
	}
	home, head := resolve()
	if home != "" || head == "" {
		t.Fatalf("before a sync: lathe/T1 %q, HEAD %q", home, head)
	}
	long := strings.Repeat("é", 150) + "\xff"
	c1 := commit(clone, "one")
	c2 := commit(clone, long)
	hostOnly := commit(host, "only on the host")
	unknown := strings.Repeat("0", 40)

	for _, tc := range []struct {
		name     string
		max      int
		bases    []string
		base     string
		count    int
		subjects []string
	}{
		{"beyond the Workspace HEAD", 10, []string{"", head}, head, 2, []string{"long", "one"}},
		{"bounded", 1, []string{head}, head, 2, []string{"long"}},
		{"a base the clone lacks is skipped", 10, []string{hostOnly, head}, head, 2, []string{"long", "one"}},
		{"beyond the first known", 10, []string{c1, head}, c1, 1, []string{"long"}},
		{"none known: HEAD's history", 10, []string{unknown}, "", 3, []string{"long", "one", "first"}},
		{"nothing beyond", 10, []string{c2}, c2, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := cloneRepo.Brings(hostCtx(t), tc.max, tc.bases...)
			if err != nil {
				t.Fatal(err)
			}
			if b.Base != tc.base || b.Count != tc.count || len(b.Commits) != len(tc.subjects) {
				t.Fatalf("Brings = %+v, want base %s, %d commits, %v listed", b, tc.base, tc.count, tc.subjects)
			}
			for i, want := range tc.subjects {
				c := b.Commits[i]
				if want == "long" {
					if !utf8.ValidString(c.Subject) || len(c.Subject) > maxSubject+len("…") || !strings.HasPrefix(c.Subject, "éé") {
						t.Errorf("the long subject came as %q", c.Subject)
					}
					continue
				}
				if c.Subject != want || c.Author == "" || c.Time == 0 || len(c.Commit) != 40 {
					t.Errorf("commit %d = %+v, want %q", i, c, want)
				}
			}
		})
	}
	if _, err := cloneRepo.Brings(hostCtx(t), 10, "HEAD"); err == nil {
		t.Error("a base that is no commit ID was taken")
	}
	if _, err := FindHome(hostCtx(t), t.TempDir()); !errors.Is(err, ErrNotRepository) {
		t.Errorf("FindHome outside a repository: %v, want ErrNotRepository", err)
	}
	empty := t.TempDir()
	gittest.Run(t, empty, "init", "-q")
	if _, err := TransferOf(Open(Host{}, empty)).Brings(hostCtx(t), 10, head); !errors.Is(err, ErrNoCommit) {
		t.Errorf("an unborn HEAD: %v, want ErrNoCommit", err)
	}
}
