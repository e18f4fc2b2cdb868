package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// sharedAgents is one install folder for outside agents per machine, so
// that each test does not install the same pinned packages again (the
// installer's atomic rename keeps concurrent users apart).
func sharedAgents() Option { return WithAgentsDir(filepath.Join(os.TempDir(), "lathe-test-agents")) }

func TestOutsideAgentClaudeCode(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.Text("Writing it."),
			fakellm.ToolCall("toolu_1", "Bash", `{"command":"echo hi from claude > hello.txt && cat hello.txt",`, `"description":"write hello"}`),
			fakellm.Usage(100, 20, 0),
		}},
		{Steps: []fakellm.Step{fakellm.Text("Done: hello.txt says hi."), fakellm.Usage(120, 6, 0)}},
	}}
	r := turnDaemon(t, config.KindAnthropic, script, func(c *config.Config) {
		c.Agents = append(c.Agents, config.Agent{ID: "claude", Name: "Claude Code", Kind: "acp", ACP: &config.ACP{Preset: "claude-code"}, Provider: "fake", Model: "m1"})
	}, sharedAgents())
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"claude"}`).ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "c1", "input": "write hello.txt"})
	frames := outsideTurn(t, tc, "c1", "allow")
	for _, f := range frames {
		b, _ := json.Marshal(f)
		t.Logf("frame %s", b)
	}
	for _, q := range r.llm.Requests() {
		t.Logf("llm %s %s %.300s", q.Method, q.Path, q.Body)
	}
	if !strings.Contains(frames[len(frames)-1].Kind, "done") {
		t.Fatalf("turn ended %+v", frames[len(frames)-1])
	}
}

// outsideTurn reads turn's frames to its terminal one, answering each
// permission request with decision.
func outsideTurn(t *testing.T, tc *turnConn, turn, decision string) []turnFrame {
	t.Helper()
	ctx := testContext(t, 90*time.Second)
	var got []turnFrame
	for {
		kind, raw := readFrame(t, ctx, tc.c)
		if kind == "mcp-approval-required" {
			var a struct {
				ApprovalID string `json:"approval_id"`
				Server     string `json:"server"`
				Tool       string `json:"tool"`
				TurnID     string `json:"turn_id"`
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				t.Fatal(err)
			}
			t.Logf("approval %s", raw)
			tc.send(t, map[string]any{"cmd": "mcp-approve", "approval_id": a.ApprovalID, "decision": decision, "persist": "once"})
			got = append(got, turnFrame{Kind: kind, Name: a.Server + " " + a.Tool})
			continue
		}
		if kind == "event" || strings.HasPrefix(kind, "session-environment") {
			continue
		}
		var f turnFrame
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		if f.TurnID != turn {
			continue
		}
		got = append(got, f)
		if f.terminal() {
			return got
		}
	}
}
