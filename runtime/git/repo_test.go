package git

// Repo against real repositories, with git running inside a real sandbox
// (containerd, namespace testNamespace). The fixtures are written and read
// back with the host's git, so each check sees what git itself records.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/runtime/git/gittest"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/sandboxtest"
)

// testNamespace is this package's own containerd namespace.
const testNamespace = "lathe-test-git"

// fixture is one repository in the shared sandbox's working directory.
type fixture struct {
	t    *testing.T
	dir  string
	repo *Repo
}

func newFixture(t *testing.T, sb sandbox.Sandbox, base string) *fixture {
	t.Helper()
	dir, err := os.MkdirTemp(base, "repo-")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, repo: Open(sb, dir)}
	f.git("init", "-q", "-b", "main")
	return f
}

// git runs the host's git in the fixture and returns its stdout.
func (f *fixture) git(args ...string) string {
	f.t.Helper()
	return gittest.Run(f.t, f.dir, args...)
}

func (f *fixture) write(path, content string) {
	f.t.Helper()
	gittest.Write(f.t, f.dir, map[string]string{path: content})
}

func (f *fixture) commit(msg string) {
	f.t.Helper()
	f.git("add", "-A")
	f.git("commit", "-q", "--allow-empty", "-m", msg)
}

// index is path's content in the index, or "<absent>".
func (f *fixture) index(path string) string {
	out, err := gittest.Try(f.dir, "cat-file", "blob", ":"+path)
	if err != nil {
		return "<absent>"
	}
	return out
}

// worktree is path's content on disk, or "<absent>".
func (f *fixture) worktree(path string) string {
	b, err := os.ReadFile(filepath.Join(f.dir, path))
	if err != nil {
		return "<absent>"
	}
	return string(b)
}

// short is `git status --short` as one line per path, for assertions.
func (f *fixture) short() string {
	return strings.TrimRight(f.git("status", "--short", "-uall", "--no-renames"), "\n")
}

func ctx(t *testing.T) context.Context { return sandboxtest.Context(t, time.Minute) }

// TestRepo runs every Repo test in one sandbox.
func TestRepo(t *testing.T) {
	sb, spec := containerdtest.ReadySandbox(t, testNamespace)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, sb sandbox.Sandbox, base string)
	}{
		{"hunks", testHunks},
		{"status", testStatus},
		{"status leaves the index", testStatusLeavesIndex},
		{"not a repository", testNotRepository},
		{"stage and unstage", testStageUnstage},
		{"discard", testDiscard},
		{"checkout", testCheckout},
		{"commit", testCommit},
		{"status token", testStatusToken},
		{"branches", testBranches},
		{"hostile config", testHostileConfig},
		{"snapshots", testSnapshots},
		{"turn trees", testTurnTrees},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, sb, spec.WorkingDir) })
	}
}

// testHunks stages, unstages and discards single hunks of every kind of
// change, each against a fresh repository.
func testHunks(t *testing.T, sb sandbox.Sandbox, base string) {
	twenty := gittest.Lines(20, nil)
	edited := gittest.Lines(20, map[int]string{2: "two", 18: "eighteen"})
	for _, tc := range []struct {
		name   string
		setup  func(f *fixture) // after the first commit of "base.txt"
		path   string
		action string
		index  int
		header string
		hunks  int   // how many hunks Changes lists
		err    error // wanted error class; then nothing may change
		check  func(t *testing.T, f *fixture)
	}{
		{name: "stage the second of two hunks", path: "base.txt", action: HunkStage, index: 1, hunks: 2,
			setup: func(f *fixture) { f.write("base.txt", edited) },
			check: func(t *testing.T, f *fixture) {
				want(t, "index", f.index("base.txt"), gittest.Lines(20, map[int]string{18: "eighteen"}))
				want(t, "worktree", f.worktree("base.txt"), edited)
			}},
		{name: "stage the first hunk, checking its header", path: "base.txt", action: HunkStage, index: 0, header: "@@ -1,5 +1,5 @@", hunks: 2,
			setup: func(f *fixture) { f.write("base.txt", edited) },
			check: func(t *testing.T, f *fixture) {
				want(t, "index", f.index("base.txt"), gittest.Lines(20, map[int]string{2: "two"}))
			}},
		{name: "a stale header is refused", path: "base.txt", action: HunkStage, index: 0, header: "@@ -1,5 +1,6 @@", hunks: 2, err: ErrHunkChanged,
			setup: func(f *fixture) { f.write("base.txt", edited) }},
		{name: "an index past the end", path: "base.txt", action: HunkStage, index: 2, hunks: 2, err: ErrNoHunk,
			setup: func(f *fixture) { f.write("base.txt", edited) }},
		{name: "unstage one of two staged hunks", path: "base.txt", action: HunkUnstage, index: 0, hunks: 2,
			setup: func(f *fixture) { f.write("base.txt", edited); f.git("add", "base.txt") },
			check: func(t *testing.T, f *fixture) {
				want(t, "index", f.index("base.txt"), gittest.Lines(20, map[int]string{18: "eighteen"}))
				want(t, "worktree", f.worktree("base.txt"), edited)
			}},
		{name: "discard one of two hunks", path: "base.txt", action: HunkDiscard, index: 1, hunks: 2,
			setup: func(f *fixture) { f.write("base.txt", edited) },
			check: func(t *testing.T, f *fixture) {
				want(t, "index", f.index("base.txt"), twenty)
				want(t, "worktree", f.worktree("base.txt"), gittest.Lines(20, map[int]string{2: "two"}))
			}},
		{name: "stage an untracked file", path: "new.txt", action: HunkStage, hunks: 1,
			setup: func(f *fixture) { f.write("new.txt", "fresh\nfile\n") },
			check: func(t *testing.T, f *fixture) {
				want(t, "index", f.index("new.txt"), "fresh\nfile\n")
				want(t, "status", f.short(), "A  new.txt")
			}},
		{name: "discard an untracked file", path: "new.txt", action: HunkDiscard, hunks: 1,
			setup: func(f *fixture) { f.write("new.txt", "fresh\n") },
			check: func(t *testing.T, f *fixture) { want(t, "worktree", f.worktree("new.txt"), "<absent>") }},
		{name: "unstage a staged new file", path: "new.txt", action: HunkUnstage, hunks: 1,
			setup: func(f *fixture) { f.write("new.txt", "fresh\n"); f.git("add", "new.txt") },
			check: func(t *testing.T, f *fixture) {
				want(t, "index", f.index("new.txt"), "<absent>")
				want(t, "status", f.short(), "?? new.txt")
			}},
		{name: "stage a deletion", path: "base.txt", action: HunkStage, hunks: 1,
			setup: func(f *fixture) { os.Remove(filepath.Join(f.dir, "base.txt")) },
			check: func(t *testing.T, f *fixture) { want(t, "status", f.short(), "D  base.txt") }},
		{name: "unstage a deletion", path: "base.txt", action: HunkUnstage, hunks: 1,
			setup: func(f *fixture) { f.git("rm", "-q", "base.txt") },
			check: func(t *testing.T, f *fixture) {
				want(t, "index", f.index("base.txt"), twenty)
				want(t, "status", f.short(), " D base.txt")
			}},
		{name: "discard a deletion", path: "base.txt", action: HunkDiscard, hunks: 1,
			setup: func(f *fixture) { os.Remove(filepath.Join(f.dir, "base.txt")) },
			check: func(t *testing.T, f *fixture) {
				want(t, "worktree", f.worktree("base.txt"), twenty)
				want(t, "status", f.short(), "")
			}},
		{name: "a binary change has no hunks", path: "bin.dat", action: HunkStage, hunks: 0, err: ErrBinary,
			setup: func(f *fixture) {
				f.write("bin.dat", "\x00\x01\x02")
				f.commit("bin")
				f.write("bin.dat", "\x00\x01\x03")
			}},
		{name: "an untracked binary file has no hunks", path: "bin.dat", action: HunkStage, hunks: 0, err: ErrBinary,
			setup: func(f *fixture) { f.write("bin.dat", "\x00\xff") }},
		{name: "unstage one edit of a staged rename", path: "moved.txt", action: HunkUnstage, index: 0, hunks: 2,
			setup: func(f *fixture) {
				f.git("mv", "base.txt", "moved.txt")
				f.write("moved.txt", edited)
				f.git("add", "moved.txt")
			},
			check: func(t *testing.T, f *fixture) {
				want(t, "index", f.index("moved.txt"), gittest.Lines(20, map[int]string{18: "eighteen"}))
				want(t, "index of the source", f.index("base.txt"), "<absent>")
				want(t, "worktree", f.worktree("moved.txt"), edited)
				if rn := f.git("diff", "--cached", "-M", "--name-status"); !strings.HasPrefix(rn, "R") || !strings.HasSuffix(rn, "\tbase.txt\tmoved.txt\n") {
					t.Errorf("the rename is no longer staged: %q", rn)
				}
			}},
		{name: "a file without a trailing newline", path: "noeol.txt", action: HunkStage, hunks: 1,
			setup: func(f *fixture) { f.write("noeol.txt", "a\nlast"); f.commit("noeol"); f.write("noeol.txt", "a\nlast!") },
			check: func(t *testing.T, f *fixture) { want(t, "index", f.index("noeol.txt"), "a\nlast!") }},
		{name: "adding a trailing newline", path: "noeol.txt", action: HunkStage, hunks: 1,
			setup: func(f *fixture) {
				f.write("noeol.txt", "a\nlast")
				f.commit("noeol")
				f.write("noeol.txt", "a\nlast\n")
			},
			check: func(t *testing.T, f *fixture) { want(t, "index", f.index("noeol.txt"), "a\nlast\n") }},
		{name: "a CRLF file keeps its CRs", path: "crlf.txt", action: HunkStage, index: 1, hunks: 2,
			setup: func(f *fixture) {
				f.write("crlf.txt", strings.ReplaceAll(twenty, "\n", "\r\n"))
				f.commit("crlf")
				f.write("crlf.txt", strings.ReplaceAll(edited, "\n", "\r\n"))
			},
			check: func(t *testing.T, f *fixture) {
				want(t, "index", f.index("crlf.txt"), strings.ReplaceAll(gittest.Lines(20, map[int]string{18: "eighteen"}), "\n", "\r\n"))
			}},
		{name: "a path with spaces", path: "my dir/my file.txt", action: HunkStage, index: 1, hunks: 2,
			setup: func(f *fixture) {
				f.write("my dir/my file.txt", twenty)
				f.commit("spaces")
				f.write("my dir/my file.txt", edited)
			},
			check: func(t *testing.T, f *fixture) {
				want(t, "index", f.index("my dir/my file.txt"), gittest.Lines(20, map[int]string{18: "eighteen"}))
			}},
		{name: "a unicode path", path: "ünïcødé/文件.txt", action: HunkDiscard, index: 0, hunks: 2,
			setup: func(f *fixture) {
				f.write("ünïcødé/文件.txt", twenty)
				f.commit("unicode")
				f.write("ünïcødé/文件.txt", edited)
			},
			check: func(t *testing.T, f *fixture) {
				want(t, "worktree", f.worktree("ünïcødé/文件.txt"), gittest.Lines(20, map[int]string{18: "eighteen"}))
			}},
		{name: "a path git quotes", path: "we\"ird\tna\\me", action: HunkStage, hunks: 1,
			setup: func(f *fixture) {
				f.write("we\"ird\tna\\me", "x\n")
				f.commit("quoted")
				f.write("we\"ird\tna\\me", "y\n")
			},
			check: func(t *testing.T, f *fixture) { want(t, "index", f.index("we\"ird\tna\\me"), "y\n") }},
		{name: "an untracked file with spaces", path: "new dir/new file.txt", action: HunkStage, hunks: 1,
			setup: func(f *fixture) { f.write("new dir/new file.txt", "n\n") },
			check: func(t *testing.T, f *fixture) { want(t, "index", f.index("new dir/new file.txt"), "n\n") }},
		{name: "a mode change stays unstaged", path: "base.txt", action: HunkStage, index: 0, hunks: 2,
			setup: func(f *fixture) { f.write("base.txt", edited); os.Chmod(filepath.Join(f.dir, "base.txt"), 0o755) },
			check: func(t *testing.T, f *fixture) {
				want(t, "index", f.index("base.txt"), gittest.Lines(20, map[int]string{2: "two"}))
				want(t, "index mode", strings.Fields(f.git("ls-files", "-s", "base.txt"))[0], "100644")
			}},
		{name: "a file becoming a symlink: its deletion alone", path: "base.txt", action: HunkStage, index: 0, hunks: 2,
			setup: func(f *fixture) {
				os.Remove(filepath.Join(f.dir, "base.txt"))
				os.Symlink("elsewhere", filepath.Join(f.dir, "base.txt"))
			},
			check: func(t *testing.T, f *fixture) { want(t, "status", f.short(), "D  base.txt\n?? base.txt") }},
		{name: "an untracked directory", path: "newdir", action: HunkStage, err: ErrUntrackedDir,
			setup: func(f *fixture) { f.write("newdir/a", "a\n"); f.write("newdir/b", "b\n") }},
		{name: "a clean path has no hunks", path: "base.txt", action: HunkStage, err: ErrNoHunk, setup: func(*fixture) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, sb, base)
			f.write("base.txt", twenty)
			f.commit("base")
			tc.setup(f)
			c, err := f.repo.Changes(ctx(t), tc.path, tc.action == HunkUnstage)
			switch {
			case errors.Is(err, ErrUntrackedDir) && errors.Is(tc.err, ErrUntrackedDir):
				return
			case err != nil:
				t.Fatalf("Changes: %v", err)
			}
			n := 0
			for _, fd := range c.Files {
				n += len(fd.Hunks)
			}
			if n != tc.hunks {
				t.Fatalf("Changes lists %d hunks, want %d:\n%s", n, tc.hunks, c.Raw)
			}
			before, idxBefore := f.short(), f.git("ls-files", "-s")
			h, err := f.repo.ApplyHunk(ctx(t), tc.path, tc.index, tc.header, tc.action)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("ApplyHunk: %v, want %v", err, tc.err)
				}
				want(t, "status", f.short(), before)
				want(t, "index", f.git("ls-files", "-s"), idxBefore)
				return
			}
			if err != nil {
				t.Fatalf("ApplyHunk: %v", err)
			}
			if !strings.HasPrefix(h.Header, "@@ ") {
				t.Errorf("returned hunk %+v", h)
			}
			tc.check(t, f)
		})
	}
}

func want(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// testStatusLeavesIndex: a status never writes the index, not even to
// refresh stale stat data, so it never holds index.lock while the user's
// or the Agent's own git command needs it ("Unable to create index.lock").
func testStatusLeavesIndex(t *testing.T, sb sandbox.Sandbox, base string) {
	f := newFixture(t, sb, base)
	f.write("a.txt", "a\n")
	f.commit("first")
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(f.dir, "a.txt"), later, later); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(f.dir, ".git", "index")
	before, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := f.repo.Status(ctx(t)); err != nil || len(st.Entries) != 0 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	if after, _ := os.ReadFile(index); !bytes.Equal(after, before) {
		t.Error("status rewrote the index")
	}
}

func testStatus(t *testing.T, sb sandbox.Sandbox, base string) {
	f := newFixture(t, sb, base)
	st, err := f.repo.Status(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Branch != (Branch{Head: "main", Initial: true}) || len(st.Entries) != 0 {
		t.Errorf("empty repository: %+v", st)
	}
	f.write("a.txt", "a\n")
	f.write("b.txt", "b\n")
	f.write("gone.txt", "g\n")
	f.write(".gitignore", "*.log\n")
	f.commit("first")
	f.write("a.txt", "A\n")
	f.git("add", "a.txt")
	f.write("a.txt", "AA\n")
	f.git("mv", "b.txt", "c d.txt")
	os.Remove(filepath.Join(f.dir, "gone.txt"))
	f.write("new/ü.txt", "u\n")
	f.write("x.log", "ignored\n")
	// The sandbox's uid owns nothing here: safe.directory lets git in.
	// (The root is readable by all: a user namespace gives the sandbox no
	// power over files of uids it does not map.)
	if err := os.Chmod(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(f.dir, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	st, err = f.repo.Status(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []File
	for _, e := range st.Entries {
		got = append(got, e.File())
	}
	wantFiles := []File{
		{Path: "a.txt", Staged: "modified", Unstaged: "modified"},
		{Path: "c d.txt", OrigPath: "b.txt", Staged: "renamed"},
		{Path: "gone.txt", Unstaged: "deleted"},
		{Path: "new/ü.txt", Unstaged: "untracked"},
	}
	if !slices.Equal(got, wantFiles) || st.Branch.Head != "main" || st.Branch.Initial || len(st.Branch.Commit) != 40 {
		t.Errorf("status %+v\nfiles %+v\nwant  %+v", st.Branch, got, wantFiles)
	}
	// Limited to a path.
	st, err = f.repo.Status(ctx(t), "new")
	if err != nil || len(st.Entries) != 1 || st.Entries[0].Path != "new/ü.txt" {
		t.Errorf("status of new/: %+v, %v", st.Entries, err)
	}
}

func testNotRepository(t *testing.T, sb sandbox.Sandbox, base string) {
	plain, err := os.MkdirTemp(base, "plain-")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(sb, plain).Status(ctx(t)); !errors.Is(err, ErrNotRepository) {
		t.Errorf("plain directory: %v", err)
	}
	// A repository above the root is not the root's: discovery stops there.
	f := newFixture(t, sb, base)
	f.write("sub/x", "x\n")
	f.commit("x")
	for name, op := range map[string]func(r *Repo) error{
		"status":   func(r *Repo) error { _, err := r.Status(ctx(t)); return err },
		"stage":    func(r *Repo) error { return r.Stage(ctx(t), nil) },
		"changes":  func(r *Repo) error { _, err := r.Changes(ctx(t), "x", false); return err },
		"branches": func(r *Repo) error { _, _, err := r.Branches(ctx(t)); return err },
		"commit":   func(r *Repo) error { _, err := r.Commit(ctx(t), "m", true, Identity{"L", "l@l"}); return err },
	} {
		if err := op(Open(sb, filepath.Join(f.dir, "sub"))); !errors.Is(err, ErrNotRepository) {
			t.Errorf("%s in a subdirectory of a repository: %v", name, err)
		}
	}
	// A bare repository planted in the root is never discovered.
	bare, _ := os.MkdirTemp(base, "bare-")
	if out, err := exec.Command("git", "init", "-q", "--bare", bare).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := Open(sb, bare).Status(ctx(t)); err == nil {
		t.Error("a bare repository was used as the root's")
	}
}

func testStageUnstage(t *testing.T, sb sandbox.Sandbox, base string) {
	f := newFixture(t, sb, base)
	// Unstage on an unborn branch removes from the index.
	f.write("a.txt", "a\n")
	f.git("add", "a.txt")
	if err := f.repo.Unstage(ctx(t), []string{"a.txt"}); err != nil {
		t.Fatal(err)
	}
	want(t, "unborn unstage", f.short(), "?? a.txt")
	f.write("b c.txt", "b\n")
	f.write("ü.txt", "u\n")
	f.write("star*.txt", "s\n")
	if err := f.repo.Stage(ctx(t), []string{"b c.txt", "ü.txt"}); err != nil {
		t.Fatal(err)
	}
	want(t, "staged two", f.short(), "A  \"b c.txt\"\nA  ü.txt\n?? a.txt\n?? star*.txt")
	// Pathspecs are literal: no glob, no magic.
	for _, p := range []string{"*.txt", ":(top)a.txt", ":/a.txt", "a.*"} {
		if err := f.repo.Stage(ctx(t), []string{p}); !errors.Is(err, ErrNoMatch) {
			t.Errorf("stage %q: %v, want ErrNoMatch", p, err)
		}
	}
	if err := f.repo.Stage(ctx(t), []string{"star*.txt"}); err != nil {
		t.Fatal(err)
	}
	want(t, "literal star", f.short(), "A  \"b c.txt\"\nA  star*.txt\nA  ü.txt\n?? a.txt")
	if err := f.repo.Stage(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	want(t, "stage all", f.short(), "A  a.txt\nA  \"b c.txt\"\nA  star*.txt\nA  ü.txt")
	f.commit("all")
	f.write("a.txt", "A\n")
	os.Remove(filepath.Join(f.dir, "b c.txt"))
	if err := f.repo.Stage(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	want(t, "stage changes and deletions", f.short(), "M  a.txt\nD  \"b c.txt\"")
	if err := f.repo.Unstage(ctx(t), []string{"b c.txt"}); err != nil {
		t.Fatal(err)
	}
	want(t, "unstage one", f.short(), "M  a.txt\n D \"b c.txt\"")
	if err := f.repo.Unstage(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	want(t, "unstage all", f.short(), " M a.txt\n D \"b c.txt\"")
	if err := f.repo.Stage(ctx(t), []string{"nope.txt"}); !errors.Is(err, ErrNoMatch) {
		t.Errorf("stage a missing path: %v", err)
	}
}

func testDiscard(t *testing.T, sb sandbox.Sandbox, base string) {
	f := newFixture(t, sb, base)
	f.write("a.txt", "a\n")
	f.write("b.txt", "b\n")
	f.write("s.txt", "s\n")
	f.commit("first")
	f.write("a.txt", "A\n")
	os.Remove(filepath.Join(f.dir, "b.txt"))
	f.write("s.txt", "S\n")
	f.git("add", "s.txt")
	f.write("s.txt", "SS\n")
	f.write("new/n.txt", "n\n")
	f.write("keep.txt", "k\n")
	got, err := f.repo.Discard(ctx(t), "a.txt")
	if err != nil || !slices.Equal(got, []string{"a.txt"}) {
		t.Fatalf("discard a.txt: %v, %v", got, err)
	}
	want(t, "a.txt", f.worktree("a.txt"), "a\n")
	got, err = f.repo.Discard(ctx(t), "new")
	if err != nil || !slices.Equal(got, []string{"new/n.txt"}) {
		t.Fatalf("discard new/: %v, %v", got, err)
	}
	got, err = f.repo.Discard(ctx(t), "")
	if err != nil || !slices.Equal(got, []string{"b.txt", "s.txt", "keep.txt"}) {
		t.Fatalf("discard all: %v, %v", got, err)
	}
	want(t, "staged change stays", f.short(), "M  s.txt")
	want(t, "s.txt", f.worktree("s.txt"), "S\n")
	want(t, "b.txt", f.worktree("b.txt"), "b\n")
	if got, err := f.repo.Discard(ctx(t), ""); err != nil || len(got) != 0 {
		t.Errorf("nothing left to discard: %v, %v", got, err)
	}
}

func testCheckout(t *testing.T, sb sandbox.Sandbox, base string) {
	f := newFixture(t, sb, base)
	f.write("a.txt", "a\n")
	f.commit("first")
	first := strings.TrimSpace(f.git("rev-parse", "HEAD"))
	f.git("branch", "feature")
	f.write("a.txt", "a2\n")
	f.commit("second")
	h, err := f.repo.Checkout(ctx(t), "feature")
	if err != nil || h != (Head{Commit: first, Branch: "feature"}) {
		t.Fatalf("checkout feature: %+v, %v", h, err)
	}
	want(t, "a.txt", f.worktree("a.txt"), "a\n")
	h, err = f.repo.Checkout(ctx(t), "main~0")
	if err != nil || !h.Detached || h.Branch != "" {
		t.Fatalf("checkout a commit: %+v, %v", h, err)
	}
	if _, err := f.repo.Checkout(ctx(t), "nope"); !errors.Is(err, ErrUnknownRef) {
		t.Errorf("unknown ref: %v", err)
	}
	f.write("a.txt", "local\n")
	var gerr *Error
	if _, err := f.repo.Checkout(ctx(t), "feature"); !errors.As(err, &gerr) || !strings.Contains(gerr.Stderr, "would be overwritten") {
		t.Errorf("checkout over local changes: %v", err)
	}
	want(t, "local change kept", f.worktree("a.txt"), "local\n")
}

// testStatusToken: a token names the checkout's state, content included;
// StageAllExactly stages only the state a token covers, and otherwise
// leaves the index as it was.
func testStatusToken(t *testing.T, sb sandbox.Sandbox, base string) {
	f := newFixture(t, sb, base)
	f.write("a.txt", "a\n")
	f.commit("first")
	f.write("a.txt", "a2\n")
	f.write("new.txt", "new\n")
	f.git("add", "new.txt")
	_, token, err := f.repo.StatusToken(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := f.repo.CheckStatusToken(ctx(t), token)
	if err != nil || tree == "" {
		t.Fatalf("unchanged checkout: %q, %v", tree, err)
	}
	for name, change := range map[string]func(){
		"content of a listed file": func() { f.write("a.txt", "a3\n") },
		"a new file":               func() { f.write("other.txt", "x\n") },
		"the index":                func() { f.git("add", "a.txt") },
	} {
		saved := f.git("ls-files", "-s")
		change()
		if _, err := f.repo.CheckStatusToken(ctx(t), token); !errors.Is(err, ErrStatusChanged) {
			t.Errorf("after a change to %s: %v, want ErrStatusChanged", name, err)
		}
		f.git("reset", "-q")
		f.git("add", "new.txt")
		f.write("a.txt", "a2\n")
		_ = os.Remove(filepath.Join(f.dir, "other.txt"))
		if now := f.git("ls-files", "-s"); now != saved {
			t.Fatalf("fixture not restored: %q, want %q", now, saved)
		}
	}
	// The worktree changes after the check: the index is left as it was.
	f.write("a.txt", "a4\n")
	if err := f.repo.StageAllExactly(ctx(t), tree); !errors.Is(err, ErrStatusChanged) {
		t.Fatalf("StageAllExactly after a write: %v", err)
	}
	want(t, "index of a.txt", f.index("a.txt"), "a\n")
	want(t, "index of new.txt", f.index("new.txt"), "new\n")
	f.write("a.txt", "a2\n")
	if err := f.repo.StageAllExactly(ctx(t), tree); err != nil {
		t.Fatal(err)
	}
	want(t, "index of a.txt", f.index("a.txt"), "a2\n")
}

func testCommit(t *testing.T, sb sandbox.Sandbox, base string) {
	f := newFixture(t, sb, base)
	if _, err := f.repo.Commit(ctx(t), "", false, Identity{"Lathe", "lathe@localhost"}); !errors.Is(err, ErrNothingToCommit) {
		t.Fatalf("empty commit: %v", err)
	}
	f.write("a.txt", "a\n")
	f.write("b.txt", "b\n")
	f.git("add", "a.txt")
	c, err := f.repo.Commit(ctx(t), "", false, Identity{"Lathe", "lathe@localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "Update a.txt" || !slices.Equal(c.Paths, []string{"a.txt"}) || c.Branch != "main" || len(c.Commit) != 40 {
		t.Errorf("commit %+v", c)
	}
	want(t, "HEAD", strings.TrimSpace(f.git("rev-parse", "HEAD")), c.Commit)
	want(t, "author", f.git("log", "-1", "--format=%an <%ae>|%cn <%ce>|%B"), "Lathe <lathe@localhost>|Lathe <lathe@localhost>|Update a.txt\n\n")
	want(t, "b.txt is left out", f.short(), "?? b.txt")
	// stage_all, a message of its own (kept as given, "#" lines too), and the
	// repository's own identity.
	f.git("config", "user.name", "Repo Owner")
	f.git("config", "user.email", "owner@example.org")
	f.write("a.txt", "A\n")
	c, err = f.repo.Commit(ctx(t), "Fix #12\n\n# not a comment\n", true, Identity{"Lathe", "lathe@localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "Fix #12" || !slices.Equal(c.Paths, []string{"a.txt", "b.txt"}) {
		t.Errorf("commit %+v", c)
	}
	want(t, "repo identity", f.git("log", "-1", "--format=%an <%ae>|%B"), "Repo Owner <owner@example.org>|Fix #12\n\n# not a comment\n\n")
	want(t, "clean", f.short(), "")
}

func testBranches(t *testing.T, sb sandbox.Sandbox, base string) {
	f := newFixture(t, sb, base)
	refs, h, err := f.repo.Branches(ctx(t))
	if err != nil || len(refs) != 0 || h != (Head{Branch: "main"}) {
		t.Fatalf("unborn: %+v %+v %v", refs, h, err)
	}
	f.write("a", "a\n")
	f.commit("Initial commit")
	f.git("branch", "feature/ü")
	f.git("update-ref", "refs/remotes/origin/main", "HEAD")
	f.git("symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
	refs, h, err = f.repo.Branches(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range refs {
		names = append(names, fmt.Sprintf("%s:%v:%v:%s", r.Name, r.Current, r.Remote, r.Subject))
	}
	if !slices.Equal(names, []string{"feature/ü:false:false:Initial commit", "main:true:false:Initial commit", "origin/main:false:true:Initial commit"}) {
		t.Errorf("branches %v", names)
	}
	if h.Branch != "main" || h.Detached || h.Commit != refs[1].Commit {
		t.Errorf("head %+v", h)
	}
}

// testHostileConfig: a repository whose config names programs (a hook, an
// fsmonitor, a signing program, an external diff, a textconv, a pager) and
// another worktree gets none of them run, and its own root used.
func testHostileConfig(t *testing.T, sb sandbox.Sandbox, base string) {
	f := newFixture(t, sb, base)
	marker := filepath.Join(f.dir, "pwned")
	hooks := filepath.Join(f.dir, ".git", "hooks")
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "post-checkout", "post-index-change"} {
		if err := os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\necho "+h+" >> "+marker+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	evil := "!echo ran >> " + marker + "; false"
	f.write("a.txt", "a\n")
	f.write("b.bin", "b\n")
	f.write(".gitattributes", "*.bin diff=evil\n")
	f.commit("first")
	for _, kv := range [][2]string{
		{"core.fsmonitor", "echo fsmonitor >> " + marker},
		{"commit.gpgSign", "true"},
		{"gpg.program", "/bin/sh -c 'echo gpg >> " + marker + "'"},
		{"diff.external", "sh -c 'echo extdiff >> " + marker + "'"},
		{"diff.evil.textconv", "sh -c 'echo textconv >> " + marker + "'"},
		{"diff.evil.command", "sh -c 'echo evildiff >> " + marker + "'"},
		{"core.pager", "sh -c 'echo pager >> " + marker + "'"},
		{"core.worktree", "/"},
		{"alias.status", evil},
		{"diff.noprefix", "true"},
		{"diff.mnemonicPrefix", "true"},
		{"apply.whitespace", "error"},
	} {
		f.git("config", kv[0], kv[1])
	}
	f.write("a.txt", "a \nmore \n") // trailing whitespace, for apply.whitespace=error
	f.write("b.bin", "B\n")
	r := f.repo
	if st, err := r.Status(ctx(t)); err != nil || len(st.Entries) != 2 {
		b, _ := os.ReadFile(marker)
		t.Fatalf("status: %+v, %v; marker: %s", st, err, b)
	}
	for _, p := range []string{"a.txt", "b.bin"} {
		c, err := r.Changes(ctx(t), p, false)
		if err != nil || len(c.Files) != 1 || len(c.Files[0].Hunks) != 1 {
			t.Fatalf("changes of %s: %+v, %v\n%s", p, c, err, c.Raw)
		}
	}
	if _, err := r.ApplyHunk(ctx(t), "a.txt", 0, "", HunkStage); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit(ctx(t), "evil", true, Identity{"Lathe", "lathe@localhost"}); err != nil {
		t.Fatal(err)
	}
	f.git("branch", "other", "HEAD~1")
	if _, err := r.Checkout(ctx(t), "other"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Snapshot(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("the repository ran its programs:\n%s", b)
	}
	want(t, "signed", f.git("log", "-1", "--format=%G?", "main"), "N\n")
}

func testSnapshots(t *testing.T, sb sandbox.Sandbox, base string) {
	f := newFixture(t, sb, base)
	empty, err := f.repo.Snapshot(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	f.write("a.txt", "a\n")
	f.write("b.txt", "b\n")
	f.write("x.log", "ignored\n")
	f.write(".gitignore", "*.log\n")
	f.commit("first")
	f.write("a.txt", "A\n")
	f.git("add", "a.txt")
	before, err := f.repo.Snapshot(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	status, index := f.short(), f.git("ls-files", "-s")
	f.write("b.txt", "B\n")
	f.write("new/n.txt", "n\n")
	f.write("y.log", "ignored\n")
	after, err := f.repo.Snapshot(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := f.repo.Snapshot(ctx(t)); err != nil || again != after {
		t.Errorf("the same worktree snapshots as %s, then %s (%v)", after, again, err)
	}
	got, err := f.repo.ChangedPaths(ctx(t), before, after)
	if err != nil || !slices.Equal(got, []string{"b.txt", "new/n.txt"}) {
		t.Errorf("changed between snapshots: %v, %v", got, err)
	}
	got, err = f.repo.ChangedPaths(ctx(t), empty, before)
	if err != nil || !slices.Equal(got, []string{".gitignore", "a.txt", "b.txt"}) {
		t.Errorf("changed since the empty snapshot: %v, %v", got, err)
	}
	// Snapshots change neither the index nor the status.
	f.write("b.txt", "b\n")
	os.RemoveAll(filepath.Join(f.dir, "new"))
	want(t, "status", f.short(), status)
	want(t, "index", f.git("ls-files", "-s"), index)
	if _, err := f.repo.ChangedPaths(ctx(t), "HEAD", after); err == nil {
		t.Error("ChangedPaths took a revision expression")
	}
}
