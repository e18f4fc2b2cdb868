package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"lathe/runtime/gateway"
	"lathe/runtime/llm/fakellm"
)

// gmErr is a Gemini error as its client reports it: the status and
// Google's error body.
type gmErr struct {
	status  int
	message string
	code    string
}

func (e *gmErr) Error() string { return fmt.Sprintf("gemini %d %s: %s", e.status, e.code, e.message) }

type gmChunk struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         string `json:"text"`
				Thought      bool   `json:"thought"`
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount     int64 `json:"promptTokenCount"`
		CandidatesTokenCount int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount   int64 `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// geminiClient drives the Gemini wire as Gemini CLI does (the Go SDK is
// not among this module's dependencies; the requests are the CLI's as
// recorded from 0.61.0): the key in x-goog-api-key, the model in the path,
// parametersJsonSchema, function calls and responses with ids. A stream
// that ends without a finish reason is an error, as the CLI treats it.
func geminiClient(ctx context.Context, url, key string, stream bool, prompt string) (result, error) {
	body, _ := json.Marshal(map[string]any{
		"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "Be brief."}}},
		"contents": []any{
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt}}},
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"id": "call_0", "name": "read", "args": map[string]any{"path": "x"}},
				"thoughtSignature": "skip_thought_signature_validator"}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"id": "call_0", "name": "read", "response": map[string]any{"output": "package x"}}}}},
		},
		"tools": []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "read", "description": "Read a file",
			"parametersJsonSchema": json.RawMessage(schema)}}}},
		"generationConfig": map[string]any{"temperature": 1, "topP": 0.95, "thinkingConfig": map[string]any{"includeThoughts": true}},
	})
	method := "generateContent"
	if stream {
		method = "streamGenerateContent?alt=sse"
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1beta/models/m1:"+method, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-goog-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	var res result
	add := func(c gmChunk) error {
		if c.Error != nil {
			return &gmErr{c.Error.Code, c.Error.Message, c.Error.Status}
		}
		for _, cand := range c.Candidates {
			for _, p := range cand.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					res.calls = append(res.calls, toolCall{p.FunctionCall.ID, p.FunctionCall.Name, compact(string(p.FunctionCall.Args))})
				case !p.Thought:
					res.text += p.Text
				}
			}
			if cand.FinishReason != "" {
				res.stop = cand.FinishReason
			}
		}
		if u := c.UsageMetadata; u != nil {
			res.in, res.out, res.reason = u.PromptTokenCount, u.CandidatesTokenCount+u.ThoughtsTokenCount, u.ThoughtsTokenCount
		}
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		var c gmChunk
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || c.Error == nil {
			return result{}, fmt.Errorf("status %d without Google's error body: %v", resp.StatusCode, err)
		}
		e := add(c).(*gmErr)
		e.status = resp.StatusCode
		return result{}, e
	}
	if !stream {
		var c gmChunk
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
			return result{}, err
		}
		return res, add(c)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var c gmChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return result{}, err
		}
		if err := add(c); err != nil {
			return result{}, err
		}
	}
	if err := sc.Err(); err != nil {
		return result{}, err
	}
	if res.stop == "" {
		return result{}, fmt.Errorf("the stream ended without a finish reason")
	}
	return res, nil
}

// TestGeminiRequests: Gemini's own error shape for what the gateway cannot
// translate or does not serve, and the key taken from ?key= too.
func TestGeminiRequests(t *testing.T) {
	r := newRig(t, chatProvider, gateway.Options{}, toolTurn())
	for _, tc := range []struct {
		name, path, key, body string
		status                int
		code, want            string
	}{
		{"no key", "/v1beta/models/m1:streamGenerateContent?alt=sse", "", `{}`, 401, "UNAUTHENTICATED", "API key"},
		{"bad json", "/v1beta/models/m1:generateContent", token, `{"contents":`, 400, "INVALID_ARGUMENT", "unexpected end"},
		{"image", "/v1beta/models/m1:generateContent", token, `{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}]}`,
			400, "INVALID_ARGUMENT", "inlineData is not supported"},
		{"role", "/v1beta/models/m1:generateContent", token, `{"contents":[{"role":"system","parts":[{"text":"x"}]}]}`, 400, "INVALID_ARGUMENT", `role "system"`},
		{"unanswered", "/v1beta/models/m1:generateContent", token, `{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}]}`,
			400, "INVALID_ARGUMENT", "answers no functionCall"},
		{"deep", "/v1beta/models/m1:generateContent", token, strings.Repeat("[", 100) + strings.Repeat("]", 100), 400, "INVALID_ARGUMENT", "nests too deeply"},
		{"no sse", "/v1beta/models/m1:streamGenerateContent", token, `{}`, 400, "INVALID_ARGUMENT", "alt=sse"},
		{"count tokens", "/v1beta/models/m1:countTokens", token, `{}`, 404, "NOT_FOUND", "countTokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, r.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("x-goog-api-key", tc.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var c gmChunk
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || c.Error == nil || c.Error.Code != tc.status || c.Error.Status != tc.code || !strings.Contains(c.Error.Message, tc.want) {
				t.Fatalf("status %d body %+v, want %d %s with %q", resp.StatusCode, c.Error, tc.status, tc.code, tc.want)
			}
		})
	}
	if len(r.up.reqs) != 0 {
		t.Fatal("a refused request reached the upstream")
	}
	// ?key= is Gemini's other place for the key.
	got, err := geminiClient(testContext(t), r.url, "", false, "Read a.go")
	if status, _ := statusOf(err); status != 401 {
		t.Fatalf("no key: %+v %v", got, err)
	}
	req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, r.url+"/v1beta/models/m1:generateContent?key="+token,
		strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(r.up.reqs) != 1 || r.up.reqs[0].Model != "m1" {
		t.Fatalf("?key=: status %d, upstream %+v", resp.StatusCode, r.up.reqs)
	}
}

// TestBadProviderArgs: a provider's tool call whose arguments are not a
// JSON object (Gemini's args and Anthropic's tool_use input must be one)
// is the host's failure, 502 (an error event mid-stream), never a
// malformed reply, an empty body or a panic.
func TestBadProviderArgs(t *testing.T) {
	clients := map[string]func(context.Context, string, string, bool, string) (result, error){"gemini": geminiClient, "anthropic": anthropicClient}
	for name, client := range clients {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s stream=%v", name, stream), func(t *testing.T) {
				r := newRig(t, chatProvider, gateway.Options{}, fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("calling"), fakellm.ToolCall("call_x", "read", `{"path":`)}})
				got, err := client(testContext(t), r.url, token, stream, "Read a.go")
				status, msg := statusOf(err)
				if !strings.Contains(strings.ReplaceAll(msg, `\"`, `"`), `"call_x" are not a JSON object`) || (status != http.StatusBadGateway && !(stream && name == "anthropic")) {
					t.Fatalf("status %d %q (%v, %+v), want 502", status, msg, err, got)
				}
			})
		}
	}
}
