package daemon

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal/events"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
)

// TestHooksOutsideSessions: a Chat turn and an Automation run's agent node
// run the operator's hooks with a Session turn's rules. A host PreToolUse
// guard blocks an MCP call (the model gets the reason), a hook that needs
// a sandbox fails closed where there is none, a UserPromptSubmit hook
// blocks the turn (or the node) before the model is asked, and every run
// is journaled on the Chat (chat-hook-ran) or the run
// (automation-node-hook-ran) and counted in /metrics.
func TestHooksOutsideSessions(t *testing.T) {
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		// chat, turn 1: the guard blocks
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "mcp__t__echo", `{"text":"a secret"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("it was blocked"), fakellm.Usage(10, 5, 0)}},
		// chat, turn 2: the guard allows, the sandbox hook cannot run
		{Steps: []fakellm.Step{fakellm.ToolCall("c2", "mcp__t__echo", `{"text":"plain"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("blocked again"), fakellm.Usage(10, 5, 0)}},
		// the agent node
		{Steps: []fakellm.Step{fakellm.ToolCall("c3", "mcp__t__echo", `{"text":"another secret"}`), fakellm.Usage(4, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("LGTM"), fakellm.Usage(4, 1, 0)}},
	}})
	defer fake.Close()
	d, srv := outsideHooksDaemon(t, fake)

	// A Chat.
	id := mustCall(t, srv, 201, post, "/api/chat", `{"agent_id":"a"}`)["id"].(string)
	cc := openChatConn(t, srv)
	turn := func(content string) (result *chatFrame, last chatFrame) {
		t.Helper()
		cc.send(t, map[string]any{"cmd": "chat-turn", "chat_id": id, "content": content})
		fs := cc.terminal(t)
		for i := range fs {
			if fs[i].Kind == "chat-tool-result" {
				result = &fs[i]
			}
		}
		return result, fs[len(fs)-1]
	}
	res, last := turn("use the tool")
	if res == nil || res.IsError == nil || !*res.IsError || *res.Result != "blocked by hook `no-secrets`: no secrets over mcp" || last.Kind != "chat-done" {
		t.Fatalf("guarded call: result %+v, end %+v", res, last)
	}
	if reqs := fake.Requests(); !strings.Contains(string(reqs[1].Body), "blocked by hook `no-secrets`: no secrets over mcp") {
		t.Errorf("the model did not get the block reason: %s", reqs[1].Body)
	}
	res, last = turn("use it plainly")
	if res == nil || !strings.HasPrefix(*res.Result, "hook `sandboxed` failed: no sandbox to run it in") || last.Kind != "chat-done" {
		t.Fatalf("a sandbox hook in a Chat: result %+v, end %+v", res, last)
	}
	n := len(fake.Requests())
	if _, last = turn("say the forbidden words"); last.Kind != "chat-error" || last.Error != "blocked by hook `prompt-guard`: no forbidden words" {
		t.Errorf("blocked prompt: %+v", last)
	}
	if got := len(fake.Requests()); got != n {
		t.Errorf("a blocked prompt reached the model: %d requests, want %d", got, n)
	}
	chatRuns, starts := hookRuns(t, srv, id, "chat-hook-ran")
	want := []string{
		"SessionStart:hello:=allow", "UserPromptSubmit:prompt-guard:=allow", "PreToolUse:no-secrets:mcp__t__echo=block", "Stop:bye:=allow",
		"UserPromptSubmit:prompt-guard:=allow", "PreToolUse:no-secrets:mcp__t__echo=allow", "PreToolUse:sandboxed:mcp__t__echo=error", "Stop:bye:=allow",
		"UserPromptSubmit:prompt-guard:=block",
	}
	if strings.Join(chatRuns, " ") != strings.Join(want, " ") {
		t.Errorf("chat-hook-ran events:\n%v\nwant\n%v", chatRuns, want)
	}
	// The hook read its event, and ran in a scratch directory of its own.
	if len(starts) != 1 || !strings.Contains(starts[0], `"session_id":"`+id+`"`) || !strings.Contains(starts[0], `"lathe_scope":"chat"`) ||
		!strings.Contains(starts[0], "/lathe-hooks-") {
		t.Errorf("SessionStart's stderr: %q", starts)
	}

	// An Automation's agent node.
	for _, rec := range []string{
		`{"id":"review","name":"Review","trigger":{"kind":"manual"},"nodes":[{"id":"ask","kind":"agent","agent_id":"a","input":"Review: {{trigger}}"}]}`,
	} {
		if r := call(t, srv, post, "/api/automations", rec); r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	if r := call(t, srv, post, "/api/workflows/review/execute", `{"input":"the diff"}`); r.status != 200 || !strings.Contains(string(r.body), `"output":"LGTM"`) {
		t.Fatalf("review: %d %s", r.status, r.body)
	}
	if reqs := fake.Requests(); !strings.Contains(string(reqs[len(reqs)-1].Body), "blocked by hook `no-secrets`: no secrets over mcp") {
		t.Errorf("the node's model did not get the block reason")
	}
	n = len(fake.Requests())
	r := call(t, srv, post, "/api/workflows/review/execute", `{"input":"the forbidden diff"}`)
	if r.status != 502 || !strings.Contains(string(r.body), "blocked by hook `prompt-guard`: no forbidden words") {
		t.Errorf("a blocked node: %d %s", r.status, r.body)
	}
	if got := len(fake.Requests()); got != n {
		t.Errorf("a blocked node reached the model: %d requests, want %d", got, n)
	}
	var nodeRuns, ids []string
	for _, run := range runsOf(d, "review") {
		ids = append(ids, run.RunID)
	}
	slices.Sort(ids) // oldest first
	for _, run := range ids {
		got, _ := hookRuns(t, srv, run, "automation-node-hook-ran")
		nodeRuns = append(nodeRuns, got...)
	}
	want = []string{
		"SessionStart:hello:=allow", "UserPromptSubmit:prompt-guard:=allow", "PreToolUse:no-secrets:mcp__t__echo=block", "Stop:bye:=allow",
		"SessionStart:hello:=allow", "UserPromptSubmit:prompt-guard:=block",
	}
	if strings.Join(nodeRuns, " ") != strings.Join(want, " ") {
		t.Errorf("automation-node-hook-ran events:\n%v\nwant\n%v", nodeRuns, want)
	}

	r = call(t, srv, get, "/metrics", "")
	for _, want := range []string{
		`lathe_hook_runs_total{decision="block",event="PreToolUse"} 2`,
		`lathe_hook_runs_total{decision="block",event="UserPromptSubmit"} 2`,
		`lathe_hook_runs_total{decision="error",event="PreToolUse"} 1`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// hookRuns reads the hook runs (events of typ) journaled on aggregate id,
// as "event:hook:tool=decision", and the stderr of its SessionStart runs.
func hookRuns(t *testing.T, srv *httptest.Server, id, typ string) (runs, starts []string) {
	t.Helper()
	r := call(t, srv, get, "/api/events/journal?aggregate="+id, "")
	if r.status != 200 {
		t.Fatalf("journal of %s: %d %s", id, r.status, r.body)
	}
	for _, env := range feed(t, r.body) {
		if env.Type != typ {
			continue
		}
		var e events.HookRun
		if err := json.Unmarshal(env.Data, &e); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, e.Event+":"+e.Hook+":"+e.Tool+"="+e.Decision)
		if e.Event == "SessionStart" {
			starts = append(starts, e.Stderr)
		}
	}
	return runs, starts
}

// TestHooksOnExecute: POST /api/agents/{id}/execute runs the operator's
// hooks with a Session turn's rules and no sandbox: host hooks run, a
// guard blocks a tool call of the tool loop (the model gets the reason), a
// hook that needs a sandbox fails closed, a UserPromptSubmit hook refuses
// the execute (403, the model never asked), SessionStart runs for a
// stateless execute only; every run is journaled on the Agent
// (agent-hook-ran) and counted in /metrics.
func TestHooksOnExecute(t *testing.T) {
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		// a stateful execute: the guard blocks
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "mcp__t__echo", `{"text":"a secret"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("it was blocked"), fakellm.Usage(10, 5, 0)}},
		// a stateless execute
		{Steps: []fakellm.Step{fakellm.Text("hi"), fakellm.Usage(3, 1, 0)}},
		// a stateful execute: the guard allows, the sandbox hook cannot run
		{Steps: []fakellm.Step{fakellm.ToolCall("c2", "mcp__t__echo", `{"text":"plain"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("blocked again"), fakellm.Usage(10, 5, 0)}},
	}})
	defer fake.Close()
	_, srv := outsideHooksDaemon(t, fake)
	for _, tc := range []struct {
		body, status, want, model string // model: what the model's last request holds
	}{
		{`{"input":"use the tool"}`, "200", `"output":"it was blocked"`, "blocked by hook `no-secrets`: no secrets over mcp"},
		{`{"input":"say hi","stateless":true}`, "200", `"output":"hi"`, "say hi"},
		{`{"input":"say the forbidden words"}`, "403", `"error":"blocked by hook ` + "`prompt-guard`" + `: no forbidden words"`, ""},
		{`{"input":"use it plainly"}`, "200", `"output":"blocked again"`, "hook `sandboxed` failed: no sandbox to run it in"},
	} {
		n := len(fake.Requests())
		r := call(t, srv, post, "/api/agents/a/execute", tc.body)
		if strconv.Itoa(r.status) != tc.status || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("execute %s: %d %s, want %s %s", tc.body, r.status, r.body, tc.status, tc.want)
		}
		reqs := fake.Requests()
		switch {
		case tc.model == "" && len(reqs) != n:
			t.Errorf("execute %s: a refused execute reached the model", tc.body)
		case tc.model != "" && (len(reqs) == n || !strings.Contains(string(reqs[len(reqs)-1].Body), tc.model)):
			t.Errorf("execute %s: the model did not get %q", tc.body, tc.model)
		}
	}
	runs, starts := hookRuns(t, srv, "a", "agent-hook-ran")
	want := []string{
		"UserPromptSubmit:prompt-guard:=allow", "PreToolUse:no-secrets:mcp__t__echo=block", "Stop:bye:=allow",
		"SessionStart:hello:=allow", "UserPromptSubmit:prompt-guard:=allow", "Stop:bye:=allow",
		"UserPromptSubmit:prompt-guard:=block",
		"UserPromptSubmit:prompt-guard:=allow", "PreToolUse:no-secrets:mcp__t__echo=allow", "PreToolUse:sandboxed:mcp__t__echo=error", "Stop:bye:=allow",
	}
	if strings.Join(runs, " ") != strings.Join(want, " ") {
		t.Errorf("agent-hook-ran events:\n%v\nwant\n%v", runs, want)
	}
	if len(starts) != 1 || !strings.Contains(starts[0], `"lathe_scope":"agent"`) || !strings.Contains(starts[0], "/lathe-hooks-") {
		t.Errorf("SessionStart's stderr: %q", starts)
	}
	body := string(call(t, srv, get, "/metrics", "").body)
	for _, want := range []string{
		`lathe_hook_runs_total{decision="block",event="PreToolUse"} 1`,
		`lathe_hook_runs_total{decision="block",event="UserPromptSubmit"} 1`,
		`lathe_hook_runs_total{decision="error",event="PreToolUse"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// outsideHooksDaemon is a daemon without sandboxes whose Agent a calls the
// model fake, with an MCP server t (echo) and the hooks of the tests
// above, once the MCP server connected.
func outsideHooksDaemon(t *testing.T, fake *fakellm.Server) (*Daemon, *httptest.Server) {
	t.Helper()
	bin := mcpTestServer(t)
	d, srv := newTestDaemon(t, func(c *config.Config) {
		runtimeConfig(config.KindOpenAI, fake.URL())(c)
		c.MCP.Servers = []config.MCPServer{{Name: "t", Transport: "stdio", Command: bin, Approval: "never"}}
		c.Hooks = []config.Hook{
			{Event: "SessionStart", Name: "hello", Host: true, Command: `cat >&2; echo >&2; pwd >&2`},
			{Event: "UserPromptSubmit", Name: "prompt-guard", Host: true,
				Command: `grep -q forbidden && { echo '{"decision":"block","reason":"no forbidden words"}'; exit 0; }; exit 0`},
			{Event: "PreToolUse", Matcher: "mcp__t__.*", Name: "no-secrets", Host: true,
				Command: `grep -q secret && { echo "no secrets over mcp" >&2; exit 2; }; exit 0`},
			{Event: "PreToolUse", Matcher: "mcp__t__.*", Name: "sandboxed", Command: "true"},
			{Event: "Stop", Name: "bye", Host: true, Command: "true"},
		}
	})
	polltest.Until(t, "the MCP server connects", func() bool {
		return strings.Contains(string(call(t, srv, get, "/api/tools", "").body), `"mcp__t__echo"`)
	})
	return d, srv
}
