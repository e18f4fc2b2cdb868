package metrics

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections/metrics/metricstest"
	"lathe/runtime/usage"
)

func rec(agg string, at time.Time, p events.Payload) journal.Record {
	return journal.Record{Envelope: journal.Envelope{Type: p.EventType(), Aggregate: p.Aggregate(), AggregateID: agg, At: at}, Raw: []byte(`{}`), Payload: p}
}

// scrape returns the text /metrics serves.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", w.Code, w.Body)
	}
	return w.Body.String()
}

// TestFoldAndFormat folds a turn with two tool calls, a hook and an
// approval, a Chat turn's, an agent node's, an execute's and an A2A task's
// inferences (their tokens and cost in the same series as the turn's), and checks the series and
// the text promtool accepts.
func TestFoldAndFormat(t *testing.T) {
	m := New(Options{Version: "test", WSClients: func() int { return 3 }, WSCutOffs: func() int64 { return 2 }, SandboxProvider: "containerd",
		Models: []string{"m1", "m2", "m3"}, Tool: func(name string) bool { return name == "shell" || name == "read_file" }})
	t0 := time.Now().Add(-time.Minute)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	usd, chatUSD, nodeUSD, a2aUSD := 0.25, 0.5, 0.125, 0.0625
	m.Observe([]journal.Record{rec("S1", at(-2000), events.EnvironmentChanging{Generation: 1}), rec("S1", at(-500), events.EnvironmentReady{Generation: 1})})
	m.Observe([]journal.Record{rec("S1", at(0), events.TurnAccepted{TurnID: "T1", AgentID: "coder"}), rec("S1", at(10), events.TurnStarted{TurnID: "T1", Agent: "coder", Model: "m1"})})
	m.Observe([]journal.Record{
		rec("S1", at(510), events.TurnOutput{TurnID: "T1", Agent: "coder", Step: 1, FirstTokenMS: 300}),
		rec("S1", at(511), events.TurnUsage{TurnID: "T1", Agent: "coder", Step: 1, Model: "m1", CostUSD: &usd, Tokens: usage.Tokens{InputTokens: 100, OutputTokens: 20, ReasoningTokens: 5}}),
	})
	m.Observe([]journal.Record{
		rec("S1", at(520), events.HookRan{TurnID: "T1", Event: "PreToolUse", Hook: "no-rm", Decision: "block"}),
		rec("C1", at(521), events.ChatHookRan{HookRun: events.HookRun{TurnID: "CT", Event: "UserPromptSubmit", Hook: "guard", Decision: "error"}}),
		rec("R1", at(522), events.NodeHookRan{Node: "ask", HookRun: events.HookRun{TurnID: "ask", Event: "PreToolUse", Hook: "guard", Decision: "allow"}}),
		rec("S1", at(530), events.ToolCallFinished{TurnID: "T1", Agent: "coder", Name: "shell", IsError: true, DurationMS: 20}),
		rec("S1", at(540), events.ToolCallFinished{TurnID: "T1", Agent: "coder", Name: "read_file", DurationMS: 3}),
		rec("A1", at(600), events.ApprovalRequested{AgentID: "coder"}),
		rec("A1", at(2600), events.ApprovalResolved{Decision: "allow"}),
		rec("S1", at(3540), events.TurnOutput{TurnID: "T1", Agent: "coder", Step: 2}),
		rec("S1", at(3541), events.TurnUsage{TurnID: "T1", Agent: "coder", Step: 2, Model: "m1", Tokens: usage.Tokens{InputTokens: 50, OutputTokens: 2}}),
		rec("S1", at(3550), events.TurnDone{TurnID: "T1"}),
		rec("S2", at(3560), events.TurnFailed{TurnID: "T2"}),
	})
	m.Observe([]journal.Record{
		rec("C1", at(4000), events.ChatTurnEnded{TurnID: "CT", Outcome: events.ChatDone, Inferences: []events.Inference{
			{Agent: "coder", Step: 1, Model: "m1", DurationMS: 700, FirstTokenMS: 200, InputTokens: 40, OutputTokens: 10, ReasoningTokens: 3, UsageKnown: true, CostUSD: &chatUSD},
			{Agent: "coder", Step: 2, Model: "m1", DurationMS: 300, InputTokens: 60, OutputTokens: 5, UsageKnown: true}}}),
		rec("R1", at(4100), events.NodeFinished{Node: "ask", State: events.StateSucceeded, Inferences: []events.Inference{
			{Agent: "reviewer", Step: 1, Model: "m2", DurationMS: 900, FirstTokenMS: 400, InputTokens: 30, OutputTokens: 7, CostUSD: &nodeUSD}}}),
		rec("E1", at(4200), events.AgentExecuted{Intent: "E1", Inferences: []events.Inference{
			{Agent: "scout", Step: 1, Model: "m3", DurationMS: 500, FirstTokenMS: 100, InputTokens: 9, OutputTokens: 4, UsageKnown: true}}}),
		rec("X1", at(4300), events.A2ATaskEnded{State: "completed", Inferences: []events.Inference{
			{Agent: "helper", Step: 1, Model: "m1", DurationMS: 250, FirstTokenMS: 50, InputTokens: 3, OutputTokens: 2, UsageKnown: true, CostUSD: &a2aUSD}}}),
	})
	text := scrape(t, m)
	for _, want := range []string{
		`lathe_turns_total{outcome="done"} 1`,
		`lathe_turns_total{outcome="error"} 1`,
		`lathe_turns_started_total{agent="coder"} 1`,
		`lathe_tokens_total{agent="coder",direction="input"} 250`,
		`lathe_tokens_total{agent="coder",direction="output"} 37`,
		`lathe_tokens_total{agent="coder",direction="reasoning"} 8`,
		`lathe_tokens_total{agent="reviewer",direction="input"} 30`,
		`lathe_tokens_total{agent="reviewer",direction="output"} 7`,
		`lathe_cost_usd_total{agent="coder"} 0.75`,
		`lathe_cost_usd_total{agent="reviewer"} 0.125`,
		`lathe_inferences_unpriced_total{agent="coder"} 2`,
		`lathe_tool_calls_total{outcome="error",tool="shell"} 1`,
		`lathe_tool_calls_total{outcome="ok",tool="read_file"} 1`,
		`lathe_hook_runs_total{decision="block",event="PreToolUse"} 1`,
		`lathe_inference_seconds_count{agent="coder"} 4`,
		`lathe_inference_seconds_sum{agent="coder"} 4.5`,
		`lathe_inference_seconds_sum{agent="reviewer"} 0.9`,
		`lathe_time_to_first_token_seconds_count{agent="coder",scope="session"} 1`,
		`lathe_time_to_first_token_seconds_sum{agent="coder",scope="session"} 0.3`,
		`lathe_time_to_first_token_seconds_count{agent="coder",scope="chat"} 1`,
		`lathe_time_to_first_token_seconds_sum{agent="coder",scope="chat"} 0.2`,
		`lathe_time_to_first_token_seconds_sum{agent="reviewer",scope="automation"} 0.4`,
		`lathe_time_to_first_token_seconds_sum{agent="scout",scope="agent"} 0.1`,
		`lathe_tokens_total{agent="scout",direction="input"} 9`,
		`lathe_inferences_unpriced_total{agent="scout"} 1`,
		// An inbound A2A task counts as the other runs do (issue 35).
		`lathe_tokens_total{agent="helper",direction="input"} 3`,
		`lathe_tokens_total{agent="helper",direction="output"} 2`,
		`lathe_cost_usd_total{agent="helper"} 0.0625`,
		`lathe_inference_seconds_sum{agent="helper"} 0.25`,
		`lathe_time_to_first_token_seconds_sum{agent="helper",scope="a2a"} 0.05`,
		`lathe_hook_runs_total{decision="error",event="UserPromptSubmit"} 1`,
		`lathe_hook_runs_total{decision="allow",event="PreToolUse"} 1`,
		`lathe_approval_wait_seconds_sum 2`,
		`lathe_model_tokens_total{agent="coder",direction="input",model="m1",usage_known="false"} 150`,
		`lathe_model_tokens_total{agent="coder",direction="input",model="m1",usage_known="true"} 100`,
		`lathe_model_tokens_total{agent="coder",direction="reasoning",model="m1",usage_known="true"} 3`,
		`lathe_model_tokens_total{agent="reviewer",direction="output",model="m2",usage_known="false"} 7`,
		`lathe_sandboxes_total{provider="containerd",state="ready"} 1`,
		`lathe_sandbox_ready_seconds_sum{provider="containerd"} 1.5`,
		`lathe_journal_appends_total 21`,
		`lathe_journal_commits_total 5`,
		`lathe_journal_commit_latency_seconds_count 5`,
		`lathe_ws_clients 3`,
		`lathe_ws_cutoffs_total 2`,
		`lathe_build_info{version="test"} 1`,
		`go_goroutines `,
		`process_resident_memory_bytes `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	if len(m.ready) != 0 || len(m.changing) != 0 {
		t.Errorf("ended turns or changes left state: %v %v", m.ready, m.changing)
	}
	metricstest.Promtool(t, text)
}

// TestLabelsAreBounded: model and tool names from outside (a
// model_override, a name a model made up) add no series; they count under
// Other beside the configured models and the advertised tools (issue 32,
// finding 7).
func TestLabelsAreBounded(t *testing.T) {
	m := New(Options{Models: []string{"m1"}, Tool: func(name string) bool { return name == "shell" }})
	at := time.Now()
	series := func(text, prefix string) int {
		n := 0
		for line := range strings.SplitSeq(text, "\n") {
			if strings.HasPrefix(line, prefix) {
				n++
			}
		}
		return n
	}
	fold := func(i int) {
		m.Observe([]journal.Record{
			rec("E1", at, events.AgentExecuted{Intent: "E1", Inferences: []events.Inference{
				{Agent: "coder", Step: 1, Model: fmt.Sprintf("override-%d", i), DurationMS: 5, InputTokens: 1, UsageKnown: true},
				{Agent: "coder", Step: 2, Model: "m1", DurationMS: 5, InputTokens: 1, UsageKnown: true}}}),
			rec("S1", at, events.TurnUsage{TurnID: "T1", Agent: "coder", Step: i, Model: fmt.Sprintf("turn-override-%d", i), Tokens: usage.Tokens{InputTokens: 1, TokenUsageKnown: true}}),
			rec("S1", at, events.ToolCallFinished{TurnID: "T1", Agent: "coder", Name: fmt.Sprintf("made_up_%d", i), IsError: true}),
			rec("S1", at, events.ToolCallFinished{TurnID: "T1", Agent: "coder", Name: "shell"}),
		})
	}
	fold(0)
	first := scrape(t, m)
	for i := 1; i < 40; i++ {
		fold(i)
	}
	text := scrape(t, m)
	for _, prefix := range []string{"lathe_model_tokens_total{", "lathe_tool_calls_total{", "lathe_tool_call_seconds_count{"} {
		if got, want := series(text, prefix), series(first, prefix); got != want {
			t.Errorf("%s: %d series after 40 outside names, %d after one", prefix, got, want)
		}
	}
	for _, want := range []string{
		`lathe_model_tokens_total{agent="coder",direction="input",model="m1",usage_known="true"} 40`,
		`lathe_model_tokens_total{agent="coder",direction="input",model="other",usage_known="true"} 80`,
		`lathe_tool_calls_total{outcome="ok",tool="shell"} 40`,
		`lathe_tool_calls_total{outcome="error",tool="other"} 40`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, "override-") || strings.Contains(text, "made_up_") {
		t.Errorf("an outside name is a label:\n%s", text)
	}
	metricstest.Promtool(t, text)
}

// BenchmarkObserve is the commit feed's cost per turn-usage event.
func BenchmarkObserve(b *testing.B) {
	m := New(Options{})
	batch := []journal.Record{rec("S1", time.Now(), events.TurnUsage{TurnID: "T1", Agent: "coder", Model: "m1", Tokens: usage.Tokens{InputTokens: 1}})}
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(batch)
	}
}
