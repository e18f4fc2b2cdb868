package daemon

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"lathe/transport"
)

// Every JSON response a test daemon writes, to the tests' Go client and to
// the browser tests' Chromium alike, is checked against the daemon's
// OpenAPI 3.1 document (GET /api/openapi.json, generated from the route
// table) with kin-openapi's openapi3filter, which loads 3.1 and validates
// with JSON Schema 2020-12: a handler that answers a status or a shape its
// route's entry does not document fails the test that met it.

var openAPIRouter = sync.OnceValues(func() (routers.Router, error) {
	data, err := transport.OpenAPI()
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, err
	}
	doc.Servers = openapi3.Servers{{URL: "/"}}
	return gorillamux.NewRouter(doc)
})

// checkOpenAPI is h, validating every JSON response it writes; a WebSocket
// upgrade and a HEAD pass through.
func checkOpenAPI(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	router, err := openAPIRouter()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" || r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		tee := &teeWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(tee, r)
		body := tee.body.Bytes()
		if w.Header().Get("Content-Encoding") == "gzip" { // as a browser asks for it
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err == nil {
				body, err = io.ReadAll(zr)
			}
			if err != nil {
				t.Errorf("OpenAPI: %s %s: gzip body: %v", r.Method, r.URL.Path, err)
				return
			}
		}
		if err := checkResponse(router, r, tee.status, w.Header(), body); err != nil {
			t.Errorf("OpenAPI: %s %s answered %d, not as documented: %v\nbody: %.500s", r.Method, r.URL.Path, tee.status, err, body)
		}
	})
}

// checkResponse validates one response: nil when it is not JSON, when no
// route of the document takes the request (the router's 404 and 405), or
// when it is a sandbox's own answer through the Preview.
func checkResponse(router routers.Router, req *http.Request, status int, header http.Header, body []byte) error {
	if mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mt != "application/json" {
		return nil // bytes, pages, NDJSON streams: their shapes are not JSON schemas
	}
	route, params, err := router.FindRoute(req)
	if err != nil || route == nil || strings.Contains(route.Path, "/proxy/") {
		return nil
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// teeWriter keeps a copy of the status and body it passes on.
type teeWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *teeWriter) WriteHeader(status int) {
	if status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

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

// TestOpenAPICheckerCatchesDrift feeds the checker answers that differ
// from the document: each is reported, and a documented one is not.
func TestOpenAPICheckerCatchesDrift(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		status     int
		body       string
		drift      bool
	}{
		{"documented list", "/api/workspaces", 200, `[]`, false},
		{"documented error", "/api/workspaces/W", 404, `{"error":"workspace \"W\""}`, false},
		{"object for a list", "/api/workspaces", 200, `{"id":"W"}`, true},
		{"wrong field type", "/api/workspaces/W", 200, `{"id":7}`, true},
		{"error without its message", "/api/workspaces/W", 404, `{"message":"no"}`, true},
		{"undocumented success status", "/api/workspaces", 202, `[]`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			h := checkOpenAPI(rec, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, tc.path, nil))
			if got := len(rec.errors) > 0; got != tc.drift {
				t.Errorf("reported %v, want %v: %v", rec.errors, tc.drift, tc.drift)
			}
		})
	}
}
