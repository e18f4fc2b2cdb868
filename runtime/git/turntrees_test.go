package git

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lathe/runtime/git/gittest"
	"lathe/runtime/sandbox"
)

func TestParseNameStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []TreeChange
		bad  bool
	}{
		{"empty", "", []TreeChange{}, false},
		{"each kind", "M\x00a.go\x00A\x00n/new.txt\x00D\x00old.txt\x00T\x00link\x00R100\x00c.txt\x00d.txt\x00C75\x00x\x00y\x00",
			[]TreeChange{{"a.go", Modified, ""}, {"n/new.txt", Added, ""}, {"old.txt", Deleted, ""}, {"link", Modified, ""},
				{"d.txt", Renamed, "c.txt"}, {"y", Added, ""}}, false},
		{"odd names", "M\x00a b\tc\nd\x00", []TreeChange{{"a b\tc\nd", Modified, ""}}, false},
		{"rename without its destination", "R100\x00c.txt\x00", nil, true},
		{"status without path", "M\x00", nil, true},
		{"unknown status", "X\x00a\x00", nil, true},
		{"empty status", "\x00a\x00", nil, true},
		{"empty path", "M\x00\x00", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNameStatus([]byte(tc.in))
			if tc.bad {
				if err == nil {
					t.Fatalf("parsed %q as %v", tc.in, got)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func FuzzParseNameStatus(f *testing.F) {
	f.Add([]byte("M\x00a.go\x00R100\x00c\x00d\x00"))
	f.Add([]byte("A\x00x\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := ParseNameStatus(data)
		if err != nil {
			return
		}
		for _, c := range cs {
			if c.Path == "" || c.Status == "" || (c.Status == Renamed) != (c.From != "") {
				t.Fatalf("parsed %q into %+v", data, c)
			}
		}
	})
}

// testTurnTrees: a turn's snapshots listed, diffed, kept by refs through
// git gc, and written back into the worktree without touching the index.
func testTurnTrees(t *testing.T, sb sandbox.Sandbox, base string) {
	f := newFixture(t, sb, base)
	f.write("a.txt", "a\n")
	f.write("b.txt", "b\n")
	f.write("c.txt", "a file long enough to be found again after its rename\n")
	f.commit("first")
	before, err := f.repo.Snapshot(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	f.write("a.txt", "A\n")
	os.Remove(filepath.Join(f.dir, "b.txt"))
	os.Rename(filepath.Join(f.dir, "c.txt"), filepath.Join(f.dir, "d.txt"))
	f.write("n/new.txt", "new\n")
	after, err := f.repo.Snapshot(ctx(t))
	if err != nil {
		t.Fatal(err)
	}

	got, err := f.repo.TreeChanges(ctx(t), before, after, true)
	wantChanges := []TreeChange{{"a.txt", Modified, ""}, {"b.txt", Deleted, ""}, {"d.txt", Renamed, "c.txt"}, {"n/new.txt", Added, ""}}
	if err != nil || !sameChanges(got, wantChanges) {
		t.Errorf("changes with renames: %v, %v; want %v", got, err, wantChanges)
	}
	got, err = f.repo.TreeChanges(ctx(t), before, after, false)
	wantChanges = []TreeChange{{"a.txt", Modified, ""}, {"b.txt", Deleted, ""}, {"c.txt", Deleted, ""}, {"d.txt", Added, ""}, {"n/new.txt", Added, ""}}
	if err != nil || !sameChanges(got, wantChanges) {
		t.Errorf("changes without renames: %v, %v; want %v", got, err, wantChanges)
	}
	d, err := f.repo.TreeDiff(ctx(t), before, after, "a.txt")
	if err != nil || len(d.Files) != 1 || !slices.Equal(d.Files[0].Hunks[0].Lines, []string{"-a", "+A"}) {
		t.Errorf("diff of a.txt: %+v, %v", d.Files, err)
	}
	if _, err := f.repo.TreeChanges(ctx(t), "HEAD", after, true); err == nil {
		t.Error("TreeChanges took a revision expression")
	}
	missing := strings.Repeat("1", 40)
	if _, err := f.repo.TreeChanges(ctx(t), before, missing, true); !errors.Is(err, ErrSnapshotGone) {
		t.Errorf("changes to a missing snapshot: %v", err)
	}
	if _, err := f.repo.TreeDiff(ctx(t), missing, after, "a.txt"); !errors.Is(err, ErrSnapshotGone) {
		t.Errorf("diff from a missing snapshot: %v", err)
	}
	if err := f.repo.WriteFromTree(ctx(t), missing, []string{"a.txt"}, nil); !errors.Is(err, ErrSnapshotGone) {
		t.Errorf("restore from a missing snapshot: %v", err)
	}

	// Refs keep both trees through an aggressive gc; an unreferenced
	// snapshot does not survive it (so the check can fail).
	refs := []RefValue{{"refs/lathe/turns/T1/before", before}, {"refs/lathe/turns/T1/after", after}}
	if err := f.repo.CreateRefs(ctx(t), refs); err != nil {
		t.Fatal(err)
	}
	if err := f.repo.CreateRefs(ctx(t), refs); err == nil {
		t.Error("CreateRefs replaced existing refs")
	}
	if err := f.repo.SetRefs(ctx(t), []RefValue{{"refs/lathe/turns/T2/before", after}}); err != nil {
		t.Fatal(err)
	}
	if err := f.repo.SetRefs(ctx(t), []RefValue{{"refs/lathe/turns/T2/before", before}}); err != nil {
		t.Fatal(err)
	}
	want(t, "ref set twice", f.git("rev-parse", "refs/lathe/turns/T2/before"), before+"\n")
	f.git("update-ref", "-d", "refs/lathe/turns/T2/before")
	f.write("loose.txt", "only in an unreferenced snapshot\n")
	loose, err := f.repo.Snapshot(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(f.dir, "loose.txt"))
	f.git("reflog", "expire", "--expire=now", "--all")
	f.git("gc", "-q", "--prune=now")
	for _, tree := range []string{before, after} {
		if _, err := gittest.Try(f.dir, "cat-file", "-e", tree); err != nil {
			t.Errorf("gc pruned the referenced tree %s: %v", tree, err)
		}
	}
	if _, err := gittest.Try(f.dir, "cat-file", "-e", loose); err == nil {
		t.Errorf("gc kept the unreferenced snapshot %s: the gc check proves nothing", loose)
	}

	// Write the before side back: a.txt and b.txt as they were, d.txt and
	// n/new.txt gone; the index and HEAD untouched.
	f.write("a.txt", "A edited\n")
	f.git("add", "a.txt")
	index, head := f.git("ls-files", "-s"), f.git("rev-parse", "HEAD")
	if err := f.repo.WriteFromTree(ctx(t), before, []string{"a.txt", "b.txt", "c.txt"}, []string{"d.txt", "n/new.txt", "never-there"}); err != nil {
		t.Fatal(err)
	}
	for p, w := range map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "a file long enough to be found again after its rename\n", "d.txt": "<absent>", "n/new.txt": "<absent>"} {
		want(t, p, f.worktree(p), w)
	}
	want(t, "index", f.git("ls-files", "-s"), index)
	want(t, "HEAD", f.git("rev-parse", "HEAD"), head)
	if err := f.repo.WriteFromTree(ctx(t), before, []string{"d.txt"}, nil); err == nil {
		t.Error("WriteFromTree wrote a path its tree does not hold")
	}

	// DeleteRefs deletes only refs that still name the object given.
	if err := f.repo.DeleteRefs(ctx(t), []RefValue{{"refs/lathe/turns/T1/before", after}, {"refs/lathe/turns/T1/after", after}}); err != nil {
		t.Fatal(err)
	}
	want(t, "refs left", f.git("for-each-ref", "--format=%(refname)", "refs/lathe/"), "refs/lathe/turns/T1/before\n")
}

func sameChanges(got, want []TreeChange) bool {
	slices.SortFunc(got, func(a, b TreeChange) int { return strings.Compare(a.Path, b.Path) })
	return slices.Equal(got, want)
}
