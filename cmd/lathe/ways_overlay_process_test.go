package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/runtime/lanefs"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// procMounts lists the mount points at or under dir.
func procMounts(t *testing.T, dir string) []string {
	t.Helper()
	m, err := lanefs.MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWaysLanesMountAgainAfterReboot runs two lanes to their end on their
// overlays, kills the daemon with SIGKILL and unmounts the lanes (what a
// reboot does; a kill alone leaves them mounted), then restarts: the
// start-up mounts the lanes again from their base and upper layers, their
// writes are there for Diff and for Verify in sandboxes prepared anew, the
// files of a set the journal does not need and the trash a crash left are
// removed (unmounted first), and Discard leaves no container, copy or mount
// behind.
func TestWaysLanesMountAgainAfterReboot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("overlay lanes need root")
	}
	cl := containerdtest.Namespace(t, turnProcNamespace)
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Model: "m1", Steps: []fakellm.Step{fakellm.ToolCall("c1", "shell", `{"command":"echo lane0 > lane.txt && rm a.txt"}`)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("lane 0 done")}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.ToolCall("d1", "shell", `{"command":"echo lane1 > lane.txt"}`)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("lane 1 done")}},
	}})
	t.Cleanup(fake.Close)
	cfg := turnProcConfig(t, fake, "")
	data, _ := filepath.EvalSymlinks(t.TempDir())
	ways := filepath.Join(data, "ways")
	t.Cleanup(func() { _ = lanefs.UnmountUnder(ways) })
	d := procStart(t, data, "--config", cfg)
	session, dir := procWaysSession(t, d)
	set := procStartWays(t, d, session, `{"input":"write","lanes":[{"model":"m1"},{"model":"m2"}]}`)
	ready := func() bool {
		_, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+session+"/variants/results", "")
		return strings.Contains(string(body), `"state":"ready"`)
	}
	procPoll(t, "both lanes ended", ready)
	if m := procMounts(t, filepath.Join(ways, set)); len(m) != 2 {
		t.Fatalf("the lanes' mounts: %v, want one overlay per lane", m)
	}
	d.kill(t)
	if err := lanefs.UnmountUnder(ways); err != nil {
		t.Fatal(err)
	}
	// What a crash can leave besides: a trash not yet emptied, and the
	// files of a set the journal no longer needs, still mounted.
	stale := filepath.Join(ways, "01STALESET")
	if err := os.MkdirAll(filepath.Join(stale, "base", "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := lanefs.Overlay{Base: filepath.Join(stale, "base"), Upper: filepath.Join(stale, "0", "upper"), Work: filepath.Join(stale, "0", "work"), Merged: filepath.Join(stale, "0", "merged")}
	if err := o.Mount(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ways, ".trash", "01OLD", "base"), 0o755); err != nil {
		t.Fatal(err)
	}
	d = procStart(t, data, "--config", cfg)
	procPoll(t, "the lanes mounted again", func() bool { return len(procMounts(t, filepath.Join(ways, set))) == 2 })
	procPoll(t, "the stale files and the trash removed", func() bool {
		entries, _ := os.ReadDir(filepath.Join(ways, ".trash"))
		_, err := os.Lstat(stale)
		return len(entries) == 0 && os.IsNotExist(err) && len(procMounts(t, stale)) == 0
	})

	for i, want := range []string{"lane0\n", "lane1\n"} {
		status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+session+"/variants/diff?attempt_set_id="+set+"&index="+string(rune('0'+i))+"&path=lane.txt", "")
		var diff struct{ Before, After *string }
		if status != 200 || json.Unmarshal(body, &diff) != nil || diff.After == nil || *diff.After != want || diff.Before != nil {
			t.Errorf("diff of lane %d after the restart: %d %s", i, status, body)
		}
	}
	// Verify prepares each lane's sandbox anew on its mounted files: lane 0
	// deleted a.txt, lane 1 did not.
	status, body := procDoLong(t, http.MethodPost, d.url+"/api/sessions/"+session+"/variants/verify", `{"attempt_set_id":"`+set+`","check":"test -f lane.txt && test ! -f a.txt"}`)
	var res struct {
		Attempts []struct {
			Verdict *struct{ Passed bool }
		}
	}
	if status != 200 || json.Unmarshal(body, &res) != nil || len(res.Attempts) != 2 {
		t.Fatalf("verify after the restart: %d %s", status, body)
	}
	if v := res.Attempts[0].Verdict; v == nil || !v.Passed {
		t.Errorf("lane 0's Check after the restart: %s", body)
	}
	if v := res.Attempts[1].Verdict; v == nil || v.Passed {
		t.Errorf("lane 1's Check after the restart (it kept a.txt): %s", body)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "a\n" {
		t.Errorf("the Workspace's a.txt: %q %v", b, err)
	}

	procDiscard(t, d, cl, session, set, 2)
	if _, err := os.Stat(filepath.Join(ways, set)); !os.IsNotExist(err) {
		t.Errorf("the set's files are still in place: %v", err)
	}
	if m := procMounts(t, ways); len(m) != 0 {
		t.Errorf("mounts left: %v", m)
	}
	procPoll(t, "the trash emptied", func() bool {
		entries, _ := os.ReadDir(filepath.Join(ways, ".trash"))
		return len(entries) == 0
	})
	procDelete(t, d, session)
}
