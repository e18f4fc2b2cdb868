package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// TestLatticeTurnEndsOnceAfterKill kills a daemon (SIGKILL) while two
// Workers of a lattice turn run, one in a tool call and one mid-stream,
// and requires exactly one interrupted terminal record at the restart, the
// paid usage kept as a subtotal, and the plan's subtasks marked
// interrupted.
func TestLatticeTurnEndsOnceAfterKill(t *testing.T) {
	containerdtest.Namespace(t, turnProcNamespace)
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Model: "plan-m", Steps: []fakellm.Step{fakellm.ToolCall("p1", "submit_plan",
			`{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"run it"},{"id":"b","title":"B","instruction":"say it"}]}`), fakellm.Usage(10, 5, 0)}},
		{Model: "w1-m", Steps: []fakellm.Step{fakellm.ToolCall("c1", "shell", `{"command":"sleep 600"}`), fakellm.Usage(11, 7, 0)}},
		{Model: "w2-m", Steps: []fakellm.Step{fakellm.Text("saying"), fakellm.Stall(nil)}},
	}})
	t.Cleanup(fake.Close)
	t.Setenv("LATHE_TEST_TURN_KEY", "k")
	cfg := writeConfig(t, fmt.Sprintf(`sandbox:
  default_image: %q
  containerd: {address: %q, namespace: %q}
providers:
  fake: {kind: openai, base_url: %q, api_key_env: LATHE_TEST_TURN_KEY}
agents:
  - {id: planner, provider: fake, model: plan-m}
  - {id: w1, provider: fake, model: w1-m}
  - {id: w2, provider: fake, model: w2-m}
lattice: {coordinator: planner}
`, containerdtest.Image, containerdtest.Address(), turnProcNamespace, fake.URL()+"/v1"))
	data := t.TempDir()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	d := procStart(t, data, "--config", cfg)
	session := procCreate(t, d, dir, "")
	if ss := procWait(t, d, session, "settled", procSettled); ss.Environment.State != events.EnvReady {
		t.Fatalf("session not ready: %+v", ss.Environment)
	}
	// Both Workers are under way: w1's tool call started, w2 streams.
	var toolStarted, streaming bool
	procTurnFrames(t, d, map[string]any{"cmd": "session", "id": session, "turn_id": "L1", "input": "go"}, func(kind string, raw []byte) bool {
		toolStarted = toolStarted || kind == "tool-call" && strings.Contains(string(raw), `"agent":"w1"`)
		streaming = streaming || kind == "token" && strings.Contains(string(raw), `"agent":"w2"`)
		return toolStarted && streaming
	})
	d.kill(t)
	d = procStart(t, data, "--config", cfg)

	var terminal []string
	for _, env := range procEvents(t, d, session) {
		if env.Type == "turn-done" || env.Type == "turn-cancelled" || env.Type == "turn-failed" {
			terminal = append(terminal, env.Type)
		}
	}
	if !slices.Equal(terminal, []string{"turn-failed"}) {
		t.Fatalf("terminal records: %v, want exactly one turn-failed", terminal)
	}
	tr := procTurn(t, d, session, "L1")
	if tr.Status != projections.TurnError || !tr.Interrupted || tr.Usage.InputTokens != 21 || tr.Usage.OutputTokens != 12 || tr.Usage.TokenUsageKnown {
		t.Errorf("turn after the kill: status %s interrupted %v usage %+v", tr.Status, tr.Interrupted, tr.Usage)
	}
	if tr.Lattice == nil || len(tr.Lattice.Subtasks) != 2 || tr.Lattice.Subtasks[0].Status != projections.SubtaskInterrupted ||
		tr.Lattice.Subtasks[1].Status != projections.SubtaskInterrupted {
		t.Errorf("plan after the kill: %+v", tr.Lattice)
	}
	if status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+session+"/active-turn", ""); status != 200 || !strings.Contains(string(body), `"turn":null`) {
		t.Errorf("active turn after the restart: %d %s", status, body)
	}
	procDelete(t, d, session)
}
