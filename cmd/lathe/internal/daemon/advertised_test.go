package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
)

// TestUnadvertisedToolsNeverRun: a model may name any tool, and a tool the
// turn did not advertise to its Agent never runs (issue 32, finding 2).
// MCP server shut is open only to Agent reviewer; every other Agent has
// the tools of server open, so its turns go through the MCP toolbox. On
// every surface that runs an Agent (a Session turn, a lattice Worker, a
// Ways lane, a Chat, an Automation's agent node, a stateful and a
// stateless execute), the scripted model calls shut's echo: it gets the
// error result "unknown tool: mcp__shut__echo", and neither the server
// (which logs every call it receives) nor the host hook on its tools ever
// sees the call. The sandboxes are real.
func TestUnadvertisedToolsNeverRun(t *testing.T) {
	const tool = "mcp__shut__echo"
	unknown := "unknown tool: " + tool
	bin := mcpTestServer(t)
	logs := t.TempDir()
	served, hooked := filepath.Join(logs, "served.log"), filepath.Join(logs, "hooked.log")
	callsShut := func(model, answer string) []fakellm.Turn {
		return []fakellm.Turn{
			{Model: model, Steps: []fakellm.Step{fakellm.ToolCall("c1", tool, `{"text":"for reviewer only"}`), fakellm.Usage(10, 5, 0)}},
			{Model: model, Steps: []fakellm.Step{fakellm.Text(answer), fakellm.Usage(10, 5, 0)}},
		}
	}
	var script fakellm.Script
	for _, m := range []string{"m1", "w1-m", "lane-m", "chat-m", "node-m", "exec-m"} {
		script.Turns = append(script.Turns, callsShut(m, "answered on "+m)...)
	}
	script.Turns = append(script.Turns,
		fakellm.Turn{Model: "plan-m", Steps: []fakellm.Step{planCall(subtask("a", "echo for the reviewer")), fakellm.Usage(10, 5, 0)}},
		fakellm.Turn{Model: "plan-m", Steps: []fakellm.Step{fakellm.Text("synthesised"), fakellm.Usage(10, 5, 0)}},
		// a stateless execute: one inference, its call is never run
		fakellm.Turn{Model: "sl-m", Steps: []fakellm.Step{fakellm.ToolCall("c1", tool, `{"text":"x"}`), fakellm.Text("stateless"), fakellm.Usage(3, 1, 0)}},
	)
	r := newWaysRig(t, script, func(c *config.Config) {
		agent := func(id, model string) config.Agent {
			return config.Agent{ID: id, Name: id, Provider: "fake", Model: model}
		}
		c.Agents = []config.Agent{agent("coder", "m1"), agent("planner", "plan-m"), agent("w1", "w1-m"), agent("chatter", "chat-m"),
			agent("noder", "node-m"), agent("runner", "exec-m"), agent("reviewer", "m1")}
		c.Lattice = config.Lattice{Coordinator: "planner"}
		c.MCP.Servers = []config.MCPServer{
			{Name: "open", Transport: "stdio", Command: bin, Approval: "never"},
			{Name: "shut", Transport: "stdio", Command: bin, Approval: "never", Agents: []string{"reviewer"}, Env: map[string]string{"LATHE_MCPTEST_LOG": served}},
		}
		c.Hooks = []config.Hook{{Event: "PreToolUse", Matcher: "mcp__shut__.*", Name: "seen", Host: true, Command: "cat >> " + hooked}}
	})
	polltest.Until(t, "both MCP servers connect", func() bool {
		body := string(r.do(t, get, "/api/tools", "").body)
		return strings.Contains(body, `"mcp__open__echo"`) && strings.Contains(body, `"`+tool+`"`)
	})
	single, lattice, tc := r.everySessionMode(t)

	// turn runs a Session turn to session-done and returns the result the
	// model was given for call c1.
	turn := func(t *testing.T, session, turnID string) string {
		tc.send(t, map[string]any{"cmd": "session", "id": session, "turn_id": turnID, "input": "ask the reviewer's server"})
		fs := tc.terminal(t, turnID)
		if last := fs[len(fs)-1]; last.Kind != "session-done" {
			t.Fatalf("turn %s: %+v", turnID, last)
		}
		for _, f := range fs {
			if f.Kind == "tool-call" && f.Phase == "result" && f.CallID == "c1" && f.IsError {
				return *f.Result
			}
		}
		return ""
	}
	for _, c := range []struct {
		name  string
		model string // whose last request carries the result ("" for none)
		run   func(t *testing.T) string
	}{
		{"session turn", "m1", func(t *testing.T) string {
			res := turn(t, single, "S1")
			var rec projections.Turn
			if err := json.Unmarshal(r.do(t, get, "/api/sessions/"+single+"/turns/S1", "").body, &rec); err != nil {
				t.Fatal(err)
			}
			if len(rec.ToolCalls) != 1 || rec.ToolCalls[0].Name != tool || !rec.ToolCalls[0].IsError || rec.ToolCalls[0].Result.String() != unknown {
				t.Errorf("the turn record's calls: %+v", rec.ToolCalls)
			}
			return res
		}},
		{"lattice Worker", "w1-m", func(t *testing.T) string { return turn(t, lattice, "L1") }},
		{"Ways lane", "lane-m", func(t *testing.T) string {
			set := r.waysStart(t, single, `{"input":"ask the reviewer's server","lanes":[{"model":"lane-m"}]}`)
			res := r.waitResults(t, single, "ready", func(res waysResults) bool { return res.AttemptSetID == set && res.State == "ready" })
			if res.Attempts[0].State != "succeeded" {
				t.Errorf("lane: %+v", res.Attempts[0])
			}
			return unknown // the lane's result is checked in the model's request
		}},
		{"Chat", "chat-m", func(t *testing.T) string {
			id := mustCall(t, r.srv, 201, post, "/api/chat", `{"agent_id":"chatter"}`)["id"].(string)
			cc := openChatConn(t, r.srv)
			cc.send(t, map[string]any{"cmd": "chat-turn", "chat_id": id, "content": "ask the reviewer's server"})
			fs := cc.terminal(t)
			if last := fs[len(fs)-1]; last.Kind != "chat-done" {
				t.Fatalf("chat turn: %+v", last)
			}
			for _, f := range fs {
				if f.Kind == "chat-tool-result" && f.Result != nil {
					return *f.Result
				}
			}
			return ""
		}},
		{"Automation agent node", "node-m", func(t *testing.T) string {
			mustCall(t, r.srv, 201, post, "/api/automations",
				`{"id":"ask","name":"Ask","trigger":{"kind":"manual"},"nodes":[{"id":"n","kind":"agent","agent_id":"noder","input":"{{trigger}}"}]}`)
			if resp := r.do(t, post, "/api/workflows/ask/execute", `{"input":"ask the reviewer's server"}`); resp.status != 200 ||
				!strings.Contains(string(resp.body), "answered on node-m") {
				t.Fatalf("run: %d %s", resp.status, resp.body)
			}
			return unknown
		}},
		{"stateful execute", "exec-m", func(t *testing.T) string {
			if resp := r.do(t, post, "/api/agents/runner/execute", `{"input":"ask the reviewer's server"}`); resp.status != 200 ||
				!strings.Contains(string(resp.body), "answered on exec-m") {
				t.Fatalf("execute: %d %s", resp.status, resp.body)
			}
			return unknown
		}},
		{"stateless execute", "", func(t *testing.T) string {
			if resp := r.do(t, post, "/api/agents/runner/execute", `{"input":"ask","model_override":"sl-m"}`); resp.status != 200 ||
				!strings.Contains(string(resp.body), `"output":"stateless"`) {
				t.Fatalf("execute: %d %s", resp.status, resp.body)
			}
			return unknown
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			size := func(f string) int {
				b, _ := os.ReadFile(f)
				return len(b)
			}
			before := []int{size(served), size(hooked)}
			if got := c.run(t); got != unknown {
				t.Errorf("the model got %q for its call, want %q", got, unknown)
			}
			if c.model != "" {
				var last fakellm.Request
				for _, req := range r.llm.Requests() {
					if req.Model == c.model {
						last = req
					}
				}
				if !strings.Contains(string(last.Body), unknown) {
					t.Errorf("the %s model's last request (%d) lacks the error result %q", c.model, last.Seq, unknown)
				}
			}
			for i, f := range []string{served, hooked} {
				if n := size(f); n != before[i] {
					t.Errorf("an unadvertised tool ran: %s grew by %d bytes", filepath.Base(f), n-before[i])
				}
			}
		})
	}
}

// everySessionMode makes the rig's Workspace a repository and readies two
// Sessions on it, a single-Agent one (coder, whose set is discarded at the
// end) and a lattice one whose team is w1 alone, with a /ws connection for
// their turns.
func (r *waysRig) everySessionMode(t *testing.T) (single, lattice string, tc *turnConn) {
	t.Helper()
	r.gitWorkspace(t)
	single = r.create(t, "").ID
	lattice = r.create(t, `"mode":{"kind":"lattice","workers":["w1"]}`).ID
	r.ready(t, single)
	r.ready(t, lattice)
	r.discardAtEnd(t, single)
	return single, lattice, openTurnConn(t, &turnRig{envRig: r.envRig, llm: r.llm, daemon: r.d})
}
