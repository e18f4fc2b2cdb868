package daemon

import (
	"slices"
	"sort"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// TestOutsideAgentTelemetry: the real Claude Code's turn is traced and
// counted as a built-in one is: one invoke_agent span with a chat span per
// model call the gateway metered and an execute_tool span for its command,
// and its tokens and time to first token in /metrics, by Agent.
func TestOutsideAgentTelemetry(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	rc := newOTLPReceiver(t)
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("toolu_t", "Bash", `{"command":"true","description":"nothing"}`), fakellm.Usage(100, 20, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("done"), fakellm.Usage(120, 6, 0)}},
	}}
	r := turnDaemon(t, config.KindAnthropic, script, func(c *config.Config) {
		c.Telemetry.OTLPEndpoint = rc.srv.URL
		c.Agents = append(c.Agents, config.Agent{ID: "claude", Name: "Claude Code", Kind: "acp", ACP: &config.ACP{Preset: "claude-code"}, Provider: "fake", Model: "m1"})
	}, sharedAgents(t, "claude-code"))
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"claude"}`).ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "tr1", "input": "do nothing"})
	if f := outsideTurn(t, tc, "tr1", "allow"); f[len(f)-1].Kind != "session-done" {
		t.Fatalf("turn ended %s", f[len(f)-1].line())
	}
	spans := slices.DeleteFunc(rc.await(t, 5), func(s *tracepb.Span) bool { return s.Name == "sandbox.prepare" })
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	if want := []string{"chat m1", "chat m1", "execute_tool execute", "invoke_agent Claude Code"}; !slices.Equal(names, want) {
		t.Errorf("spans %v, want %v", names, want)
	}
	metrics := string(r.do(t, get, "/metrics", "").body)
	for _, want := range []string{`lathe_tokens_total{agent="claude",direction="input"} 220`, `lathe_tokens_total{agent="claude",direction="output"} 26`,
		`lathe_time_to_first_token_seconds_count{agent="claude",scope="session"} 2`, `lathe_inference_seconds_count{agent="claude"} 2`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, `agent="claude"`))
		}
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
