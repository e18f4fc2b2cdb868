package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// The Gemini wire: POST /v1beta/models/{model}:streamGenerateContent?alt=sse
// and :generateContent, as Gemini CLI calls them with GOOGLE_GEMINI_BASE_URL
// (the key in x-goog-api-key). The model is in the path, not the body.
func geminiWire(model string, stream bool) wire {
	return wire{
		parse: func(body []byte) (call, error) {
			c, err := parseGemini(body)
			c.req.Model, c.stream = model, stream
			return c, err
		},
		writeErr: geminiError, newStream: newGeminiStream, reply: geminiReply,
	}
}

// gemini routes a call on a model to its method.
func (g *gateway) gemini(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	switch {
	case method == "streamGenerateContent" && r.URL.Query().Get("alt") == "sse":
		g.serve(geminiWire(model, true)).ServeHTTP(w, r)
	case method == "streamGenerateContent":
		geminiError(w, http.StatusBadRequest, "gateway: streamGenerateContent is served as Server-Sent Events only: add alt=sse")
	case method == "generateContent":
		g.serve(geminiWire(model, false)).ServeHTTP(w, r)
	default:
		geminiError(w, http.StatusNotFound, fmt.Sprintf("gateway: method %q is not served (streamGenerateContent, generateContent)", method))
	}
}

type gmRequest struct {
	Contents          []gmContent `json:"contents"`
	SystemInstruction *gmContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Description          string          `json:"description"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		MaxOutputTokens int `json:"maxOutputTokens"`
		ThinkingConfig  *struct {
			ThinkingBudget int    `json:"thinkingBudget"`
			ThinkingLevel  string `json:"thinkingLevel"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
}

type gmContent struct {
	Role  string   `json:"role"`
	Parts []gmPart `json:"parts"`
}

type gmPart struct {
	Text             *string     `json:"text,omitempty"`
	Thought          bool        `json:"thought,omitempty"`
	FunctionCall     *gmCall     `json:"functionCall,omitempty"`
	FunctionResponse *gmResponse `json:"functionResponse,omitempty"`
	// What the gateway refuses, by name.
	InlineData          json.RawMessage `json:"inlineData,omitempty"`
	FileData            json.RawMessage `json:"fileData,omitempty"`
	ExecutableCode      json.RawMessage `json:"executableCode,omitempty"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult,omitempty"`
}

type gmCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type gmResponse struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

// refused names the first kind of content in p the gateway cannot carry.
func (p gmPart) refused() string {
	for _, k := range []struct {
		name string
		raw  json.RawMessage
	}{{"inlineData", p.InlineData}, {"fileData", p.FileData}, {"executableCode", p.ExecutableCode}, {"codeExecutionResult", p.CodeExecutionResult}} {
		if len(k.raw) > 0 && string(k.raw) != "null" {
			return k.name
		}
	}
	return ""
}

// parseGemini translates a generateContent request. Thought parts the agent
// sends back are dropped; tools other than function declarations (Google
// Search, code execution) are dropped; inline and file data are refused.
// A function call without an id gets one, which the next function response
// of the same name without an id answers.
func parseGemini(body []byte) (call, error) {
	var in gmRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return call{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	req := llm.Request{MaxOutputTokens: max(in.GenerationConfig.MaxOutputTokens, 0)}
	if tc := in.GenerationConfig.ThinkingConfig; tc != nil {
		req.ThinkingBudget = max(tc.ThinkingBudget, 0)
		if req.ThinkingBudget == 0 {
			req.ThinkingBudget = effortBudget(strings.ToLower(tc.ThinkingLevel))
		}
	}
	if si := in.SystemInstruction; si != nil {
		for i, p := range si.Parts {
			if p.Text == nil || p.FunctionCall != nil || p.FunctionResponse != nil || p.refused() != "" {
				return call{}, fmt.Errorf("%w: systemInstruction.parts[%d]: text only", ErrBadRequest, i)
			}
			req.System = join(req.System, *p.Text)
		}
	}
	pending := map[string][]string{} // a call's name to the ids given to its calls without one
	for i, c := range in.Contents {
		what := fmt.Sprintf("contents[%d]", i)
		m := llm.Message{Role: llm.RoleUser}
		switch c.Role {
		case "user", "", "function":
		case "model":
			m.Role = llm.RoleAssistant
		default:
			return call{}, fmt.Errorf("%w: %s: role %q (want user or model)", ErrBadRequest, what, c.Role)
		}
		for j, p := range c.Parts {
			what := fmt.Sprintf("%s.parts[%d]", what, j)
			if k := p.refused(); k != "" {
				return call{}, fmt.Errorf("%w: %s: %s is not supported by the gateway (text only)", ErrBadRequest, what, k)
			}
			switch {
			case p.FunctionCall != nil:
				if m.Role != llm.RoleAssistant {
					return call{}, fmt.Errorf("%w: %s: a functionCall in a user turn", ErrBadRequest, what)
				}
				fc := p.FunctionCall
				a := bytes.TrimSpace(fc.Args)
				if len(a) == 0 || string(a) == "null" {
					a = json.RawMessage("{}")
				} else if a[0] != '{' {
					return call{}, fmt.Errorf("%w: %s: functionCall.args is not an object", ErrBadRequest, what)
				}
				id := fc.ID
				if id == "" {
					id = fmt.Sprintf("gemini_call_%d_%d", i, j)
					pending[fc.Name] = append(pending[fc.Name], id)
				}
				m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: id, Name: fc.Name, Arguments: a})
			case p.FunctionResponse != nil:
				if m.Role == llm.RoleAssistant {
					return call{}, fmt.Errorf("%w: %s: a functionResponse in a model turn", ErrBadRequest, what)
				}
				fr := p.FunctionResponse
				id := fr.ID
				if id == "" {
					ids := pending[fr.Name]
					if len(ids) == 0 {
						return call{}, fmt.Errorf("%w: %s: a functionResponse without an id answers no functionCall of %q", ErrBadRequest, what, fr.Name)
					}
					id, pending[fr.Name] = ids[0], ids[1:]
				}
				t, isErr := functionResult(fr.Response)
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, Text: t, ToolCallID: id, IsError: isErr})
			case p.Text != nil && !p.Thought:
				m.Text = join(m.Text, *p.Text)
			}
		}
		if m.Text != "" || len(m.ToolCalls) > 0 {
			req.Messages = append(req.Messages, m)
		}
	}
	for i, t := range in.Tools {
		for j, d := range t.FunctionDeclarations {
			if d.Name == "" {
				return call{}, fmt.Errorf("%w: tools[%d].functionDeclarations[%d]: a function needs a name", ErrBadRequest, i, j)
			}
			schema := d.ParametersJSONSchema
			if len(schema) == 0 && len(d.Parameters) > 0 {
				schema = lowerTypes(d.Parameters)
			}
			req.Tools = append(req.Tools, llm.Tool{Name: d.Name, Description: d.Description, Schema: schema})
		}
	}
	if req.ThinkingBudget > 0 && inToolLoop(req.Messages) {
		req.ThinkingBudget = 0 // as parseAnthropic: no thinking block to give back
	}
	return call{req: req}, nil
}

// functionResult is a function response's text: its output (Gemini CLI
// sends {"output": …}) or its error, or else the whole response as JSON.
func functionResult(raw json.RawMessage) (string, bool) {
	var r struct {
		Output *string `json:"output"`
		Error  *string `json:"error"`
	}
	if json.Unmarshal(raw, &r) == nil {
		switch {
		case r.Error != nil && r.Output == nil:
			return *r.Error, true
		case r.Output != nil && r.Error == nil:
			return *r.Output, false
		}
	}
	return string(raw), false
}

// lowerTypes turns a Gemini OpenAPI schema's upper-case types ("OBJECT")
// into JSON Schema's ("object"); a schema that does not decode is kept.
func lowerTypes(raw json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "type" {
					v[k] = strings.ToLower(s)
				} else {
					walk(x)
				}
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// geminiError writes Google's error shape: {"error":{code,message,status}}.
func geminiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, gmErrorOf(status, msg))
}

type gmError struct {
	Error gmErrorBody `json:"error"`
}

type gmErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
}

func gmErrorOf(status int, msg string) gmError {
	s := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 402: "FAILED_PRECONDITION", 403: "PERMISSION_DENIED",
		404: "NOT_FOUND", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 503: "UNAVAILABLE"}[status]
	if s == "" {
		s = "INTERNAL"
	}
	return gmError{Error: gmErrorBody{Code: status, Message: msg, Status: s}}
}

type gmUsage struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount"`
	ThoughtsTokenCount   int `json:"thoughtsTokenCount,omitempty"`
	TotalTokenCount      int `json:"totalTokenCount"`
}

// gmUsageOf splits the output tokens as Gemini does: candidates exclude the
// thoughts, which are counted apart.
func gmUsageOf(u usage.Tokens) *gmUsage {
	return &gmUsage{PromptTokenCount: u.InputTokens, CandidatesTokenCount: max(u.OutputTokens-u.ReasoningTokens, 0),
		ThoughtsTokenCount: u.ReasoningTokens, TotalTokenCount: u.InputTokens + u.OutputTokens}
}

type gmCandidate struct {
	Content      gmContent `json:"content"`
	FinishReason string    `json:"finishReason,omitempty"`
	Index        int       `json:"index"`
}

type gmAnswer struct {
	Candidates    []gmCandidate `json:"candidates"`
	UsageMetadata *gmUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string        `json:"modelVersion"`
	ResponseID    string        `json:"responseId"`
}

func gmFinish(r llm.StopReason) string {
	switch r {
	case llm.StopMaxTokens:
		return "MAX_TOKENS"
	case llm.StopOther:
		return "SAFETY"
	}
	return "STOP" // Gemini ends a turn of function calls with STOP too
}

func gmCallPart(tc llm.ToolCall) gmPart {
	return gmPart{FunctionCall: &gmCall{ID: tc.ID, Name: tc.Name, Args: tc.Arguments}}
}

// badArgs is the error for a provider's tool call whose arguments are not
// the JSON object Gemini's args and Anthropic's tool_use input must be, or ""
// when they are.
func badArgs(tc llm.ToolCall) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(tc.Arguments, &obj) != nil {
		return fmt.Sprintf("lathe gateway: the provider's arguments for tool call %q are not a JSON object", tc.ID)
	}
	return ""
}

// gmStream writes a streamGenerateContent SSE reply: one chunk a delta, a
// function call whole in one chunk when its arguments are complete, and the
// finish reason with the usage in the last.
type gmStream struct {
	s      *sse
	c      call
	id     string
	usage  usage.Tokens
	failed bool // an error chunk was sent: nothing follows it
}

func newGeminiStream(s *sse, c call) encoder {
	return &gmStream{s: s, c: c, id: newID("gm_")}
}

func (e *gmStream) chunk(parts []gmPart, finish string, u *gmUsage) {
	e.s.send("", gmAnswer{Candidates: []gmCandidate{{Content: gmContent{Role: "model", Parts: parts}, FinishReason: finish}},
		UsageMetadata: u, ModelVersion: e.c.req.Model, ResponseID: e.id})
}

func (e *gmStream) event(ev llm.Event) {
	if e.failed {
		return
	}
	switch ev := ev.(type) {
	case llm.TextDelta:
		e.chunk([]gmPart{{Text: ptr(ev.Text)}}, "", nil)
	case llm.ReasoningDelta:
		e.chunk([]gmPart{{Text: ptr(ev.Text), Thought: true}}, "", nil)
	case llm.ToolCallEnd:
		tc := llm.ToolCall{ID: ev.ID, Name: ev.Name, Arguments: ev.Arguments}
		if msg := badArgs(tc); msg != "" {
			e.fail(http.StatusBadGateway, msg)
			return
		}
		e.chunk([]gmPart{gmCallPart(tc)}, "", nil)
	case llm.Usage:
		e.usage = ev.Tokens
	case llm.Done:
		e.chunk([]gmPart{}, gmFinish(ev.StopReason), gmUsageOf(e.usage))
	}
}

func (e *gmStream) fail(status int, msg string) {
	e.failed = true
	e.s.send("", gmErrorOf(status, msg))
}

func geminiReply(w http.ResponseWriter, c call, a answer) {
	parts := []gmPart{}
	if a.reasoning != "" {
		parts = append(parts, gmPart{Text: ptr(a.reasoning), Thought: true})
	}
	if a.text != "" {
		parts = append(parts, gmPart{Text: ptr(a.text)})
	}
	for _, tc := range a.calls {
		if msg := badArgs(tc); msg != "" {
			geminiError(w, http.StatusBadGateway, msg)
			return
		}
		parts = append(parts, gmCallPart(tc))
	}
	writeJSON(w, http.StatusOK, gmAnswer{Candidates: []gmCandidate{{Content: gmContent{Role: "model", Parts: parts}, FinishReason: gmFinish(a.stop)}},
		UsageMetadata: gmUsageOf(a.usage), ModelVersion: c.req.Model, ResponseID: newID("gm_")})
}
