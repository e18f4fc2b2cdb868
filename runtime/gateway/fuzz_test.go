package gateway

import (
	"encoding/json"
	"errors"
	"testing"

	"lathe/runtime/errs"
	"lathe/runtime/llm"
)

// fuzzParser checks a wire's request parser on any body: it never panics,
// refuses with the Invalid class, and what it accepts is a request the
// providers can send (valid roles, tool arguments that are JSON objects).
func fuzzParser(f *testing.F, parse func([]byte) (call, error), seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := parse(body)
		if err != nil {
			if !errors.Is(err, errs.Invalid) {
				t.Fatalf("error %v is not of class Invalid", err)
			}
			return
		}
		for _, m := range c.req.Messages {
			switch m.Role {
			case llm.RoleUser, llm.RoleAssistant, llm.RoleTool:
			default:
				t.Fatalf("role %q", m.Role)
			}
			for _, tc := range m.ToolCalls {
				if !json.Valid(tc.Arguments) {
					t.Fatalf("tool call arguments %q", tc.Arguments)
				}
			}
		}
		if c.req.MaxOutputTokens < 0 || c.req.ThinkingBudget < 0 {
			t.Fatalf("negative bounds %+v", c.req)
		}
	})
}

func FuzzParseAnthropic(f *testing.F) {
	fuzzParser(f, parseAnthropic,
		`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"s"}],"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},`+
			`"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"c","name":"f","input":{"a":1}}]},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c","content":[{"type":"text","text":"r"}],"is_error":true},{"type":"text","text":"go on"}]}],`+
			`"tools":[{"name":"f","description":"d","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"f","input":null}]}]}`,
		`{"system":"s","messages":[]}`)
}

func FuzzParseChat(f *testing.F) {
	fuzzParser(f, parseChat,
		`{"model":"m","max_completion_tokens":10,"reasoning_effort":"high","stream":true,"stream_options":{"include_usage":true},`+
			`"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},`+
			`{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":""}}]}]}`)
}

func FuzzParseResponses(f *testing.F) {
	fuzzParser(f, parseResponses,
		`{"model":"m","instructions":"s","max_output_tokens":10,"reasoning":{"effort":"low"},"stream":true,"store":false,`+
			`"input":[{"type":"message","role":"developer","content":"d"},{"role":"user","content":[{"type":"input_text","text":"hi"}]},`+
			`{"type":"reasoning","summary":[]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},`+
			`{"type":"function_call_output","call_id":"c","output":"r"}],"tools":[{"type":"function","name":"f","parameters":{}},{"type":"web_search"}]}`,
		`{"input":"hi"}`)
}

func FuzzParseGemini(f *testing.F) {
	fuzzParser(f, parseGemini,
		`{"systemInstruction":{"parts":[{"text":"s"}]},"generationConfig":{"maxOutputTokens":10,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":1024}},`+
			`"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"t","thought":true},{"text":"ok"},{"functionCall":{"name":"f","args":{"a":1}},"thoughtSignature":"x"}]},`+
			`{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"output":"r"}}},{"text":"go on"}]}],`+
			`"tools":[{"functionDeclarations":[{"name":"f","description":"d","parametersJsonSchema":{"type":"object"}},{"name":"g","parameters":{"type":"OBJECT"}}]},{"googleSearch":{}}]}`,
		`{"contents":[{"role":"model","parts":[{"functionCall":{"id":"c","name":"f","args":null}}]},{"role":"user","parts":[{"functionResponse":{"id":"c","name":"f","response":{"error":"e"}}}]}]}`,
		`{"generationConfig":{"thinkingConfig":{"thinkingLevel":"HIGH"}},"contents":[]}`)
}
