package daemon

import (
	"bytes"
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

// Every JSON response the integration tests receive through a test
// daemon's client is checked against the daemon's OpenAPI 3.1 document
// (GET /api/openapi.json, generated from the route table) with
// kin-openapi's openapi3filter, which loads 3.1 and validates with JSON
// Schema 2020-12: a handler that answers a status or a shape its route's
// entry does not document fails the test that met it.

var openAPIDoc = sync.OnceValues(func() (*openapi3.T, error) {
	data, err := transport.OpenAPI()
	if err != nil {
		return nil, err
	}
	return openapi3.NewLoader().LoadFromData(data)
})

// checkOpenAPI makes srv's client validate the responses it receives.
func checkOpenAPI(t testing.TB, srv *httptest.Server) {
	t.Helper()
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	served := *doc
	served.Servers = openapi3.Servers{{URL: srv.URL}}
	router, err := gorillamux.NewRouter(&served)
	if err != nil {
		t.Fatalf("openapi router: %v", err)
	}
	client := srv.Client()
	client.Transport = openAPIChecker{t: t, next: client.Transport, router: router}
}

// openAPIChecker is the validating http.RoundTripper.
type openAPIChecker struct {
	t      testing.TB
	next   http.RoundTripper
	router routers.Router
}

func (c openAPIChecker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return resp, nil // bytes, pages, NDJSON streams: their shapes are not JSON schemas
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil || route == nil || strings.Contains(route.Path, "/proxy/") {
		return resp, nil // no route (the router's 404 and 405), or a sandbox's own answer
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		c.t.Errorf("OpenAPI: %s %s answered %d, not as documented: %v\nbody: %.500s", req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
	return resp, nil
}

// recordingTB records Errorf instead of failing.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestOpenAPICheckerCatchesDrift feeds the checker answers that differ
// from the document: each is reported, and a documented one is not.
func TestOpenAPICheckerCatchesDrift(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
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
			checkOpenAPI(rec, srv)
			c := srv.Client().Transport.(openAPIChecker)
			c.next = roundTripFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: tc.status, Header: http.Header{"Content-Type": {"application/json"}},
					Body: io.NopCloser(strings.NewReader(tc.body))}, nil
			})
			req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := len(rec.errors) > 0; got != tc.drift {
				t.Errorf("reported %v, want %v: %v", rec.errors, tc.drift, tc.drift)
			}
		})
	}
}
