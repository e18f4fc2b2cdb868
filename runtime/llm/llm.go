// Package llm is the provider-neutral streaming interface that the agent
// runtime consumes. The provider packages (llm/openai, llm/anthropic,
// llm/ollama) implement Provider over the real protocols.
package llm

import (
	"context"
	"encoding/json"
	"errors"

	"lathe/runtime/usage"
)

// Provider runs one model inference as a stream of events.
type Provider interface {
	// Stream starts an inference. A failure before the first event may be
	// returned here or from the first Recv; callers handle both alike.
	Stream(ctx context.Context, req Request) (Stream, error)
}

// Stream is one inference in progress.
//
// Recv returns the next Event. A successful stream ends with a Usage event,
// then a Done event, then io.EOF. A failed stream ends with an error that
// wraps one of the sentinels below (or the context's error) and is a
// *StreamError carrying the usage known so far. Close releases the
// connection; it may be called at any time and more than once.
type Stream interface {
	Recv() (Event, error)
	Close() error
}

// Role is the author of a Message.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool" // a tool result
)

// Message is one entry of the conversation.
type Message struct {
	Role Role
	// Text is the user text, the assistant text, or the tool result.
	Text string
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall
	// ToolCallID names the call a tool message answers; IsError marks a
	// failed tool call.
	ToolCallID string
	IsError    bool
}

// ToolCall is one call the model made.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage // a complete JSON object
}

// Tool is a tool advertised to the model.
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage // JSON Schema of the arguments object
}

// Request is one inference.
type Request struct {
	Model    string
	System   string
	Messages []Message
	Tools    []Tool
	// MaxOutputTokens caps the output; 0 means the provider's default.
	MaxOutputTokens int
	// ThinkingBudget enables extended thinking with this many tokens where
	// the protocol needs it switched on (Anthropic); 0 leaves it off.
	ThinkingBudget int
}

// Event is one of TextDelta, ReasoningDelta, ToolCallStart,
// ToolCallArgsDelta, ToolCallEnd, Usage and Done.
type Event interface{ isEvent() }

// TextDelta is a piece of the answer text.
type TextDelta struct{ Text string }

// ReasoningDelta is a piece of the model's reasoning (thinking) text.
type ReasoningDelta struct{ Text string }

// ToolCallStart opens tool call number Index of this inference.
type ToolCallStart struct {
	Index int
	ID    string // the provider's call id
	Name  string
}

// ToolCallArgsDelta is a piece of the arguments JSON of call Index.
type ToolCallArgsDelta struct {
	Index int
	Delta string
}

// ToolCallEnd closes call Index with its complete arguments JSON ("{}" when
// the model sent none).
type ToolCallEnd struct {
	Index     int
	ID        string
	Name      string
	Arguments json.RawMessage
}

// Usage is the event that reports an inference's token usage.
// TokenUsageKnown is false whenever the provider omitted usage or the
// stream failed: the counts are then a known subtotal. Reasoning is
// included in the output where the provider reports it separately;
// providers that do not (Anthropic) leave it 0.
type Usage struct{ usage.Tokens }

// StopReason says why the model stopped.
type StopReason string

// Stop reasons.
const (
	StopEnd       StopReason = "end"        // the model finished its answer
	StopToolCalls StopReason = "tool_calls" // the model waits for tool results
	StopMaxTokens StopReason = "max_tokens" // the output cap was reached
	StopOther     StopReason = "other"      // anything else (content filter, refusal…)
)

// Done ends a successful stream.
type Done struct {
	StopReason StopReason
	// Raw is the provider's own stop reason.
	Raw string
}

func (TextDelta) isEvent()         {}
func (ReasoningDelta) isEvent()    {}
func (ToolCallStart) isEvent()     {}
func (ToolCallArgsDelta) isEvent() {}
func (ToolCallEnd) isEvent()       {}
func (Usage) isEvent()             {}
func (Done) isEvent()              {}

// ErrUnavailable reports that the model server could not be reached, failed
// with a 5xx status, or broke the stream off.
var ErrUnavailable = errors.New("llm: provider unavailable")

// ErrRateLimited reports a 429 from the provider.
var ErrRateLimited = errors.New("llm: rate limited")

// ErrMalformed reports a response the client could not parse.
var ErrMalformed = errors.New("llm: malformed response")

// ErrAuth reports a 401 or 403 from the provider.
var ErrAuth = errors.New("llm: authentication failed")

// ErrRequest reports a request the provider refused as invalid (another 4xx).
var ErrRequest = errors.New("llm: request rejected")

// StreamError is the error of a failed inference. Usage holds the counts
// known at the failure, with TokenUsageKnown false. RetryAfter is the provider's
// Retry-After hint, if any, on ErrRateLimited.
type StreamError struct {
	Err        error
	Usage      usage.Tokens
	RetryAfter string
}

func (e *StreamError) Error() string { return e.Err.Error() }
func (e *StreamError) Unwrap() error { return e.Err }

// UsageOf returns the usage carried by a stream error, if it is one.
func UsageOf(err error) (usage.Tokens, bool) {
	var se *StreamError
	if errors.As(err, &se) {
		return se.Usage, true
	}
	return usage.Tokens{}, false
}

// ErrorForStatus returns the sentinel for an HTTP error status, or nil for a
// status below 400.
func ErrorForStatus(status int) error {
	switch {
	case status < 400:
		return nil
	case status == 429:
		return ErrRateLimited
	case status == 401 || status == 403:
		return ErrAuth
	case status >= 500:
		return ErrUnavailable
	default:
		return ErrRequest
	}
}
