package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/snapshots"

	"lathe/runtime/git/gittest"
	"lathe/runtime/lanefs"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
)

// mountsUnder lists the mount points at or under dir.
func mountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	m, err := lanefs.MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// laneSnapshots lists the container snapshots of a set's lanes.
func (r *waysRig) laneSnapshots(t testing.TB, set string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	err := r.cl.SnapshotService("overlayfs").Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if strings.Contains(info.Name, set) {
			keys = append(keys, info.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list snapshots: %v", err)
	}
	return keys
}

// TestWaysOverlayLanes runs four lanes over one frozen base of the
// checkout, each on its own overlay: one lane rewrites, deletes and adds
// files, the primary checkout is then rewritten in place, loses a file and
// gains one, and another lane, looking afterwards, sees the checkout as it
// was at the start and nothing of either. Discard of the four lanes (two
// still running) then leaves no container, snapshot, copy or mount.
func TestWaysOverlayLanes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("overlay lanes need root")
	}
	release := make(chan struct{})
	r := newWaysRig(t, fakellm.Script{Turns: []fakellm.Turn{
		{Model: "m1", Steps: []fakellm.Step{fakellm.ToolCall("c1", "shell", `{"command":"echo zero > a.txt && rm dir/b.txt && echo 0 > lane0.txt"}`)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("lane 0 done")}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Stall(release), fakellm.ToolCall("d1", "shell", `{"command":"cat a.txt dir/b.txt; ls -a"}`)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("lane 1 done")}},
		{Model: "m3", Steps: []fakellm.Step{fakellm.Text("working"), fakellm.Stall(nil)}},
		{Model: "m4", Steps: []fakellm.Step{fakellm.Text("working"), fakellm.Stall(nil)}},
	}})
	write(t, filepath.Join(r.dir, "a.txt"), "a\n")
	mkdir(t, filepath.Join(r.dir, "dir"))
	write(t, filepath.Join(r.dir, "dir", "b.txt"), "b\n")
	gittest.Run(t, r.dir, "init", "-q", "-b", "main")
	gittest.Run(t, r.dir, "add", "-A")
	gittest.Run(t, r.dir, "-c", "user.name=T", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
	id := r.create(t, "").ID
	r.ready(t, id)
	r.discardAtEnd(t, id)
	ways := filepath.Join(r.d.dataDir, "ways")

	set := r.waysStart(t, id, `{"input":"go","lanes":[{"model":"m1"},{"model":"m2"},{"model":"m3"},{"model":"m4"}]}`)
	r.waitResults(t, id, "lane 0 done, the others running", func(res waysResults) bool {
		return res.AttemptSetID == set && res.Attempts[0].State == "succeeded" &&
			res.Attempts[1].State == "running" && res.Attempts[2].State == "running" && res.Attempts[3].State == "running"
	})
	// One base, four overlays on it.
	if m := mountsUnder(t, filepath.Join(ways, set)); len(m) != 4 {
		t.Fatalf("mounts of the set: %v, want one overlay per lane", m)
	}
	entries, _ := os.ReadDir(filepath.Join(ways, set))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"0", "1", "2", "3", "base"}) {
		t.Errorf("the set's files: %v, want one base and four lanes", names)
	}
	if b, err := os.ReadFile(filepath.Join(ways, set, "base", "a.txt")); err != nil || string(b) != "a\n" {
		t.Errorf("the base's a.txt: %q %v (a lane wrote through?)", b, err)
	}

	// The primary checkout changes in place, loses a file and gains one.
	write(t, filepath.Join(r.dir, "a.txt"), "primary later\n")
	if err := os.Remove(filepath.Join(r.dir, "dir", "b.txt")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(r.dir, "primary-later.txt"), "p\n")
	close(release)
	res := r.waitResults(t, id, "lane 1 done", func(res waysResults) bool { return res.Attempts[1].State == "succeeded" })
	if !slices.Equal(res.Attempts[0].ChangedFiles, []string{"a.txt", "dir/b.txt", "lane0.txt"}) || len(res.Attempts[1].ChangedFiles) != 0 {
		t.Errorf("changed files: lane 0 %v, lane 1 %v", res.Attempts[0].ChangedFiles, res.Attempts[1].ChangedFiles)
	}
	a, _ := r.d.Store().AttemptSet(set)
	var seen string
	for _, c := range a.Attempts[1].Turn.ToolCalls {
		seen += c.Result.String()
	}
	if !strings.Contains(seen, "a\nb\n") || strings.Contains(seen, "zero") || strings.Contains(seen, "lane0.txt") ||
		strings.Contains(seen, "primary") || strings.Contains(seen, "No such file") {
		t.Errorf("lane 1 saw (it must see the checkout as it was, and no other writes):\n%s", seen)
	}

	t0 := time.Now()
	discarded := mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/discard", `{"attempt_set_id":"`+set+`"}`)
	t.Logf("discard of 4 lanes answered in %v", time.Since(t0))
	if discarded["state"] != "discarded" {
		t.Errorf("discard: %v", discarded)
	}
	if left := r.laneLeftovers(t, set, 4); len(left) != 0 {
		t.Errorf("Discard left behind: %v", left)
	}
	if left := r.laneSnapshots(t, set); len(left) != 0 {
		t.Errorf("Discard left snapshots: %v", left)
	}
	if m := mountsUnder(t, ways); len(m) != 0 {
		t.Errorf("Discard left mounts: %v", m)
	}
	polltest.Check(t, func() error {
		if entries, _ := os.ReadDir(filepath.Join(ways, ".trash")); len(entries) != 0 {
			return fmt.Errorf("the discarded lanes' files are still in the trash: %v", entries)
		}
		return nil
	}, polltest.Within(envSettle), polltest.Every(20*time.Millisecond))
	if b, err := os.ReadFile(filepath.Join(r.dir, "a.txt")); err != nil || string(b) != "primary later\n" {
		t.Errorf("the Workspace after Discard: %q %v", b, err)
	}
}
