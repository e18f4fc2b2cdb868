package traces

import (
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"lathe/journal"
	"lathe/journal/events"
)

// TestContent: prompts, completions and tool calls' arguments and results
// go on spans only when the operator opts in, and then never with a secret:
// the daemon's own (Options.Secrets) or one shaped like a credential.
func TestContent(t *testing.T) {
	const known = "lathe-api-key-0123456789"
	turn := func(t0 time.Time) []journal.Record {
		return []journal.Record{
			rec("S1", 1, t0, events.TurnAccepted{TurnID: "T1", AgentID: "coder", Input: events.NewText("deploy with key " + known)}),
			rec("S1", 2, t0, events.TurnStarted{TurnID: "T1", Agent: "coder", Model: "m1"}),
			rec("S1", 3, t0, events.TurnOutput{TurnID: "T1", Agent: "coder", Step: 1, Text: events.NewText("calling with Bearer abcdefghijklmnop"),
				ToolCalls: []events.StepCall{{CallID: "c1", Name: "shell", Arguments: events.NewJSON([]byte(`{"command":"curl -u me:` + known + ` x"}`))}}}),
			rec("S1", 4, t0, events.TurnUsage{TurnID: "T1", Agent: "coder", Model: "m1"}),
			rec("S1", 5, t0, events.ToolCallStarted{TurnID: "T1", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "shell",
				Arguments: events.NewJSON([]byte(`{"command":"echo ghp_abcdefghijklmnopqrstuvwxyz"}`))}),
			rec("S1", 6, t0, events.ToolCallFinished{TurnID: "T1", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "shell",
				Result: events.NewText("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuv\nAKIAABCDEFGHIJKLMNOP ok")}),
			rec("S1", 7, t0, events.TurnDone{TurnID: "T1"}),
		}
	}
	keys := []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}
	for _, c := range []struct {
		name string
		o    Options
	}{{"off", Options{Secrets: []string{known}}}, {"on", Options{Content: true, Secrets: []string{known}}}} {
		t.Run(c.name, func(t *testing.T) {
			sr := tracetest.NewSpanRecorder()
			New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr)).Tracer("test"), c.o).Observe(turn(time.Now()))
			got := map[string]string{}
			for _, s := range sr.Ended() {
				for _, a := range s.Attributes() {
					got[string(a.Key)] += a.Value.Emit()
				}
			}
			for _, k := range keys {
				if _, ok := got[k]; ok != c.o.Content {
					t.Errorf("%s on a span: %v, want %v", k, ok, c.o.Content)
				}
			}
			for k, v := range got {
				for _, secret := range []string{known, "abcdefghijklmnop", "ghp_", "sk-proj", "AKIA"} {
					if strings.Contains(v, secret) {
						t.Errorf("%s carries a secret (%s): %s", k, secret, v)
					}
				}
			}
			if c.o.Content && (!strings.Contains(got["gen_ai.input.messages"], `"content":"deploy with key [REDACTED]"`) ||
				!strings.Contains(got["gen_ai.output.messages"], `"name":"shell"`) || !strings.Contains(got["gen_ai.tool.call.result"], " ok")) {
				t.Errorf("content: %v", got)
			}
		})
	}
}
