package gateway

import (
	"fmt"
	"testing"

	"lathe/runtime/llm"
)

// TestParseGemini: what Gemini CLI sends becomes the conversation a
// provider can answer: calls without ids paired with their responses by
// name and order, thoughts dropped, a response's error flagged, OpenAPI
// parameter types lowered, thinking mapped.
func TestParseGemini(t *testing.T) {
	c, err := parseGemini([]byte(`{"systemInstruction":{"role":"user","parts":[{"text":"a"},{"text":"b"}]},` +
		`"generationConfig":{"maxOutputTokens":99,"thinkingConfig":{"thinkingLevel":"HIGH"}},"contents":[` +
		`{"role":"user","parts":[{"text":"ctx"},{"text":"hi"}]},` +
		`{"role":"model","parts":[{"text":"hmm","thought":true},{"text":"Reading."},{"functionCall":{"name":"read","args":{"p":1}}},{"functionCall":{"name":"read","args":{"p":2}}},{"functionCall":{"id":"x9","name":"run"}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"read","response":{"output":"one"}}},{"functionResponse":{"name":"read","response":{"output":"two"}}},` +
		`{"functionResponse":{"id":"x9","name":"run","response":{"error":"exit 1"}}}]},` +
		`{"role":"model","parts":[{"text":"done"}]},{"role":"user","parts":[{"text":"more"}]}],` +
		`"tools":[{"functionDeclarations":[{"name":"read","parameters":{"type":"OBJECT","properties":{"p":{"type":"INTEGER"}}}}]},{"googleSearch":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range c.req.Messages {
		s := fmt.Sprintf("%s %q", m.Role, m.Text)
		for _, tc := range m.ToolCalls {
			s += fmt.Sprintf(" %s:%s%s", tc.ID, tc.Name, tc.Arguments)
		}
		if m.ToolCallID != "" {
			s += fmt.Sprintf(" for %s error=%v", m.ToolCallID, m.IsError)
		}
		got = append(got, s)
	}
	want := []string{
		`user "ctx\nhi"`,
		`assistant "Reading." gemini_call_1_2:read{"p":1} gemini_call_1_3:read{"p":2} x9:run{}`,
		`tool "one" for gemini_call_1_2 error=false`,
		`tool "two" for gemini_call_1_3 error=false`,
		`tool "exit 1" for x9 error=true`,
		`assistant "done"`,
		`user "more"`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("messages\n%q\nwant\n%q", got, want)
	}
	if c.req.System != "a\nb" || c.req.MaxOutputTokens != 99 || c.req.ThinkingBudget != 24576 {
		t.Errorf("system %q max %d thinking %d", c.req.System, c.req.MaxOutputTokens, c.req.ThinkingBudget)
	}
	if len(c.req.Tools) != 1 || string(c.req.Tools[0].Schema) != `{"properties":{"p":{"type":"integer"}},"type":"object"}` {
		t.Errorf("tools %+v", c.req.Tools)
	}
	// In a tool loop thinking is off, as on the other wires.
	c, err = parseGemini([]byte(`{"generationConfig":{"thinkingConfig":{"thinkingBudget":4000}},"contents":[{"role":"model","parts":[{"functionCall":{"id":"c","name":"f"}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"id":"c","name":"f","response":{"output":"r"}}}]}]}`))
	if err != nil || c.req.ThinkingBudget != 0 || c.req.Messages[1].Role != llm.RoleTool {
		t.Fatalf("tool loop: %+v %v", c.req, err)
	}
}
