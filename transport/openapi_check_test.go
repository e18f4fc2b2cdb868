package transport

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/julienschmidt/httprouter"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Every JSON response the route tests receive through fakeServer is
// validated against the document's schema for its route and status, with
// santhosh-tekuri/jsonschema (JSON Schema 2020-12, the dialect of OpenAPI
// 3.1's schemas): a handler that answers a status or a shape its route's
// entry does not document fails the test that met it.

// docURL is the document's resource name in the compiler.
const docURL = "lathe:///openapi.json"

// openAPISchemas compiles the document's schemas on demand, by JSON
// pointer into the document.
type openAPISchemas struct {
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	doc      map[string]any
	compiled map[string]*jsonschema.Schema
	router   *httprouter.Router // answers the table path of a request
}

var documentSchemas = sync.OnceValues(func() (*openAPISchemas, error) {
	data, err := OpenAPI()
	if err != nil {
		return nil, err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(docURL, v); err != nil {
		return nil, err
	}
	s := &openAPISchemas{compiler: c, doc: v.(map[string]any), compiled: map[string]*jsonschema.Schema{}, router: httprouter.New()}
	for _, rt := range Routes() {
		path := rt.Path
		s.router.Handle(rt.Method, path, func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
			w.Header().Set("X-Route", path)
		})
	}
	return s, nil
})

// schema is the compiled schema at pointer, a JSON pointer into the
// document.
func (s *openAPISchemas) schema(pointer string) (*jsonschema.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.compiled[pointer]; ok {
		return sch, nil
	}
	sch, err := s.compiler.Compile(docURL + "#" + pointer)
	if err != nil {
		return nil, err
	}
	s.compiled[pointer] = sch
	return sch, nil
}

// pointerToken escapes a JSON pointer token.
func pointerToken(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// responseSchema is the JSON pointer of the schema that the document gives
// the JSON body of a status of method on the table path, and whether it
// documents one.
func (s *openAPISchemas) responseSchema(method, path string, status int) (string, error) {
	op := "/paths/" + pointerToken(openAPIPath(path)) + "/" + strings.ToLower(method)
	paths, _ := s.doc["paths"].(map[string]any)
	item, _ := paths[openAPIPath(path)].(map[string]any)
	o, ok := item[strings.ToLower(method)].(map[string]any)
	if !ok {
		return "", fmt.Errorf("the document has no operation %s %s", method, path)
	}
	responses, _ := o["responses"].(map[string]any)
	code := strconv.Itoa(status)
	r, ok := responses[code].(map[string]any)
	if !ok {
		if status < 400 {
			return "", fmt.Errorf("status %d is not documented", status)
		}
		code, r = "default", responses["default"].(map[string]any)
	}
	content, _ := r["content"].(map[string]any)
	if _, ok := content[mediaJSON]; !ok {
		return "", fmt.Errorf("status %d documents no JSON body", status)
	}
	return op + "/responses/" + code + "/content/" + pointerToken(mediaJSON) + "/schema", nil
}

// checkResponse validates one response against the document: nil when it
// is not JSON, or when no route of the table took the request (the
// router's own 404 and 405).
func checkResponse(r *http.Request, status int, header http.Header, body []byte) error {
	if mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mt != mediaJSON || status == http.StatusSwitchingProtocols {
		return nil
	}
	s, err := documentSchemas()
	if err != nil {
		return err
	}
	h, _, _ := s.router.Lookup(r.Method, r.URL.Path)
	if h == nil {
		return nil
	}
	rec := http.Header{}
	h(headerWriter(rec), r, nil)
	path := rec.Get("X-Route")
	pointer, err := s.responseSchema(r.Method, path, status)
	if err != nil {
		return err
	}
	sch, err := s.schema(pointer)
	if err != nil {
		return fmt.Errorf("compile %s: %w", pointer, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s: %w", pointer, err)
	}
	return nil
}

// headerWriter is a ResponseWriter that keeps only the header.
type headerWriter http.Header

func (h headerWriter) Header() http.Header       { return http.Header(h) }
func (headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (headerWriter) WriteHeader(int)             {}

// checkedHandler is h, with every JSON response it writes validated
// against the document; a WebSocket upgrade and a HEAD pass through.
func checkedHandler(t testing.TB, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" || r.Method == http.MethodHead { // a HEAD answer has no body on the wire
			h.ServeHTTP(w, r)
			return
		}
		tee := &teeWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(tee, r)
		if err := checkResponse(r, tee.status, w.Header(), tee.body.Bytes()); err != nil {
			t.Errorf("OpenAPI: %s %s answered %d, not as documented: %v\nbody: %.500s", r.Method, r.URL.Path, tee.status, err, tee.body.Bytes())
		}
	})
}

// teeWriter keeps a copy of the status and body it passes on.
type teeWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *teeWriter) WriteHeader(status int) { w.status = status; w.ResponseWriter.WriteHeader(status) }
func (w *teeWriter) Write(b []byte) (int, error) {
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}
func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// recordingTB records Errorf instead of failing.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestCheckedHandlerCatchesDrift feeds the checker answers that differ
// from the document: each is reported, and a documented one is not.
func TestCheckedHandlerCatchesDrift(t *testing.T) {
	for _, tc := range []struct {
		name, method, path string
		status             int
		body               string
		drift              bool
	}{
		{"documented list", http.MethodGet, "/api/workspaces", 200, `[]`, false},
		{"documented error", http.MethodGet, "/api/workspaces/W", 404, `{"error":"workspace \"W\""}`, false},
		{"documented record", http.MethodGet, "/api/automation-folders", 200, `[{"path":"a","name":"a","durable":false}]`, false},
		{"null for a list", http.MethodGet, "/api/automation-folders", 200, `null`, true},
		{"object for a list", http.MethodGet, "/api/workspaces", 200, `{"id":"W"}`, true},
		{"a member it never has", http.MethodGet, "/api/automation-folders", 200, `[{"path":"a","name":"a","durable":false,"x":1}]`, true},
		{"a member it always has left out", http.MethodGet, "/api/automation-folders", 200, `[{"path":"a","name":"a"}]`, true},
		{"error without its message", http.MethodGet, "/api/workspaces/W", 404, `{"message":"no"}`, true},
		{"undocumented success status", http.MethodGet, "/api/workspaces", 202, `[]`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			h := checkedHandler(rec, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				writeJSONBytes(w, tc.status, []byte(tc.body))
			}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.path, nil))
			if got := len(rec.errors) > 0; got != tc.drift {
				t.Errorf("reported %v, want drift %v", rec.errors, tc.drift)
			}
		})
	}
}
