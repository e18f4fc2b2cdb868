package git

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// statusSample is `git status --porcelain=v2 -z --branch -uall` output
// with every kind of record.
const statusSample = "# branch.oid 9a97838995bcd0df7153904fb3c5e02b840d7078\x00# branch.head main\x00# branch.upstream origin/main\x00# branch.ab +2 -1\x00" +
	"1 .M N... 100644 100644 100644 c06fdc6176f25024fe915f1e840aa30a3e07f065 c06fdc6176f25024fe915f1e840aa30a3e07f065 dir/my file.txt\x00" +
	"1 A. N... 000000 100644 100644 0000000000000000000000000000000000000000 45b983be36b73c0788dc9cbcb76cbb80fc7bb057 ünï\ncode.txt\x00" +
	"2 RM N... 100644 100644 100644 0ff3bbb9c8bba2291654cd64067fa417ff54c508 0ff3bbb9c8bba2291654cd64067fa417ff54c508 R77 b c.txt\x00a.txt\x00" +
	"1 .M SC.. 160000 160000 160000 1111111111111111111111111111111111111111 1111111111111111111111111111111111111111 sub\x00" +
	"u UU N... 100644 100644 100644 100644 1111111111111111111111111111111111111111 2222222222222222222222222222222222222222 3333333333333333333333333333333333333333 conflict.txt\x00" +
	"? new dir/x\x00! ignored.log\x00"

func TestParseStatus(t *testing.T) {
	st, err := ParseStatus([]byte(statusSample))
	if err != nil {
		t.Fatal(err)
	}
	wantBranch := Branch{Head: "main", Commit: "9a97838995bcd0df7153904fb3c5e02b840d7078", Upstream: "origin/main", Ahead: 2, Behind: 1}
	if st.Branch != wantBranch {
		t.Errorf("branch = %+v, want %+v", st.Branch, wantBranch)
	}
	want := []File{
		{Path: "dir/my file.txt", Unstaged: "modified"},
		{Path: "ünï\ncode.txt", Staged: "added"},
		{Path: "b c.txt", OrigPath: "a.txt", Staged: "renamed", Unstaged: "modified"},
		{Path: "sub", Unstaged: "modified", Submodule: true},
		{Path: "conflict.txt", Conflict: "UU"},
		{Path: "new dir/x", Unstaged: "untracked"},
		{Path: "ignored.log", Unstaged: "ignored"},
	}
	var got []File
	for _, e := range st.Entries {
		got = append(got, e.File())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files\n got %+v\nwant %+v", got, want)
	}
	if st.Entries[2].Score != "R77" {
		t.Errorf("score = %q", st.Entries[2].Score)
	}
	for i, want := range []bool{true, false, true, true, false, true, false} {
		if got := st.Entries[i].HasUnstaged(); got != want {
			t.Errorf("entry %d (%s) HasUnstaged = %v", i, st.Entries[i].Path, got)
		}
	}

	for _, tc := range []struct {
		name, in string
		want     Branch
	}{
		{"unborn", "# branch.oid (initial)\x00# branch.head main\x00", Branch{Head: "main", Initial: true}},
		{"detached, with a stash header", "# branch.oid 9a97838995bcd0df7153904fb3c5e02b840d7078\x00# branch.head (detached)\x00# stash 3\x00",
			Branch{Detached: true, Commit: "9a97838995bcd0df7153904fb3c5e02b840d7078"}},
		{"empty", "", Branch{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ParseStatus([]byte(tc.in))
			if err != nil || st.Branch != tc.want || len(st.Entries) != 0 {
				t.Errorf("got %+v, %v; want %+v", st, err, tc.want)
			}
		})
	}
}

func TestParseStatusRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, err string }{
		{"no terminator", "? x", "no NUL terminator"},
		{"unknown kind", "3 x\x00", "unknown record kind"},
		{"no kind", "x\x00", "no record kind"},
		{"few fields", "1 .M N... 100644\x00", "too few fields"},
		{"bad XY", "1 XY N... 100644 100644 100644 a b p\x00", "bad XY"},
		{"bad submodule", "1 .M Q... 100644 100644 100644 a b p\x00", "bad submodule"},
		{"rename without origin", "2 R. N... 100644 100644 100644 a b R100 p\x00", "no original path"},
		{"bad score", "2 R. N... 100644 100644 100644 a b X100 p\x00o\x00", "bad rename score"},
		{"bad ab", "# branch.ab 2 1\x00", "bad branch.ab"},
		{"empty untracked", "? \x00", "empty path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseStatus([]byte(tc.in))
			if !errors.Is(err, ErrMalformedStatus) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(statusSample))
	f.Add([]byte("# branch.oid (initial)\x00# branch.head (detached)\x00? a\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseStatus(data)
		if err != nil {
			return
		}
		for _, e := range st.Entries {
			if e.Path == "" {
				t.Fatalf("entry without a path: %+v", e)
			}
			_ = e.File()
		}
	})
}

const refsSample = "refs/heads/main\x00\x009a97838995bcd0df7153904fb3c5e02b840d7078\x00*\x00origin/main\x001700000000\x00Fix the thing\x00with a NUL\n" +
	"refs/heads/feature/x\x00\x001111111111111111111111111111111111111111\x00 \x00\x001700000001\x00\n" +
	"refs/remotes/origin/HEAD\x00refs/remotes/origin/main\x009a97838995bcd0df7153904fb3c5e02b840d7078\x00 \x00\x001700000000\x00Fix\n" +
	"refs/remotes/origin/main\x00\x009a97838995bcd0df7153904fb3c5e02b840d7078\x00 \x00\x001700000000\x00Fix\n"

func TestParseBranches(t *testing.T) {
	got, err := ParseBranches([]byte(refsSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []BranchRef{
		{Name: "main", Ref: "refs/heads/main", Commit: "9a97838995bcd0df7153904fb3c5e02b840d7078", Current: true, Upstream: "origin/main", Subject: "Fix the thing\x00with a NUL", Date: time.Unix(1700000000, 0).UTC()},
		{Name: "feature/x", Ref: "refs/heads/feature/x", Commit: "1111111111111111111111111111111111111111", Date: time.Unix(1700000001, 0).UTC()},
		{Name: "origin/main", Ref: "refs/remotes/origin/main", Commit: "9a97838995bcd0df7153904fb3c5e02b840d7078", Remote: true, Subject: "Fix", Date: time.Unix(1700000000, 0).UTC()},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if got, err := ParseBranches(nil); err != nil || len(got) != 0 || got == nil {
		t.Errorf("no refs: %#v, %v", got, err)
	}
	for _, bad := range []string{"refs/heads/x\x00\x00a\n", "refs/tags/v1\x00\x00a\x00 \x00\x001\x00s\n", "refs/heads/x\x00\x00a\x00?\x00\x001\x00s\n", "refs/heads/x\x00\x00a\x00 \x00\x00yesterday\x00s\n", "refs/heads/\x00\x00a\x00 \x00\x001\x00s\n"} {
		if _, err := ParseBranches([]byte(bad)); !errors.Is(err, ErrMalformedRefs) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzParseBranches(f *testing.F) {
	f.Add([]byte(refsSample))
	f.Fuzz(func(t *testing.T, data []byte) {
		refs, err := ParseBranches(data)
		if err != nil {
			return
		}
		for _, r := range refs {
			if r.Name == "" || !strings.HasSuffix(r.Ref, r.Name) {
				t.Fatalf("bad ref %+v", r)
			}
		}
	})
}
