// Package telemetry starts the OpenTelemetry trace pipeline when an OTLP
// endpoint is named: the official SDK's tracer provider, a batch span
// processor and the OTLP/HTTP exporter. With no endpoint nothing starts:
// Start returns nil, and the daemon then folds no spans at all
// (projections/traces).
//
// Decisions:
//   - The endpoint is telemetry.otlp_endpoint, else what the OTLP
//     environment names, as the SDKs read it: OTEL_EXPORTER_OTLP_ENDPOINT
//     (a base URL; spans go to its /v1/traces) or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the traces URL, posted to as
//     given; it wins). The exporter reads the environment itself; the
//     configured endpoint overrides it (WithEndpointURL).
//   - telemetry.otlp_endpoint is a base URL, or the traces URL itself
//     when its path ends in /v1/traces: that is posted to as given.
//   - An endpoint that is not an http(s) URL is refused at start, naming
//     its source: the SDK would log it and post to localhost instead.
//   - service.name is "lathe" unless OTEL_SERVICE_NAME (or service.name in
//     OTEL_RESOURCE_ATTRIBUTES) names another, as the SDKs do.
package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// The OTLP environment variables that name an endpoint, the traces one
// first: it wins.
const (
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
)

// tracesPath is the OTLP/HTTP traces path under a base URL.
const tracesPath = "/v1/traces"

// Options configure the pipeline.
type Options struct {
	// Endpoint is telemetry.otlp_endpoint: an OTLP/HTTP base URL
	// ("http://127.0.0.1:4318"), whose /v1/traces gets the spans, or that
	// traces URL itself. Empty: the environment's endpoint, if any.
	Endpoint string
	// Version is the daemon's, as service.version.
	Version string
}

// Telemetry is a running trace pipeline.
type Telemetry struct {
	tp *sdktrace.TracerProvider
}

// EndpointEnv names the OTLP environment variable that names an endpoint,
// or is "" when none does.
func EndpointEnv() string {
	for _, name := range []string{EnvTracesEndpoint, EnvEndpoint} {
		if os.Getenv(name) != "" {
			return name
		}
	}
	return ""
}

// Start builds the pipeline, or returns nil when neither o nor the
// environment names an endpoint. The exporter connects lazily: an endpoint
// that is down costs dropped spans, never a failed start.
func Start(o Options) (*Telemetry, error) {
	var opts []otlptracehttp.Option
	switch env := EndpointEnv(); {
	case o.Endpoint != "":
		u, err := httpURL("telemetry.otlp_endpoint", o.Endpoint)
		if err != nil {
			return nil, err
		}
		if !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), tracesPath) {
			u.Path = strings.TrimSuffix(u.Path, "/") + tracesPath
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	case env != "":
		if _, err := httpURL(env, os.Getenv(env)); err != nil {
			return nil, err
		}
	default:
		return nil, nil
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := resource.Merge(resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("lathe"), semconv.ServiceVersion(o.Version)),
		resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	return &Telemetry{tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// httpURL parses v, the value of the endpoint source names, as an http or
// https URL with a host.
func httpURL(source, v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s must be an http:// or https:// URL, such as http://127.0.0.1:4318", source)
	}
	return u, nil
}

// Tracer is the daemon's tracer.
func (t *Telemetry) Tracer() trace.Tracer { return t.tp.Tracer("lathe") }

// Shutdown exports what is queued and stops, bounded by ctx. A nil
// Telemetry has nothing to stop.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}
