// Package gateway is the model gateway's HTTP side: it serves an outside
// agent the model wires it speaks (Anthropic Messages, OpenAI Chat
// Completions, OpenAI Responses, Gemini), authenticates each call by a token scoped
// to a Session's turn, translates the request into the provider-neutral
// llm.Request, and streams the Upstream's llm.Events back in the wire the
// agent spoke. The hub-and-spoke translation lets any agent wire reach any
// provider: each wire is translated to llm.Request and from llm.Event only.
//
// Each wire lives in its own file: anthropic.go, chat.go, responses.go,
// gemini.go.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"lathe/runtime/errs"
	"lathe/runtime/jsonlimit"
	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// Grant is what a token entitles: the model calls of one turn of one
// Session's Agent.
type Grant struct{ SessionID, TurnID, AgentID string }

// Upstream runs one model call for a grant; it meters, prices, budgets and
// records the call. A refusal wraps an errs class (errs.OverBudget for a
// call over the Agent's budget) or an llm sentinel.
type Upstream interface {
	Stream(ctx context.Context, g Grant, req llm.Request) (llm.Stream, error)
}

// Tokens resolves the token an agent presents.
type Tokens interface {
	Grant(token string) (Grant, bool)
}

// Options configures the gateway.
type Options struct {
	// Model is the one model GET /v1/models lists; empty lists none.
	Model string
	// MaxBody bounds a request body in bytes; 0 means DefaultMaxBody.
	MaxBody int64
}

// DefaultMaxBody is the default bound of a request body: a long
// conversation with its tool results fits well inside it.
const DefaultMaxBody = 32 << 20

// call is one parsed request of any wire.
type call struct {
	req    llm.Request
	stream bool
	// includeUsage is Chat Completions' stream_options.include_usage.
	includeUsage bool
}

// answer is a whole non-streaming reply, gathered from the stream.
type answer struct {
	reasoning, text string
	calls           []llm.ToolCall
	usage           usage.Tokens
	stop            llm.StopReason
}

// encoder writes one streamed reply in a wire's SSE.
type encoder interface {
	// event writes what ev means in the wire; Done ends the reply.
	event(ev llm.Event)
	// fail ends the reply with an error event.
	fail(status int, msg string)
}

// wire is one agent-facing protocol: how it reads a request and writes a
// reply or an error.
type wire struct {
	parse     func(body []byte) (call, error)
	writeErr  func(w http.ResponseWriter, status int, msg string)
	newStream func(s *sse, c call) encoder
	reply     func(w http.ResponseWriter, c call, a answer)
}

// ErrBadRequest is the class of a request body the gateway cannot translate.
var ErrBadRequest = errs.New(errs.Invalid, "gateway: bad request")

// New returns the gateway's handler.
func New(up Upstream, tokens Tokens, opts Options) http.Handler {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	g := &gateway{up: up, tokens: tokens, opts: opts}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/messages", g.serve(anthropicWire))
	mux.Handle("POST /v1/chat/completions", g.serve(chatWire))
	mux.Handle("POST /v1/responses", g.serve(responsesWire))
	mux.HandleFunc("POST /v1beta/models/{call}", g.gemini)
	mux.HandleFunc("GET /v1/models", g.models)
	return mux
}

type gateway struct {
	up     Upstream
	tokens Tokens
	opts   Options
}

// token is the caller's key: x-api-key (Anthropic), x-goog-api-key or
// ?key= (Gemini), or a Bearer token.
func token(r *http.Request) string {
	for _, h := range []string{"x-api-key", "x-goog-api-key"} {
		if k := r.Header.Get(h); k != "" {
			return k
		}
	}
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return r.URL.Query().Get("key")
}

func (g *gateway) grant(r *http.Request) (Grant, bool) {
	t := token(r)
	if t == "" {
		return Grant{}, false
	}
	return g.tokens.Grant(t)
}

func (g *gateway) serve(wr wire) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gr, ok := g.grant(r)
		if !ok {
			wr.writeErr(w, http.StatusUnauthorized, "gateway: missing or unknown API key")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.opts.MaxBody))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			wr.writeErr(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("gateway: request body over the %d-byte limit", g.opts.MaxBody))
			return
		case err != nil:
			wr.writeErr(w, http.StatusBadRequest, fmt.Sprintf("gateway: reading the request body: %v", err))
			return
		}
		if err := jsonlimit.Check(body, jsonlimit.Limits{Depth: jsonlimit.MaxDepth}); err != nil {
			wr.writeErr(w, http.StatusBadRequest, "gateway: "+err.Error())
			return
		}
		c, err := wr.parse(body)
		if err != nil {
			wr.writeErr(w, http.StatusBadRequest, err.Error())
			return
		}
		st, err := g.up.Stream(r.Context(), gr, c.req)
		if err != nil {
			failed(w, wr, err)
			return
		}
		defer st.Close()
		// The first event decides between an error status and a reply.
		first, err := st.Recv()
		if err != nil {
			failed(w, wr, err)
			return
		}
		if !c.stream {
			a, err := gather(first, st)
			if err != nil {
				failed(w, wr, err)
				return
			}
			wr.reply(w, c, a)
			return
		}
		enc := wr.newStream(startSSE(w), c)
		for ev := first; ; {
			enc.event(ev)
			if ev, err = st.Recv(); err != nil {
				break
			}
		}
		if !errors.Is(err, io.EOF) {
			status, msg := classify(err)
			enc.fail(status, msg)
		}
	})
}

// failed writes a refused or failed upstream call as the wire's error.
func failed(w http.ResponseWriter, wr wire, err error) {
	var se *llm.StreamError
	if errors.As(err, &se) && se.RetryAfter != "" {
		w.Header().Set("Retry-After", se.RetryAfter)
	}
	status, msg := classify(err)
	wr.writeErr(w, status, msg)
}

// classify is the one mapping of an upstream error to a status and the
// message the agent shows.
func classify(err error) (int, string) {
	status := http.StatusBadGateway
	switch {
	case errors.Is(err, errs.OverBudget):
		// 402: the agents' clients do not retry it, and show the message.
		status = http.StatusPaymentRequired
	case errors.Is(err, llm.ErrRateLimited):
		status = http.StatusTooManyRequests
	case errors.Is(err, errs.Invalid), errors.Is(err, llm.ErrRequest):
		status = http.StatusBadRequest
	case errors.Is(err, errs.TooLarge):
		status = http.StatusRequestEntityTooLarge
	case errors.Is(err, errs.Forbidden):
		status = http.StatusForbidden
	case errors.Is(err, errs.NotFound):
		status = http.StatusNotFound
	case errors.Is(err, errs.Unavailable), errors.Is(err, llm.ErrUnavailable):
		status = http.StatusServiceUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		status = 499 // the agent went away; nobody reads this
	}
	// llm.ErrAuth and llm.ErrMalformed stay 502: the provider's key and
	// answers are the host's business, not the agent's.
	return status, "lathe gateway: " + err.Error()
}

// gather reads a whole stream into an answer.
func gather(first llm.Event, st llm.Stream) (answer, error) {
	var a answer
	var text, reasoning strings.Builder
	for ev, err := first, error(nil); ; ev, err = st.Recv() {
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return a, err
		}
		switch ev := ev.(type) {
		case llm.TextDelta:
			text.WriteString(ev.Text)
		case llm.ReasoningDelta:
			reasoning.WriteString(ev.Text)
		case llm.ToolCallEnd:
			a.calls = append(a.calls, llm.ToolCall{ID: ev.ID, Name: ev.Name, Arguments: ev.Arguments})
		case llm.Usage:
			a.usage = ev.Tokens
		case llm.Done:
			a.stop = ev.StopReason
		}
	}
	a.text, a.reasoning = text.String(), reasoning.String()
	return a, nil
}

func (g *gateway) models(w http.ResponseWriter, r *http.Request) {
	if _, ok := g.grant(r); !ok {
		chatWire.writeErr(w, http.StatusUnauthorized, "gateway: missing or unknown API key")
		return
	}
	type model struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Type        string `json:"type"`
		DisplayName string `json:"display_name"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	if g.opts.Model != "" {
		out.Data = append(out.Data, model{ID: g.opts.Model, Object: "model", Type: "model", DisplayName: g.opts.Model, OwnedBy: "lathe"})
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// sse writes one Server-Sent Events reply, flushing each event.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// send writes one event; an empty name writes a data line alone.
func (s *sse) send(name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the gateway's own types are encoded
	}
	s.data(name, data)
}

func (s *sse) data(name string, data []byte) {
	buf := make([]byte, 0, len(data)+len(name)+16)
	if name != "" {
		buf = append(append(append(buf, "event: "...), name...), '\n')
	}
	buf = append(append(append(buf, "data: "...), data...), "\n\n"...)
	s.w.Write(buf)
	if s.f != nil {
		s.f.Flush()
	}
}

// newID returns a fresh id with the wire's prefix.
func newID(prefix string) string { return prefix + rand.Text() }

// text is a content field that is either a string or a list of typed
// parts; the text parts are joined. A part of another type is refused,
// unless skip names it.
func text(raw json.RawMessage, what string, skip ...string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrBadRequest, what, err)
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("%w: %s: want a string or a list of text parts: %v", ErrBadRequest, what, err)
	}
	var b strings.Builder
	for _, p := range parts {
		switch {
		case p.Type == "text" || p.Type == "input_text" || p.Type == "output_text":
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		case slices.Contains(skip, p.Type):
		default:
			return "", fmt.Errorf("%w: %s: content of type %q is not supported by the gateway (text only)", ErrBadRequest, what, p.Type)
		}
	}
	return b.String(), nil
}

// effortBudget maps an OpenAI reasoning effort to a thinking budget, for
// providers that take one (Anthropic); 0 leaves thinking off.
func effortBudget(effort string) int {
	switch effort {
	case "minimal", "low":
		return 2048
	case "medium":
		return 8192
	case "high", "xhigh":
		return 24576
	}
	return 0
}

// args returns a tool call's arguments as a JSON object ("{}" when empty).
func args(s, what string) (json.RawMessage, error) {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid([]byte(s)) {
		return nil, fmt.Errorf("%w: %s: arguments are not JSON", ErrBadRequest, what)
	}
	return json.RawMessage(s), nil
}
