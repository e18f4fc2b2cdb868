// Package anthropic implements llm.Provider over the Anthropic Messages API
// (streaming, tool use, extended thinking) with the official SDK.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	an "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// DefaultMaxTokens is the output cap sent when a Request sets none; the
// Messages API requires one.
const DefaultMaxTokens = 8192

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root that /v1/messages hangs off; empty means
	// https://api.anthropic.com.
	BaseURL    string
	APIKey     string
	HTTPClient *http.Client
	// MaxRetries is how often the SDK retries a failed request itself. The
	// default 0 leaves retry policy to the caller.
	MaxRetries int
}

// Provider streams Messages.
type Provider struct{ client an.Client }

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	opts := []option.RequestOption{option.WithMaxRetries(cfg.MaxRetries), option.WithAPIKey(cfg.APIKey)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Provider{client: an.NewClient(opts...)}
}

var _ llm.Provider = (*Provider)(nil)

// Stream implements llm.Provider.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	params, err := params(req)
	if err != nil {
		return nil, err
	}
	s := p.client.Messages.NewStreaming(ctx, params)
	st := &stream{ctx: ctx, blocks: map[int64]*block{}}
	st.Pump = llm.Pump[an.MessageStreamEventUnion]{Source: s, Decode: st.event, Finish: st.finish, Fail: st.fail, Usage: func() usage.Tokens { return st.usage.Tokens }}
	if err := s.Err(); err != nil {
		s.Close()
		return nil, st.fail(err)
	}
	return st, nil
}

func params(req llm.Request) (an.MessageNewParams, error) {
	maxTokens := req.MaxOutputTokens
	if maxTokens <= 0 {
		maxTokens = max(DefaultMaxTokens, req.ThinkingBudget+DefaultMaxTokens/2)
	}
	params := an.MessageNewParams{Model: an.Model(req.Model), MaxTokens: int64(maxTokens)}
	if req.System != "" {
		params.System = []an.TextBlockParam{{Text: req.System}}
	}
	if req.ThinkingBudget > 0 {
		params.Thinking = an.ThinkingConfigParamOfEnabled(int64(req.ThinkingBudget))
	}
	// The API wants user and assistant turns to alternate: tool results
	// and the user text after them share one user message.
	add := func(role an.MessageParamRole, blocks ...an.ContentBlockParamUnion) {
		if n := len(params.Messages); n > 0 && params.Messages[n-1].Role == role {
			params.Messages[n-1].Content = append(params.Messages[n-1].Content, blocks...)
			return
		}
		params.Messages = append(params.Messages, an.MessageParam{Role: role, Content: blocks})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case llm.RoleUser:
			add(an.MessageParamRoleUser, an.NewTextBlock(m.Text))
		case llm.RoleTool:
			add(an.MessageParamRoleUser, an.NewToolResultBlock(m.ToolCallID, m.Text, m.IsError))
		case llm.RoleAssistant:
			var blocks []an.ContentBlockParamUnion
			if m.Text != "" {
				blocks = append(blocks, an.NewTextBlock(m.Text))
			}
			for _, c := range m.ToolCalls {
				args := c.Arguments
				if len(args) == 0 {
					args = json.RawMessage("{}")
				}
				blocks = append(blocks, an.NewToolUseBlock(c.ID, args, c.Name))
			}
			add(an.MessageParamRoleAssistant, blocks...)
		default:
			return params, fmt.Errorf("%w: message %d has role %q", llm.ErrRequest, i, m.Role)
		}
	}
	for _, t := range req.Tools {
		schema := an.ToolInputSchemaParam{}
		if len(t.Schema) > 0 {
			var m map[string]any
			if err := json.Unmarshal(t.Schema, &m); err != nil {
				return params, fmt.Errorf("%w: tool %s schema: %v", llm.ErrRequest, t.Name, err)
			}
			schema.Properties = m["properties"]
			if req, ok := m["required"].([]any); ok {
				for _, r := range req {
					if s, ok := r.(string); ok {
						schema.Required = append(schema.Required, s)
					}
				}
			}
			delete(m, "properties")
			delete(m, "required")
			delete(m, "type")
			if len(m) > 0 {
				schema.ExtraFields = m
			}
		}
		tp := an.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = an.String(t.Description)
		}
		params.Tools = append(params.Tools, an.ToolUnionParam{OfTool: &tp})
	}
	return params, nil
}

// block is an open tool_use content block.
type block struct {
	tool     int // tool call index within this inference
	id, name string
	args     []byte
}

type stream struct {
	ctx context.Context
	llm.Pump[an.MessageStreamEventUnion]
	blocks   map[int64]*block // open tool_use blocks by content index
	tools    int
	usage    llm.Usage
	inKnown  bool
	outKnown bool
	stop     string
	stopped  bool // message_stop seen
}

func (st *stream) finish(err error) error {
	switch {
	case err != nil:
		return st.fail(err)
	case !st.stopped:
		return st.fail(fmt.Errorf("%w: stream ended before message_stop", llm.ErrUnavailable))
	default:
		st.usage.TokenUsageKnown = st.inKnown && st.outKnown
		st.Emit(st.usage, llm.Done{StopReason: stopReason(st.stop), Raw: st.stop})
		return io.EOF
	}
}

func (st *stream) event(ev an.MessageStreamEventUnion) error {
	switch ev.Type {
	case "message_start":
		if ev.Message.JSON.Usage.Valid() {
			u := ev.Message.Usage
			st.usage.InputTokens = int(u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens)
			st.usage.OutputTokens = int(u.OutputTokens)
			st.inKnown = true
		}
	case "content_block_start":
		cb := ev.ContentBlock
		switch cb.Type {
		case "text":
			if cb.Text != "" {
				st.Emit(llm.TextDelta{Text: cb.Text})
			}
		case "thinking":
			if cb.Thinking != "" {
				st.Emit(llm.ReasoningDelta{Text: cb.Thinking})
			}
		case "tool_use":
			b := &block{tool: st.tools, id: cb.ID, name: cb.Name}
			st.tools++
			st.blocks[ev.Index] = b
			st.Emit(llm.ToolCallStart{Index: b.tool, ID: b.id, Name: b.name})
		}
	case "content_block_delta":
		d := ev.Delta
		switch d.Type {
		case "text_delta":
			st.Emit(llm.TextDelta{Text: d.Text})
		case "thinking_delta":
			st.Emit(llm.ReasoningDelta{Text: d.Thinking})
		case "input_json_delta":
			b, ok := st.blocks[ev.Index]
			if !ok {
				return fmt.Errorf("%w: input_json_delta for block %d, which is not an open tool_use", llm.ErrMalformed, ev.Index)
			}
			if d.PartialJSON != "" {
				b.args = append(b.args, d.PartialJSON...)
				st.Emit(llm.ToolCallArgsDelta{Index: b.tool, Delta: d.PartialJSON})
			}
		}
	case "content_block_stop":
		if b, ok := st.blocks[ev.Index]; ok {
			delete(st.blocks, ev.Index)
			args := json.RawMessage(b.args)
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			st.Emit(llm.ToolCallEnd{Index: b.tool, ID: b.id, Name: b.name, Arguments: args})
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			st.stop = string(ev.Delta.StopReason)
		}
		if ev.JSON.Usage.Valid() {
			st.usage.OutputTokens = int(ev.Usage.OutputTokens)
			if ev.Usage.InputTokens > 0 {
				st.usage.InputTokens = int(ev.Usage.InputTokens + ev.Usage.CacheCreationInputTokens + ev.Usage.CacheReadInputTokens)
			}
			st.outKnown = true
		}
	case "message_stop":
		st.stopped = true
	}
	return nil
}

func stopReason(s string) llm.StopReason {
	switch s {
	case "end_turn", "stop_sequence":
		return llm.StopEnd
	case "tool_use":
		return llm.StopToolCalls
	case "max_tokens":
		return llm.StopMaxTokens
	default:
		return llm.StopOther
	}
}

// fail classifies err (llm.Classify) with the usage known so far.
func (st *stream) fail(err error) error {
	return llm.Classify(st.ctx, "anthropic", err, st.usage.Tokens, apiFailure)
}

// apiFailure recognizes the SDK's error type: an HTTP error status, or an
// error event inside a 200 stream (overloaded).
func apiFailure(err error) (llm.APIFailure, bool) {
	var apiErr *an.Error
	if !errors.As(err, &apiErr) {
		return llm.APIFailure{}, false
	}
	f := llm.APIFailure{Status: apiErr.StatusCode, Message: apiErr.Error()}
	if apiErr.Response != nil {
		f.RetryAfter = apiErr.Response.Header.Get("Retry-After")
	}
	return f, true
}
