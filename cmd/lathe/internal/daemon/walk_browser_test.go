package daemon

// The workbench's second walk (issue 26) in Debian's Chromium, on a daemon
// without sandboxes whose Agents talk to the scripted model
// (testdata/browser/walk.mjs): every screen reaches the rail at 390 px, a
// Lattice Session is made in the New Session dialog with its team narrowed,
// the Ways panel with no set asks nothing that fails, and its planner is
// chosen and remembered per Workspace.

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/git/gittest"
	"lathe/runtime/llm/fakellm"
)

func TestWalkInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	t.Setenv(testRuntimeKeyEnv, "k")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Model: "plan-m", Steps: []fakellm.Step{fakellm.ToolCall("p", "submit_steps", `{"steps":["read the test","fix the race"]}`), fakellm.Usage(5, 5, 0)}},
	}})
	defer fake.Close()
	_, srv := newTestDaemon(t, func(c *config.Config) {
		c.Providers = map[string]config.Provider{"fake": {Kind: config.KindOpenAI, BaseURL: fake.URL() + "/v1", APIKeyEnv: testRuntimeKeyEnv}}
		c.Agents = []config.Agent{
			{ID: "coder", Name: "Coder", Provider: "fake", Model: "m1"},
			{ID: "planner", Name: "Planner", Provider: "fake", Model: "plan-m"},
			{ID: "w1", Name: "Worker One", Provider: "fake", Model: "w1-m"},
			{ID: "w2", Name: "Worker Two", Provider: "fake", Model: "w2-m"},
		}
		c.Lattice = config.Lattice{Coordinator: "planner", Workers: []string{"w1", "w2"}}
	})
	dir := realDir(t, t.TempDir())
	resp, err := http.Post(srv.URL+"/api/workspaces", "application/json", strings.NewReader(`{"path":`+quote(dir)+`,"name":"walk"}`))
	if err != nil {
		t.Fatal(err)
	}
	var ws struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&ws); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register the Workspace: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()

	runBrowser(t, node, chromium, "walk.mjs", 3*time.Minute, "LATHE_URL="+srv.URL)

	// The plan preview ran on the planner the panel chose, not the Session's Agent.
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Model != "plan-m" {
		models := make([]string, len(reqs))
		for i, r := range reqs {
			models[i] = r.Model
		}
		t.Fatalf("the model saw %v, want one plan preview on plan-m", models)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

const walkNamespace = "lathe-test-walk"

// TestWalkLiveInChromium (testdata/browser/walk_live.mjs): a second tab
// shows a live turn's user message while it runs, a write_file card shows
// the change against the previous content, comments on two of its hunks go
// to the Agent as one review turn, and a refused commit says why beside the
// Commit button, whose words follow the index.
func TestWalkLiveInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	release := make(chan struct{})
	var once sync.Once
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Text("Holding. "), fakellm.Stall(release), fakellm.Text("Released."), fakellm.Usage(3, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("w", "write_file", `{"path":"a.txt","content":`+quote(numbered(map[int]string{1: "a changed", 3: "L3 rewritten", 17: "L17 rewritten"}))+`}`), fakellm.Usage(3, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("Rewrote a.txt."), fakellm.Usage(3, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("Addressed both comments."), fakellm.Usage(3, 2, 0)}},
	}}
	r := turnDaemonIn(t, walkNamespace, config.KindOpenAI, script, nil)
	gittest.Run(t, r.dir, "init", "-q", "-b", "main")
	gittest.Run(t, r.dir, "config", "user.name", "Walk Tester")
	gittest.Run(t, r.dir, "config", "user.email", "walk@example.org")
	write(t, filepath.Join(r.dir, "a.txt"), numbered(nil))
	gittest.Run(t, r.dir, "add", "-A")
	gittest.Run(t, r.dir, "commit", "-q", "-m", "first")
	write(t, filepath.Join(r.dir, "a.txt"), numbered(map[int]string{1: "a changed"}))
	id := r.create(t, "").ID
	r.ready(t, id)
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the Session's delete: a held turn refuses it
	runBrowserSignals(t, node, chromium, "walk_live.mjs", 3*time.Minute, func(name string) {
		if name == "release" {
			once.Do(func() { close(release) })
		}
	}, "LATHE_URL="+r.srv.URL, "LATHE_SESSION="+id, "LATHE_WORKSPACE="+r.dir)

	// The review turn carried both comments, each with its file, lines, code and note.
	reqs := r.llm.Requests()
	got := lastUser(t, reqs[len(reqs)-1])
	for _, want := range []string{"Review comment on a.txt (line 3):", "L3 rewritten", "say why it changed",
		"Review comment on a.txt (lines 17-18):", "L17 rewritten\nl18", "keep l18 as it was"} {
		if !strings.Contains(got, want) {
			t.Errorf("the review turn's message lacks %q:\n%s", want, got)
		}
	}
}

// numbered is twenty lines l1…l20, with the lines of change replaced.
func numbered(change map[int]string) string {
	var b strings.Builder
	for i := 1; i <= 20; i++ {
		line, ok := change[i]
		if !ok {
			line = "l" + strconv.Itoa(i)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
