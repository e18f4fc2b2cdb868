package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

const turnProcNamespace = "lathe-test-turnproc"

// procTurnFrames sends a session command on a fresh /ws connection and
// reads that turn's frames until stop holds for one.
func procTurnFrames(t *testing.T, d *daemonProc, cmd map[string]any, stop func(kind string, raw []byte) bool) []string {
	t.Helper()
	ctx := procContext(t, 30*time.Second)
	c, _, err := websocket.Dial(ctx, d.url+"/ws", nil)
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	b, _ := json.Marshal(cmd)
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for {
		_, raw, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read /ws after %v: %v\nstderr:\n%s", kinds, err, d.stderr.String())
		}
		var f struct {
			Kind   string `json:"kind"`
			TurnID string `json:"turn_id"`
		}
		if json.Unmarshal(raw, &f) != nil || f.TurnID != cmd["turn_id"] {
			continue
		}
		kinds = append(kinds, f.Kind)
		if stop(f.Kind, raw) {
			return kinds
		}
	}
}

// turnProcConfig writes a config whose Agent coder talks to fake over the
// OpenAI protocol, with sandboxes in turnProcNamespace, plus extra YAML.
func turnProcConfig(t *testing.T, fake *fakellm.Server, extra string) string {
	t.Helper()
	t.Setenv("LATHE_TEST_TURN_KEY", "k")
	return writeConfig(t, fmt.Sprintf(`sandbox:
  default_image: %q
  containerd:
    address: %q
    namespace: %q
providers:
  fake:
    kind: openai
    base_url: %q
    api_key_env: LATHE_TEST_TURN_KEY
agents:
  - id: coder
    name: Coder
    provider: fake
    model: m1
`, containerdtest.Image, containerdtest.Address(), turnProcNamespace, fake.URL()+"/v1")+extra)
}

func procTurn(t *testing.T, d *daemonProc, session, turn string) projections.Turn {
	t.Helper()
	status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+session+"/turns/"+turn, "")
	var tr projections.Turn
	if status != 200 || json.Unmarshal(body, &tr) != nil {
		t.Fatalf("GET turn %s: %d %s", turn, status, body)
	}
	return tr
}

// TestTurnsEndOnceAcrossStops stops a daemon under a running turn, by
// SIGTERM and by SIGKILL, and requires exactly one terminal record per turn
// afterwards, with the usage already paid kept visible.
func TestTurnsEndOnceAcrossStops(t *testing.T) {
	containerdtest.Namespace(t, turnProcNamespace)
	// Each turn: one inference that asks for a long shell command (paid:
	// 11 in, 7 out), during which the daemon is stopped.
	step := fakellm.Turn{Steps: []fakellm.Step{
		fakellm.Text("running it"),
		fakellm.ToolCall("c1", "shell", `{"command":"sleep 600"}`),
		fakellm.Usage(11, 7, 0),
	}}
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{step, step}})
	t.Cleanup(fake.Close)
	cfg := turnProcConfig(t, fake, "")
	data := t.TempDir()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	d := procStart(t, data, "--config", cfg)
	session := procCreate(t, d, dir, "")
	if ss := procWait(t, d, session, "settled", procSettled); ss.Environment.State != events.EnvReady {
		t.Fatalf("session not ready: %+v", ss.Environment)
	}

	// No subtests: each restarted daemon must outlive the case that starts it.
	for _, c := range procStops(&d) {
		{
			cmd := map[string]any{"cmd": "session", "id": session, "turn_id": c.turn, "input": "run the long thing", "target_agent": "coder"}
			procTurnFrames(t, d, cmd, func(kind string, raw []byte) bool {
				return kind == "tool-call" && strings.Contains(string(raw), `"phase":"start"`)
			})
			c.stop(t)
			d = procStart(t, data, "--config", cfg)
			var terminal []string
			for _, env := range procEvents(t, d, session) {
				if env.Type == "turn-done" || env.Type == "turn-cancelled" || env.Type == "turn-failed" {
					var p struct {
						TurnID string `json:"turn_id"`
					}
					_ = json.Unmarshal(env.Data, &p)
					if p.TurnID == c.turn {
						terminal = append(terminal, env.Type)
					}
				}
			}
			if !slices.Equal(terminal, []string{"turn-failed"}) {
				t.Fatalf("terminal records of %s: %v, want exactly one turn-failed", c.turn, terminal)
			}
			tr := procTurn(t, d, session, c.turn)
			if tr.Status != projections.TurnError || !tr.Interrupted || !strings.Contains(tr.Error, c.wantErr) ||
				tr.Usage.InputTokens != 11 || tr.Usage.OutputTokens != 7 || tr.Usage.TokenUsageKnown {
				t.Errorf("turn after the stop: status %s interrupted %v error %q usage %+v", tr.Status, tr.Interrupted, tr.Error, tr.Usage)
			}
			// The Session takes turns again once its environment is back:
			// nothing is left live.
			if ss := procWait(t, d, session, "settled after the restart", procSettled); ss.Environment.State != events.EnvReady {
				t.Fatalf("session not ready after the restart: %+v", ss.Environment)
			}
			if status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+session+"/active-turn", ""); status != 200 || !strings.Contains(string(body), `"turn":null`) {
				t.Errorf("active turn after the restart: %d %s", status, body)
			}
		}
	}
	procDelete(t, d, session) // while the last daemon runs: cleanups stop it first
}

// procStop is a way to stop a daemon under a running turn (its turn ID
// names it), with what the turn's interrupted record then says.
type procStop struct {
	turn    string
	stop    func(*testing.T)
	wantErr string
}

// procStops stops *d by SIGTERM, then by SIGKILL.
func procStops(d **daemonProc) []procStop {
	return []procStop{
		{"sigterm", func(t *testing.T) { (*d).stop(t) }, "shutting down"},
		{"sigkill", func(t *testing.T) { (*d).kill(t) }, "stopped during this turn"},
	}
}
