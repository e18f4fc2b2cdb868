package main

import (
	"encoding/json"
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

// TestLatticeTurnEndsOnceAcrossStops stops a daemon (SIGTERM, then
// SIGKILL) while two Workers of a lattice turn run, one in a tool call and
// one mid-stream, and requires exactly one interrupted terminal record per
// turn afterwards, the paid usage kept as a subtotal, the plan's subtasks
// marked interrupted and no Worker reported failed.
func TestLatticeTurnEndsOnceAcrossStops(t *testing.T) {
	containerdtest.Namespace(t, turnProcNamespace)
	var turns []fakellm.Turn
	for range 2 {
		turns = append(turns,
			fakellm.Turn{Model: "plan-m", Steps: []fakellm.Step{fakellm.ToolCall("p1", "submit_plan",
				`{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"run it"},{"id":"b","title":"B","instruction":"say it"}]}`), fakellm.Usage(10, 5, 0)}},
			fakellm.Turn{Model: "w1-m", Steps: []fakellm.Step{fakellm.ToolCall("c1", "shell", `{"command":"sleep 600"}`), fakellm.Usage(11, 7, 0)}},
			fakellm.Turn{Model: "w2-m", Steps: []fakellm.Step{fakellm.Text("saying"), fakellm.Stall(nil)}})
	}
	fake := fakellm.New(fakellm.Script{Turns: turns})
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
	// No subtests: each restarted daemon must outlive the case that starts it.
	for _, c := range procStops(&d) {
		// Both Workers are under way: w1's tool call started, w2 streams.
		var toolStarted, streaming bool
		procTurnFrames(t, d, map[string]any{"cmd": "session", "id": session, "turn_id": c.turn, "input": "go"}, func(kind string, raw []byte) bool {
			toolStarted = toolStarted || kind == "tool-call" && strings.Contains(string(raw), `"agent":"w1"`)
			streaming = streaming || kind == "token" && strings.Contains(string(raw), `"agent":"w2"`)
			return toolStarted && streaming
		})
		c.stop(t)
		d = procStart(t, data, "--config", cfg)

		var terminal []string
		for _, env := range procEvents(t, d, session) {
			var p struct {
				TurnID string `json:"turn_id"`
				State  string `json:"state"`
			}
			_ = json.Unmarshal(env.Data, &p)
			switch {
			case p.TurnID != c.turn:
			case env.Type == "turn-done" || env.Type == "turn-cancelled" || env.Type == "turn-failed":
				terminal = append(terminal, env.Type)
			case env.Type == "lattice-task" && p.State != events.TaskActivated:
				t.Errorf("%s: a Worker's subtask recorded %s", c.turn, p.State)
			}
		}
		if !slices.Equal(terminal, []string{"turn-failed"}) {
			t.Fatalf("terminal records of %s: %v, want exactly one turn-failed", c.turn, terminal)
		}
		tr := procTurn(t, d, session, c.turn)
		if tr.Status != projections.TurnError || !tr.Interrupted || !strings.Contains(tr.Error, c.wantErr) ||
			tr.Usage.InputTokens != 21 || tr.Usage.OutputTokens != 12 || tr.Usage.TokenUsageKnown {
			t.Errorf("%s: turn after the stop: status %s interrupted %v error %q usage %+v", c.turn, tr.Status, tr.Interrupted, tr.Error, tr.Usage)
		}
		if tr.Lattice == nil || len(tr.Lattice.Subtasks) != 2 || tr.Lattice.Subtasks[0].Status != projections.SubtaskInterrupted ||
			tr.Lattice.Subtasks[1].Status != projections.SubtaskInterrupted {
			t.Errorf("%s: plan after the stop: %+v", c.turn, tr.Lattice)
		}
		if status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+session+"/active-turn", ""); status != 200 || !strings.Contains(string(body), `"turn":null`) {
			t.Errorf("active turn after the restart: %d %s", status, body)
		}
	}
	procDelete(t, d, session)
}
