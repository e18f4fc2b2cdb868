package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/llm"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/usage"
)

// echoTools has one tool, "submit", whose result is its arguments, or an
// error result for "bad" ones.
type echoTools struct{}

func (echoTools) Tools() []llm.Tool {
	return []llm.Tool{{Name: "submit", Schema: json.RawMessage(`{"type":"object"}`)}}
}
func (echoTools) Call(_ context.Context, name string, args json.RawMessage) tools.Result {
	if string(args) == `{"bad":true}` {
		return tools.Result{Output: "invalid: bad", IsError: true}
	}
	return tools.Result{Output: name + ":" + string(args)}
}

// callsOf records the calls a turn started.
type callsOf struct {
	quiet
	calls []agent.Call
}

func (c *callsOf) ToolStarted(call agent.Call) error { c.calls = append(c.calls, call); return nil }

func call(id, name, args string) []llm.Event {
	return []llm.Event{llm.ToolCallEnd{ID: id, Name: name, Arguments: json.RawMessage(args)},
		llm.Usage{Tokens: usage.Tokens{InputTokens: 1, OutputTokens: 1, TokenUsageKnown: true}}, llm.Done{StopReason: llm.StopToolCalls}}
}

// FinishOn ends a turn at its tool's call: done with the result, or failed
// with an error result; other calls run as usual first.
func TestFinishOn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		steps   [][]llm.Event
		outcome string
		output  string
	}{
		{"structured output", [][]llm.Event{call("c1", "submit", `{"plan":1}`)}, agent.OutcomeDone, `submit:{"plan":1}`},
		{"invalid structured output", [][]llm.Event{call("c1", "submit", `{"bad":true}`)}, agent.OutcomeError, ""},
		{"another tool first", [][]llm.Event{call("c1", "list", `{}`), call("c2", "submit", `{"plan":2}`)}, agent.OutcomeDone, `submit:{"plan":2}`},
		{"text answer", [][]llm.Event{answer(1, llm.StopEnd)}, agent.OutcomeDone, "answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &scripted{steps: tc.steps}
			res := budgetRegistry(p, catalog.Budget{}).RunTurn(context.Background(),
				agent.TurnRequest{AgentID: "a", Input: "x", Tools: echoTools{}, FinishOn: "submit"}, quiet{})
			if res.Outcome != tc.outcome || res.Output != tc.output {
				t.Fatalf("outcome %s %q (%v), want %s %q", res.Outcome, res.Output, res.Err, tc.outcome, tc.output)
			}
			if tc.outcome == agent.OutcomeError && (res.Err == nil || res.Err.Error() != "invalid: bad") {
				t.Errorf("error %v", res.Err)
			}
			if len(p.steps) != 0 {
				t.Errorf("%d inferences left unplayed", len(p.steps))
			}
		})
	}
}

// Occurrences carries call-ID counts across runs of one turn.
func TestSharedOccurrences(t *testing.T) {
	seen := map[string]int{}
	var got []int
	for range 2 {
		p := &scripted{steps: [][]llm.Event{call("c1", "submit", `{}`)}}
		obs := &callsOf{}
		budgetRegistry(p, catalog.Budget{}).RunTurn(context.Background(),
			agent.TurnRequest{AgentID: "a", Input: "x", Tools: echoTools{}, FinishOn: "submit", Occurrences: seen}, obs)
		for _, c := range obs.calls {
			got = append(got, c.Occurrence)
		}
	}
	if !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("occurrences %v, want [1 2]", got)
	}
}

// finished records the results of a turn's calls.
type finished struct {
	callsOf
	results []tools.Result
}

func (f *finished) ToolFinished(_ agent.Call, r tools.Result, _ time.Duration) error {
	f.results = append(f.results, r)
	return nil
}

// A call whose arguments nest past jsonlimit.Default is not run: the model
// gets an error result that says why, and the call's arguments are kept as
// a JSON string, so the events that record it replay (issue 23, finding 1).
func TestTooDeepArgumentsAreRefused(t *testing.T) {
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	p := &scripted{steps: [][]llm.Event{call("c1", "submit", `{"a":`+deep+`}`), answer(1, llm.StopEnd)}}
	obs := &finished{}
	res := budgetRegistry(p, catalog.Budget{}).RunTurn(context.Background(),
		agent.TurnRequest{AgentID: "a", Input: "x", Tools: echoTools{}}, obs)
	if res.Outcome != agent.OutcomeDone {
		t.Fatalf("outcome %s (%v)", res.Outcome, res.Err)
	}
	if len(obs.results) != 1 || !obs.results[0].IsError || !strings.Contains(obs.results[0].Output, "refused") ||
		strings.HasPrefix(obs.results[0].Output, "submit:") {
		t.Fatalf("results %.200v: want one error result that refuses the call", obs.results)
	}
	var kept string
	if len(obs.calls) != 1 || json.Unmarshal(obs.calls[0].Arguments, &kept) != nil || !strings.HasPrefix(kept, `{"a":[[[`) {
		t.Fatalf("the recorded arguments are not kept as a JSON string: %.80s", obs.calls[0].Arguments)
	}
}
