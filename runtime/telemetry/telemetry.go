// Package telemetry starts the OpenTelemetry trace pipeline when the
// operator names an OTLP endpoint (telemetry.otlp_endpoint): the official
// SDK's tracer provider, a batch span processor and the OTLP/HTTP
// exporter. With no endpoint nothing starts: Start returns nil, and the
// daemon then folds no spans at all (projections/traces).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// Options configure the pipeline.
type Options struct {
	// Endpoint is the OTLP/HTTP base URL ("http://127.0.0.1:4318"); spans
	// go to its /v1/traces. Empty: no traces.
	Endpoint string
	// Version is the daemon's, as service.version.
	Version string
}

// Telemetry is a running trace pipeline.
type Telemetry struct {
	tp *sdktrace.TracerProvider
}

// Start builds the pipeline, or returns nil when o names no endpoint. The
// exporter connects lazily: an endpoint that is down costs dropped spans,
// never a failed start.
func Start(o Options) (*Telemetry, error) {
	if o.Endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("telemetry.otlp_endpoint must be an http:// or https:// base URL")
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("lathe"), semconv.ServiceVersion(o.Version))
	return &Telemetry{tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
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
