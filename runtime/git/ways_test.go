package git

import (
	"os"
	"path/filepath"
	"testing"

	"lathe/runtime/git/gittest"

	"lathe/runtime/sandbox/containerd/containerdtest"
)

// TestWaysOps: a snapshot commit leaves the index, HEAD and branches alone;
// the patch between two snapshots applies to another worktree alone; a
// half-applied patch is undone by RestorePaths and then applies.
func TestWaysOps(t *testing.T) {
	sb, spec := containerdtest.ReadySandbox(t, testNamespace)
	primary := newFixture(t, sb, spec.WorkingDir)
	primary.write("a.txt", "a\n")
	primary.write("gone.txt", "gone\n")
	primary.commit("first")
	primary.write("a.txt", "a staged\n")
	primary.git("add", "a.txt")
	primary.write("untracked.txt", "u\n")
	statusBefore, headBefore := primary.short(), primary.git("rev-parse", "HEAD")

	ref := "refs/lathe/ways/01TEST"
	commit, tree, err := primary.repo.SnapshotCommit(ctx(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	if got := primary.short(); got != statusBefore {
		t.Errorf("status after the snapshot commit: %q, want %q", got, statusBefore)
	}
	if got := primary.git("rev-parse", "HEAD"); got != headBefore {
		t.Errorf("HEAD moved: %s", got)
	}
	if got := primary.git("rev-parse", ref); got != commit+"\n" {
		t.Errorf("ref = %q, want %s", got, commit)
	}
	if content, ok, err := primary.repo.Show(ctx(t), commit, "untracked.txt"); err != nil || !ok || string(content) != "u\n" {
		t.Errorf("the snapshot's untracked file: %q %v %v", content, ok, err)
	}
	if _, ok, err := primary.repo.Show(ctx(t), tree, "missing.txt"); ok || err != nil {
		t.Errorf("a missing path: ok=%v err=%v", ok, err)
	}

	// A lane: a full copy, changed.
	lane := newFixture(t, sb, spec.WorkingDir)
	lane.git("fetch", "-q", primary.dir, ref)
	lane.git("read-tree", "-u", "--reset", commit)
	lane.write("a.txt", "a from the lane\n")
	lane.write("new/b.bin", "\x00\x01binary\n")
	if err := removeFile(lane.dir, "gone.txt"); err != nil {
		t.Fatal(err)
	}
	after, err := lane.repo.Snapshot(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := lane.repo.Patch(ctx(t), tree, after)
	if err != nil {
		t.Fatal(err)
	}
	// Half-applied: one file written, the rest not.
	primary.write("new/b.bin", "partial")
	if err := primary.repo.ApplyPatch(ctx(t), patch); err == nil {
		t.Fatal("a patch applied over a half-applied state")
	}
	if err := primary.repo.RestorePaths(ctx(t), commit, []string{"a.txt", "new/b.bin", "gone.txt"}); err != nil {
		t.Fatal(err)
	}
	if err := primary.repo.ApplyPatch(ctx(t), patch); err != nil {
		t.Fatal(err)
	}
	got, err := primary.repo.Snapshot(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got != after {
		t.Errorf("primary after the patch: tree %s, want the lane's %s", got, after)
	}
	if idx := primary.index("a.txt"); idx != "a staged\n" {
		t.Errorf("the index changed: %q", idx)
	}
	if err := primary.repo.DeleteRef(ctx(t), ref); err != nil {
		t.Fatal(err)
	}
	if out, err := tryGit(primary.dir, "rev-parse", "-q", "--verify", ref); err == nil {
		t.Errorf("ref still there: %s", out)
	}
	if _, _, err := primary.repo.SnapshotCommit(ctx(t), "refs/heads/main"); err == nil {
		t.Error("SnapshotCommit wrote a branch")
	}
}

func removeFile(dir, name string) error { return os.Remove(filepath.Join(dir, name)) }

func tryGit(dir string, args ...string) (string, error) { return gittest.Try(dir, args...) }
