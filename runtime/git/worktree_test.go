package git_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"lathe/runtime/git"
)

func TestParseWorktrees(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []git.Worktree
	}{
		{name: "none", in: "", want: nil},
		{name: "main and a branch and a detached one", in: "worktree /ws\x00HEAD abc\x00branch refs/heads/main\x00\x00" +
			"worktree /data/worktrees/S1\x00HEAD def\x00branch refs/heads/lathe/S1\x00\x00worktree /tmp/x y\x00HEAD 123\x00detached\x00\x00",
			want: []git.Worktree{{Path: "/ws", Head: "abc", Branch: "refs/heads/main"}, {Path: "/data/worktrees/S1", Head: "def", Branch: "refs/heads/lathe/S1"}, {Path: "/tmp/x y", Head: "123"}}},
		{name: "bare", in: "worktree /r.git\x00bare\x00\x00", want: []git.Worktree{{Path: "/r.git", Bare: true}}},
		{name: "attributes before any worktree are ignored", in: "HEAD abc\x00branch refs/heads/x\x00", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := git.ParseWorktrees([]byte(tc.in)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzParseWorktrees(f *testing.F) {
	f.Add([]byte("worktree /ws\x00HEAD abc\x00branch refs/heads/main\x00\x00"))
	f.Add([]byte("worktree\x00\x00bare"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, w := range git.ParseWorktrees(b) {
			if strings.ContainsRune(w.Path, 0) || strings.ContainsRune(w.Branch, 0) {
				t.Fatalf("a field holds a NUL: %+v", w)
			}
		}
	})
}

// TestWorktreesAtOnce: Sessions of one Workspace created, listed and
// removed at once never fail. Git writes a registration's files one by
// one, and a listing that met a half-written one died.
func TestWorktreesAtOnce(t *testing.T) {
	hm := newHome(t, map[string]string{"a.txt": "a\n"})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 6 {
		wg.Go(func() {
			for round := range 15 {
				dir := filepath.Join(filepath.Dir(hm.wt), fmt.Sprintf("S%d-%d", i, round))
				if _, err := hm.h.AddWorktree(hctx(t), dir, fmt.Sprintf("lathe/S%d-%d", i, round)); err != nil {
					errs <- fmt.Errorf("add %s: %w", dir, err)
					return
				}
				if _, err := hm.h.Worktrees(hctx(t)); err != nil {
					errs <- fmt.Errorf("list: %w", err)
					return
				}
				if err := hm.h.RemoveWorktree(hctx(t), dir); err != nil {
					errs <- fmt.Errorf("remove %s: %w", dir, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
