package transport

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/swaggest/jsonschema-go"

	"lathe/projections"
	"lathe/runtime/errs"
)

// errorBody is the one JSON error shape of every HTTP route: {"error": "..."}.
type errorBody struct {
	Error string `json:"error" required:"true"` // required: for the OpenAPI document
}

// PrepareJSONSchema lets an error carry members beside error in the
// OpenAPI document: a route's refusal may name what it refused (the
// conflicting files, the usage a failed run paid for), and a client must
// not fail on one it does not know.
func (errorBody) PrepareJSONSchema(s *jsonschema.Schema) error {
	s.AdditionalProperties = nil
	return nil
}

// writeJSON writes v as a JSON body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
		return
	}
	writeJSONBytes(w, status, body)
}

// writeJSONTo is writeJSON for a body of size bytes that body writes.
func writeJSONTo(w http.ResponseWriter, status, size int, body io.WriterTo) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(size+1))
	w.WriteHeader(status)
	if _, err := body.WriteTo(w); err == nil {
		_, _ = w.Write([]byte{'\n'})
	}
}

// writeSession answers a Session: its cached JSON, written without a copy.
func writeSession(w http.ResponseWriter, status int, ss *projections.Session) {
	s := ss.JSON()
	writeJSONTo(w, status, len(s), jsonText(s))
}

// jsonText is JSON already encoded, as an io.WriterTo.
type jsonText string

func (t jsonText) WriteTo(w io.Writer) (int64, error) {
	n, err := io.WriteString(w, string(t))
	return int64(n), err
}

// writeJSONBytes is writeJSON for a body already encoded (one JSON value).
func writeJSONBytes(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
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

// statusOf maps the error classes (runtime/errs: the commands' and the
// runtime's errors alike belong to them) to HTTP statuses, one case a class.
// It is the only place in the daemon that makes that mapping.
func statusOf(err error) int {
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes), errors.Is(err, errs.TooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errUnsupportedMediaType):
		return http.StatusUnsupportedMediaType
	case errors.Is(err, errs.Invalid):
		return http.StatusBadRequest
	case errors.Is(err, errs.NotFound):
		return http.StatusNotFound
	case errors.Is(err, errs.Forbidden):
		return http.StatusForbidden
	case errors.Is(err, errs.Conflict):
		return http.StatusConflict
	case errors.Is(err, errs.Unavailable):
		return http.StatusServiceUnavailable
	// Budget exceeded is 402 Payment Required: the request itself was fine
	// and the provider may have been paid, but the Agent's spending limit
	// refused the result; it is distinct from a 409 state conflict and
	// from a 502 provider failure.
	case errors.Is(err, errs.OverBudget):
		return http.StatusPaymentRequired
	case errors.Is(err, errs.Upstream):
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
	if rest, ok := strings.CutPrefix(err.Error(), errUnsupportedMediaType.Error()+": "); ok {
		return rest
	}
	return errs.Reason(err)
}
