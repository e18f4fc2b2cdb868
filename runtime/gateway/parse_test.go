package gateway

import "testing"

// TestThinking: thinking maps where the wire has it, and is off for a call
// that answers tool results (no thinking block can be given back).
func TestThinking(t *testing.T) {
	const toolLoop = `{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c","content":"r"}]}`
	for _, tc := range []struct {
		name  string
		parse func([]byte) (call, error)
		body  string
		want  int
	}{
		{"anthropic enabled", parseAnthropic, `{"thinking":{"type":"enabled","budget_tokens":4000},"messages":[{"role":"user","content":"hi"}]}`, 4000},
		{"anthropic disabled", parseAnthropic, `{"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`, 0},
		{"anthropic in a tool loop", parseAnthropic, `{"thinking":{"type":"enabled","budget_tokens":4000},"messages":[{"role":"user","content":"hi"},` + toolLoop + `]}`, 0},
		{"chat high", parseChat, `{"reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`, 24576},
		{"chat none", parseChat, `{"messages":[{"role":"user","content":"hi"}]}`, 0},
		{"chat in a tool loop", parseChat, `{"reasoning_effort":"low","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}`, 0},
		{"responses medium", parseResponses, `{"reasoning":{"effort":"medium"},"input":"hi"}`, 8192},
		{"responses in a tool loop", parseResponses, `{"reasoning":{"effort":"medium"},"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"r"}]}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if c.req.ThinkingBudget != tc.want {
				t.Fatalf("thinking budget %d, want %d", c.req.ThinkingBudget, tc.want)
			}
		})
	}
}

// TestThinkingOnlyTurn: an assistant turn that was thinking alone is not
// sent on as an empty message, which Anthropic refuses.
func TestThinkingOnlyTurn(t *testing.T) {
	c, err := parseAnthropic([]byte(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""}]},{"role":"user","content":"go on"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.req.Messages) != 2 || c.req.Messages[1].Text != "go on" {
		t.Fatalf("messages %+v", c.req.Messages)
	}
}
