package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal"
	"lathe/projections/metrics"
	"lathe/projections/traces"
	"lathe/runtime/telemetry"
	"lathe/transport"
)

// telemetryFlush bounds the export of the queued spans at close.
const telemetryFlush = time.Second

// observers are the commit feed's telemetry read models: /metrics always,
// the trace fold only with an OTLP endpoint (telemetry.otlp_endpoint or
// the OTLP environment variables).
type observers struct {
	metrics   *metrics.Metrics
	traces    *traces.Traces // nil: no endpoint, nothing folded
	telemetry *telemetry.Telemetry
}

// startObservers builds them; d.server is read only once it exists.
func (d *Daemon) startObservers(cfg config.Config, version string) error {
	// The commands exist by the time the commit feed is folded (wire).
	d.obs.metrics = metrics.New(metrics.Options{Version: version, WSClients: func() int { return d.server.Hub().Clients() },
		WSCutOffs: func() int64 { return d.server.Hub().CutOffs() }, SandboxProvider: cfg.Sandbox.Provider,
		Models: configuredModels(cfg), Tool: func(name string) bool { return d.cmds.MCP.AdvertisedTool(name) }})
	tel, err := telemetry.Start(telemetry.Options{Endpoint: cfg.Telemetry.OTLPEndpoint, Version: version})
	if err != nil || tel == nil {
		return err
	}
	d.obs.telemetry = tel
	d.obs.traces = traces.New(tel.Tracer(), traces.Options{Agents: traceAgents(cfg), Content: cfg.Telemetry.CaptureContent,
		Secrets: secretValues(cfg)})
	return nil
}

// traceAgents are the configured Agents as their spans name them: their
// names, their providers' kinds and the base URLs their inferences call.
func traceAgents(cfg config.Config) map[string]traces.Agent {
	out := make(map[string]traces.Agent, len(cfg.Agents))
	for _, a := range cfg.Agents {
		p := cfg.Providers[a.Provider]
		out[a.ID] = traces.Agent{Name: a.Name, Provider: p.Kind, BaseURL: providerBaseURL(p)}
	}
	return out
}

// configuredModels are the model names the configuration file names: its
// Agents' models and the models it prices ("provider/model").
func configuredModels(cfg config.Config) []string {
	var out []string
	for _, a := range cfg.Agents {
		out = append(out, a.Model)
	}
	for key := range cfg.Prices {
		if _, model, ok := strings.Cut(key, "/"); ok {
			out = append(out, model)
		}
	}
	return out
}

// secretValues are the secrets the daemon knows, which span content must
// never carry: its API keys and bearer tokens, the providers' keys, the
// MCP servers' environment values, the NATS users' passwords.
func secretValues(cfg config.Config) []string {
	var out []string
	for _, c := range append(slices.Clone(cfg.Server.APIKeys), cfg.Server.BearerTokens...) {
		out = append(out, c.Key)
	}
	for _, p := range cfg.Providers {
		if p.APIKeyEnv != "" {
			out = append(out, os.Getenv(p.APIKeyEnv))
		}
	}
	for _, u := range cfg.NATS.OutsideUsers() {
		out = append(out, u.Password)
	}
	for _, m := range cfg.MCP.Servers {
		for _, v := range m.Env {
			out = append(out, v)
		}
	}
	return out
}

// observe folds a committed batch before its frames go out: a client that
// saw a frame finds its work counted.
func (o *observers) observe(batch []journal.Record) {
	o.metrics.Observe(batch)
	if o.traces != nil {
		o.traces.Observe(batch)
	}
}

// close exports the spans still queued, briefly.
func (o *observers) close() {
	ctx, cancel := context.WithTimeout(context.Background(), telemetryFlush)
	defer cancel()
	o.telemetry.Shutdown(ctx)
}

// ServeMetrics serves GET /metrics alone, without credentials, on addr
// (telemetry.metrics_listen, a loopback address) until ctx ends, and
// returns the address it listens on. Like the API in unauthenticated
// loopback mode, it answers only a loopback Host header, so a
// DNS-rebinding page cannot read it.
func (d *Daemon) ServeMetrics(ctx context.Context, addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("telemetry.metrics_listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", d.obs.metrics.Handler())
	srv := &http.Server{Handler: transport.LocalHostOnly(mux), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	context.AfterFunc(ctx, func() { srv.Close() })
	return ln.Addr(), nil
}
