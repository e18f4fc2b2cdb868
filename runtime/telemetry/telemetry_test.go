package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP/HTTP endpoint that keeps the path and the
// service.name of each export it gets, and answers success on any path.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	exports []string // "path service.name"
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if err != nil {
			t.Errorf("decode OTLP request to %s: %v", r.URL.Path, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.Value.GetStringValue()
				}
			}
			rc.mu.Lock()
			rc.exports = append(rc.exports, r.URL.Path+" "+service)
			rc.mu.Unlock()
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) got() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return strings.Join(rc.exports, ", ")
}

// TestStartEndpoint exports one span for each way of naming the endpoint
// and checks where it went and under which service name: the configured
// base URL or traces URL (posted to as given), the OTLP environment's
// endpoints as the SDKs read them, the configuration winning over them,
// and OTEL_SERVICE_NAME.
func TestStartEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, endpoint  string
		env             map[string]string // values: "{}" is the receiver's URL
		want, wantOther string
	}{
		{name: "base URL", endpoint: "{}", want: "/v1/traces lathe"},
		{name: "base URL with a path", endpoint: "{}/otlp/", want: "/otlp/v1/traces lathe"},
		{name: "traces URL", endpoint: "{}/v1/traces", want: "/v1/traces lathe"},
		{name: "env base URL", env: map[string]string{EnvEndpoint: "{}/otlp"}, want: "/otlp/v1/traces lathe"},
		{name: "env traces URL", env: map[string]string{EnvTracesEndpoint: "{}/in/spans", EnvEndpoint: "{}/otlp"}, want: "/in/spans lathe"},
		{name: "config wins", endpoint: "{}/v1/traces", env: map[string]string{EnvEndpoint: "other", EnvTracesEndpoint: "other"},
			want: "/v1/traces lathe"},
		{name: "service name", endpoint: "{}", env: map[string]string{"OTEL_SERVICE_NAME": "lathe-ci"}, want: "/v1/traces lathe-ci"},
		{name: "service name from resource attributes", endpoint: "{}", env: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=lathe-eu"},
			want: "/v1/traces lathe-eu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, other := newReceiver(t), newReceiver(t)
			url := func(v string) string {
				if v == "other" {
					return other.URL
				}
				return strings.ReplaceAll(v, "{}", rc.URL)
			}
			for _, k := range []string{EnvEndpoint, EnvTracesEndpoint, "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
				t.Setenv(k, url(tc.env[k]))
			}
			tel, err := Start(Options{Endpoint: url(tc.endpoint), Version: "test"})
			if err != nil || tel == nil {
				t.Fatalf("Start: %v, %v", tel, err)
			}
			_, span := tel.Tracer().Start(context.Background(), "probe")
			span.End()
			if err := tel.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if got := rc.got(); got != tc.want {
				t.Errorf("exports %q, want %q", got, tc.want)
			}
			if got := other.got(); got != "" {
				t.Errorf("the environment's endpoint got %q though the configuration names one", got)
			}
		})
	}
}

// TestStartRefuses: no endpoint anywhere starts nothing; one that is not
// an http(s) URL is refused, naming where it came from.
func TestStartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, endpoint, env, want string
	}{
		{name: "none"},
		{name: "config", endpoint: "127.0.0.1:4318", want: "telemetry.otlp_endpoint must be an http:// or https:// URL"},
		{name: "env", env: "grpc://127.0.0.1:4317", want: EnvEndpoint + " must be an http:// or https:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvTracesEndpoint, "")
			t.Setenv(EnvEndpoint, tc.env)
			tel, err := Start(Options{Endpoint: tc.endpoint})
			if tc.want == "" {
				if tel != nil || err != nil {
					t.Fatalf("Start with no endpoint: %v, %v", tel, err)
				}
				return
			}
			if tel != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, %v; want the error %q", tel, err, tc.want)
			}
		})
	}
}
