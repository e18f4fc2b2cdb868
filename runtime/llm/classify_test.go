package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// sdkError stands for a provider SDK's own error type.
type sdkError struct{ f llm.APIFailure }

func (e *sdkError) Error() string { return "sdk: " + e.f.Message }

func recognize(err error) (llm.APIFailure, bool) {
	var e *sdkError
	if errors.As(err, &e) {
		return e.f, true
	}
	return llm.APIFailure{}, false
}

func TestClassify(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	var syntax error = &json.SyntaxError{Offset: 3}
	typ := json.Unmarshal([]byte(`{"a":1}`), &struct{ A string }{})
	api := func(status int, retry string) error {
		return fmt.Errorf("wrapped: %w", &sdkError{llm.APIFailure{Status: status, Message: "nope", RetryAfter: retry}})
	}
	for _, tc := range []struct {
		name       string
		ctx        context.Context
		err        error
		class      error
		msg        string // the whole message
		retryAfter string
	}{
		{name: "cancelled context wins", ctx: cancelled, err: api(500, ""), class: context.Canceled, msg: "p: context canceled"},
		{name: "cancelled, connection reset", ctx: cancelled, err: syscall.ECONNRESET, class: context.Canceled, msg: "p: context canceled"},
		{name: "already unavailable", ctx: live, err: fmt.Errorf("%w: no finish_reason", llm.ErrUnavailable), class: llm.ErrUnavailable, msg: "llm: provider unavailable: no finish_reason"},
		{name: "already malformed", ctx: live, err: fmt.Errorf("%w: bad call", llm.ErrMalformed), class: llm.ErrMalformed, msg: "llm: malformed response: bad call"},
		{name: "429 with Retry-After", ctx: live, err: api(429, "7"), class: llm.ErrRateLimited, msg: "p: llm: rate limited: status 429: nope", retryAfter: "7"},
		{name: "401", ctx: live, err: api(401, ""), class: llm.ErrAuth, msg: "p: llm: authentication failed: status 401: nope"},
		{name: "403", ctx: live, err: api(403, ""), class: llm.ErrAuth, msg: "p: llm: authentication failed: status 403: nope"},
		{name: "400", ctx: live, err: api(400, ""), class: llm.ErrRequest, msg: "p: llm: request rejected: status 400: nope"},
		{name: "503", ctx: live, err: api(503, "2"), class: llm.ErrUnavailable, msg: "p: llm: provider unavailable: status 503: nope", retryAfter: "2"},
		{name: "error event in a 200 stream", ctx: live, err: api(200, ""), class: llm.ErrUnavailable, msg: "p: llm: provider unavailable: status 200: nope"},
		{name: "error event without status", ctx: live, err: api(0, ""), class: llm.ErrUnavailable, msg: "p: llm: provider unavailable: nope"},
		{name: "JSON syntax", ctx: live, err: syntax, class: llm.ErrMalformed, msg: "p: llm: malformed response: " + syntax.Error()},
		{name: "JSON type", ctx: live, err: typ, class: llm.ErrMalformed, msg: "p: llm: malformed response: " + typ.Error()},
		{name: "connection reset", ctx: live, err: syscall.ECONNRESET, class: llm.ErrUnavailable, msg: "p: llm: provider unavailable: " + syscall.ECONNRESET.Error()},
		{name: "cut off", ctx: live, err: io.ErrUnexpectedEOF, class: llm.ErrUnavailable, msg: "p: llm: provider unavailable: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := llm.Classify(tc.ctx, "p", tc.err, usage.Tokens{InputTokens: 5, OutputTokens: 2, TokenUsageKnown: true}, recognize)
			var se *llm.StreamError
			if !errors.As(err, &se) {
				t.Fatalf("%T %v, want a *StreamError", err, err)
			}
			if !errors.Is(err, tc.class) || err.Error() != tc.msg {
				t.Errorf("%q, want %q of class %v", err, tc.msg, tc.class)
			}
			if se.RetryAfter != tc.retryAfter {
				t.Errorf("RetryAfter %q, want %q", se.RetryAfter, tc.retryAfter)
			}
			if se.Usage != (usage.Tokens{InputTokens: 5, OutputTokens: 2}) {
				t.Errorf("usage %+v, want the counts so far with TokenUsageKnown false", se.Usage)
			}
		})
	}
	// Without an SDK recognizer an API error is a plain failure.
	if err := llm.Classify(live, "p", api(429, "7"), usage.Tokens{}, nil); !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), "sdk: nope") {
		t.Errorf("no recognizer: %v", err)
	}
}
