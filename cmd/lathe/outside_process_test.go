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

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// TestOutsideTurnAcrossKill9 kills a daemon with SIGKILL while the real
// Claude Code (installed by that daemon from npm) streams a turn in the
// Session's sandbox. The next daemon ends that turn exactly once, as
// interrupted; kills the agent process the dead daemon left behind; and
// the next turn runs on a new agent process that resumed the agent's own
// session with session/load: its model call carries the first turn.
func TestOutsideTurnAcrossKill9(t *testing.T) {
	containerdtest.Namespace(t, turnProcNamespace)
	release := make(chan struct{})
	defer close(release)
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Text("Noted: pelican."), fakellm.Usage(10, 3, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("thinking it over"), fakellm.Stall(release)}},
		{Steps: []fakellm.Step{fakellm.Text("The word was pelican."), fakellm.Usage(30, 5, 0)}},
	}})
	t.Cleanup(fake.Close)
	// The agent's own mark, so that this test finds its processes among
	// the host's.
	mark := "LATHE_TEST_AGENT_MARK=" + filepath.Base(t.TempDir())
	t.Setenv("TEST_OUTSIDE_PROVIDER_KEY", "sk-never-in-the-sandbox")
	cfg := writeConfig(t, fmt.Sprintf(`sandbox:
  default_image: %q
  containerd: {address: %q, namespace: %q}
providers:
  fake: {kind: anthropic, base_url: %q, api_key_env: TEST_OUTSIDE_PROVIDER_KEY}
agents:
  - id: claude
    name: Claude Code
    kind: acp
    acp: {preset: claude-code, env: {%s: %s}}
    provider: fake
    model: m1
`, containerdtest.Image, containerdtest.Address(), turnProcNamespace, fake.URL(), strings.Split(mark, "=")[0], strings.Split(mark, "=")[1]))
	data := t.TempDir()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	d := procStart(t, data, "--config", cfg)
	// The first preparation installs the agent: minutes at most.
	status, resp := procDo(t, http.MethodPost, d.url+"/api/sessions", `{"working_dir":"`+dir+`","name":"claude","mode":{"kind":"single_agent","agent_id":"claude"}}`)
	if status != 201 {
		t.Fatalf("create session: %d %s", status, resp)
	}
	session := idOf(t, resp)
	polltest.Check(t, func() error {
		if ss := procSession(t, d, session); !procSettled(ss) {
			return fmt.Errorf("environment %s", ss.Environment.State)
		} else if ss.Environment.State != events.EnvReady {
			t.Fatalf("session not ready: %+v", ss.Environment)
		}
		return nil
	}, polltest.Within(5*time.Minute))

	t.Cleanup(func() {
		if t.Failed() {
			for _, q := range fake.Requests() {
				t.Logf("model call %d (script turn %d) %s %.300s", q.Seq, q.Turn, q.Path, q.Body)
			}
		}
	})
	done := func(kind string, _ []byte) bool {
		return strings.HasPrefix(kind, "session-") && kind != "session-accepted" && kind != "session-start"
	}
	if k := procTurnFrames(t, d, map[string]any{"cmd": "session", "id": session, "turn_id": "t1", "input": "remember the word pelican"}, done); k[len(k)-1] != "session-done" {
		t.Fatalf("first turn: %v\n%s", k, d.stderr.String())
	}
	procTurnFrames(t, d, map[string]any{"cmd": "session", "id": session, "turn_id": "t2", "input": "think it over"}, func(kind string, _ []byte) bool { return kind == "token" })
	if len(carriersOf(mark)) == 0 {
		t.Fatal("no agent process carries the test's mark: the checks below would prove nothing")
	}
	d.kill(t)
	left := carriersOf(mark)
	if len(left) == 0 {
		t.Fatal("the agent process died with the daemon: nothing was left for the next start to end")
	}

	d = procStart(t, data, "--config", cfg)
	polltest.Check(t, func() error {
		if c := carriersOf(mark); len(c) > 0 {
			return fmt.Errorf("the dead daemon's agent still runs: %q", c)
		}
		return nil
	}, polltest.Within(time.Minute))
	var terminal []string
	for _, env := range procEvents(t, d, session) {
		var p struct {
			TurnID string `json:"turn_id"`
		}
		if json.Unmarshal(env.Data, &p) == nil && p.TurnID == "t2" && slices.Contains([]string{"turn-done", "turn-cancelled", "turn-failed"}, env.Type) {
			terminal = append(terminal, env.Type)
		}
	}
	if !slices.Equal(terminal, []string{"turn-failed"}) {
		t.Fatalf("terminal records of the killed turn: %v, want exactly one turn-failed", terminal)
	}
	if tr := procTurn(t, d, session, "t2"); tr.Status != projections.TurnError || !tr.Interrupted {
		t.Errorf("the killed turn: status %s interrupted %v error %q", tr.Status, tr.Interrupted, tr.Error)
	}

	// The next turn: a new process, the agent's own session loaded.
	calls := len(fake.Requests())
	k := procTurnFrames(t, d, map[string]any{"cmd": "session", "id": session, "turn_id": "t3", "input": "which word was it?"}, done)
	if k[len(k)-1] != "session-done" {
		t.Fatalf("turn after the restart: %v\n%s", k, d.stderr.String())
	}
	reqs := fake.Requests()
	if len(reqs) <= calls {
		t.Fatal("the turn after the restart made no model call")
	}
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "remember the word pelican") || !strings.Contains(last, "which word was it?") {
		t.Errorf("the model call after the restart lacks the first turn (no session/load): %.600s", last)
	}
	for _, q := range reqs {
		if q.Header.Get("X-Api-Key") != "sk-never-in-the-sandbox" {
			t.Errorf("a model call reached the provider with key %q", q.Header.Get("X-Api-Key"))
		}
	}
	if status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+session+"/active-turn", ""); status != 200 || !strings.Contains(string(body), `"turn":null`) {
		t.Errorf("active turn at the end: %d %s", status, body)
	}
	procDelete(t, d, session)
}
