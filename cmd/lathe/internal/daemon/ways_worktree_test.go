package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/runtime/git/gittest"
	"lathe/runtime/llm/fakellm"
)

// TestWaysOnWorktreeSession: a Ways set on a worktree Session runs in lanes
// whose git is their own (a lane's commit moves no branch of the
// Workspace), owns that Session's worktree only (its surfaces answer 409,
// a shared Session of the Workspace keeps working, the snapshot lists no
// Workspace ownership, the merge home waits), and Keep applies the lane's
// change to the worktree, leaving the Workspace folder as it was.
func TestWaysOnWorktreeSession(t *testing.T) {
	hostGitIdentity(t, "Host User", "host@example.org")
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Model: "m1", Steps: []fakellm.Step{fakellm.ToolCall("c1", "shell",
			`{"command":"cat wip.txt > seen.txt && printf 'lane\\n' > a.txt && git add -A && git -c user.name=L -c user.email=l@l commit -qm lane"}`), fakellm.Usage(1, 1, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("lane done"), fakellm.Usage(1, 1, 0)}},
	}}
	r := newWaysRig(t, script)
	r.gitWorkspace(t)
	shared := r.create(t, "").ID
	r.ready(t, shared)
	wt := worktreeSession(t, r.srv, r.ws, "worktree")["id"].(string) // deleted at the end, uncommitted files and all
	r.discardAtEnd(t, wt)
	mustCall(t, r.srv, 201, post, "/api/sessions/"+wt+"/files/create", `{"path":"wip.txt","kind":"file"}`)
	mustCall(t, r.srv, 200, post, "/api/sessions/"+wt+"/file?path=wip.txt", `{"content":"uncommitted in the worktree\n"}`)
	before := gittest.State(t, r.dir)
	branch := gittest.Run(t, r.dir, "rev-parse", "lathe/"+wt)

	set := r.waysStart(t, wt, `{"input":"edit","n":1,"lanes":[{"model":"m1"}]}`)
	res := r.waitResults(t, wt, "ready", func(res waysResults) bool { return res.State == "ready" })
	if a := res.Attempts[0]; a.State != "succeeded" || strings.Join(a.ChangedFiles, ",") != "a.txt,seen.txt" {
		t.Fatalf("the lane: %+v", a)
	}
	if got := gittest.Run(t, r.dir, "rev-parse", "lathe/"+wt); got != branch {
		t.Errorf("the lane's commit moved the Session's branch in the Workspace: %s, was %s", got, branch)
	}
	if snap := envSnapshot(t, r.srv); len(snap.AttemptOwnerships) != 0 {
		t.Errorf("a set on a worktree Session owns a Workspace: %+v", snap.AttemptOwnerships)
	}
	for _, c := range []struct {
		session, method, path, body string
		status                      int
	}{
		{wt, get, "/file?path=a.txt", "", 409},
		{wt, get, "/git/status", "", 409},
		{wt, post, "/tasks", `{"command":"true"}`, 409},
		{wt, post, "/merge", `{"strategy":"merge"}`, 409},
		{shared, get, "/file?path=a.txt", "", 200},
		{shared, get, "/git/status", "", 200},
		{shared, post, "/tasks", `{"command":"true"}`, 201},
	} {
		resp := r.do(t, c.method, "/api/sessions/"+c.session+c.path, c.body)
		if resp.status != c.status || (c.status == 409 && !strings.Contains(string(resp.body), set)) {
			t.Errorf("%s %s of session %s while the set is unresolved = %d %s, want %d", c.method, c.path, c.session, resp.status, resp.body, c.status)
		}
	}

	kept := mustCall(t, r.srv, 200, post, "/api/sessions/"+wt+"/variants/adopt", `{"attempt_set_id":"`+set+`","index":0}`)
	if kept["state"] != "kept" || kept["settled"] != true {
		t.Fatalf("keep: %v", kept)
	}
	for p, want := range map[string]string{"a.txt": "lane\n", "seen.txt": "uncommitted in the worktree\n", "wip.txt": "uncommitted in the worktree\n"} {
		if got := readVia(t, r.srv, wt, p); got != want {
			t.Errorf("the worktree's %s after Keep = %q, want %q", p, got, want)
		}
	}
	if got := readVia(t, r.srv, shared, "a.txt"); got != "a staged\n" {
		t.Errorf("the shared Session's a.txt after Keep = %q", got)
	}
	if got := gittest.State(t, r.dir); got != before {
		t.Errorf("Keep on a worktree Session changed the Workspace folder:\n%s\nwas\n%s", got, before)
	}
	for _, p := range []string{"seen.txt", "wip.txt"} {
		if _, err := os.Lstat(filepath.Join(r.dir, p)); err == nil {
			t.Errorf("%s reached the Workspace folder", p)
		}
	}
}
