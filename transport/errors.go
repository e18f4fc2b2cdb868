package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"lathe/commands"
	"lathe/runtime/agent"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/mcp"
)

// errorBody is the one JSON error shape of every HTTP route: {"error": "..."}.
type errorBody struct {
	Error string `json:"error"`
}

// writeJSON writes v as a JSON body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// writeError writes {"error": msg} with the given status.
func writeError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(errorBody{Error: msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// statusOf maps the command error classes to HTTP statuses. It is the only
// place in the daemon that makes that mapping.
func statusOf(err error) int {
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, commands.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, commands.ErrInvalid), errors.Is(err, agent.ErrInvalid), errors.Is(err, mcp.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, commands.ErrNotFound), errors.Is(err, agent.ErrUnknownAgent), errors.Is(err, catalog.ErrUnknownAgent),
		errors.Is(err, mcp.ErrUnknownServer), errors.Is(err, mcp.ErrUnknownSlug), errors.Is(err, mcp.ErrUnknownTool):
		return http.StatusNotFound
	case errors.Is(err, commands.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, commands.ErrConflict), errors.Is(err, mcp.ErrDuplicate):
		return http.StatusConflict
	case errors.Is(err, commands.ErrUnavailable), errors.Is(err, agent.ErrNotSpawned), errors.Is(err, mcp.ErrUnavailable):
		return http.StatusServiceUnavailable
	// Budget exceeded is 402 Payment Required: the request itself was fine
	// and the provider may have been paid, but the Agent's spending limit
	// refused the result; it is distinct from a 409 state conflict and
	// from a 502 provider failure.
	case errors.Is(err, agent.ErrBudget):
		return http.StatusPaymentRequired
	case errors.Is(err, agent.ErrProvider):
		return http.StatusBadGateway
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}

// fail writes err with the status its class maps to. The class name that
// commands put in front of a message ("invalid request: …") is redundant
// with the status, so the body carries only the message.
func fail(w http.ResponseWriter, err error) {
	writeError(w, statusOf(err), errorMessage(err))
}

// errorMessage is err's message without its class name, for HTTP bodies
// and /ws frames alike.
func errorMessage(err error) string {
	msg := err.Error()
	for _, class := range []error{commands.ErrInvalid, commands.ErrNotFound, commands.ErrForbidden, commands.ErrConflict, commands.ErrTooLarge, commands.ErrUnavailable} {
		if rest, ok := strings.CutPrefix(msg, class.Error()+": "); ok {
			return rest
		}
	}
	return msg
}

// maxJSONBytes caps every JSON request body. The Guard's cap is higher
// (attachment uploads), so decodeJSON enforces this one itself.
const maxJSONBytes = 1 << 20

// decodeJSON reads exactly one JSON object of at most maxJSONBytes from the
// request body into v. Unknown fields, trailing data, wrong types and
// oversized bodies are errors of class commands.ErrInvalid (or
// commands.ErrTooLarge / *http.MaxBytesError, which map to 413).
func decodeJSON(r *http.Request, v any) error {
	if r.ContentLength > maxJSONBytes {
		return fmt.Errorf("%w: request body of %d bytes exceeds the %d-byte limit", commands.ErrTooLarge, r.ContentLength, maxJSONBytes)
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.Body = http.MaxBytesReader(nil, r.Body, maxJSONBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var maxBytes *http.MaxBytesError
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &maxBytes):
			return err
		case errors.Is(err, io.EOF):
			return fmt.Errorf("%w: request body is empty; a JSON object is required", commands.ErrInvalid)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Errorf("%w: request body is truncated JSON", commands.ErrInvalid)
		case errors.As(err, &syntax):
			return fmt.Errorf("%w: request body is not valid JSON (offset %d): %v", commands.ErrInvalid, syntax.Offset, err)
		case errors.As(err, &typ) && typ.Field == "":
			return fmt.Errorf("%w: request body must be a JSON object, not %s", commands.ErrInvalid, typ.Value)
		case errors.As(err, &typ):
			return fmt.Errorf("%w: field %q must be %s, not %s", commands.ErrInvalid, typ.Field, jsonKind(typ.Type), typ.Value)
		default:
			return fmt.Errorf("%w: %v", commands.ErrInvalid, err)
		}
	}
	if dec.More() {
		return fmt.Errorf("%w: request body has data after the JSON object", commands.ErrInvalid)
	}
	return nil
}

// jsonKind names the JSON kind a Go type decodes from, for error messages.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another JSON type"
}
