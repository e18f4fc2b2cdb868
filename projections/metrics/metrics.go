// Package metrics is the Prometheus read model: counters and histograms
// folded from the journal's commit feed, as every projection is, so that
// no command or runtime path carries instrumentation of its own.
//
// Decisions:
//   - Observe runs in the commit feed's goroutine, once per committed
//     batch, in seq order. It only counts: a few map lookups per event and
//     no I/O.
//   - Counters start at zero with the process, as Prometheus expects;
//     rate() and increase() handle the reset of a restart. Replay at start
//     is not counted (it is not work done by this process).
//   - Series labels are bounded: Agent IDs come from the configuration,
//     outcomes and directions are fixed, and a model or tool name is its
//     own label only when it is configured (Options.Models) or advertised
//     (Options.Tool); any other (a model_override, a name a model made up)
//     counts under Other. Each new label value is a series kept for the
//     life of the process, so a value from outside must never be one.
//   - Times come from the events' own commit times (At), so a latency is
//     what the journal saw: an inference is the time from the event that
//     let it start (turn-started, or the previous tool call's end) to its
//     output; an approval wait from its request to its resolution.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/usage"
)

// Metrics holds the series. The zero value is unusable; use New.
type Metrics struct {
	reg *prometheus.Registry

	turnsStarted  *prometheus.CounterVec
	turns         *prometheus.CounterVec
	tokens        *prometheus.CounterVec
	costUSD       *prometheus.CounterVec
	unpriced      *prometheus.CounterVec
	inference     *prometheus.HistogramVec
	firstToken    *prometheus.HistogramVec
	toolCalls     *prometheus.CounterVec
	toolSeconds   *prometheus.HistogramVec
	hookRuns      *prometheus.CounterVec
	approvalWait  prometheus.Histogram
	appends       prometheus.Counter
	commits       prometheus.Counter
	commitLatency prometheus.Histogram
	eventBytes    prometheus.Histogram
	modelTokens   *prometheus.CounterVec
	sandboxes     *prometheus.CounterVec
	sandboxReady  prometheus.Observer
	provider      string

	mu sync.Mutex
	// ready is when each running turn's next inference could start
	// (aggregate ID + turn ID → time); approvals, when each was asked.
	ready     map[string]time.Time
	approvals map[string]time.Time
	changing  map[string]time.Time // Session → when its environment began changing

	models map[string]bool
	tool   func(string) bool
}

// Options add what is not in the journal.
type Options struct {
	// Version labels lathe_build_info.
	Version string
	// WSClients, when set, reports the /ws clients connected now.
	WSClients func() int
	// WSCutOffs, when set, counts the /ws clients cut off for lagging.
	WSCutOffs func() int64
	// SandboxProvider labels the sandbox series (containerd, remote).
	SandboxProvider string
	// Models are the configured model names, labelled as themselves.
	Models []string
	// Tool reports whether a tool name is one the daemon advertises to
	// models, labelled as itself; nil labels none.
	Tool func(name string) bool
}

// Other is the label of every model and tool name that is neither
// configured nor advertised.
const Other = "other"

// New builds the series and registers them with the Go runtime's and the
// process's collectors.
func New(o Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), ready: map[string]time.Time{}, approvals: map[string]time.Time{},
		changing: map[string]time.Time{}, provider: o.SandboxProvider, models: map[string]bool{}, tool: o.Tool}
	for _, name := range o.Models {
		m.models[name] = true
	}
	if m.tool == nil {
		m.tool = func(string) bool { return false }
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		m.reg.MustRegister(v)
		return v
	}
	seconds := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	m.turnsStarted = counter("lathe_turns_started_total", "Turns that started, by Agent.", "agent")
	m.turns = counter("lathe_turns_total", "Turns that ended, by outcome (done, cancelled or error).", "outcome")
	m.tokens = counter("lathe_tokens_total", "Tokens used, by Agent and direction (input, output or reasoning).", "agent", "direction")
	m.costUSD = counter("lathe_cost_usd_total", "Priced cost in USD of the inferences whose price is known, by Agent.", "agent")
	m.unpriced = counter("lathe_inferences_unpriced_total", "Inferences whose price is unknown, by Agent.", "agent")
	m.toolCalls = counter("lathe_tool_calls_total", "Tool calls that finished, by tool and outcome (ok or error).", "tool", "outcome")
	m.hookRuns = counter("lathe_hook_runs_total", "Hook runs, by event and decision (allow, block or error).", "event", "decision")
	m.inference = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lathe_inference_seconds",
		Help: "Time from the start of an inference to its journaled output, by Agent.", Buckets: seconds}, []string{"agent"})
	m.firstToken = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lathe_time_to_first_token_seconds",
		Help:    "Time from the start of an inference to its first streamed text or reasoning, by Agent and scope (session, lane, chat, automation or agent: an execute).",
		Buckets: []float64{.05, .1, .25, .5, .75, 1, 1.5, 2, 3, 5, 10, 30}}, []string{"agent", "scope"})
	m.toolSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lathe_tool_call_seconds",
		Help: "Tool call durations, by tool.", Buckets: seconds}, []string{"tool"})
	m.approvalWait = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lathe_approval_wait_seconds",
		Help: "Time from an approval request to its resolution.", Buckets: []float64{1, 5, 15, 60, 300, 900, 3600}})
	m.appends = prometheus.NewCounter(prometheus.CounterOpts{Name: "lathe_journal_appends_total", Help: "Events committed to the journal."})
	m.commits = prometheus.NewCounter(prometheus.CounterOpts{Name: "lathe_journal_commits_total", Help: "Journal commits (each holds one or more appends)."})
	m.commitLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lathe_journal_commit_latency_seconds",
		Help:    "Time from an append's call to its delivery on the commit feed (the fsync included).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}})
	m.eventBytes = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lathe_journal_event_bytes",
		Help: "Stored size of committed events.", Buckets: prometheus.ExponentialBuckets(128, 4, 8)})
	m.modelTokens = counter("lathe_model_tokens_total", "Tokens used, by Agent, model, direction and whether the provider reported the counts (usage_known).",
		"agent", "model", "direction", "usage_known")
	m.sandboxes = counter("lathe_sandboxes_total", "Session environments that ended a change, by provider and state (ready or failed).", "provider", "state")
	readyTime := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lathe_sandbox_ready_seconds",
		Help: "Time from an environment change's start to Ready, by provider.", Buckets: []float64{.25, .5, 1, 2, 5, 10, 30, 60, 300}}, []string{"provider"})
	m.sandboxReady = readyTime.WithLabelValues(o.SandboxProvider)
	m.reg.MustRegister(m.inference, m.firstToken, m.toolSeconds, m.approvalWait, m.appends, m.commits, m.commitLatency, m.eventBytes, readyTime,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lathe_build_info", Help: "The daemon's build.", ConstLabels: prometheus.Labels{"version": o.Version}},
			func() float64 { return 1 }))
	if o.WSCutOffs != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lathe_ws_cutoffs_total",
			Help: "/ws clients cut off (close 1013) because their queue filled."}, func() float64 { return float64(o.WSCutOffs()) }))
	}
	if o.WSClients != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lathe_ws_clients", Help: "Connected /ws clients."},
			func() float64 { return float64(o.WSClients()) }))
	}
	return m
}

// Handler serves the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Observe folds one committed batch, in seq order.
func (m *Metrics) Observe(batch []journal.Record) {
	if len(batch) == 0 {
		return
	}
	now := time.Now()
	m.commits.Inc()
	m.appends.Add(float64(len(batch)))
	var oldest time.Time
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range batch {
		m.eventBytes.Observe(float64(len(r.Raw)))
		if oldest.IsZero() || r.At.Before(oldest) {
			oldest = r.At
		}
		p, key, scope := r.Payload, r.AggregateID+"/", scopeSession
		if l, ok := p.(events.LaneOf); ok {
			p, key, scope = l.TurnPayload(), key+"lane/"+l.LaneRef().Run, scopeLane
		} else if t, ok := p.(events.TurnEvent); ok {
			key += t.Turn()
		}
		m.fold(key, scope, r.At, p)
	}
	m.commitLatency.Observe(now.Sub(oldest).Seconds())
}

// Scopes of the first-token series: where the Agent ran.
const (
	scopeSession    = "session"
	scopeLane       = "lane"
	scopeChat       = "chat"
	scopeAutomation = "automation"
	scopeAgent      = "agent" // POST /api/agents/{id}/execute
	scopeA2A        = "a2a"   // an inbound A2A task
)

// fold counts one event; key names its turn (or lane) run, scope where
// it ran.
func (m *Metrics) fold(key, scope string, at time.Time, p any) {
	switch e := p.(type) {
	case events.TurnStarted:
		m.turnsStarted.WithLabelValues(e.Agent).Inc()
		m.ready[key] = at
	case events.TurnOutput:
		if t, ok := m.ready[key]; ok {
			m.inference.WithLabelValues(e.Agent).Observe(at.Sub(t).Seconds())
		}
		if e.FirstTokenMS > 0 {
			m.firstToken.WithLabelValues(e.Agent, scope).Observe(e.FirstTokenMS / 1000)
		}
		m.ready[key] = at
	case events.TurnUsage:
		m.usage(e.Agent, e.Model, e.Tokens, e.CostUSD)
	case events.ToolCallFinished:
		outcome := "ok"
		if e.IsError {
			outcome = "error"
		}
		name := e.Name
		if !m.tool(name) {
			name = Other
		}
		m.toolCalls.WithLabelValues(name, outcome).Inc()
		m.toolSeconds.WithLabelValues(name).Observe(float64(e.DurationMS) / 1000)
		m.ready[key] = at
	case events.ChatTurnEnded:
		m.inferences(scopeChat, e.Inferences)
	case events.NodeFinished:
		m.inferences(scopeAutomation, e.Inferences)
	case events.AgentExecuted:
		m.inferences(scopeAgent, e.Inferences)
	case events.A2ATaskEnded:
		m.inferences(scopeA2A, e.Inferences)
	case events.HookRan:
		m.hookRuns.WithLabelValues(e.Event, e.Decision).Inc()
	case events.ChatHookRan:
		m.hookRuns.WithLabelValues(e.Event, e.Decision).Inc()
	case events.NodeHookRan:
		m.hookRuns.WithLabelValues(e.Event, e.Decision).Inc()
	case events.AgentHookRan:
		m.hookRuns.WithLabelValues(e.Event, e.Decision).Inc()
	case events.TurnDone:
		m.end(key, "done")
	case events.TurnCancelled:
		m.end(key, "cancelled")
	case events.TurnFailed:
		m.end(key, "error")
	case events.LaneEnded:
		delete(m.ready, key+"lane/"+e.Run)
	case events.ApprovalRequested:
		m.approvals[key] = at
	case events.ApprovalResolved:
		if t, ok := m.approvals[key]; ok {
			m.approvalWait.Observe(at.Sub(t).Seconds())
			delete(m.approvals, key)
		}
	case events.EnvironmentChanging:
		m.changing[key] = at
	case events.EnvironmentReady:
		m.sandboxes.WithLabelValues(m.provider, "ready").Inc()
		if t, ok := m.changing[key]; ok {
			m.sandboxReady.Observe(at.Sub(t).Seconds())
			delete(m.changing, key)
		}
	case events.EnvironmentFailed:
		m.sandboxes.WithLabelValues(m.provider, "failed").Inc()
		delete(m.changing, key)
	}
}

// usage counts one inference's tokens and cost (or that it has no price).
func (m *Metrics) usage(agent, model string, t usage.Tokens, costUSD *float64) {
	known := strconv.FormatBool(t.TokenUsageKnown)
	if !m.models[model] {
		model = Other
	}
	for _, d := range []struct {
		direction string
		n         int
	}{{"input", t.InputTokens}, {"output", t.OutputTokens}, {"reasoning", t.ReasoningTokens}} {
		m.tokens.WithLabelValues(agent, d.direction).Add(float64(d.n))
		m.modelTokens.WithLabelValues(agent, model, d.direction, known).Add(float64(d.n))
	}
	if costUSD != nil {
		m.costUSD.WithLabelValues(agent).Add(*costUSD)
	} else {
		m.unpriced.WithLabelValues(agent).Inc()
	}
}

// inferences counts the model calls a Chat turn, an agent node, an
// Agent's execute or an A2A task kept on its end: their latency, time to first token, tokens and cost, as
// turn-output and turn-usage count a Session turn's.
func (m *Metrics) inferences(scope string, list []events.Inference) {
	for _, in := range list {
		m.usage(in.Agent, in.Model, usage.Tokens{InputTokens: in.InputTokens, OutputTokens: in.OutputTokens,
			ReasoningTokens: in.ReasoningTokens, TokenUsageKnown: in.UsageKnown}, in.CostUSD)
		m.inference.WithLabelValues(in.Agent).Observe(in.DurationMS / 1000)
		if in.FirstTokenMS > 0 {
			m.firstToken.WithLabelValues(in.Agent, scope).Observe(in.FirstTokenMS / 1000)
		}
	}
}

func (m *Metrics) end(key, outcome string) {
	m.turns.WithLabelValues(outcome).Inc()
	delete(m.ready, key)
}
