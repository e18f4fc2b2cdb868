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
)

// TestFoldOutside folds a Chat turn, an Automation run, an Agent execute
// and an inbound A2A task, each with a failed tool call, a hook run and two inferences
// (and an execute a crash interrupted), and checks each trace: the tree,
// the times, the names, the attributes that link it to the journal and
// those the GenAI conventions ask for (the Agent's name and ID, the
// provider's host, the tool call's error.type).
func TestFoldOutside(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	infs := []events.Inference{
		{Agent: "a", Step: 1, Model: "m1", At: at(10), DurationMS: 90, FirstTokenMS: 40, InputTokens: 7, OutputTokens: 2, FinishReason: "tool_calls"},
		{Agent: "a", Step: 2, Model: "m1", At: at(200), DurationMS: 100, InputTokens: 9, OutputTokens: 3, FinishReason: "stop"},
	}
	hook := events.HookRun{TurnID: "T", Agent: "a", Event: "PreToolUse", Hook: "guard", CallID: "c1", Decision: "allow"}
	hookOf := func(intent string) events.HookRun { h := hook; h.TurnID = intent; return h }
	for _, tc := range []struct {
		name string
		recs []journal.Record
		// want: each span as "name parent start..end", parent "-" for the root.
		want         []string
		root         string
		rootAttrs    map[attribute.Key]string
		conversation string
		noHook       bool // the run has no hook runs (an A2A task runs none)
	}{{
		name: "chat",
		recs: []journal.Record{
			rec("C1", 11, at(0), events.ChatTurnStarted{TurnID: "T", Agent: "a", Model: "m1"}),
			rec("C1", 12, at(110), events.ChatHookRan{HookRun: hook}),
			rec("C1", 13, at(190), events.ChatToolCalled{TurnID: "T", CallID: "c1", Name: "mcp__t__echo", IsError: true, DurationMS: 70}),
			rec("C1", 14, at(310), events.ChatTurnEnded{TurnID: "T", Outcome: events.ChatDone, Inferences: infs}),
		},
		want: []string{"execute_tool mcp__t__echo invoke_agent Reviewer 120..190", "chat m1 invoke_agent Reviewer 10..100", "chat m1 invoke_agent Reviewer 200..300",
			"invoke_agent Reviewer - 0..310"},
		root:         "invoke_agent Reviewer",
		rootAttrs:    map[attribute.Key]string{AcceptSeqKey: "11", TurnIDKey: "T", ScopeKey: "chat", OutcomeKey: "done", "gen_ai.operation.name": "invoke_agent"},
		conversation: "C1",
	}, {
		name: "automation",
		recs: []journal.Record{
			rec("R1", 21, at(0), events.RunStarted{AutomationID: "review", Trigger: events.RunTrigger{Kind: events.TriggerManual}}),
			rec("R1", 22, at(1), events.NodeFinished{Node: "in", State: events.StateSucceeded}),
			rec("R1", 23, at(5), events.NodeStarted{Node: "ask"}),
			rec("R1", 24, at(110), events.NodeHookRan{Node: "ask", HookRun: hook}),
			rec("R1", 25, at(120), events.NodeToolCall{Node: "ask", Agent: "a", CallID: "c1", Occurrence: 1, Name: "mcp__t__echo", Phase: "start"}),
			rec("R1", 26, at(190), events.NodeToolCall{Node: "ask", Agent: "a", CallID: "c1", Occurrence: 1, Name: "mcp__t__echo", Phase: "result", IsError: true}),
			rec("R1", 27, at(305), events.NodeFinished{Node: "ask", State: events.StateSucceeded, Inferences: infs}),
			rec("R1", 28, at(310), events.RunFinished{AutomationID: "review", State: events.StateSucceeded}),
		},
		want: []string{"automation.node in automation.run review 1..1", "execute_tool mcp__t__echo invoke_agent Reviewer 120..190",
			"chat m1 invoke_agent Reviewer 10..100", "chat m1 invoke_agent Reviewer 200..300", "invoke_agent Reviewer automation.run review 5..305",
			"automation.run review - 0..310"},
		root:         "automation.run review",
		rootAttrs:    map[attribute.Key]string{AcceptSeqKey: "21", AutomationIDKey: "review", ScopeKey: "automation", OutcomeKey: events.StateSucceeded},
		conversation: "R1",
	}, {
		name: "agent execute",
		recs: []journal.Record{
			rec(events.EffectsID, 31, at(0), events.EffectIntended{Intent: "X1", Kind: events.EffectAgentExecute, Target: "a"}),
			rec("a", 32, at(110), events.AgentHookRan{HookRun: hookOf("X1")}),
			rec("a", 33, at(310), events.AgentExecuted{Intent: "X1", Model: "m1", Calls: 1, Inferences: infs,
				Tools: []events.ExecutedTool{{CallID: "c1", Name: "mcp__t__echo", At: at(120), DurationMS: 70, IsError: true}}}),
			rec(events.EffectsID, 34, at(310), events.EffectSettled{Intent: "X1", Outcome: events.EffectDone}),
		},
		want: []string{"execute_tool mcp__t__echo invoke_agent Reviewer 120..190", "chat m1 invoke_agent Reviewer 10..100", "chat m1 invoke_agent Reviewer 200..300",
			"invoke_agent Reviewer - 0..310"},
		root:         "invoke_agent Reviewer",
		rootAttrs:    map[attribute.Key]string{AcceptSeqKey: "31", TurnIDKey: "X1", ScopeKey: "agent", OutcomeKey: "done", "gen_ai.request.model": "m1"},
		conversation: "X1",
	}, {
		// Issue 35: an inbound A2A task is a trace as the other runs are.
		name: "a2a task",
		recs: []journal.Record{
			rec("K1", 51, at(0), events.A2ATaskReceived{ReceiverID: "helper", AgentID: "a", ContextID: "ctx-1"}),
			rec("K1", 52, at(310), events.A2ATaskEnded{State: "completed", Inferences: infs}),
		},
		want:         []string{"chat m1 invoke_agent Reviewer 10..100", "chat m1 invoke_agent Reviewer 200..300", "invoke_agent Reviewer - 0..310"},
		root:         "invoke_agent Reviewer",
		rootAttrs:    map[attribute.Key]string{AcceptSeqKey: "51", TurnIDKey: "K1", ScopeKey: "a2a", OutcomeKey: "completed", A2AReceiverKey: "helper", "gen_ai.agent.id": "a"},
		conversation: "ctx-1",
		noHook:       true,
	}, {
		name: "agent execute interrupted",
		recs: []journal.Record{
			rec(events.EffectsID, 41, at(0), events.EffectIntended{Intent: "X2", Kind: events.EffectAgentExecute, Target: "a"}),
			rec("a", 42, at(110), events.AgentHookRan{HookRun: hookOf("X2")}),
			rec(events.EffectsID, 43, at(500), events.EffectSettled{Intent: "X2", Outcome: events.EffectInterrupted}),
		},
		want:         []string{"invoke_agent Reviewer - 0..500"},
		root:         "invoke_agent Reviewer",
		rootAttrs:    map[attribute.Key]string{AcceptSeqKey: "41", ScopeKey: "agent", OutcomeKey: events.EffectInterrupted},
		conversation: "X2",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sr := tracetest.NewSpanRecorder()
			tr := New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr)).Tracer("test"), Options{Agents: map[string]Agent{
				"a": {Name: "Reviewer", Provider: "openai", BaseURL: "https://llm.example:8443/v1"}}})
			tr.Observe(tc.recs)
			ended := sr.Ended()
			names := map[[8]byte]string{}
			for _, s := range ended {
				names[s.SpanContext().SpanID()] = s.Name()
			}
			var got []string
			var root sdktrace.ReadOnlySpan
			for _, s := range ended {
				parent := "-"
				if s.Parent().IsValid() {
					parent = names[s.Parent().SpanID()]
				} else {
					root = s
				}
				got = append(got, fmt.Sprintf("%s %s %d..%d", s.Name(), parent, s.StartTime().Sub(t0).Milliseconds(), s.EndTime().Sub(t0).Milliseconds()))
				attrs := map[attribute.Key]string{}
				for _, a := range s.Attributes() {
					attrs[a.Key] = a.Value.Emit()
				}
				if attrs["gen_ai.conversation.id"] != tc.conversation {
					t.Errorf("%s: gen_ai.conversation.id %q", s.Name(), attrs["gen_ai.conversation.id"])
				}
				if s.Name() == "chat m1" && (attrs["gen_ai.usage.input_tokens"] == "" || attrs["gen_ai.response.finish_reasons"] == "" ||
					attrs["gen_ai.provider.name"] != "openai" || attrs["server.address"] != "llm.example" || attrs["server.port"] != "8443") {
					t.Errorf("chat span: %v", attrs)
				}
				if s.Name() == "execute_tool mcp__t__echo" && (attrs["error.type"] != ToolErrorType || s.Status().Code != codes.Error) {
					t.Errorf("failed tool call's span: %v, status %v", attrs, s.Status())
				}
				if s.Name() == "chat m1" && s.StartTime().Equal(at(10)) && (attrs[FirstTokenKey] != "0.04" || len(s.Events()) != 1) {
					t.Errorf("the first chat span's time to first token: %v, events %v", attrs[FirstTokenKey], s.Events())
				}
				if s.Name() == "invoke_agent Reviewer" && (attrs["gen_ai.agent.id"] != "a" || attrs["gen_ai.agent.name"] != "Reviewer" || attrs["gen_ai.provider.name"] != "openai" ||
					(!tc.noHook && (len(s.Events()) != 1 || s.Events()[0].Name != "hook"))) {
					t.Errorf("invoke_agent span: %v, events %v", attrs, s.Events())
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("spans\n%v\nwant\n%v", got, tc.want)
			}
			attrs := map[attribute.Key]string{}
			for _, a := range root.Attributes() {
				attrs[a.Key] = a.Value.Emit()
			}
			for k, v := range tc.rootAttrs {
				if attrs[k] != v {
					t.Errorf("%s: %s = %q, want %q", root.Name(), k, attrs[k], v)
				}
			}
			if len(tr.outside) != 0 {
				t.Errorf("state left after the end: %v", tr.outside)
			}
		})
	}
}
