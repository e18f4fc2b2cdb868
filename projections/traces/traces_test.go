package traces

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/usage"
)

func rec(agg string, seq uint64, at time.Time, p events.Payload) journal.Record {
	return journal.Record{Envelope: journal.Envelope{Seq: seq, Type: p.EventType(), AggregateID: agg, At: at}, Payload: p}
}

// TestFold folds a lattice turn whose Worker's call was held by a hook and
// an approval, and checks the tree and the span events.
func TestFold(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tr := New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr)).Tracer("test"), Options{Agents: map[string]Agent{
		"lead":   {Name: "Lead", Provider: "openai", BaseURL: "http://127.0.0.1:11434"},
		"worker": {Name: "Worker", Provider: "anthropic", BaseURL: "https://api.anthropic.com"}}})
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr.Observe([]journal.Record{
		rec("S1", 5, at(-900), events.EnvironmentChanging{Generation: 1}),
		rec("S1", 6, at(-100), events.EnvironmentReady{Generation: 1}),
		rec("S1", 7, at(0), events.TurnAccepted{TurnID: "T1", AgentID: "lead"}),
		rec("S1", 8, at(1), events.TurnStarted{TurnID: "T1", Agent: "lead", Model: "m1"}),
		rec("S1", 9, at(5), events.ToolCallStarted{TurnID: "T1", Agent: "worker", CallID: "c1", Occurrence: 1, Name: "mcp__gh__issue"}),
		rec("S1", 10, at(6), events.HookRan{TurnID: "T1", Agent: "worker", Event: "PreToolUse", Hook: "audit", CallID: "c1", Occurrence: 1, Decision: "allow"}),
		rec("A1", 11, at(7), events.ApprovalRequested{Session: "S1", TurnID: "T1", AgentID: "worker", Server: "gh"}),
		rec("A1", 12, at(1007), events.ApprovalResolved{Decision: "allow"}),
		rec("S1", 13, at(1010), events.ToolCallFinished{TurnID: "T1", Agent: "worker", CallID: "c1", Occurrence: 1, Name: "mcp__gh__issue", IsError: true}),
		rec("S1", 14, at(1500), events.TurnOutput{TurnID: "T1", Agent: "worker", Step: 1, FirstTokenMS: 250}),
		rec("S1", 15, at(1500), events.TurnUsage{TurnID: "T1", Agent: "worker", Model: "m1", Tokens: usage.Tokens{InputTokens: 3, OutputTokens: 4}}),
		rec("S1", 16, at(1600), events.TurnFailed{TurnID: "T1", Error: "boom"}),
	})
	ended := sr.Ended()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byName[s.Name()] = s
	}
	root, worker, tool, chat := byName["invoke_agent Lead"], byName["invoke_agent Worker"], byName["execute_tool mcp__gh__issue"], byName["chat m1"]
	if env := byName["sandbox.prepare"]; env == nil || !env.StartTime().Equal(at(-900)) || !env.EndTime().Equal(at(-100)) {
		t.Errorf("sandbox.prepare: %v", env)
	}
	if len(ended) != 5 || root == nil || worker == nil || tool == nil || chat == nil {
		t.Fatalf("spans: %v", byName)
	}
	if worker.Parent().SpanID() != root.SpanContext().SpanID() || tool.Parent().SpanID() != worker.SpanContext().SpanID() ||
		chat.Parent().SpanID() != worker.SpanContext().SpanID() {
		t.Error("the Worker's spans do not hang under its invoke_agent span, under the turn's")
	}
	for _, c := range []struct {
		span sdktrace.ReadOnlySpan
		want map[attribute.Key]string
	}{
		{root, map[attribute.Key]string{"gen_ai.agent.id": "lead", "gen_ai.agent.name": "Lead", "gen_ai.provider.name": "openai"}},
		{worker, map[attribute.Key]string{"gen_ai.agent.id": "worker", "gen_ai.agent.name": "Worker", "gen_ai.provider.name": "anthropic"}},
		{chat, map[attribute.Key]string{"gen_ai.provider.name": "anthropic", "server.address": "api.anthropic.com", "server.port": "443"}},
		{tool, map[attribute.Key]string{"error.type": ToolErrorType}},
	} {
		got := map[attribute.Key]string{}
		for _, a := range c.span.Attributes() {
			got[a.Key] = a.Value.Emit()
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", c.span.Name(), k, got[k], v)
			}
		}
	}
	if tool.Status().Code != codes.Error {
		t.Errorf("failed tool call's status: %v", tool.Status())
	}
	if root.Status().Description != "boom" || !root.EndTime().Equal(at(1600)) {
		t.Errorf("root: %+v ended %v", root.Status(), root.EndTime())
	}
	var got []string
	for _, e := range tool.Events() {
		got = append(got, e.Name)
	}
	if len(got) != 3 || got[0] != "hook" || got[1] != "approval.requested" || got[2] != "approval.resolved" {
		t.Errorf("tool span events: %v", got)
	}
	if !chat.StartTime().Equal(at(1010)) || !chat.EndTime().Equal(at(1500)) {
		t.Errorf("chat span %v..%v, want from the tool call's end to the output", chat.StartTime(), chat.EndTime())
	}
	var ttft float64
	for _, a := range chat.Attributes() {
		if a.Key == FirstTokenKey {
			ttft = a.Value.AsFloat64()
		}
	}
	if ev := chat.Events(); ttft != 0.25 || len(ev) != 1 || ev[0].Name != "gen_ai.first_token" || !ev[0].Time.Equal(at(1260)) {
		t.Errorf("chat span's time to first token: %v, events %v", ttft, ev)
	}
	if len(tr.runs) != 0 || len(tr.approvals) != 0 || len(tr.envs) != 0 {
		t.Errorf("state left after the turn: %v %v", tr.runs, tr.approvals)
	}
}

// TestFoldKeep folds a Ways set's Keep: a ways.keep span over a child span
// per phase, from its first phase to the set's settling.
func TestFoldKeep(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tr := New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr)).Tracer("test"), Options{})
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr.Observe([]journal.Record{
		rec("W1", 1, at(0), events.AttemptSetStarted{Session: "S1"}),
		rec("W1", 2, at(100), events.KeepPhase{Index: 1, Phase: events.KeepApplying}),
		rec("W1", 3, at(300), events.KeepPhase{Index: 1, Phase: events.KeepApplied}),
	})
	if n := len(sr.Ended()); n != 1 {
		t.Fatalf("%d spans ended before the set settled, want the apply phase's", n)
	}
	tr.Observe([]journal.Record{
		rec("W1", 4, at(350), events.KeepPhase{Index: 1, Phase: events.KeepTranscriptRecorded}),
		rec("W1", 5, at(400), events.AttemptSetSettled{Workspace: "w"}),
	})
	var got []string
	var root sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		got = append(got, fmt.Sprintf("%s %v..%v", s.Name(), s.StartTime().Sub(t0).Milliseconds(), s.EndTime().Sub(t0).Milliseconds()))
		if s.Name() == "ways.keep" {
			root = s
		}
	}
	want := []string{"ways.keep.apply 100..300", "ways.keep.transcript 300..350", "ways.keep.settle 350..400", "ways.keep 100..400"}
	if !slices.Equal(got, want) {
		t.Fatalf("keep spans %v, want %v", got, want)
	}
	for _, s := range sr.Ended() {
		if s != root && s.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("%s is not under ways.keep", s.Name())
		}
	}
	attrs := map[attribute.Key]string{}
	for _, a := range root.Attributes() {
		attrs[a.Key] = a.Value.Emit()
	}
	if attrs["gen_ai.conversation.id"] != "S1" || attrs[AttemptSetKey] != "W1" || attrs[LaneKey] != "1" {
		t.Errorf("ways.keep attributes: %v", attrs)
	}
	if len(tr.keeps) != 0 || len(tr.sets) != 0 {
		t.Errorf("state left after the set settled: %v %v", tr.keeps, tr.sets)
	}
}

// BenchmarkObserveTurn folds one turn of seven events (accept, start, an
// inference, a tool call, a final inference's output, the end) into spans
// of the SDK with a batch processor that drops them.
func BenchmarkObserveTurn(b *testing.B) {
	tr := New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()))).Tracer("bench"), Options{})
	t0 := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		tr.Observe([]journal.Record{
			rec("S1", 1, t0, events.TurnAccepted{TurnID: "T1", AgentID: "coder"}),
			rec("S1", 2, t0, events.TurnStarted{TurnID: "T1", Agent: "coder", Model: "m1"}),
			rec("S1", 3, t0, events.TurnOutput{TurnID: "T1", Agent: "coder", Step: 1, ToolCalls: []events.StepCall{{CallID: "c1"}}}),
			rec("S1", 4, t0, events.TurnUsage{TurnID: "T1", Agent: "coder", Model: "m1"}),
			rec("S1", 5, t0, events.ToolCallStarted{TurnID: "T1", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "shell"}),
			rec("S1", 6, t0, events.ToolCallFinished{TurnID: "T1", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "shell"}),
			rec("S1", 7, t0, events.TurnDone{TurnID: "T1"}),
		})
	}
}
