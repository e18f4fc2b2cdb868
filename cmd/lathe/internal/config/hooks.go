package config

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"lathe/runtime/hooks"
	"lathe/runtime/telemetry"
)

// Hook is one configured hook (CONTRACT.md "Hooks, traces and metrics"):
//
//	hooks:
//	  - event: PreToolUse          # SessionStart | UserPromptSubmit | PreToolUse | PostToolUse | Stop
//	    matcher: "shell"           # as Claude Code: an exact name or list (Bash|write_file), *, or a regexp; tool events only
//	    command: "./scripts/guard" # sh -c, in the Session's sandbox, in its checkout
//	    timeout_seconds: 30        # default 30, at most 600
//	    name: no-rm                # optional label in tool cards and History; default: the command
//	    host: false                # true: run on the daemon host, scrubbed environment
type Hook struct {
	Event          string `yaml:"event"`
	Matcher        string `yaml:"matcher"`
	Command        string `yaml:"command"`
	TimeoutSeconds int    `yaml:"timeout_seconds"`
	Name           string `yaml:"name"`
	Host           bool   `yaml:"host"`
}

// Telemetry configures trace export.
type Telemetry struct {
	// OTLPEndpoint is an OTLP/HTTP base URL ("http://127.0.0.1:4318"),
	// whose /v1/traces gets the spans, or that traces URL itself; it wins
	// over $OTEL_EXPORTER_OTLP_ENDPOINT and $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.
	// Empty: those variables' endpoint; none: no traces, no exporter.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// MetricsListen is a loopback host:port that serves GET /metrics alone
	// without credentials, for a local scraper; empty: none (the main
	// listener's /metrics, behind the API's authentication, always is).
	MetricsListen string `yaml:"metrics_listen"`
	// CaptureContent puts prompts, completions and tool calls' arguments
	// and results on the spans, scrubbed of secrets; off by default.
	CaptureContent bool `yaml:"capture_content"`
}

// Spec is h as the runtime runs it; id names it where it asks the
// operator when it has no name (its place in the config).
func (h Hook) Spec(id string) hooks.Hook {
	return hooks.Hook{Event: h.Event, Matcher: h.Matcher, Command: h.Command, Name: h.Name, Host: h.Host,
		Timeout: hooks.TimeoutOf(h.TimeoutSeconds), ID: cmp.Or(h.Name, id)}
}

// HookSet is the configured hooks: the global ones and each Agent's. An
// unnamed hook's ID is its index: "2" in hooks, "<agent>.0" in an Agent's.
func (c Config) HookSet() hooks.Set {
	set := hooks.Set{PerAgent: map[string][]hooks.Hook{}}
	for i, h := range c.Hooks {
		set.Global = append(set.Global, h.Spec(strconv.Itoa(i)))
	}
	for _, a := range c.Agents {
		for i, h := range a.Hooks {
			set.PerAgent[a.ID] = append(set.PerAgent[a.ID], h.Spec(a.ID+"."+strconv.Itoa(i)))
		}
	}
	return set
}

// validateHooks checks one hooks list under its dotted key.
func validateHooks(key string, list []Hook, bad func(key, format string, args ...any)) {
	for i, h := range list {
		k := fmt.Sprintf("%s[%d]", key, i)
		if !slices.Contains(hooks.Events, h.Event) {
			bad(k+".event", "%q is not one of %s", h.Event, strings.Join(hooks.Events, ", "))
		}
		if strings.TrimSpace(h.Command) == "" {
			bad(k+".command", "required: the command the hook runs")
		}
		if h.Matcher != "" {
			if !hooks.ToolEvent(h.Event) {
				bad(k+".matcher", "only PreToolUse and PostToolUse hooks match tool names; remove it")
			} else if err := hooks.CheckMatcher(h.Matcher); err != nil {
				bad(k+".matcher", "%v", err)
			}
		}
		if h.TimeoutSeconds < 0 || h.TimeoutSeconds > hooks.MaxTimeoutSeconds {
			bad(k+".timeout_seconds", "must be from 1 to %d (0: the default %d)", hooks.MaxTimeoutSeconds, hooks.DefaultTimeoutSeconds)
		}
	}
}

// validateTelemetry checks the telemetry keys.
func validateTelemetry(t Telemetry, bad func(key, format string, args ...any)) {
	if t.MetricsListen != "" {
		if host, err := splitListen(t.MetricsListen); err != nil {
			bad("telemetry.metrics_listen", "%v", err)
		} else if !isLoopback(host) {
			bad("telemetry.metrics_listen", "%q must be a loopback address: it serves /metrics without credentials", t.MetricsListen)
		}
	}
	if t.OTLPEndpoint == "" {
		if t.CaptureContent && telemetry.EndpointEnv() == "" {
			bad("telemetry.capture_content", "needs telemetry.otlp_endpoint (or $%s): without it no span is exported", telemetry.EnvEndpoint)
		}
		return
	}
	if u, err := url.Parse(t.OTLPEndpoint); err != nil || !isHTTPURL(t.OTLPEndpoint) || u.RawQuery != "" || u.Fragment != "" {
		bad("telemetry.otlp_endpoint", "must be an http:// or https:// base URL such as http://127.0.0.1:4318, or its /v1/traces URL")
	}
}
