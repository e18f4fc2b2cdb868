package turns

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"lathe/commands/core"
)

func TestTurnRequestValidate(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, c := range []struct {
		name string
		req  TurnRequest
		ok   bool
	}{
		{"plain", TurnRequest{Input: "fix the test"}, true},
		{"all fields", TurnRequest{Input: "x", TurnID: "t-1", IdempotencyKey: "k", DisplayInput: str("x"),
			ContextReferences: []json.RawMessage{json.RawMessage(`{"kind":"editor","path":"a.go"}`)}, ReferenceIDs: []string{"a", "b"},
			ModelOverride: str("m2"), TargetAgent: str("coder")}, true},
		{"empty input", TurnRequest{Input: " \n"}, false},
		{"invalid UTF-8", TurnRequest{Input: "\xff"}, false},
		{"turn id with a control character", TurnRequest{Input: "x", TurnID: "a\nb"}, false},
		{"turn id with spaces around", TurnRequest{Input: "x", TurnID: " t"}, false},
		{"context reference not an object", TurnRequest{Input: "x", ContextReferences: []json.RawMessage{json.RawMessage(`[1]`)}}, false},
		{"context reference null", TurnRequest{Input: "x", ContextReferences: []json.RawMessage{json.RawMessage(`null`)}}, false},
		// Issue 23, finding 1: within 64 KiB, but too deep to replay once stored.
		{"context reference nested 9,000 deep", TurnRequest{Input: "x", ContextReferences: []json.RawMessage{
			json.RawMessage(`{"a":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`)}}, false},
		{"reference named twice", TurnRequest{Input: "x", ReferenceIDs: []string{"a", "a"}}, false},
		{"empty model override", TurnRequest{Input: "x", ModelOverride: str(" ")}, false},
		{"empty target agent", TurnRequest{Input: "x", TargetAgent: str("")}, false},
	} {
		err := c.req.validate()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, core.ErrInvalid)) {
			t.Errorf("%s: err %v, want ok=%v (or ErrInvalid)", c.name, err, c.ok)
		}
	}
}

// FuzzTurnRequest feeds /ws session commands (outside input) to the turn
// request's validation: it must never panic, and what it accepts has input.
func FuzzTurnRequest(f *testing.F) {
	for _, seed := range []string{
		`{"input":"hi"}`,
		`{"input":"hi","turn_id":"t","idempotency_key":"k","context_references":[{"a":1}],"reference_ids":["r"],"model_override":"m","target_agent":"a"}`,
		`{"input":"","context_references":[null,[],"x"]}`,
		`{"input":"\u0000","turn_id":"\u0007"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cmd struct { // the /ws session command's fields
			Input             string            `json:"input"`
			DisplayInput      *string           `json:"display_input"`
			ContextReferences []json.RawMessage `json:"context_references"`
			TurnID            string            `json:"turn_id"`
			IdempotencyKey    string            `json:"idempotency_key"`
			ReferenceIDs      []string          `json:"reference_ids"`
			ModelOverride     *string           `json:"model_override"`
			TargetAgent       *string           `json:"target_agent"`
		}
		if json.Unmarshal(data, &cmd) != nil {
			return
		}
		req := TurnRequest{Input: cmd.Input, DisplayInput: cmd.DisplayInput, ContextReferences: cmd.ContextReferences, TurnID: cmd.TurnID,
			IdempotencyKey: cmd.IdempotencyKey, ReferenceIDs: cmd.ReferenceIDs, ModelOverride: cmd.ModelOverride, TargetAgent: cmd.TargetAgent}
		if err := req.validate(); err == nil && req.Input == "" {
			t.Fatalf("accepted a turn without input: %s", data)
		}
	})
}
