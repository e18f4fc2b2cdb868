package git_test

import (
	"reflect"
	"strings"
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
