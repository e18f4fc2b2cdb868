package fakellm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Created is the fixed "created" time of every OpenAI response, so that
// streams are deterministic.
const Created = 1700000000

// Request is the record of one request the server received.
type Request struct {
	Seq          int // 1-based arrival order
	Method       string
	Path         string
	Header       http.Header
	Body         []byte
	Model        string
	Stream       bool
	IncludeUsage bool // OpenAI stream_options.include_usage
	Turn         int  // index of the Turn that answered, or -1
}

// JSON decodes the recorded body into v.
func (r Request) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// Server plays a Script. It is an http.Handler; New also starts it on a
// loopback port.
type Server struct {
	script Script
	hs     *httptest.Server
	closed chan struct{}
	once   sync.Once

	mu   sync.Mutex
	used []bool
	reqs []Request
}

// NewHandler returns an unstarted Server, for serving on a listener of the
// caller's choice.
func NewHandler(script Script) (*Server, error) {
	if err := script.Validate(); err != nil {
		return nil, err
	}
	return &Server{script: script, closed: make(chan struct{}), used: make([]bool, len(script.Turns))}, nil
}

// New starts a Server on a loopback port. It panics on an invalid script,
// as httptest.NewServer panics on a failed listen.
func New(script Script) *Server {
	s, err := NewHandler(script)
	if err != nil {
		panic(err)
	}
	s.hs = httptest.NewServer(s)
	return s
}

// URL is the server's base URL, such as http://127.0.0.1:41234. The OpenAI
// endpoints answer both under it and under URL()+"/v1"; the Anthropic
// endpoint is URL()+"/v1/messages"; Gemini's are under URL()+"/v1beta/models/"
// (GOOGLE_GEMINI_BASE_URL is URL()).
func (s *Server) URL() string {
	if s.hs == nil {
		return ""
	}
	return s.hs.URL
}

// Close releases every stall and, for a server started by New, shuts it
// down and waits for outstanding requests.
func (s *Server) Close() {
	s.once.Do(func() { close(s.closed) })
	if s.hs != nil {
		s.hs.Close()
	}
}

// Requests returns a copy of the record of requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Remaining reports how many Turns have not been played.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, u := range s.used {
		if !u {
			n++
		}
	}
	return n
}

type requestBody struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/v1")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/":
		io.WriteString(w, "Ollama is running")
	case r.Method == http.MethodGet && r.URL.Path == "/api/tags":
		s.serveTags(w)
	case r.Method == http.MethodGet && path == "/models":
		s.serveModels(w)
	case r.Method == http.MethodPost && path == "/chat/completions":
		s.serveModel(w, r, protoOpenAI)
	case r.Method == http.MethodPost && path == "/messages":
		s.serveModel(w, r, protoAnthropic)
	case r.Method == http.MethodPost && path == "/responses":
		s.serveModel(w, r, protoResponses)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1beta/models/"):
		s.serveModel(w, r, protoGemini)
	default:
		http.NotFound(w, r)
	}
}

type proto int

const (
	protoOpenAI proto = iota
	protoAnthropic
	protoResponses
	protoGemini
)

func (s *Server) serveModel(w http.ResponseWriter, r *http.Request, p proto) {
	body, err := io.ReadAll(r.Body)
	var rb requestBody
	if err == nil {
		err = json.Unmarshal(body, &rb)
	}
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Turn: -1}
	if p == protoGemini {
		model, stream, ok := geminiCall(r.URL.Path)
		if !ok {
			writeError(w, p, http.StatusNotFound, "", fmt.Sprintf("fakellm: no Gemini method at %s", r.URL.Path))
			return
		}
		rb.Model, rb.Stream = model, stream
	}
	if err == nil {
		rec.Model, rec.Stream = rb.Model, rb.Stream
		rec.IncludeUsage = rb.StreamOptions != nil && rb.StreamOptions.IncludeUsage
	}
	s.mu.Lock()
	if err == nil {
		for i, t := range s.script.Turns {
			if !s.used[i] && (t.Model == "" || t.Model == rb.Model) && (t.Contains == "" || bytes.Contains(body, []byte(t.Contains))) {
				s.used[i] = true
				rec.Turn = i
				break
			}
		}
	}
	rec.Seq = len(s.reqs) + 1
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()

	if err != nil {
		writeError(w, p, http.StatusBadRequest, "", fmt.Sprintf("fakellm: bad request body: %v", err))
		return
	}
	if rec.Turn < 0 {
		writeError(w, p, http.StatusInternalServerError, "", fmt.Sprintf("fakellm: no scripted turn left for model %q", rb.Model))
		return
	}
	turn := s.script.Turns[rec.Turn]
	if len(turn.Steps) > 0 && turn.Steps[0].Kind == KindFail {
		st := turn.Steps[0]
		writeError(w, p, st.Status, st.RetryAfter, fmt.Sprintf("fakellm: scripted status %d", st.Status))
		return
	}
	pl := &player{s: s, w: w, ctx: r.Context(), seq: rec.Seq, model: rb.Model, turn: turn}
	pl.flusher, _ = w.(http.Flusher)
	switch {
	case p == protoAnthropic:
		pl.anthropicStream()
	case p == protoGemini && rb.Stream:
		pl.geminiStream()
	case p == protoGemini:
		pl.geminiComplete()
	case p == protoResponses && rb.Stream:
		pl.responsesStream()
	case p == protoResponses:
		pl.responsesComplete()
	case rb.Stream:
		pl.openAIStream(rec.IncludeUsage)
	default:
		pl.openAIComplete()
	}
}

func writeError(w http.ResponseWriter, p proto, status int, retryAfter, msg string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if p == protoGemini {
		code := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
			429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}[status]
		if code == "" {
			code = "INTERNAL"
		}
		writeJSON(w, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": code}})
		return
	}
	if p == protoAnthropic {
		typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
			404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}[status]
		if typ == "" {
			typ = "api_error"
		}
		writeJSON(w, map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
		return
	}
	typ := "server_error"
	switch {
	case status == 429:
		typ = "rate_limit_exceeded"
	case status == 401:
		typ = "invalid_request_error"
	case status < 500:
		typ = "invalid_request_error"
	}
	writeJSON(w, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

func writeJSON(w io.Writer, v any) {
	w.Write(marshal(v))
}

// marshal encodes v as compact JSON without HTML escaping, as the real
// servers do.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only our own types are encoded
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func (s *Server) serveTags(w http.ResponseWriter) {
	type details struct {
		Format            string `json:"format"`
		Family            string `json:"family"`
		ParameterSize     string `json:"parameter_size"`
		QuantizationLevel string `json:"quantization_level"`
	}
	type model struct {
		Name       string  `json:"name"`
		Model      string  `json:"model"`
		ModifiedAt string  `json:"modified_at"`
		Size       int64   `json:"size"`
		Digest     string  `json:"digest"`
		Details    details `json:"details"`
	}
	out := struct {
		Models []model `json:"models"`
	}{Models: []model{}}
	for i, name := range s.script.Models {
		out.Models = append(out.Models, model{
			Name: name, Model: name, ModifiedAt: "2023-11-14T22:13:20Z", Size: int64(1000 + i),
			Digest:  fmt.Sprintf("%064x", i+1),
			Details: details{Format: "gguf", Family: "fake", ParameterSize: "1B", QuantizationLevel: "Q4_0"},
		})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	writeJSON(w, out)
}

func (s *Server) serveModels(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, name := range s.script.Models {
		out.Data = append(out.Data, model{ID: name, Object: "model", Created: Created, OwnedBy: "fakellm"})
	}
	w.Header().Set("Content-Type", "application/json")
	writeJSON(w, out)
}

// player writes one Turn on one response.
type player struct {
	s       *Server
	w       http.ResponseWriter
	flusher http.Flusher
	ctx     context.Context
	seq     int
	model   string
	turn    Turn
}

func (p *player) flush() {
	if p.flusher != nil {
		p.flusher.Flush()
	}
}

// stall holds the stream and reports whether the client is still there.
func (p *player) stall(st Step) bool {
	p.flush()
	var timeout <-chan time.Time
	if st.StallMS > 0 {
		t := time.NewTimer(time.Duration(st.StallMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-p.ctx.Done():
		return false
	case <-st.Release:
	case <-timeout:
	case <-p.s.closed:
	}
	return p.ctx.Err() == nil
}

// drop flushes what was written and makes net/http close the connection
// without ending the response.
func (p *player) drop() {
	p.flush()
	panic(http.ErrAbortHandler)
}

func (p *player) startSSE() {
	h := p.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	p.w.WriteHeader(http.StatusOK)
}

// usage returns the Turn's usage step, if any.
func (p *player) usage() (Step, bool) {
	for _, st := range p.turn.Steps {
		if st.Kind == KindUsage {
			return st, true
		}
	}
	return Step{}, false
}

func (p *player) hasToolCall() bool {
	for _, st := range p.turn.Steps {
		if st.Kind == KindToolCall {
			return true
		}
	}
	return false
}
