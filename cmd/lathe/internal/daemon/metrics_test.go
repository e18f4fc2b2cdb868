package daemon

import (
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/projections/metrics/metricstest"
	"lathe/runtime/llm/fakellm"
)

// TestMetricsLabelOnlyKnownNames: a model_override and a tool name the
// model made up are no /metrics label values (each would be a series for
// the life of the process); they count as "other", beside the configured
// model and the advertised tool, which keep their own (issue 32,
// finding 7).
func TestMetricsLabelOnlyKnownNames(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "made_up_tool_1", `{}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c2", "shell", `{"command":"true"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("done"), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("executed"), fakellm.Usage(7, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("plain"), fakellm.Usage(5, 1, 0)}},
	}}
	r := turnDaemonIn(t, "lathe-test-metrics-labels", config.KindOpenAI, script, nil)
	id := r.create(t, "").ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "t-1", "input": "go", "model_override": "invented-model-1"})
	if fs := tc.terminal(t, "t-1"); fs[len(fs)-1].Kind != "session-done" {
		t.Fatalf("turn: %+v", fs[len(fs)-1])
	}
	for _, body := range []string{`{"input":"x","model_override":"invented-model-2"}`, `{"input":"y"}`} {
		if resp := r.do(t, post, "/api/agents/coder/execute", body); resp.status != 200 {
			t.Fatalf("execute %s: %d %s", body, resp.status, resp.body)
		}
	}

	text := string(r.do(t, get, "/metrics", "").body)
	for _, want := range []string{
		`lathe_tool_calls_total{outcome="error",tool="other"} 1`,
		`lathe_tool_calls_total{outcome="ok",tool="shell"} 1`,
		`lathe_model_tokens_total{agent="coder",direction="input",model="other",usage_known="true"} 37` + "\n",
		`lathe_model_tokens_total{agent="coder",direction="input",model="m1",usage_known="true"} 5` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, outside := range []string{"invented-model", "made_up_tool"} {
		if strings.Contains(text, outside) {
			t.Errorf("/metrics labels %s:\n%s", outside, text)
		}
	}
	metricstest.Promtool(t, text)
}
