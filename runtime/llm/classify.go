package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"lathe/runtime/usage"
)

// APIFailure is what a provider SDK's error type says about a refused
// request or an error event in the stream.
type APIFailure struct {
	// Status is the HTTP status; 0 for an error event inside a stream that
	// began with 200 (Anthropic's overloaded_error, an SSE error event).
	Status int
	// Message is the provider's own message, shown after the class.
	Message string
	// RetryAfter is the response's Retry-After header, if any.
	RetryAfter string
}

// Classify is the one classification of the error that prevented or ended a
// provider stream, shared by the SDK clients. provider prefixes the message;
// u is the usage known so far; api recognizes the SDK's own error types
// (nil recognizes none). The result is always a *StreamError whose Usage is
// u with TokenUsageKnown false. The classes, in order:
//   - the stream's context ended: its error (context.Canceled or
//     DeadlineExceeded), whatever the transport made of it, so that a
//     cancel is never mistaken for a provider failure;
//   - err already wraps ErrUnavailable or ErrMalformed (the client's own
//     decoding found it): kept as it is;
//   - an API failure: the class of its status (ErrorForStatus); a status
//     below 400, an error event inside a 200 stream, is ErrUnavailable, since
//     the server gave up mid-answer (overloaded) rather than refused;
//   - a JSON syntax or type error: ErrMalformed;
//   - anything else (connection refused, reset, cut off mid-stream):
//     ErrUnavailable.
func Classify(ctx context.Context, provider string, err error, u usage.Tokens, api func(error) (APIFailure, bool)) error {
	u.TokenUsageKnown = false
	se := &StreamError{Usage: u}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	f, isAPI := APIFailure{}, false
	if api != nil {
		f, isAPI = api(err)
	}
	switch {
	case ctx.Err() != nil:
		se.Err = fmt.Errorf("%s: %w", provider, ctx.Err())
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrMalformed):
		se.Err = err
	case isAPI:
		class := ErrorForStatus(f.Status)
		if class == nil {
			class = ErrUnavailable
		}
		se.RetryAfter = f.RetryAfter
		if f.Status == 0 {
			se.Err = fmt.Errorf("%s: %w: %s", provider, class, f.Message)
		} else {
			se.Err = fmt.Errorf("%s: %w: status %d: %s", provider, class, f.Status, f.Message)
		}
	case errors.As(err, &syntax), errors.As(err, &typ):
		se.Err = fmt.Errorf("%s: %w: %w", provider, ErrMalformed, err)
	default:
		se.Err = fmt.Errorf("%s: %w: %w", provider, ErrUnavailable, err)
	}
	return se
}
