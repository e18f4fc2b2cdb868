// Package openai implements llm.Provider over OpenAI-compatible Chat
// Completions streaming (OpenAI, vLLM, llama.cpp server, LM Studio,
// OpenRouter, Ollama's /v1), with the official openai-go SDK.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root that /chat/completions hangs off, such as
	// https://api.openai.com/v1 or http://127.0.0.1:11434/v1.
	BaseURL string
	// APIKey is sent as a Bearer token; empty sends none.
	APIKey     string
	HTTPClient *http.Client
	// MaxRetries is how often the SDK retries a failed request itself. The
	// default 0 leaves retry policy to the caller.
	MaxRetries int
	// MaxCompletionTokens sends the output cap as max_completion_tokens (as
	// OpenAI's reasoning models require) instead of the widely supported
	// max_tokens.
	MaxCompletionTokens bool
}

// Provider streams Chat Completions.
type Provider struct {
	client oa.Client
	cfg    Config
}

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithMaxRetries(cfg.MaxRetries),
		option.WithAPIKey(cfg.APIKey),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Provider{client: oa.NewClient(opts...), cfg: cfg}
}

var _ llm.Provider = (*Provider)(nil)

// Stream implements llm.Provider.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	opts := []option.RequestOption{}
	if p.cfg.APIKey == "" {
		// The SDK sends "Bearer " with an empty key; local servers need none.
		opts = append(opts, option.WithHeaderDel("Authorization"))
	}
	s := p.client.Chat.Completions.NewStreaming(ctx, params, opts...)
	st := &stream{ctx: ctx, calls: map[int]*call{}}
	st.Pump = llm.Pump[oa.ChatCompletionChunk]{Source: s, Decode: st.chunk, Finish: st.finishStream, Fail: st.fail, Usage: func() usage.Tokens { return st.usage.Tokens }}
	if err := s.Err(); err != nil {
		s.Close()
		return nil, st.fail(err)
	}
	return st, nil
}

func (p *Provider) params(req llm.Request) (oa.ChatCompletionNewParams, error) {
	params := oa.ChatCompletionNewParams{
		Model:         shared.ChatModel(req.Model),
		StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)},
	}
	if req.MaxOutputTokens > 0 {
		if p.cfg.MaxCompletionTokens {
			params.MaxCompletionTokens = oa.Int(int64(req.MaxOutputTokens))
		} else {
			params.MaxTokens = oa.Int(int64(req.MaxOutputTokens))
		}
	}
	if req.System != "" {
		params.Messages = append(params.Messages, oa.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		switch m.Role {
		case llm.RoleUser:
			params.Messages = append(params.Messages, oa.UserMessage(m.Text))
		case llm.RoleTool:
			params.Messages = append(params.Messages, oa.ToolMessage(m.Text, m.ToolCallID))
		case llm.RoleAssistant:
			am := oa.ChatCompletionAssistantMessageParam{}
			if m.Text != "" || len(m.ToolCalls) == 0 {
				am.Content.OfString = oa.String(m.Text)
			}
			for _, c := range m.ToolCalls {
				args := string(c.Arguments)
				if args == "" {
					args = "{}"
				}
				am.ToolCalls = append(am.ToolCalls, oa.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
					}})
			}
			params.Messages = append(params.Messages, oa.ChatCompletionMessageParamUnion{OfAssistant: &am})
		default:
			return params, fmt.Errorf("%w: message %d has role %q", llm.ErrRequest, i, m.Role)
		}
	}
	for _, t := range req.Tools {
		var schema map[string]any
		if len(t.Schema) > 0 {
			if err := json.Unmarshal(t.Schema, &schema); err != nil {
				return params, fmt.Errorf("%w: tool %s schema: %v", llm.ErrRequest, t.Name, err)
			}
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			def.Description = oa.String(t.Description)
		}
		params.Tools = append(params.Tools, oa.ChatCompletionFunctionTool(def))
	}
	return params, nil
}

type call struct {
	index    int
	id, name string
	args     []byte
	ended    bool
}

type stream struct {
	ctx context.Context
	llm.Pump[oa.ChatCompletionChunk]
	calls  map[int]*call
	order  []int // call indexes in arrival order
	usage  llm.Usage
	finish string
}

func (st *stream) finishStream(err error) error {
	switch {
	case err != nil:
		return st.fail(err)
	case st.finish == "":
		return st.fail(fmt.Errorf("%w: stream ended without a finish_reason", llm.ErrUnavailable))
	default:
		st.endCalls(-1)
		st.Emit(st.usage, llm.Done{StopReason: stopReason(st.finish), Raw: st.finish})
		return io.EOF
	}
}

// delta is the part of a chunk's delta that the SDK does not type.
type delta struct {
	ReasoningContent *string `json:"reasoning_content"`
	Reasoning        *string `json:"reasoning"`
}

func (st *stream) chunk(c oa.ChatCompletionChunk) error {
	if c.JSON.Usage.Valid() {
		st.usage.InputTokens = int(c.Usage.PromptTokens)
		st.usage.OutputTokens = int(c.Usage.CompletionTokens)
		st.usage.ReasoningTokens = int(c.Usage.CompletionTokensDetails.ReasoningTokens)
		st.usage.TokenUsageKnown = true
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // only one choice is requested
		}
		d := ch.Delta
		if raw := d.RawJSON(); raw != "" {
			var extra delta
			if err := json.Unmarshal([]byte(raw), &extra); err != nil {
				return fmt.Errorf("%w: %v", llm.ErrMalformed, err)
			}
			if extra.ReasoningContent != nil && *extra.ReasoningContent != "" {
				st.Emit(llm.ReasoningDelta{Text: *extra.ReasoningContent})
			} else if extra.Reasoning != nil && *extra.Reasoning != "" {
				st.Emit(llm.ReasoningDelta{Text: *extra.Reasoning})
			}
		}
		if d.Content != "" {
			st.Emit(llm.TextDelta{Text: d.Content})
		}
		for _, tc := range d.ToolCalls {
			idx := int(tc.Index)
			c, ok := st.calls[idx]
			if !ok {
				st.endCalls(idx) // a new call means the earlier ones are complete
				c = &call{index: idx, id: tc.ID, name: tc.Function.Name}
				st.calls[idx] = c
				st.order = append(st.order, idx)
				st.Emit(llm.ToolCallStart{Index: idx, ID: c.id, Name: c.name})
			} else if c.ended {
				return fmt.Errorf("%w: tool call %d continued after it ended", llm.ErrMalformed, idx)
			}
			if a := tc.Function.Arguments; a != "" {
				c.args = append(c.args, a...)
				st.Emit(llm.ToolCallArgsDelta{Index: idx, Delta: a})
			}
		}
		if ch.FinishReason != "" {
			st.finish = ch.FinishReason
			st.endCalls(-1)
		}
	}
	return nil
}

// endCalls ends every open call other than except.
func (st *stream) endCalls(except int) {
	for _, idx := range st.order {
		c := st.calls[idx]
		if c.ended || idx == except {
			continue
		}
		c.ended = true
		args := json.RawMessage(slices.Clone(c.args))
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		st.Emit(llm.ToolCallEnd{Index: idx, ID: c.id, Name: c.name, Arguments: args})
	}
}

func stopReason(finish string) llm.StopReason {
	switch finish {
	case "stop":
		return llm.StopEnd
	case "tool_calls", "function_call":
		return llm.StopToolCalls
	case "length":
		return llm.StopMaxTokens
	default:
		return llm.StopOther
	}
}

// fail classifies err (llm.Classify) with the usage known so far.
func (st *stream) fail(err error) error {
	return llm.Classify(st.ctx, "openai", err, st.usage.Tokens, apiFailure)
}

// apiFailure recognizes the SDK's error types: an HTTP error status, or an
// error event inside the stream.
func apiFailure(err error) (llm.APIFailure, bool) {
	var apiErr *oa.Error
	var sse *ssestream.StreamError
	switch {
	case errors.As(err, &apiErr):
		f := llm.APIFailure{Status: apiErr.StatusCode, Message: apiErr.Message}
		if apiErr.Response != nil {
			f.RetryAfter = apiErr.Response.Header.Get("Retry-After")
		}
		return f, true
	case errors.As(err, &sse):
		return llm.APIFailure{Message: sse.Message}, true
	}
	return llm.APIFailure{}, false
}
