package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// TestOutsideAgentAsLatticeWorker runs the real Claude Code as one Worker
// of a lattice turn, beside a built-in Worker that waits for its result:
// Claude Code's subtask runs in the Session's sandbox on an agent process
// of its own (its Anthropic calls translated by the gateway onto the
// coordinator's Chat Completions provider), its command approved; its
// result reaches the next Worker and the synthesis; its usage counts in
// the turn's.
func TestOutsideAgentAsLatticeWorker(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Model: "plan-m", Steps: []fakellm.Step{
			planCall(subtask("a", "write alpha into a.txt"), subtask("b", "say what a wrote", "a")), fakellm.Usage(100, 30, 0)}},
		{Model: "claude-m", Steps: []fakellm.Step{
			fakellm.ToolCall("toolu_a", "Bash", `{"command":"echo alpha > a.txt","description":"write a.txt"}`), fakellm.Usage(40, 10, 0)}},
		{Model: "claude-m", Steps: []fakellm.Step{fakellm.Text("wrote alpha"), fakellm.Usage(60, 5, 0)}},
		{Model: "w2-m", Steps: []fakellm.Step{fakellm.Text("a wrote alpha"), fakellm.Usage(70, 6, 0)}},
		{Model: "plan-m", Steps: []fakellm.Step{fakellm.Text("Done: alpha."), fakellm.Usage(200, 12, 0)}},
	}}
	r := turnDaemonIn(t, latticeNamespace, config.KindOpenAI, script, func(c *config.Config) {
		t.Setenv(testRuntimeKeyEnv, outsideSecret)
		c.Agents = []config.Agent{
			{ID: "planner", Name: "Planner", Provider: "fake", Model: "plan-m", Prompt: "you plan"},
			{ID: "claude", Name: "Claude Code", Kind: "acp", ACP: &config.ACP{Preset: "claude-code"}, Provider: "fake", Model: "claude-m"},
			{ID: "w2", Name: "Worker Two", Provider: "fake", Model: "w2-m"},
		}
		c.Lattice = config.Lattice{Coordinator: "planner"}
		c.Prices = nil
	}, sharedAgents(t, "claude-code"))
	id := r.create(t, `"mode":{"kind":"lattice"}`).ID
	r.ready(t, id)
	approveAll(t, r.srv)
	tc := openTurnConn(t, r)
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "L1", "input": "build the thing"})
	frames := tc.latticeFrames(t, "L1", terminalLattice)
	lines := latticeLines(frames)
	if last := frames[len(frames)-1].line(); last != `session-done tokens=470/63/0 known=true output="Done: alpha."` {
		t.Fatalf("the lattice turn ended %s\n%s", last, lines)
	}
	checkGolden(t, "lattice_outside_worker.golden", lines)
	if b, err := os.ReadFile(filepath.Join(r.dir, "a.txt")); err != nil || string(b) != "alpha\n" {
		t.Errorf("a.txt on the Workspace = %q, %v", b, err)
	}
	var w2Req string
	for _, q := range r.llm.Requests() {
		if q.Model == "w2-m" {
			w2Req = string(q.Body)
		}
		if q.Header.Get("Authorization") != "Bearer "+outsideSecret {
			t.Errorf("a model call reached the provider with %q", q.Header.Get("Authorization"))
		}
	}
	if !strings.Contains(w2Req, "wrote alpha") {
		t.Errorf("w2's request lacks Claude Code's result: %.600s", w2Req)
	}
}
