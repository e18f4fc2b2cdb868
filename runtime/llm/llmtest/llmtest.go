// Package llmtest is the shared conformance suite that every llm.Provider
// runs against the fakellm scripted server.
package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	"lathe/runtime/llm"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/usage"
)

// Protocol describes what a provider's protocol can report, where the suite
// must expect different numbers.
type Protocol struct {
	// ReasoningTokens: the protocol reports reasoning tokens separately.
	ReasoningTokens bool
	// InputBeforeOutput: the protocol reports input tokens when the stream
	// starts (Anthropic), so a stream cut off mid-way knows them.
	InputBeforeOutput bool
	// OutputTokensBeforeEnd is the output count a protocol reports at the
	// start of a stream (Anthropic's message_start says 1).
	OutputTokensBeforeEnd int
}

// NewFunc returns a provider talking to the fakellm server at baseURL.
type NewFunc func(baseURL string) llm.Provider

// Context returns a context bounded for one test.
func Context(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Collect reads a stream to its end and returns the events and the final
// error (nil after a clean io.EOF).
func Collect(s llm.Stream) ([]llm.Event, error) {
	defer s.Close()
	var evs []llm.Event
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// Run starts a stream for req against a server playing turns, and collects
// it. A failure of Stream itself is returned as the error.
func Run(t *testing.T, ctx context.Context, newp NewFunc, req llm.Request, turns ...fakellm.Turn) (*fakellm.Server, []llm.Event, error) {
	t.Helper()
	srv := fakellm.New(fakellm.Script{Turns: turns})
	t.Cleanup(srv.Close)
	s, err := newp(srv.URL()).Stream(ctx, req)
	if err != nil {
		return srv, nil, err
	}
	evs, err := Collect(s)
	return srv, evs, err
}

// BasicRequest is a request with a system prompt, a tool, and a history with
// a tool round trip.
func BasicRequest() llm.Request {
	return llm.Request{
		Model:  "fake-model",
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Text: "Read a.go"},
			{Role: llm.RoleAssistant, Text: "Reading.", ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "read", Arguments: json.RawMessage(`{"path":"a.go"}`)}}},
			{Role: llm.RoleTool, ToolCallID: "call_0", Text: "package a"},
			{Role: llm.RoleUser, Text: "Now a.go and b.go"},
		},
		Tools: []llm.Tool{{Name: "read", Description: "Read a file.",
			Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}},
		MaxOutputTokens: 256,
	}
}

// Suite runs the conformance tests.
func Suite(t *testing.T, newp NewFunc, proto Protocol) {
	t.Run("ToolCallsReasoningUsage", func(t *testing.T) {
		_, evs, err := Run(t, Context(t), newp, BasicRequest(), fakellm.Turn{Steps: []fakellm.Step{
			fakellm.Reasoning("Let me "), fakellm.Reasoning("think."),
			fakellm.Text("Reading "), fakellm.Text("both."),
			fakellm.ToolCall("call_a", "read", `{"pa`, `th":"a.go"`, `}`),
			fakellm.ToolCall("call_b", "read", `{"path":`, `"b.go"}`),
			fakellm.Usage(120, 45, 7),
		}})
		if err != nil {
			t.Fatal(err)
		}
		used := llm.Usage{Tokens: usage.Tokens{InputTokens: 120, OutputTokens: 45, TokenUsageKnown: true}}
		if proto.ReasoningTokens {
			used.ReasoningTokens = 7
		}
		want := []llm.Event{
			llm.ReasoningDelta{Text: "Let me "}, llm.ReasoningDelta{Text: "think."},
			llm.TextDelta{Text: "Reading "}, llm.TextDelta{Text: "both."},
			llm.ToolCallStart{Index: 0, ID: "call_a", Name: "read"},
			llm.ToolCallArgsDelta{Index: 0, Delta: `{"pa`}, llm.ToolCallArgsDelta{Index: 0, Delta: `th":"a.go"`}, llm.ToolCallArgsDelta{Index: 0, Delta: `}`},
			llm.ToolCallEnd{Index: 0, ID: "call_a", Name: "read", Arguments: json.RawMessage(`{"path":"a.go"}`)},
			llm.ToolCallStart{Index: 1, ID: "call_b", Name: "read"},
			llm.ToolCallArgsDelta{Index: 1, Delta: `{"path":`}, llm.ToolCallArgsDelta{Index: 1, Delta: `"b.go"}`},
			llm.ToolCallEnd{Index: 1, ID: "call_b", Name: "read", Arguments: json.RawMessage(`{"path":"b.go"}`)},
			used,
			llm.Done{StopReason: llm.StopToolCalls},
		}
		checkEvents(t, evs, want)
	})

	t.Run("TextUsageKnown", func(t *testing.T) {
		_, evs, err := Run(t, Context(t), newp, llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Text: "hi"}}},
			fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("Hello"), fakellm.Text(", world"), fakellm.Usage(10, 3, 0)}})
		if err != nil {
			t.Fatal(err)
		}
		checkEvents(t, evs, []llm.Event{llm.TextDelta{Text: "Hello"}, llm.TextDelta{Text: ", world"},
			llm.Usage{Tokens: usage.Tokens{InputTokens: 10, OutputTokens: 3, TokenUsageKnown: true}}, llm.Done{StopReason: llm.StopEnd}})
	})

	t.Run("UsageOmitted", func(t *testing.T) {
		_, evs, err := Run(t, Context(t), newp, llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Text: "hi"}}},
			fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("Hello")}})
		if err != nil {
			t.Fatal(err)
		}
		checkEvents(t, evs, []llm.Event{llm.TextDelta{Text: "Hello"}, llm.Usage{}, llm.Done{StopReason: llm.StopEnd}})
	})

	for _, tc := range []struct {
		name       string
		step       fakellm.Step
		want       error
		retryAfter string
	}{
		{"5xx", fakellm.Fail(503), llm.ErrUnavailable, ""},
		{"500", fakellm.Fail(500), llm.ErrUnavailable, ""},
		{"429", fakellm.RateLimited("7"), llm.ErrRateLimited, "7"},
		{"401", fakellm.Fail(401), llm.ErrAuth, ""},
		{"400", fakellm.Fail(400), llm.ErrRequest, ""},
	} {
		t.Run("Status"+tc.name, func(t *testing.T) {
			srv, _, err := Run(t, Context(t), newp, llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Text: "hi"}}},
				fakellm.Turn{Steps: []fakellm.Step{tc.step}})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			var se *llm.StreamError
			if !errors.As(err, &se) || se.RetryAfter != tc.retryAfter || se.Usage.TokenUsageKnown {
				t.Fatalf("stream error %#v", se)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Fatalf("%d requests: the client must not retry by itself", n)
			}
		})
	}

	t.Run("ConnectionRefused", func(t *testing.T) {
		srv := fakellm.New(fakellm.Script{})
		url := srv.URL()
		srv.Close()
		s, err := newp(url).Stream(Context(t), llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Text: "hi"}}})
		if err == nil {
			_, err = Collect(s)
		}
		if !errors.Is(err, llm.ErrUnavailable) {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("Malformed", func(t *testing.T) {
		_, evs, err := Run(t, Context(t), newp, llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Text: "hi"}}},
			fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("ok"), fakellm.Malformed(), fakellm.Text("more"), fakellm.Usage(5, 5, 0)}})
		if !errors.Is(err, llm.ErrMalformed) {
			t.Fatalf("err %v", err)
		}
		if u, ok := llm.UsageOf(err); !ok || u.TokenUsageKnown {
			t.Fatalf("usage %+v %v", u, ok)
		}
		checkEvents(t, evs, []llm.Event{llm.TextDelta{Text: "ok"}})
	})

	t.Run("DropMidStream", func(t *testing.T) {
		_, evs, err := Run(t, Context(t), newp, llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Text: "hi"}}},
			fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("partial"), fakellm.Drop(), fakellm.Usage(11, 22, 0)}})
		if !errors.Is(err, llm.ErrUnavailable) {
			t.Fatalf("err %v", err)
		}
		want := usage.Tokens{}
		if proto.InputBeforeOutput {
			want = usage.Tokens{InputTokens: 11, OutputTokens: proto.OutputTokensBeforeEnd}
		}
		if u, ok := llm.UsageOf(err); !ok || u != want {
			t.Fatalf("usage %+v (%v), want %+v", u, ok, want)
		}
		checkEvents(t, evs, []llm.Event{llm.TextDelta{Text: "partial"}})
	})

	t.Run("StallThenCancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(Context(t))
		srv := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.Text("before"), fakellm.Stall(nil), fakellm.Text("after")}}}})
		t.Cleanup(srv.Close)
		s, err := newp(srv.URL()).Stream(ctx, llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Text: "hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for {
			ev, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if ev == (llm.TextDelta{Text: "before"}) {
				break
			}
		}
		errc := make(chan error, 1)
		go func() {
			_, err := s.Recv()
			errc <- err
		}()
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v", err)
			}
			if u, ok := llm.UsageOf(err); !ok || u.TokenUsageKnown {
				t.Fatalf("usage %+v %v", u, ok)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Recv did not return within 2s of cancel")
		}
	})

	t.Run("StallReleased", func(t *testing.T) {
		release := make(chan struct{})
		close(release)
		_, evs, err := Run(t, Context(t), newp, llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Text: "hi"}}},
			fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("a"), fakellm.Stall(release), fakellm.Text("b")}})
		if err != nil {
			t.Fatal(err)
		}
		checkEvents(t, evs, []llm.Event{llm.TextDelta{Text: "a"}, llm.TextDelta{Text: "b"}, llm.Usage{}, llm.Done{StopReason: llm.StopEnd}})
	})
}

func checkEvents(t *testing.T, got, want []llm.Event) {
	t.Helper()
	// Raw stop reasons differ between protocols; compare the neutral one.
	norm := func(evs []llm.Event) []llm.Event {
		out := make([]llm.Event, len(evs))
		for i, e := range evs {
			if d, ok := e.(llm.Done); ok {
				d.Raw = ""
				e = d
			}
			out[i] = e
		}
		return out
	}
	g, w := norm(got), norm(want)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("events:\n got  %#v\n want %#v", g, w)
	}
}
