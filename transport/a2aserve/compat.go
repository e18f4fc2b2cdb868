package a2aserve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// What the official A2A clients need beyond the SDK's server defaults
// (issues 27 and 35): the card's security declaration, JSON-RPC errors
// that say why in their message, a failed task's short reason, and the
// refusal of a protocol version neither binding speaks.

// a2aSecurity declares how a client authenticates when the Guard wants a
// credential: x-api-key, a bearer token, or either when both are set.
func a2aSecurity(apiKeys, bearers bool) (a2a.NamedSecuritySchemes, a2a.SecurityRequirementsOptions) {
	schemes := a2a.NamedSecuritySchemes{}
	var reqs a2a.SecurityRequirementsOptions
	if apiKeys {
		schemes["apiKey"] = a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationHeader, Name: "x-api-key",
			Description: "One of the daemon's server.api_keys."}
		reqs = append(reqs, a2a.SecurityRequirements{"apiKey": {}})
	}
	if bearers {
		schemes["bearer"] = a2a.HTTPAuthSecurityScheme{Scheme: "bearer", Description: "One of the daemon's server.bearer_tokens."}
		reqs = append(reqs, a2a.SecurityRequirements{"bearer": {}})
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	return schemes, reqs
}

// a2aFailure is a failed task's status text for the remote peer: a short
// class of the failure; the detail stays in the journal (a2a-task-ended).
func a2aFailure(detail string) string {
	switch d := strings.ToLower(detail); {
	case strings.Contains(d, "budget exceeded"):
		return "the Agent's budget was exceeded"
	case strings.HasPrefix(d, "interrupted"):
		return "interrupted: the daemon stopped during this task"
	case d == "the task was stopped":
		return detail
	case strings.Contains(d, "provider failed"), strings.Contains(d, "stalled"):
		return "the Agent's model provider failed"
	}
	return "the Agent could not complete the task"
}

// rpcVersionRefusal is the JSON-RPC error (VersionNotSupported, -32009)
// for a request whose A2A-Version neither binding speaks, with the
// request's id when it has one.
func rpcVersionRefusal(r *http.Request, version string) any {
	var req struct {
		ID any `json:"id"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	switch req.ID.(type) {
	case string, float64: // an id JSON-RPC allows
	default:
		req.ID = nil
	}
	reason := fmt.Sprintf("A2A-Version %q is not supported: send 1.0, or 0.3 (or none)", version)
	type rpcError struct {
		Code    int               `json:"code"`
		Message string            `json:"message"`
		Data    map[string]string `json:"data"`
	}
	return struct {
		JSONRPC string   `json:"jsonrpc"`
		ID      any      `json:"id"`
		Error   rpcError `json:"error"`
	}{"2.0", req.ID, rpcError{-32009, reason, map[string]string{"error": reason}}}
}

// rpcMessages buffers a JSON-RPC reply and, when it is an error whose
// data names the reason, puts that reason in its message: the SDKs show
// the message only.
type rpcMessages struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *rpcMessages) WriteHeader(status int) { w.status = status }

// Flush lets the SDK's event stream start; what it writes goes out at the
// end (streaming answers only its refusal).
func (w *rpcMessages) Flush() {}
func (w *rpcMessages) Write(p []byte) (int, error) {
	return w.buf.Write(p)
}

// flush sends the (rewritten) reply.
func (w *rpcMessages) flush() {
	body := w.buf.Bytes()
	var rep map[string]json.RawMessage
	var e struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data,omitempty"`
	}
	if json.Unmarshal(body, &rep) == nil && rep["error"] != nil && json.Unmarshal(rep["error"], &e) == nil {
		if reason, ok := e.Data["error"].(string); ok && reason != "" {
			e.Message = reason
			if b, err := json.Marshal(e); err == nil {
				rep["error"] = b
				if out, err := json.Marshal(rep); err == nil {
					body = append(out, '\n')
				}
			}
		}
	}
	if w.status != 0 {
		w.ResponseWriter.WriteHeader(w.status)
	}
	w.ResponseWriter.Write(body)
}
