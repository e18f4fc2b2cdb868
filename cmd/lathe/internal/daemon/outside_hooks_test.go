package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// TestOutsideAgentHooks runs the operator's tool hooks on the real Claude
// Code's calls: a PreToolUse hook blocks a command before anyone is asked
// (its card says why; ACP carries no reason to the agent), and a PostToolUse hook runs once an
// allowed command ran, with the call as its input, its note on the card.
func TestOutsideAgentHooks(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("toolu_rm", "Bash", `{"command":"rm -rf notes","description":"clean up"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("I was not allowed."), fakellm.Usage(12, 3, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("toolu_ok", "Bash", `{"command":"echo fine > ok.txt","description":"write ok"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("Wrote it."), fakellm.Usage(12, 3, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("toolu_ask", "Bash", `{"command":"echo asked > asked.txt","description":"ask first"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("Asked and wrote."), fakellm.Usage(12, 3, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("toolu_deploy", "Bash", `{"command":"echo deploy > deployed.txt","description":"deploy"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("never asked for"), fakellm.Usage(12, 3, 0)}},
	}}
	r := turnDaemon(t, config.KindAnthropic, script, func(c *config.Config) {
		c.Hooks = []config.Hook{
			{Event: "PreToolUse", Matcher: "execute", Name: "no-rm",
				Command: `grep -q 'rm -rf' && { echo "rm -rf is not allowed here" >&2; exit 2; }; exit 0`},
			{Event: "PreToolUse", Matcher: "execute", Name: "look",
				Command: `grep -q asked && echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"a look first"}}'; exit 0`},
			{Event: "PreToolUse", Matcher: "execute", Name: "halt",
				Command: `grep -q deploy && echo '{"continue":false,"stopReason":"deploys wait"}'; exit 0`},
			{Event: "PostToolUse", Matcher: "execute", Name: "audit", Command: `cat > post-tool.json; echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"audited"}}'`},
		}
		c.Agents = append(c.Agents, config.Agent{ID: "claude", Name: "Claude Code", Kind: "acp", ACP: &config.ACP{Preset: "claude-code"}, Provider: "fake", Model: "m1"})
	}, sharedAgents(t, "claude-code"))
	if err := os.MkdirAll(filepath.Join(r.dir, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"claude"}`).ID
	r.ready(t, id)
	tc := openTurnConn(t, r)

	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "h1", "input": "clean up"})
	got := strings.Join(goldenLines(t, id, outsideTurn(t, tc, "h1", "allow")), "\n")
	if strings.Contains(got, "mcp-approval-required") || !strings.Contains(got, `output="I was not allowed."`) {
		t.Errorf("the blocked call's turn:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "notes")); err != nil {
		t.Errorf("the blocked command ran: %v", err)
	}
	if !strings.Contains(got, "[blocked by hook `no-rm`: rm -rf is not allowed here]") || strings.Contains(got, "audited") {
		t.Errorf("the blocked call's card should say why, and no PostToolUse hook runs on a call that never ran:\n%s", got)
	}

	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "h2", "input": "write ok"})
	got = strings.Join(goldenLines(t, id, outsideTurn(t, tc, "h2", "allow")), "\n")
	if !strings.Contains(got, "audited") || !strings.Contains(got, `output="Wrote it."`) {
		t.Errorf("the allowed call's card lacks the PostToolUse note:\n%s", got)
	}
	b, err := os.ReadFile(filepath.Join(r.dir, "post-tool.json"))
	if err != nil || !strings.Contains(string(b), `"hook_event_name":"PostToolUse"`) || !strings.Contains(string(b), `"command":"echo fine`) {
		t.Errorf("the PostToolUse hook's input = %s, %v", b, err)
	}

	// A hook's ask is the one question put to the operator, under its
	// server.
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "h3", "input": "ask first"})
	got = strings.Join(goldenLines(t, id, outsideTurn(t, tc, "h3", "allow")), "\n")
	if strings.Count(got, "mcp-approval-required") != 1 || !strings.Contains(got, "mcp-approval-required hook:look execute") || !strings.Contains(got, `output="Asked and wrote."`) {
		t.Errorf("the asked call's turn:\n%s", got)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "asked.txt")); err != nil || string(b) != "asked\n" {
		t.Errorf("the allowed asked command: %q, %v", b, err)
	}

	// continue: false ends the turn: the call is refused, the agent asked
	// nothing more.
	before := len(r.llm.Requests())
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "h4", "input": "deploy"})
	f := outsideTurn(t, tc, "h4", "allow")
	if end := f[len(f)-1]; end.Kind != "session-cancelled" || end.StopReason != "stopped by hook `halt`: deploys wait" {
		t.Errorf("the stopped turn ended %+v", end)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "deployed.txt")); !os.IsNotExist(err) {
		t.Errorf("the stopped call ran: %v", err)
	}
	if n := len(r.llm.Requests()) - before; n != 1 {
		t.Errorf("%d model calls in the stopped turn, want 1", n)
	}
}
