package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal/events"
	"lathe/projections/metrics/metricstest"
	"lathe/runtime/llm/fakellm"
)

// TestHooksInSandbox runs the operator's hooks on a real sandbox: a
// PreToolUse guard blocks `rm -rf` (the model gets the reason, nothing is
// removed), a PostToolUse formatter's change shows in the next read, a hook
// past its timeout is an error result that does not hang the turn, and a
// UserPromptSubmit hook blocks a turn with a reason the user sees. Every
// run is journaled as hook-ran.
func TestHooksInSandbox(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		// guard
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "shell", `{"command":"rm -rf notes"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("it was blocked"), fakellm.Usage(10, 2, 0)}},
		// formatter
		{Steps: []fakellm.Step{fakellm.ToolCall("c2", "write_file", `{"path":"notes/a.txt","content":"shout\n"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c3", "read_file", `{"path":"notes/a.txt"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("read it"), fakellm.Usage(10, 2, 0)}},
		// timeout
		{Steps: []fakellm.Step{fakellm.ToolCall("c4", "list_files", `{}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("listed"), fakellm.Usage(10, 2, 0)}},
	}}
	r := turnDaemonIn(t, "lathe-test-hooks", config.KindOpenAI, script, func(c *config.Config) {
		c.Hooks = []config.Hook{
			{Event: "PreToolUse", Matcher: "shell", Name: "no-rm",
				Command: `grep -q 'rm -rf' && { echo "rm -rf is not allowed here" >&2; exit 2; }; exit 0`},
			{Event: "PreToolUse", Matcher: "^list_", Name: "slow", Command: "sleep 60", TimeoutSeconds: 1},
			{Event: "UserPromptSubmit", Name: "prompt-guard",
				Command: `grep -q forbidden && { echo '{"decision":"block","reason":"no forbidden words"}'; exit 0; }; exit 0`},
		}
		c.Agents[0].Hooks = []config.Hook{{Event: "PostToolUse", Matcher: "write_file|edit_file", Name: "upper",
			Command: `python3 -c 'import json,sys; p=json.load(sys.stdin)["tool_input"]["path"]; s=open(p).read(); open(p,"w").write(s.upper())'`}}
	})
	if err := os.MkdirAll(filepath.Join(r.dir, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(r.dir, "notes", "keep.txt"), "keep me\n")
	id := r.create(t, "").ID
	r.ready(t, id)
	tc := openTurnConn(t, r)

	result := func(frames []turnFrame, callID string) turnFrame {
		t.Helper()
		for _, f := range frames {
			if f.Kind == "tool-call" && f.Phase != "start" && f.CallID == callID && f.Result != nil {
				return f
			}
		}
		t.Fatalf("no result of %s in %+v", callID, frames)
		return turnFrame{}
	}

	tc.runDone(t, id, "guard", "clean up")
	if _, err := os.Stat(filepath.Join(r.dir, "notes", "keep.txt")); err != nil {
		t.Errorf("the blocked rm -rf ran: %v", err)
	}
	reqs := r.llm.Requests()
	if !strings.Contains(string(reqs[1].Body), "blocked by hook `no-rm`: rm -rf is not allowed here") {
		t.Errorf("the model did not get the block reason: %s", reqs[1].Body)
	}

	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "format", "input": "write and read"})
	frames := tc.terminal(t, "format")
	if f := result(frames, "c3"); f.IsError || !strings.Contains(*f.Result, "SHOUT") {
		t.Errorf("the formatter's change is not in the next read: %+v %q", f, *f.Result)
	}

	t0 := time.Now()
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "timeout", "input": "list"})
	frames = tc.terminal(t, "timeout")
	if f := result(frames, "c4"); !f.IsError || !strings.Contains(*f.Result, "hook `slow` failed: timed out after 1s") {
		t.Errorf("timed-out hook: %+v %q", f, *f.Result)
	}
	if last := frames[len(frames)-1]; last.Kind != "session-done" || time.Since(t0) > 30*time.Second {
		t.Errorf("the turn with a timed-out hook: %+v after %v", last, time.Since(t0))
	}

	n := len(r.llm.Requests())
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "blocked", "input": "say the forbidden words"})
	frames = tc.terminal(t, "blocked")
	if last := frames[len(frames)-1]; last.Kind != "session-error" || last.Error != "blocked by hook `prompt-guard`: no forbidden words" {
		t.Errorf("blocked prompt: %+v", last)
	}
	if got := len(r.llm.Requests()); got != n {
		t.Errorf("a blocked prompt reached the model: %d requests, want %d", got, n)
	}

	// The journal keeps every run with its decision.
	resp := r.do(t, get, "/api/events/journal?aggregate="+id, "")
	var runs []string
	for _, env := range feed(t, resp.body) {
		if env.Type != "hook-ran" {
			continue
		}
		var e events.HookRan
		if err := json.Unmarshal(env.Data, &e); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, e.TurnID+":"+e.Event+":"+e.Hook+":"+e.Tool+"="+e.Decision)
		if e.Hook == "no-rm" && (e.ExitCode != 2 || e.Stderr != "rm -rf is not allowed here\n" || e.CallID != "c1") {
			t.Errorf("guard run: %+v", e)
		}
		if e.Hook == "slow" && !e.TimedOut {
			t.Errorf("slow run: %+v", e)
		}
	}
	want := []string{
		"guard:UserPromptSubmit:prompt-guard:=allow", "guard:PreToolUse:no-rm:shell=block",
		"format:UserPromptSubmit:prompt-guard:=allow", "format:PostToolUse:upper:write_file=allow",
		"timeout:UserPromptSubmit:prompt-guard:=allow", "timeout:PreToolUse:slow:list_files=error",
		"blocked:UserPromptSubmit:prompt-guard:=block",
	}
	if strings.Join(runs, " ") != strings.Join(want, " ") {
		t.Errorf("hook-ran events:\n%v\nwant\n%v", runs, want)
	}

	// /metrics counts the same work from the commit feed, in a text
	// promtool accepts.
	resp = r.do(t, get, "/metrics", "")
	for _, want := range []string{
		`lathe_turns_total{outcome="done"} 3`, `lathe_turns_total{outcome="error"} 1`,
		`lathe_tokens_total{agent="coder",direction="input"} 70`,
		`lathe_hook_runs_total{decision="block",event="PreToolUse"} 1`,
		`lathe_tool_calls_total{outcome="error",tool="shell"} 1`,
		`lathe_sandboxes_total{provider="containerd",state="ready"} 1`,
	} {
		if !strings.Contains(string(resp.body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, resp.body)
		}
	}
	metricstest.Promtool(t, string(resp.body))
}

// TestMetricsNeedAKey: /metrics is behind the same authentication as the
// API, and serves the contract's series and the Go runtime's.
func TestMetricsNeedAKey(t *testing.T) {
	const key = "test-api-key-0123456789"
	_, srv := newTestDaemon(t, func(c *config.Config) { c.Server.APIKeys = config.Secrets(key) })
	if r := call(t, srv, get, "/metrics", ""); r.status != 401 {
		t.Errorf("GET /metrics without a key: %d", r.status)
	}
	if r := call(t, srv, post, "/api/workspaces", `{"path":"`+realDir(t, t.TempDir())+`"}`, "X-Api-Key", key); r.status != 201 {
		t.Fatalf("create workspace: %d %s", r.status, r.body)
	}
	r := call(t, srv, get, "/metrics", "", "X-Api-Key", key)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s", r.status, r.header.Get("Content-Type"))
	}
	for _, want := range []string{"lathe_journal_appends_total ", "lathe_journal_commit_latency_seconds_bucket", "go_goroutines ", "lathe_ws_clients 0"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	metricstest.Promtool(t, string(r.body))
}

// TestMetricsOnItsOwnListener: telemetry.metrics_listen serves /metrics
// alone, without credentials, for a local scraper, and only to a loopback
// Host.
func TestMetricsOnItsOwnListener(t *testing.T) {
	d, _ := newTestDaemon(t, func(c *config.Config) { c.Server.APIKeys = config.Secrets("test-api-key-0123456789") })
	addr, err := d.ServeMetrics(testContext(t, 10*time.Second), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "lathe_journal_appends_total") {
		t.Errorf("GET /metrics on its listener: %d %.200s", resp.StatusCode, body)
	}
	resp, err = http.Get("http://" + addr.String() + "/api/workspaces")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("the metrics listener serves more than /metrics: %d", resp.StatusCode)
	}

	// A DNS-rebinding page reaches the listener under its own name: the
	// loopback Host check keeps it out (issue 32, finding 8).
	for _, tc := range []struct {
		host   string
		status int
	}{
		{"attacker.example:9464", 403},
		{"127.0.0.1.nip.io", 403},
		{"localhost:9464", 200},
		{"[::1]:9464", 200},
	} {
		req, err := http.NewRequest(get, "http://"+addr.String()+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		r := send(t, http.DefaultClient, req)
		if r.status != tc.status {
			t.Errorf("GET /metrics with Host %s: %d, want %d", tc.host, r.status, tc.status)
		}
		if tc.status == 403 {
			assertErrorBody(t, r, "is not allowed")
			if strings.Contains(string(r.body), "lathe_") {
				t.Errorf("Host %s read the metrics: %.200s", tc.host, r.body)
			}
		}
	}
}

// TestHooksInWaysLane: a Ways lane's prompt, tool calls and end go through
// the same hooks, in the lane's own sandbox; the block reaches the lane's
// model and its runs are journaled on the set as attempt-lane-hook-ran.
func TestHooksInWaysLane(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Model: "m1", Steps: []fakellm.Step{fakellm.ToolCall("c1", "shell", `{"command":"rm -rf a.txt"}`), fakellm.Usage(10, 5, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("blocked, leaving it"), fakellm.Usage(10, 5, 0)}},
	}}
	r := newWaysRig(t, script, func(c *config.Config) {
		c.Hooks = []config.Hook{{Event: "PreToolUse", Name: "host-mark", Host: true, Command: "touch host-hook-ran"},
			{Event: "UserPromptSubmit", Name: "prompt", Command: `grep -q '"lathe_scope":"lane"'`}, {Event: "Stop", Name: "stop", Command: "true"},
			{Event: "PreToolUse", Matcher: "shell", Name: "no-rm",
				Command: `grep -q 'rm -rf' && { echo "rm -rf is not allowed here" >&2; exit 2; }; exit 0`}}
	})
	r.gitWorkspace(t)
	id := r.create(t, "").ID
	r.ready(t, id)
	r.discardAtEnd(t, id)
	set := r.waysStart(t, id, `{"input":"clean up","lanes":[{"model":"m1"}]}`)
	r.waitResults(t, id, "ready", func(res waysResults) bool { return res.AttemptSetID == set && res.State == "ready" })
	if reqs := r.llm.Requests(); len(reqs) < 2 || !strings.Contains(string(reqs[1].Body), "blocked by hook `no-rm`: rm -rf is not allowed here") {
		t.Errorf("the lane's model did not get the block reason")
	}
	resp := r.do(t, get, "/api/events/journal?aggregate="+set, "")
	var runs []string
	for _, env := range feed(t, resp.body) {
		if env.Type == "attempt-lane-hook-ran" {
			var e events.LaneHookRan
			if err := json.Unmarshal(env.Data, &e); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, fmt.Sprintf("%d:%s:%s=%s", e.Index, e.Hook, e.Tool, e.Decision))
		}
	}
	if strings.Join(runs, " ") != "0:prompt:=allow 0:host-mark:shell=allow 0:no-rm:shell=block 0:stop:=allow" {
		t.Errorf("lane hook runs: %v", runs)
	}
	// A host hook of a lane runs in the lane's copy, never the primary checkout.
	a, _ := r.d.Store().AttemptSet(set)
	if _, err := os.Stat(filepath.Join(a.Attempts[0].Copy, "host-hook-ran")); err != nil {
		t.Errorf("the host hook did not run in the lane's copy: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "host-hook-ran")); err == nil {
		t.Error("the lane's host hook ran in the primary checkout")
	}
}
