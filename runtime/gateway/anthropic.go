package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"

	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// The Anthropic Messages wire: POST /v1/messages (Claude Code adds
// ?beta=true, which changes nothing here).
var anthropicWire = wire{parse: parseAnthropic, writeErr: anthropicError, newStream: newAnthropicStream, reply: anthropicReply}

type anRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	Stream bool `json:"stream"`
}

type anInBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// parseAnthropic translates a Messages request. Thinking blocks the agent
// sends back are dropped (llm.Message carries none); server tools (a tool
// with a type other than "custom") are dropped; image and document content
// is refused.
func parseAnthropic(body []byte) (call, error) {
	var in anRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return call{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	system, err := text(in.System, "system")
	if err != nil {
		return call{}, err
	}
	req := llm.Request{Model: in.Model, System: system, MaxOutputTokens: max(in.MaxTokens, 0)}
	if in.Thinking != nil && in.Thinking.Type == "enabled" {
		req.ThinkingBudget = max(in.Thinking.BudgetTokens, 0)
	}
	for i, m := range in.Messages {
		what := fmt.Sprintf("messages[%d]", i)
		var blocks []anInBlock
		if len(m.Content) > 0 && m.Content[0] == '"' {
			var s string
			if err := json.Unmarshal(m.Content, &s); err != nil {
				return call{}, fmt.Errorf("%w: %s: %v", ErrBadRequest, what, err)
			}
			blocks = []anInBlock{{Type: "text", Text: s}}
		} else if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return call{}, fmt.Errorf("%w: %s.content: want a string or a list of blocks: %v", ErrBadRequest, what, err)
		}
		switch m.Role {
		case "user":
			user := llm.Message{Role: llm.RoleUser}
			for j, b := range blocks {
				switch b.Type {
				case "text":
					user.Text = join(user.Text, b.Text)
				case "tool_result":
					t, err := text(b.Content, fmt.Sprintf("%s.content[%d].content", what, j))
					if err != nil {
						return call{}, err
					}
					req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, Text: t, ToolCallID: b.ToolUseID, IsError: b.IsError})
				default:
					return call{}, fmt.Errorf("%w: %s.content[%d]: content of type %q is not supported by the gateway", ErrBadRequest, what, j, b.Type)
				}
			}
			if user.Text != "" {
				req.Messages = append(req.Messages, user)
			}
		case "assistant":
			am := llm.Message{Role: llm.RoleAssistant}
			for j, b := range blocks {
				switch b.Type {
				case "text":
					am.Text = join(am.Text, b.Text)
				case "tool_use":
					a := b.Input
					if len(a) == 0 || string(a) == "null" {
						a = json.RawMessage("{}")
					}
					am.ToolCalls = append(am.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: a})
				case "thinking", "redacted_thinking":
				default:
					return call{}, fmt.Errorf("%w: %s.content[%d]: content of type %q is not supported by the gateway", ErrBadRequest, what, j, b.Type)
				}
			}
			if am.Text != "" || len(am.ToolCalls) > 0 {
				// A turn of thinking alone leaves nothing to send.
				req.Messages = append(req.Messages, am)
			}
		default:
			return call{}, fmt.Errorf("%w: %s: role %q (want user or assistant)", ErrBadRequest, what, m.Role)
		}
	}
	for i, t := range in.Tools {
		if t.Type != "" && t.Type != "custom" {
			continue
		}
		if t.Name == "" {
			return call{}, fmt.Errorf("%w: tools[%d]: a tool needs a name", ErrBadRequest, i)
		}
		req.Tools = append(req.Tools, llm.Tool{Name: t.Name, Description: t.Description, Schema: t.InputSchema})
	}
	if req.ThinkingBudget > 0 && inToolLoop(req.Messages) {
		// Anthropic wants the thinking block that preceded the tool calls
		// back, which llm.Message cannot carry: think on the next user turn.
		req.ThinkingBudget = 0
	}
	return call{req: req, stream: in.Stream}, nil
}

// inToolLoop reports whether the conversation ends with tool results.
func inToolLoop(ms []llm.Message) bool {
	return len(ms) > 0 && ms[len(ms)-1].Role == llm.RoleTool
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}

func anthropicError(w http.ResponseWriter, status int, msg string) {
	typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
		403: "permission_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
		503: "overloaded_error"}[status]
	if typ == "" {
		typ = "api_error"
	}
	writeJSON(w, status, anError{Type: "error", Error: anErrorBody{Type: typ, Message: msg}})
}

type anError struct {
	Type  string      `json:"type"`
	Error anErrorBody `json:"error"`
}

type anErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type anUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type anMessage struct {
	ID           string    `json:"id"`
	Type         string    `json:"type"`
	Role         string    `json:"role"`
	Model        string    `json:"model"`
	Content      []anBlock `json:"content"`
	StopReason   *string   `json:"stop_reason"`
	StopSequence *string   `json:"stop_sequence"`
	Usage        anUsage   `json:"usage"`
}

type anBlock struct {
	Type      string           `json:"type"`
	Text      *string          `json:"text,omitempty"`
	Thinking  *string          `json:"thinking,omitempty"`
	Signature *string          `json:"signature,omitempty"`
	ID        string           `json:"id,omitempty"`
	Name      string           `json:"name,omitempty"`
	Input     *json.RawMessage `json:"input,omitempty"`
}

type anDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

type anEvent struct {
	Type         string     `json:"type"`
	Message      *anMessage `json:"message,omitempty"`
	Index        *int       `json:"index,omitempty"`
	ContentBlock *anBlock   `json:"content_block,omitempty"`
	Delta        any        `json:"delta,omitempty"`
	Usage        *anUsage   `json:"usage,omitempty"`
}

type anStopDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

func anStop(r llm.StopReason) string {
	switch r {
	case llm.StopToolCalls:
		return "tool_use"
	case llm.StopMaxTokens:
		return "max_tokens"
	case llm.StopOther:
		return "refusal"
	}
	return "end_turn"
}

func anUsageOf(u usage.Tokens) anUsage {
	return anUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
}

func ptr[T any](v T) *T { return &v }

// anStream writes a Messages SSE reply. Input tokens are known only at the
// end, so message_start reports 0 and message_delta the whole usage.
type anStream struct {
	s     *sse
	index int    // the open content block, or the last one
	open  string // its type: text, thinking, tool_use; "" when none is open
	tool  int    // the tool call index of an open tool_use block
	sent  bool   // the open tool_use block got argument deltas
	usage usage.Tokens
	// failed: an error event was sent, nothing follows it.
	failed bool
}

func newAnthropicStream(s *sse, c call) encoder {
	e := &anStream{s: s, index: -1}
	s.send("message_start", anEvent{Type: "message_start", Message: &anMessage{ID: newID("msg_"), Type: "message",
		Role: "assistant", Model: c.req.Model, Content: []anBlock{}}})
	s.send("ping", anEvent{Type: "ping"})
	return e
}

func (e *anStream) closeBlock() {
	if e.open != "" {
		e.s.send("content_block_stop", anEvent{Type: "content_block_stop", Index: ptr(e.index)})
		e.open = ""
	}
}

func (e *anStream) openBlock(b anBlock) {
	e.closeBlock()
	e.index++
	e.open = b.Type
	e.s.send("content_block_start", anEvent{Type: "content_block_start", Index: ptr(e.index), ContentBlock: &b})
}

func (e *anStream) delta(d anDelta) {
	e.s.send("content_block_delta", anEvent{Type: "content_block_delta", Index: ptr(e.index), Delta: d})
}

func (e *anStream) event(ev llm.Event) {
	if e.failed {
		return
	}
	switch ev := ev.(type) {
	case llm.TextDelta:
		if e.open != "text" {
			e.openBlock(anBlock{Type: "text", Text: ptr("")})
		}
		e.delta(anDelta{Type: "text_delta", Text: ptr(ev.Text)})
	case llm.ReasoningDelta:
		if e.open != "thinking" {
			e.openBlock(anBlock{Type: "thinking", Thinking: ptr(""), Signature: ptr("")})
		}
		e.delta(anDelta{Type: "thinking_delta", Thinking: ptr(ev.Text)})
	case llm.ToolCallStart:
		e.openBlock(anBlock{Type: "tool_use", ID: ev.ID, Name: ev.Name, Input: ptr(json.RawMessage("{}"))})
		e.tool, e.sent = ev.Index, false
	case llm.ToolCallArgsDelta:
		if e.open == "tool_use" && e.tool == ev.Index {
			e.delta(anDelta{Type: "input_json_delta", PartialJSON: ptr(ev.Delta)})
			e.sent = true
		}
	case llm.ToolCallEnd:
		if msg := badArgs(llm.ToolCall{ID: ev.ID, Arguments: ev.Arguments}); msg != "" {
			// A tool_use input is a JSON object: an agent would choke on
			// anything else, or take a part of it for the whole.
			e.fail(http.StatusBadGateway, msg)
			return
		}
		if e.open == "tool_use" && e.tool == ev.Index {
			if !e.sent && string(ev.Arguments) != "{}" {
				e.delta(anDelta{Type: "input_json_delta", PartialJSON: ptr(string(ev.Arguments))})
			}
			e.closeBlock()
		}
	case llm.Usage:
		e.usage = ev.Tokens
	case llm.Done:
		e.closeBlock()
		e.s.send("message_delta", anEvent{Type: "message_delta", Delta: anStopDelta{StopReason: anStop(ev.StopReason)},
			Usage: ptr(anUsageOf(e.usage))})
		e.s.send("message_stop", anEvent{Type: "message_stop"})
	}
}

func (e *anStream) fail(status int, msg string) {
	e.failed = true
	typ := "api_error"
	if status == http.StatusPaymentRequired {
		typ = "billing_error"
	}
	e.s.send("error", anError{Type: "error", Error: anErrorBody{Type: typ, Message: msg}})
}

func anthropicReply(w http.ResponseWriter, c call, a answer) {
	m := anMessage{ID: newID("msg_"), Type: "message", Role: "assistant", Model: c.req.Model, Content: []anBlock{},
		StopReason: ptr(anStop(a.stop)), Usage: anUsageOf(a.usage)}
	if a.reasoning != "" {
		m.Content = append(m.Content, anBlock{Type: "thinking", Thinking: ptr(a.reasoning), Signature: ptr("")})
	}
	if a.text != "" {
		m.Content = append(m.Content, anBlock{Type: "text", Text: ptr(a.text)})
	}
	for _, tc := range a.calls {
		if msg := badArgs(tc); msg != "" {
			anthropicError(w, http.StatusBadGateway, msg)
			return
		}
		m.Content = append(m.Content, anBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: ptr(tc.Arguments)})
	}
	writeJSON(w, http.StatusOK, m)
}
