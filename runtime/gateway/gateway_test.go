package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	an "github.com/anthropics/anthropic-sdk-go"
	anopt "github.com/anthropics/anthropic-sdk-go/option"
	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"lathe/runtime/errs"
	"lathe/runtime/gateway"
	"lathe/runtime/llm"
	"lathe/runtime/llm/anthropic"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/llm/openai"
)

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// upstream is a real provider behind the gateway, recording each call.
type upstream struct {
	p      llm.Provider
	refuse error

	mu     sync.Mutex
	grants []gateway.Grant
	reqs   []llm.Request
}

func (u *upstream) Stream(ctx context.Context, g gateway.Grant, req llm.Request) (llm.Stream, error) {
	u.mu.Lock()
	u.grants, u.reqs = append(u.grants, g), append(u.reqs, req)
	u.mu.Unlock()
	if u.refuse != nil {
		return nil, u.refuse
	}
	return u.p.Stream(ctx, req)
}

type tokens map[string]gateway.Grant

func (t tokens) Grant(tok string) (gateway.Grant, bool) {
	g, ok := t[tok]
	return g, ok
}

const token = "lathe-turn-token"

var grant = gateway.Grant{SessionID: "s1", TurnID: "t1", AgentID: "a1"}

// provider names a real provider of runtime/llm pointed at a fakellm server.
type provider string

const (
	chatProvider      provider = "chat-completions"
	anthropicProvider provider = "anthropic"
)

func (p provider) new(fake *fakellm.Server) llm.Provider {
	if p == anthropicProvider {
		return anthropic.New(anthropic.Config{BaseURL: fake.URL(), APIKey: "provider-key"})
	}
	return openai.New(openai.Config{BaseURL: fake.URL() + "/v1", APIKey: "provider-key"})
}

// rig is a gateway in front of a provider in front of a fakellm server.
type rig struct {
	fake *fakellm.Server
	up   *upstream
	url  string
}

func newRig(t *testing.T, p provider, opts gateway.Options, turns ...fakellm.Turn) *rig {
	t.Helper()
	fake := fakellm.New(fakellm.Script{Turns: turns})
	t.Cleanup(fake.Close)
	up := &upstream{p: p.new(fake)}
	gw := httptest.NewServer(gateway.New(up, tokens{token: grant}, opts))
	t.Cleanup(gw.Close)
	return &rig{fake: fake, up: up, url: gw.URL}
}

// toolTurn answers with reasoning, text, a tool call and usage.
func toolTurn() fakellm.Turn {
	return fakellm.Turn{Steps: []fakellm.Step{
		fakellm.Reasoning("Let me think."),
		fakellm.Text("Reading "),
		fakellm.Text("two files."),
		fakellm.ToolCall("call_a", "read", `{"pa`, `th":"a.go"}`),
		fakellm.Usage(120, 45, 7),
	}}
}

type toolCall struct{ id, name, args string }

// result is what an agent made of a reply.
type result struct {
	text            string
	calls           []toolCall
	in, out, reason int64
	stop            string
}

// client is one wire's official SDK, driven as an agent drives it: a
// conversation with one earlier tool call and its result, and one tool.
type client func(ctx context.Context, url, key string, stream bool, prompt string) (result, error)

const schema = `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`

func schemaMap() map[string]any {
	var m map[string]any
	json.Unmarshal([]byte(schema), &m)
	return m
}

func compact(raw string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(raw)); err != nil {
		return raw
	}
	return b.String()
}

func anthropicClient(ctx context.Context, url, key string, stream bool, prompt string) (result, error) {
	c := an.NewClient(anopt.WithBaseURL(url), anopt.WithAPIKey(key), anopt.WithMaxRetries(0))
	p := an.MessageNewParams{Model: "m1", MaxTokens: 1000, System: []an.TextBlockParam{{Text: "Be brief."}},
		Messages: []an.MessageParam{
			an.NewUserMessage(an.NewTextBlock(prompt)),
			an.NewAssistantMessage(an.NewToolUseBlock("call_0", map[string]any{"path": "x"}, "read")),
			an.NewUserMessage(an.NewToolResultBlock("call_0", "package x", false)),
		},
		Tools: []an.ToolUnionParam{{OfTool: &an.ToolParam{Name: "read", Description: an.String("Read a file"),
			InputSchema: an.ToolInputSchemaParam{Properties: schemaMap()["properties"], Required: []string{"path"}}}}},
	}
	var m an.Message
	if stream {
		// Claude Code calls the beta endpoint.
		s := c.Messages.NewStreaming(ctx, p, anopt.WithQuery("beta", "true"))
		defer s.Close()
		for s.Next() {
			if err := m.Accumulate(s.Current()); err != nil {
				return result{}, err
			}
		}
		if err := s.Err(); err != nil {
			return result{}, err
		}
	} else {
		r, err := c.Messages.New(ctx, p)
		if err != nil {
			return result{}, err
		}
		m = *r
	}
	res := result{in: m.Usage.InputTokens, out: m.Usage.OutputTokens, stop: string(m.StopReason)}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			res.text += b.Text
		case "tool_use":
			res.calls = append(res.calls, toolCall{b.ID, b.Name, compact(string(b.Input))})
		}
	}
	return res, nil
}

func chatClient(ctx context.Context, url, key string, stream bool, prompt string) (result, error) {
	c := oa.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	p := oa.ChatCompletionNewParams{Model: "m1",
		Messages: []oa.ChatCompletionMessageParamUnion{
			oa.SystemMessage("Be brief."),
			oa.UserMessage(prompt),
			{OfAssistant: &oa.ChatCompletionAssistantMessageParam{ToolCalls: []oa.ChatCompletionMessageToolCallUnionParam{{
				OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{ID: "call_0",
					Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "read", Arguments: `{"path":"x"}`}}}}}},
			oa.ToolMessage("package x", "call_0"),
		},
		Tools: []oa.ChatCompletionToolUnionParam{oa.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "read", Description: oa.String("Read a file"), Parameters: schemaMap()})},
	}
	var cc oa.ChatCompletion
	if stream {
		p.StreamOptions = oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}
		s := c.Chat.Completions.NewStreaming(ctx, p)
		defer s.Close()
		var acc oa.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			return result{}, err
		}
		cc = acc.ChatCompletion
	} else {
		r, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			return result{}, err
		}
		cc = *r
	}
	if len(cc.Choices) != 1 {
		return result{}, fmt.Errorf("%d choices", len(cc.Choices))
	}
	ch := cc.Choices[0]
	res := result{text: ch.Message.Content, in: cc.Usage.PromptTokens, out: cc.Usage.CompletionTokens,
		reason: cc.Usage.CompletionTokensDetails.ReasoningTokens, stop: ch.FinishReason}
	for _, tc := range ch.Message.ToolCalls {
		res.calls = append(res.calls, toolCall{tc.ID, tc.Function.Name, compact(tc.Function.Arguments)})
	}
	return res, nil
}

func responsesClient(ctx context.Context, url, key string, stream bool, prompt string) (result, error) {
	c := oa.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	p := responses.ResponseNewParams{Model: "m1", Instructions: oa.String("Be brief."), Store: oa.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(prompt, responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(`{"path":"x"}`, "call_0", "read"),
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: oa.String("call_0"),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oa.String("package x")}}},
		}},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("read", schemaMap(), false)},
	}
	p.Tools[0].OfFunction.Description = oa.String("Read a file")
	var r responses.Response
	var deltas strings.Builder
	if stream {
		s := c.Responses.NewStreaming(ctx, p)
		defer s.Close()
		for s.Next() {
			switch ev := s.Current(); ev.Type {
			case "response.output_text.delta":
				deltas.WriteString(ev.Delta)
			case "response.completed":
				r = ev.Response
			case "response.failed":
				return result{}, fmt.Errorf("response.failed: %s", ev.Response.Error.Message)
			}
		}
		if err := s.Err(); err != nil {
			return result{}, err
		}
		if deltas.String() != r.OutputText() {
			return result{}, fmt.Errorf("deltas %q, completed output %q", deltas.String(), r.OutputText())
		}
	} else {
		rp, err := c.Responses.New(ctx, p)
		if err != nil {
			return result{}, err
		}
		r = *rp
	}
	res := result{text: r.OutputText(), in: r.Usage.InputTokens, out: r.Usage.OutputTokens,
		reason: r.Usage.OutputTokensDetails.ReasoningTokens, stop: string(r.Status)}
	for _, it := range r.Output {
		if it.Type == "function_call" {
			res.calls = append(res.calls, toolCall{it.CallID, it.Name, compact(it.Arguments.OfString)})
		}
	}
	return res, nil
}

var wires = []struct {
	name    string
	client  client
	stop    string // the wire's word for "waits for tool results"
	reasons bool   // the wire carries reasoning tokens
}{
	{"anthropic", anthropicClient, "tool_use", false},
	{"chat", chatClient, "tool_calls", true},
	{"responses", responsesClient, "completed", true},
	{"gemini", geminiClient, "STOP", true},
}

// wantRequest is the llm.Request every wire's conversation translates to.
func checkRequest(t *testing.T, got llm.Request) {
	t.Helper()
	type msg struct {
		Role             llm.Role
		Text, ToolCallID string
		Calls            []toolCall
	}
	var msgs []msg
	for _, m := range got.Messages {
		mm := msg{Role: m.Role, Text: m.Text, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			mm.Calls = append(mm.Calls, toolCall{c.ID, c.Name, compact(string(c.Arguments))})
		}
		msgs = append(msgs, mm)
	}
	want := []msg{
		{Role: llm.RoleUser, Text: "Read a.go"},
		{Role: llm.RoleAssistant, Calls: []toolCall{{"call_0", "read", `{"path":"x"}`}}},
		{Role: llm.RoleTool, Text: "package x", ToolCallID: "call_0"},
	}
	if got.Model != "m1" || got.System != "Be brief." || fmt.Sprint(msgs) != fmt.Sprint(want) {
		t.Errorf("upstream request: model %q system %q messages %+v, want %+v", got.Model, got.System, msgs, want)
	}
	if len(got.Tools) != 1 || got.Tools[0].Name != "read" || got.Tools[0].Description != "Read a file" ||
		!strings.Contains(string(got.Tools[0].Schema), `"path"`) {
		t.Errorf("upstream tools %+v", got.Tools)
	}
}

// TestWires drives each wire's official client through the gateway to each
// provider, streaming and not: the cross-wire cases are the point.
func TestWires(t *testing.T) {
	for _, w := range wires {
		for _, p := range []provider{chatProvider, anthropicProvider} {
			for _, stream := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", w.name, p, stream), func(t *testing.T) {
					r := newRig(t, p, gateway.Options{}, toolTurn())
					got, err := w.client(testContext(t), r.url, token, stream, "Read a.go")
					if err != nil {
						t.Fatal(err)
					}
					want := result{text: "Reading two files.", calls: []toolCall{{"call_a", "read", `{"path":"a.go"}`}},
						in: 120, out: 45, stop: w.stop}
					if w.reasons && p == chatProvider {
						want.reason = 7 // the Anthropic provider reports no reasoning count
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("got %+v\nwant %+v", got, want)
					}
					if len(r.up.reqs) != 1 || r.up.grants[0] != grant {
						t.Fatalf("upstream calls %d, grants %+v", len(r.up.reqs), r.up.grants)
					}
					checkRequest(t, r.up.reqs[0])
				})
			}
		}
	}
}

// statusOf is the HTTP status and the message an SDK error reports.
func statusOf(err error) (int, string) {
	var ae *an.Error
	var oe *oa.Error
	var ge *gmErr
	switch {
	case errors.As(err, &ge):
		return ge.status, ge.message
	case errors.As(err, &ae):
		return ae.StatusCode, ae.Error()
	case errors.As(err, &oe):
		return oe.StatusCode, oe.Message
	}
	return 0, fmt.Sprint(err)
}

func TestWireErrors(t *testing.T) {
	overBudget := fmt.Errorf("%w: Agent a1 has spent its $5.00 budget", errs.OverBudget)
	for _, w := range wires {
		for _, tc := range []struct {
			name   string
			key    string
			prompt string
			refuse error
			turn   fakellm.Turn
			status int
			msg    string
		}{
			{name: "bad token", key: "stolen", status: 401, msg: "API key"},
			{name: "oversized body", prompt: strings.Repeat("x", 8<<10), status: 413, msg: "limit"},
			{name: "over budget", refuse: overBudget, status: 402, msg: "has spent its $5.00 budget"},
			{name: "provider rate limit", turn: fakellm.Turn{Steps: []fakellm.Step{fakellm.RateLimited("7")}}, status: 429, msg: "rate limited"},
			{name: "provider refuses", turn: fakellm.Turn{Steps: []fakellm.Step{fakellm.Fail(400)}}, status: 400, msg: "request rejected"},
			{name: "provider down", turn: fakellm.Turn{Steps: []fakellm.Step{fakellm.Fail(500)}}, status: 503, msg: "unavailable"},
		} {
			for _, stream := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", w.name, tc.name, stream), func(t *testing.T) {
					r := newRig(t, chatProvider, gateway.Options{MaxBody: 4 << 10}, tc.turn)
					r.up.refuse = tc.refuse
					key := tc.key
					if tc.key == "" {
						key = token
					}
					prompt := "Read a.go" + tc.prompt
					_, err := w.client(testContext(t), r.url, key, stream, prompt)
					if status, msg := statusOf(err); status != tc.status || !strings.Contains(msg, tc.msg) {
						t.Fatalf("status %d message %q, want status %d with %q", status, msg, tc.status, tc.msg)
					}
					if tc.status == 401 || tc.status == 413 {
						if len(r.up.reqs) != 0 {
							t.Fatal("a refused request reached the upstream")
						}
					}
				})
			}
		}
	}
}

// TestBrokenStream: a provider that breaks off mid-answer ends the agent's
// stream with an error, not a truncated success.
func TestBrokenStream(t *testing.T) {
	for _, w := range wires {
		for _, p := range []provider{chatProvider, anthropicProvider} {
			t.Run(fmt.Sprintf("%s/%s", w.name, p), func(t *testing.T) {
				r := newRig(t, p, gateway.Options{}, fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("partial"), fakellm.Drop()}})
				_, err := w.client(testContext(t), r.url, token, true, "Read a.go")
				if err == nil || !strings.Contains(err.Error(), "unavailable") {
					t.Fatalf("err %v, want the provider's failure", err)
				}
			})
		}
	}
}

// TestBadRequest: bodies the gateway cannot translate get 400 in the
// wire's own error shape.
func TestBadRequest(t *testing.T) {
	r := newRig(t, chatProvider, gateway.Options{})
	for _, tc := range []struct {
		path, body, want string
		anthropic        bool
	}{
		{"/v1/messages", `{"model":`, "unexpected end", true},
		{"/v1/messages", `{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, `"image" is not supported`, true},
		{"/v1/messages", `{"messages":[{"role":"system","content":"x"}]}`, `role "system"`, true},
		{"/v1/messages", strings.Repeat("[", 100) + strings.Repeat("]", 100), "nests too deeply", true},
		{"/v1/chat/completions", `{"model":`, "unexpected end", false},
		{"/v1/chat/completions", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{"}}]}]}`, "not JSON", false},
		{"/v1/chat/completions", `{"tools":[{"type":"custom"}]}`, "function tool", false},
		{"/v1/responses", `[]`, "cannot unmarshal", false},
		{"/v1/responses", `{"previous_response_id":"resp_1"}`, "keeps no responses", false},
		{"/v1/responses", `{"input":[{"type":"computer_call"}]}`, `"computer_call" is not supported`, false},
	} {
		t.Run(tc.path+" "+tc.want, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, r.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 400 || body.Error.Type != "invalid_request_error" || !strings.Contains(body.Error.Message, tc.want) ||
				(body.Type == "error") != tc.anthropic {
				t.Fatalf("status %d body %+v, want 400 with %q", resp.StatusCode, body, tc.want)
			}
		})
	}
	for _, path := range []string{"/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1/models"} {
		req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, r.url+path, strings.NewReader(`{}`))
		if path == "/v1/models" {
			req.Method = http.MethodGet
		}
		req.Header.Set("Authorization", "Basic "+token) // not a Bearer token: no token at all
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without a token: status %d", path, resp.StatusCode)
		}
	}
	if len(r.up.reqs) != 0 {
		t.Fatal("a bad request reached the upstream")
	}
}

func TestModels(t *testing.T) {
	r := newRig(t, chatProvider, gateway.Options{Model: "claude-sonnet-4-6"})
	c := oa.NewClient(option.WithBaseURL(r.url+"/v1"), option.WithAPIKey(token), option.WithMaxRetries(0))
	page, err := c.Models.List(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "claude-sonnet-4-6" {
		t.Fatalf("models %+v", page.Data)
	}
	bad := oa.NewClient(option.WithBaseURL(r.url+"/v1"), option.WithAPIKey("stolen"), option.WithMaxRetries(0))
	if _, err := bad.Models.List(testContext(t)); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("bad token: %v", err)
	}
}
