package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// The OpenAI Chat Completions wire: POST /v1/chat/completions.
var chatWire = wire{parse: parseChat, writeErr: openAIError, newStream: newChatStream, reply: chatReply}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	MaxTokens           int    `json:"max_tokens"`
	MaxCompletionTokens int    `json:"max_completion_tokens"`
	ReasoningEffort     string `json:"reasoning_effort"`
	Stream              bool   `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// parseChat translates a Chat Completions request. System and developer
// messages, wherever they stand, join the one system prompt; sampling
// parameters are dropped; non-text content is refused.
func parseChat(body []byte) (call, error) {
	var in chatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return call{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	req := llm.Request{Model: in.Model, MaxOutputTokens: max(in.MaxCompletionTokens, in.MaxTokens, 0),
		ThinkingBudget: effortBudget(in.ReasoningEffort)}
	for i, m := range in.Messages {
		what := fmt.Sprintf("messages[%d].content", i)
		t, err := text(m.Content, what)
		if err != nil {
			return call{}, err
		}
		switch m.Role {
		case "system", "developer":
			req.System = join(req.System, t)
		case "user":
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Text: t})
		case "tool":
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, Text: t, ToolCallID: m.ToolCallID})
		case "assistant":
			am := llm.Message{Role: llm.RoleAssistant, Text: t}
			for j, tc := range m.ToolCalls {
				a, err := args(tc.Function.Arguments, fmt.Sprintf("messages[%d].tool_calls[%d]", i, j))
				if err != nil {
					return call{}, err
				}
				am.ToolCalls = append(am.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: a})
			}
			req.Messages = append(req.Messages, am)
		default:
			return call{}, fmt.Errorf("%w: messages[%d]: role %q", ErrBadRequest, i, m.Role)
		}
	}
	for i, t := range in.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return call{}, fmt.Errorf("%w: tools[%d]: want a function tool with a name", ErrBadRequest, i)
		}
		req.Tools = append(req.Tools, llm.Tool{Name: t.Function.Name, Description: t.Function.Description, Schema: t.Function.Parameters})
	}
	if req.ThinkingBudget > 0 && inToolLoop(req.Messages) {
		req.ThinkingBudget = 0 // as parseAnthropic: no thinking block to give back
	}
	return call{req: req, stream: in.Stream, includeUsage: in.StreamOptions != nil && in.StreamOptions.IncludeUsage}, nil
}

// openAIError writes the error shape Chat Completions and Responses share.
func openAIError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, oaError{Error: oaErrorOf(status, msg)})
}

type oaError struct {
	Error oaErrorBody `json:"error"`
}

type oaErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func oaErrorOf(status int, msg string) oaErrorBody {
	e := oaErrorBody{Message: msg, Type: "invalid_request_error"}
	switch {
	case status == http.StatusUnauthorized:
		e.Code = ptr("invalid_api_key")
	case status == http.StatusPaymentRequired:
		e.Type, e.Code = "insufficient_quota", ptr("insufficient_quota")
	case status == http.StatusTooManyRequests:
		e.Type, e.Code = "rate_limit_exceeded", ptr("rate_limit_exceeded")
	case status >= 500:
		e.Type = "server_error"
	}
	return e
}

type chatUsage struct {
	PromptTokens            int `json:"prompt_tokens"`
	CompletionTokens        int `json:"completion_tokens"`
	TotalTokens             int `json:"total_tokens"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func chatUsageOf(u usage.Tokens) *chatUsage {
	c := &chatUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
	c.CompletionTokensDetails.ReasoningTokens = u.ReasoningTokens
	return c
}

type chatFunc struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatToolCall struct {
	Index    *int     `json:"index,omitempty"`
	ID       string   `json:"id,omitempty"`
	Type     string   `json:"type,omitempty"`
	Function chatFunc `json:"function"`
}

type chatDelta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int        `json:"index"`
	Delta        *chatDelta `json:"delta,omitempty"`
	Message      *chatDelta `json:"message,omitempty"`
	FinishReason *string    `json:"finish_reason"`
}

type chatChunk struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	// Usage is null on every chunk but the last when usage is asked for.
	Usage json.RawMessage `json:"usage,omitempty"`
}

func chatFinish(r llm.StopReason) string {
	switch r {
	case llm.StopToolCalls:
		return "tool_calls"
	case llm.StopMaxTokens:
		return "length"
	case llm.StopOther:
		return "content_filter"
	}
	return "stop"
}

// chatStream writes a chat.completion.chunk SSE reply.
type chatStream struct {
	s       *sse
	c       call
	id      string
	created int64
	sent    map[int]bool // tool calls that got argument deltas
	usage   usage.Tokens
}

func newChatStream(s *sse, c call) encoder {
	e := &chatStream{s: s, c: c, id: newID("chatcmpl-"), created: time.Now().Unix(), sent: map[int]bool{}}
	e.chunk(&chatDelta{Role: "assistant", Content: ptr("")}, nil)
	return e
}

func (e *chatStream) chunk(d *chatDelta, finish *string) {
	c := chatChunk{ID: e.id, Object: "chat.completion.chunk", Created: e.created, Model: e.c.req.Model,
		Choices: []chatChoice{{Delta: d, FinishReason: finish}}}
	if e.c.includeUsage {
		c.Usage = json.RawMessage("null")
	}
	e.s.send("", c)
}

func (e *chatStream) event(ev llm.Event) {
	switch ev := ev.(type) {
	case llm.TextDelta:
		e.chunk(&chatDelta{Content: ptr(ev.Text)}, nil)
	case llm.ReasoningDelta:
		e.chunk(&chatDelta{ReasoningContent: ptr(ev.Text)}, nil)
	case llm.ToolCallStart:
		e.chunk(&chatDelta{ToolCalls: []chatToolCall{{Index: ptr(ev.Index), ID: ev.ID, Type: "function", Function: chatFunc{Name: ev.Name}}}}, nil)
	case llm.ToolCallArgsDelta:
		e.sent[ev.Index] = true
		e.chunk(&chatDelta{ToolCalls: []chatToolCall{{Index: ptr(ev.Index), Function: chatFunc{Arguments: ev.Delta}}}}, nil)
	case llm.ToolCallEnd:
		if !e.sent[ev.Index] && string(ev.Arguments) != "{}" {
			e.chunk(&chatDelta{ToolCalls: []chatToolCall{{Index: ptr(ev.Index), Function: chatFunc{Arguments: string(ev.Arguments)}}}}, nil)
		}
	case llm.Usage:
		e.usage = ev.Tokens
	case llm.Done:
		e.chunk(&chatDelta{}, ptr(chatFinish(ev.StopReason)))
		if e.c.includeUsage {
			u, _ := json.Marshal(chatUsageOf(e.usage))
			e.s.send("", chatChunk{ID: e.id, Object: "chat.completion.chunk", Created: e.created, Model: e.c.req.Model,
				Choices: []chatChoice{}, Usage: u})
		}
		e.s.data("", []byte("[DONE]"))
	}
}

func (e *chatStream) fail(status int, msg string) {
	e.s.send("", oaError{Error: oaErrorOf(status, msg)})
}

func chatReply(w http.ResponseWriter, c call, a answer) {
	msg := &chatDelta{Role: "assistant"}
	if a.text != "" || len(a.calls) == 0 {
		msg.Content = ptr(a.text)
	}
	if a.reasoning != "" {
		msg.ReasoningContent = ptr(a.reasoning)
	}
	for _, tc := range a.calls {
		msg.ToolCalls = append(msg.ToolCalls, chatToolCall{ID: tc.ID, Type: "function", Function: chatFunc{Name: tc.Name, Arguments: string(tc.Arguments)}})
	}
	u, _ := json.Marshal(chatUsageOf(a.usage))
	writeJSON(w, http.StatusOK, chatChunk{ID: newID("chatcmpl-"), Object: "chat.completion", Created: time.Now().Unix(),
		Model: c.req.Model, Choices: []chatChoice{{Message: msg, FinishReason: ptr(chatFinish(a.stop))}}, Usage: u})
}
