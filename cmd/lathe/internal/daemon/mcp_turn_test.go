package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/sandboxtest"
)

// An Agent's turn calls an MCP tool: the call is parked until an operator
// decides, never dispatched before an allow (the test server logs every
// call it receives), its result goes back to the model, and the turn goes
// on; a deny answers the model with an error result; a Stop while parked
// ends the turn cancelled and resolves the approval as cancelled.
func TestMCPToolCallsInATurn(t *testing.T) {
	bin := mcpTestServer(t)
	calls := filepath.Join(t.TempDir(), "calls.log")
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "mcp__t__echo", `{"text":"hello over mcp"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("the server said it"), fakellm.Usage(20, 4, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c2", "mcp__t__echo", `{"text":"denied"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("ok, not allowed"), fakellm.Usage(20, 4, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c3", "mcp__t__echo", `{"text":"never"}`), fakellm.Usage(10, 5, 0)}},
	}}
	r := turnDaemon(t, config.KindOpenAI, script, func(c *config.Config) {
		c.MCP.Servers = []config.MCPServer{{Name: "t", Transport: "stdio", Command: bin, Env: map[string]string{"LATHE_MCPTEST_LOG": calls}}}
	})
	sandboxtest.WaitFor(t, 30*time.Second, func() bool {
		return strings.Contains(string(r.do(t, get, "/api/mcp/servers", "").body), `"status":"connected"`)
	})
	id := r.create(t, "").ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	logged := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "\n")
	}
	// parked waits for turn's call to be parked and returns its approval
	// ID, which a new connection's snapshot lists.
	parked := func(turn string) string {
		t.Helper()
		fs := tc.until(t, turn, func(f turnFrame) bool { return f.Kind == "mcp-approval-required" || f.terminal() })
		if last := fs[len(fs)-1]; last.Kind != "mcp-approval-required" {
			t.Fatalf("turn %s ended before its MCP call was parked: %+v", turn, fs)
		}
		snap := openTurnConn(t, r).snap
		if len(snap.Approvals) != 1 || snap.Approvals[0].TurnID != turn || snap.Approvals[0].Server != "t" || snap.Approvals[0].Tool != "echo" {
			t.Fatalf("snapshot approvals: %+v", snap.Approvals)
		}
		return snap.Approvals[0].ApprovalID
	}

	// Allow: the server gets the call only now.
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "t1", "input": "ask the server"})
	a1 := parked("t1")
	if n := logged(); n != 0 {
		t.Fatalf("the server received %d calls before any decision", n)
	}
	tc.send(t, map[string]any{"cmd": "mcp-approve", "approval_id": a1, "decision": "allow", "persist": "once"})
	fs := tc.terminal(t, "t1")
	var result *turnFrame
	for i := range fs {
		if fs[i].Kind == "tool-call" && fs[i].Phase == "result" {
			result = &fs[i]
		}
	}
	if result == nil || result.Name != "mcp__t__echo" || result.IsError || *result.Result != "hello over mcp" || fs[len(fs)-1].Kind != "session-done" {
		t.Fatalf("allowed turn frames: %+v", fs)
	}
	if n := logged(); n != 1 {
		t.Errorf("the server received %d calls, want 1", n)
	}
	if reqs := r.llm.Requests(); len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), `"mcp__t__echo"`) || !strings.Contains(string(reqs[1].Body), "hello over mcp") {
		t.Errorf("the model requests lack the MCP tool or its result")
	}

	// Deny: an error result to the model, the turn goes on, no call.
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "t2", "input": "ask again"})
	a2 := parked("t2")
	tc.send(t, map[string]any{"cmd": "mcp-approve", "approval_id": a2, "decision": "deny", "persist": "once"})
	fs = tc.terminal(t, "t2")
	var denied bool
	for _, f := range fs {
		denied = denied || (f.Kind == "tool-call" && f.Phase == "result" && f.IsError && *f.Result == "denied by the operator")
	}
	if !denied || fs[len(fs)-1].Kind != "session-done" || logged() != 1 {
		t.Errorf("denied turn: %+v, %d server calls", fs, logged())
	}

	// Stop while parked: cancelled, the approval resolved cancelled.
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "t3", "input": "once more"})
	parked("t3")
	tc.send(t, map[string]any{"cmd": "session-stop", "id": id, "turn_id": "t3"})
	if fs := tc.terminal(t, "t3"); fs[len(fs)-1].Kind != "session-cancelled" {
		t.Errorf("stopped while parked: %+v", fs)
	}
	if snap := openTurnConn(t, r).snap; len(snap.Approvals) != 0 || logged() != 1 {
		t.Errorf("after the stop: approvals %+v, %d server calls", snap.Approvals, logged())
	}
}
