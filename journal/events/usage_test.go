package events_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"lathe/journal/events"
	"lathe/runtime/usage"
)

// TestUsageEventsDecodeAsStored: the events that carry token usage, as
// earlier builds stored them (events.Tokens and events.RunUsage, now
// usage.Tokens), decode to the same counts and encode back to the same
// JSON, so a journal written before keeps its meaning. A total_tokens in a
// stored event (none was ever written) is not trusted: the counts are.
func TestUsageEventsDecodeAsStored(t *testing.T) {
	want := usage.Tokens{InputTokens: 100, OutputTokens: 40, ReasoningTokens: 30, TokenUsageKnown: true}
	const tok = `"input_tokens":100,"output_tokens":40,"reasoning_tokens":30,"token_usage_known":true`
	for _, tc := range []struct {
		typ, stored string
		tokens      func(events.Payload) usage.Tokens
	}{
		{"turn-usage", `{"turn_id":"T","agent":"a","step":1,"model":"m","cost_usd":0.5,` + tok + `}`,
			func(p events.Payload) usage.Tokens { return p.(events.TurnUsage).Tokens }},
		{"turn-done", `{"turn_id":"T","output":"ok","totals":{` + tok + `}}`,
			func(p events.Payload) usage.Tokens { return p.(events.TurnDone).Totals }},
		{"turn-failed", `{"turn_id":"T","error":"x","totals":{` + tok + `}}`,
			func(p events.Payload) usage.Tokens { return p.(events.TurnFailed).Totals }},
		{"chat-turn-ended", `{"turn_id":"T","outcome":"done","message_id":"M","content":"hi",` + tok + `}`,
			func(p events.Payload) usage.Tokens { return p.(events.ChatTurnEnded).Tokens }},
		{"a2a-task-ended", `{"state":"completed","output":"a",` + tok + `}`,
			func(p events.Payload) usage.Tokens { return p.(events.A2ATaskEnded).Tokens }},
		{"lattice-task", `{"turn_id":"T","subtask":"s","agent":"w","state":"completed","tokens":{` + tok + `}}`,
			func(p events.Payload) usage.Tokens { return *p.(events.LatticeTask).Tokens }},
		{"automation-node-finished", `{"automation_id":"A","node":"n","state":"succeeded","usage":{` + tok + `}}`,
			func(p events.Payload) usage.Tokens { return *p.(events.NodeFinished).Usage }},
		{"automation-run-finished", `{"automation_id":"A","state":"succeeded","usage":{` + tok + `}}`,
			func(p events.Payload) usage.Tokens { return p.(events.RunFinished).Usage }},
		{"attempt-lane-ended", `{"index":0,"run":"S:way0","state":"succeeded","output":"ok","totals":{` + tok + `}}`,
			func(p events.Payload) usage.Tokens { return p.(events.LaneEnded).Totals }},
		{"attempt-set-judged", `{"agent":"j","model":"m","ranking":[],"usage":{` + tok + `},"usd":null}`,
			func(p events.Payload) usage.Tokens { return p.(events.AttemptSetJudged).Usage }},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			p, err := events.Decode(tc.typ, []byte(tc.stored))
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.tokens(p); got != want {
				t.Fatalf("decoded %+v, want %+v", got, want)
			}
			again, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var a, b map[string]any
			if json.Unmarshal([]byte(tc.stored), &a) != nil || json.Unmarshal(again, &b) != nil {
				t.Fatalf("not JSON: %s / %s", tc.stored, again)
			}
			for k, v := range a {
				if !reflect.DeepEqual(b[k], v) {
					t.Errorf("%s: stored %v, encoded again %v (%s)", k, v, b[k], again)
				}
			}
		})
	}
	p, err := events.Decode("chat-turn-ended", []byte(`{"turn_id":"T","outcome":"done",`+tok+`,"total_tokens":170}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(events.ChatTurnEnded).Tokens; got != want || got.Total() != 140 {
		t.Errorf("a stored total_tokens: decoded %+v (total %d), want the counts and input + output", got, got.Total())
	}
}
