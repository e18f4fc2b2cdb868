// Package fakellm is a scripted model server for tests and demos. It speaks
// the OpenAI Chat Completions and Responses protocols (streaming and not), the
// Anthropic Messages streaming protocol, Gemini's generateContent (streaming
// and not; the model in the path) and Ollama's /api/tags over real
// loopback HTTP, so that the real provider clients can be tested against it
// byte for byte.
//
// A Script is a list of Turns. Each incoming model request consumes one Turn:
// the first unconsumed Turn whose Model is empty or equal to the request's
// model. A Turn is a list of Steps that the server plays in order, in the
// wire format of the protocol the request arrived on.
package fakellm

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Kind names a Step.
type Kind string

// Step kinds.
const (
	KindText      Kind = "text"      // a text delta
	KindReasoning Kind = "reasoning" // a reasoning (thinking) delta
	KindToolCall  Kind = "tool_call" // one tool call, its arguments split into ArgsChunks
	KindUsage     Kind = "usage"     // token usage reported at the end of the stream
	KindStall     Kind = "stall"     // flush and hold the stream open
	KindFail      Kind = "fail"      // an HTTP error status instead of a stream; first step only
	KindMalformed Kind = "malformed" // one event whose JSON is cut short
	KindDrop      Kind = "drop"      // flush and close the connection mid-stream
)

// Step is one scripted action. Which fields matter depends on Kind.
type Step struct {
	Kind Kind `json:"kind"`

	// Text is the delta of a text or reasoning step.
	Text string `json:"text,omitempty"`
	// Stamp, on a text or reasoning step, appends the server's clock to
	// Text as the delta is played: StampDigits digits of Unix nanoseconds,
	// read just before the delta is encoded, written and flushed. A test in
	// the same process recovers it with SplitStamp to time the delta's way
	// to wherever it surfaces.
	Stamp bool `json:"stamp,omitempty"`

	// ID, Name and ArgsChunks describe a tool call. The chunks, joined, are
	// the arguments JSON; each chunk is sent as its own delta.
	ID         string   `json:"id,omitempty"`
	Name       string   `json:"name,omitempty"`
	ArgsChunks []string `json:"args_chunks,omitempty"`

	// In, Out and Reasoning are the token counts of a usage step.
	In        int `json:"input_tokens,omitempty"`
	Out       int `json:"output_tokens,omitempty"`
	Reasoning int `json:"reasoning_tokens,omitempty"`

	// Status and RetryAfter describe a fail step.
	Status     int    `json:"status,omitempty"`
	RetryAfter string `json:"retry_after,omitempty"`

	// A stall step holds the stream until the client goes away, Release is
	// closed, or (when positive) StallMS milliseconds have passed, whichever
	// comes first.
	StallMS int             `json:"stall_ms,omitempty"`
	Release <-chan struct{} `json:"-"`
}

// Text returns a text delta step.
func Text(s string) Step { return Step{Kind: KindText, Text: s} }

// Stamped returns a text delta step whose delta is text followed by the
// send time (see Step.Stamp).
func Stamped(text string) Step { return Step{Kind: KindText, Text: text, Stamp: true} }

// Reasoning returns a reasoning delta step.
func Reasoning(s string) Step { return Step{Kind: KindReasoning, Text: s} }

// ToolCall returns a tool call step whose arguments arrive in the given chunks.
func ToolCall(id, name string, argsChunks ...string) Step {
	return Step{Kind: KindToolCall, ID: id, Name: name, ArgsChunks: argsChunks}
}

// Usage returns a usage step.
func Usage(in, out, reasoning int) Step {
	return Step{Kind: KindUsage, In: in, Out: out, Reasoning: reasoning}
}

// Stall returns a stall step released by closing release (which may be nil:
// then only the client going away ends it).
func Stall(release <-chan struct{}) Step { return Step{Kind: KindStall, Release: release} }

// Pause returns a stall step that holds the stream for ms milliseconds,
// to pace the deltas around it.
func Pause(ms int) Step { return Step{Kind: KindStall, StallMS: ms} }

// Fail returns a fail step with the given HTTP status.
func Fail(status int) Step { return Step{Kind: KindFail, Status: status} }

// RateLimited returns a 429 fail step with a Retry-After header.
func RateLimited(retryAfter string) Step {
	return Step{Kind: KindFail, Status: 429, RetryAfter: retryAfter}
}

// Malformed returns a step that sends one event with broken JSON.
func Malformed() Step { return Step{Kind: KindMalformed} }

// Drop returns a step that closes the connection mid-stream.
func Drop() Step { return Step{Kind: KindDrop} }

// Turn is the scripted answer to one request.
type Turn struct {
	// Model, when set, makes this Turn answer only requests for that model.
	Model string `json:"model,omitempty"`
	// Contains, when set, makes this Turn answer only requests whose body
	// holds it: an outside agent's side calls (a title) come in any order.
	Contains string `json:"contains,omitempty"`
	// ReasoningKey is the OpenAI delta field that carries reasoning:
	// "reasoning_content" (the default, as vLLM and DeepSeek send) or
	// "reasoning" (as Ollama and OpenRouter send).
	ReasoningKey string `json:"reasoning_key,omitempty"`
	Steps        []Step `json:"steps"`
}

// Script is what a Server plays.
type Script struct {
	Turns []Turn `json:"turns"`
	// Models is the list that GET /api/tags and GET /v1/models return.
	Models []string `json:"models,omitempty"`
}

// ErrInvalidScript reports a script the server cannot play.
var ErrInvalidScript = errors.New("fakellm: invalid script")

// Validate reports whether the script can be played.
func (s Script) Validate() error {
	for i, t := range s.Turns {
		switch t.ReasoningKey {
		case "", "reasoning_content", "reasoning":
		default:
			return fmt.Errorf("%w: turn %d: reasoning_key %q", ErrInvalidScript, i, t.ReasoningKey)
		}
		for j, st := range t.Steps {
			if st.Stamp && st.Kind != KindText && st.Kind != KindReasoning {
				return fmt.Errorf("%w: turn %d step %d: stamp on a %s step", ErrInvalidScript, i, j, st.Kind)
			}
			switch st.Kind {
			case KindText, KindReasoning, KindUsage, KindStall, KindMalformed, KindDrop:
			case KindToolCall:
				if st.ID == "" || st.Name == "" {
					return fmt.Errorf("%w: turn %d step %d: tool call needs id and name", ErrInvalidScript, i, j)
				}
			case KindFail:
				if j != 0 {
					return fmt.Errorf("%w: turn %d step %d: fail must be the first step", ErrInvalidScript, i, j)
				}
				if st.Status < 400 || st.Status > 599 {
					return fmt.Errorf("%w: turn %d step %d: fail status %d", ErrInvalidScript, i, j, st.Status)
				}
			default:
				return fmt.Errorf("%w: turn %d step %d: unknown kind %q", ErrInvalidScript, i, j, st.Kind)
			}
		}
	}
	return nil
}

// StampDigits is the width of a stamp: Unix nanoseconds, zero-padded (19
// digits hold every time until the year 2262).
const StampDigits = 19

// delta is the text a text or reasoning step plays now.
func (st Step) delta() string {
	if !st.Stamp {
		return st.Text
	}
	return fmt.Sprintf("%s%0*d", st.Text, StampDigits, time.Now().UnixNano())
}

// ErrNoStamp reports a delta that does not end with a stamp.
var ErrNoStamp = errors.New("fakellm: no stamp")

// SplitStamp splits a delta played by a stamped step into its Text and
// the time the server sent it.
func SplitStamp(delta string) (text string, sent time.Time, err error) {
	cut := len(delta) - StampDigits
	if cut < 0 {
		return "", time.Time{}, fmt.Errorf("%w: %q is too short", ErrNoStamp, delta)
	}
	ns, err := strconv.ParseUint(delta[cut:], 10, 63)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: %q", ErrNoStamp, delta)
	}
	return delta[:cut], time.Unix(0, int64(ns)), nil
}
