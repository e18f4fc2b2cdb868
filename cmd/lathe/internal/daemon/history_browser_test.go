package daemon

import (
	"path/filepath"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/git/gittest"
	"lathe/runtime/llm/fakellm"
)

// The History view in Chromium: the trail, time travel by entry and by
// scrubber, the kind filter, the audit head and export
// (testdata/browser/history.mjs). The Session needs no sandbox.
func TestHistoryInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	_, srv := newTestDaemon(t, nil)
	dir := realDir(t, t.TempDir())
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	s := mustCall(t, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"first",`+agentMode+`,"setup_command":"make deps"}`)["id"].(string)
	mustCall(t, srv, 200, patch, "/api/sessions/"+s, `{"name":"second"}`)
	mustCall(t, srv, 200, patch, "/api/sessions/"+s, `{"name":"third"}`)
	runBrowser(t, node, chromium, "history.mjs", 2*time.Minute, "LATHE_URL="+srv.URL, "LATHE_SESSION="+s)
}

// historyNamespace is TestTurnHistoryInChromium's containerd namespace.
const historyNamespace = "lathe-test-history"

// A turn's replay and its files in Chromium, against a real sandbox, git
// and the scripted model: the replay plays the turn's text and tool cards
// to its end at 10×; Changes lists what it changed with a diff; a restore
// over a file edited since is refused with the file named, and goes through
// only when confirmed again (testdata/browser/turnhistory.mjs).
func TestTurnHistoryInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.Reasoning("plan the edit"),
			fakellm.Text("Editing."),
			fakellm.ToolCall("w", "write_file", `{"path":"added.txt","content":"new\n"}`),
			fakellm.ToolCall("e", "edit_file", `{"path":"tracked.txt","old_string":"one","new_string":"uno"}`),
			fakellm.Usage(3, 2, 1),
		}},
		{Steps: []fakellm.Step{fakellm.Text("edited both files"), fakellm.Usage(1, 1, 0)}},
	}}
	r := turnDaemonIn(t, historyNamespace, config.KindOpenAI, script, nil)
	commitBase(t, r.dir, map[string]string{"tracked.txt": "one\n"})
	id := r.create(t, "").ID
	r.ready(t, id)
	openTurnConn(t, r).runDone(t, id, "edit", "edit the files")
	// The operator edits the file after the turn: a restore must see it.
	writeFile(t, filepath.Join(r.dir, "tracked.txt"), "mine\n")
	runBrowser(t, node, chromium, "turnhistory.mjs", 3*time.Minute, "LATHE_URL="+r.srv.URL, "LATHE_SESSION="+id)
	if got := readFile(t, filepath.Join(r.dir, "tracked.txt")); got != "one\n" {
		t.Errorf("tracked.txt after the forced restore of its before side = %q", got)
	}
	if got := gittest.Run(t, r.dir, "diff", "--cached"); got != "" {
		t.Errorf("the restore touched the index:\n%s", got)
	}
}
