// Package traces folds the journal's commit feed into OpenTelemetry spans
// that follow the GenAI conventions: one `invoke_agent` span per turn (and
// per lattice Worker, per Ways lane), a `chat` span per inference, an
// `execute_tool` span per tool call, with hook decisions and approval
// waits as span events; and a `sandbox.prepare` span per environment
// change of a Session, from its start to Ready or failed; a `ways.keep`
// span per Ways Keep, with a child span per phase. A Chat turn and an
// Automation run are traces too (outside.go).
//
// Decisions:
//   - Spans are a read model, as /metrics is: the turn loop carries no
//     tracing code, and with no endpoint the daemon never calls Observe,
//     so the hot paths pay nothing. Each span takes its times from the
//     events' commit times: a chat span runs from the event that let its
//     inference start (turn-started, or the previous tool call's end) to
//     its turn-output; a tool span from tool-call-started to -finished.
//   - gen_ai.agent.id is the Agent's ID, gen_ai.agent.name its configured
//     name (Options.Agents), which also names the invoke_agent span; a chat
//     span's server.address and server.port are its provider's base URL's.
//   - An errored execute_tool span has error status and error.type
//     tool_error, the value the MCP conventions give a result with isError:
//     a tool call's failure reaches the fold as that one flag.
//   - gen_ai.conversation.id is the Session ID on every span of a turn;
//     lathe.turn.id and lathe.accept_seq (the journal seq of the accept)
//     link a trace to the audit trail.
//   - Prompt and completion contents are off by default; Options.Content
//     puts them on, scrubbed of secrets (content.go).
//   - State lives only while a turn runs; a turn the daemon did not see
//     begin (it started before this process) gets no spans.
package traces

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"lathe/journal"
	"lathe/journal/events"
)

// Attribute keys of Lathe's own.
const (
	TurnIDKey    = attribute.Key("lathe.turn.id")
	AcceptSeqKey = attribute.Key("lathe.accept_seq")
	OutcomeKey   = attribute.Key("lathe.outcome")
	MCPServerKey = attribute.Key("lathe.mcp.server")
	LaneKey      = attribute.Key("lathe.lane")
	// AttemptSetKey names a Ways set on its Keep's spans.
	AttemptSetKey = attribute.Key("lathe.attempt_set.id")
	// FirstTokenKey is a chat span's time to first token, in seconds (the
	// GenAI conventions name the metric gen_ai.server.time_to_first_token
	// but no span attribute).
	FirstTokenKey = attribute.Key("lathe.time_to_first_token")
)

// ToolErrorType is an errored execute_tool span's error.type.
const ToolErrorType = "tool_error"

// Agent is what the fold knows of a configured Agent.
type Agent struct {
	// Name is its configured name (gen_ai.agent.name); empty: none.
	Name string
	// Provider is its provider's kind (gen_ai.provider.name).
	Provider string
	// BaseURL is the API root its inferences call: the host and port of
	// its chat spans (server.address, server.port).
	BaseURL string
}

// Options configure the fold.
type Options struct {
	// Agents are the configured Agents by ID.
	Agents map[string]Agent
	// Content puts prompts, completions and tool calls' arguments and
	// results on the spans (content.go); off by default.
	Content bool
	// Secrets are the daemon's own secrets, never put on a span.
	Secrets []string
}

// Traces folds the commit feed into spans of one tracer.
type Traces struct {
	tracer  trace.Tracer
	agents  map[string]agent // by ID; an Agent the configuration does not name has no attributes
	content *redactor        // nil: no content on spans

	mu        sync.Mutex
	runs      map[string]*run       // run key → its running turn (or lane)
	approvals map[string]pending    // approval ID → the tool span it holds up
	envs      map[string]trace.Span // Session → its environment change
	sets      map[string]string     // Ways set → its Session, until it settles
	keeps     map[string]*keep      // Ways set → its Keep, until it settles
	outside   map[string]*open      // a Chat's turn, an Automation run and its nodes (outside.go)
}

// keep is a Ways set's Keep: its span and the span of its current phase.
type keep struct {
	root, phase trace.Span
	ctx         context.Context
}

// keepPhases names the span of the work that follows each Keep phase.
var keepPhases = map[string]string{
	events.KeepApplying:           "ways.keep.apply",
	events.KeepApplied:            "ways.keep.transcript",
	events.KeepTranscriptRecorded: "ways.keep.settle",
}

type pending struct {
	span trace.Span
	at   time.Time
}

// run is one running turn (or lane) and its open spans.
type run struct {
	session, agent, model string
	root                  trace.Span
	ctx                   context.Context
	workers               map[string]*worker // a lattice turn's Workers
	ready                 map[string]time.Time
	chat                  map[string]trace.Span // agent → inference awaiting its usage
	tools                 map[string]trace.Span // agent/call/occurrence → open tool call
	lastTool              trace.Span
}

type worker struct {
	span trace.Span
	ctx  context.Context
}

// agent is a configured Agent's attributes: its invoke_agent span's and its
// chat spans'.
type agent struct {
	name   string
	invoke []attribute.KeyValue // gen_ai.agent.name, gen_ai.provider.name
	chat   []attribute.KeyValue // gen_ai.provider.name, server.address, server.port
}

// New folds into spans of tracer.
func New(tracer trace.Tracer, o Options) *Traces {
	var content *redactor
	if o.Content {
		content = newRedactor(o.Secrets)
	}
	agents := make(map[string]agent, len(o.Agents))
	for id, a := range o.Agents {
		agents[id] = newAgent(a)
	}
	return &Traces{tracer: tracer, agents: agents, content: content, runs: map[string]*run{}, approvals: map[string]pending{},
		envs: map[string]trace.Span{}, sets: map[string]string{}, keeps: map[string]*keep{}, outside: map[string]*open{}}
}

// Observe folds one committed batch, in seq order.
func (t *Traces) Observe(batch []journal.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range batch {
		t.fold(r)
	}
}

func (t *Traces) fold(r journal.Record) {
	if t.foldOutside(r) {
		return
	}
	p := r.Payload
	key := r.AggregateID + "/"
	if l, ok := p.(events.LaneOf); ok {
		p, key = l.TurnPayload(), key+"lane/"+l.LaneRef().Run
		if st, ok := p.(events.TurnStarted); ok {
			session, _, _ := strings.Cut(l.LaneRef().Run, ":")
			t.begin(key, session, st.Agent, r, attribute.Int(string(LaneKey), l.LaneRef().Index))
		}
	} else if te, ok := p.(events.TurnEvent); ok {
		key += te.Turn()
	}
	switch e := p.(type) {
	case events.TurnAccepted:
		attrs := []attribute.KeyValue{TurnIDKey.String(e.TurnID), AcceptSeqKey.Int64(int64(r.Seq))}
		if t.content != nil {
			attrs = append(attrs, t.content.input(e.Input))
		}
		t.begin(key, r.AggregateID, e.AgentID, r, attrs...)
		return
	case events.LaneEnded:
		t.end(r.AggregateID+"/lane/"+e.Run, r.At, e.State, e.Error)
		return
	case events.ApprovalRequested:
		t.approvalAsked(r, e)
		return
	case events.EnvironmentChanging:
		_, span := t.tracer.Start(context.Background(), "sandbox.prepare", trace.WithTimestamp(r.At), trace.WithAttributes(
			semconv.GenAIConversationIDKey.String(r.AggregateID), attribute.Int64("lathe.environment.generation", int64(e.Generation))))
		t.envs[r.AggregateID] = span
		return
	case events.EnvironmentReady:
		t.endEnv(r.AggregateID, r.At, "")
		return
	case events.EnvironmentFailed:
		t.endEnv(r.AggregateID, r.At, e.Evidence.Error)
		return
	case events.AttemptSetStarted:
		t.sets[r.AggregateID] = e.Session
		return
	case events.KeepPhase:
		t.keepPhase(r, e)
		return
	case events.AttemptSetSettled:
		if k, ok := t.keeps[r.AggregateID]; ok {
			k.phase.End(trace.WithTimestamp(r.At))
			k.root.End(trace.WithTimestamp(r.At))
		}
		delete(t.keeps, r.AggregateID)
		delete(t.sets, r.AggregateID)
		return
	case events.ApprovalResolved:
		if pd, ok := t.approvals[r.AggregateID]; ok {
			delete(t.approvals, r.AggregateID)
			pd.span.AddEvent("approval.resolved", trace.WithTimestamp(r.At), trace.WithAttributes(
				attribute.String("lathe.approval.decision", e.Decision), attribute.Float64("lathe.approval.wait_seconds", r.At.Sub(pd.at).Seconds())))
		}
		return
	}
	ru := t.runs[key]
	if ru == nil {
		return
	}
	switch e := p.(type) {
	case events.TurnStarted:
		ru.model = e.Model
		ru.root.SetAttributes(semconv.GenAIRequestModelKey.String(e.Model))
		ru.ready[e.Agent] = r.At
	case events.TurnOutput:
		t.chat(ru, r.At, e)
	case events.TurnUsage:
		if s, ok := ru.chat[e.Agent]; ok {
			delete(ru.chat, e.Agent)
			s.SetAttributes(semconv.GenAIResponseModelKey.String(e.Model),
				semconv.GenAIUsageInputTokensKey.Int(e.InputTokens), semconv.GenAIUsageOutputTokensKey.Int(e.OutputTokens))
			s.End(trace.WithTimestamp(ru.ready[e.Agent]))
		}
	case events.ToolCallStarted:
		t.toolStarted(ru, r.At, e)
	case events.ToolCallFinished:
		k := toolKey(e.Agent, e.CallID, e.Occurrence)
		if s, ok := ru.tools[k]; ok {
			delete(ru.tools, k)
			t.toolEnd(s, r.At, e.IsError, e.Result)
		}
		ru.ready[e.Agent] = r.At
	case events.HookRan:
		attrs := hookAttrs(e)
		if s, ok := ru.tools[toolKey(e.Agent, e.CallID, e.Occurrence)]; ok && e.CallID != "" {
			s.AddEvent("hook", trace.WithTimestamp(r.At), attrs)
		} else {
			ru.root.AddEvent("hook", trace.WithTimestamp(r.At), attrs)
		}
	case events.TurnDone:
		t.end(key, r.At, "done", "")
	case events.TurnCancelled:
		t.end(key, r.At, "cancelled", "")
	case events.TurnFailed:
		t.end(key, r.At, "error", e.Error)
	}
}

// begin opens a turn's (or lane's) invoke_agent span.
func (t *Traces) begin(key, session, agent string, r journal.Record, attrs ...attribute.KeyValue) {
	o := t.invokeAgent(context.Background(), session, agent, r.At, attrs...)
	t.runs[key] = &run{session: session, agent: agent, root: o.span, ctx: o.ctx, workers: map[string]*worker{},
		ready: map[string]time.Time{agent: r.At}, chat: map[string]trace.Span{}, tools: map[string]trace.Span{}}
}

// parent is the span an Agent's work hangs under: the turn's, or in a
// lattice turn the Worker's own invoke_agent span.
func (t *Traces) parent(ru *run, agent string, at time.Time) context.Context {
	if agent == "" || agent == ru.agent {
		return ru.ctx
	}
	w := ru.workers[agent]
	if w == nil {
		o := t.invokeAgent(ru.ctx, ru.session, agent, at)
		w = &worker{span: o.span, ctx: o.ctx}
		ru.workers[agent] = w
		if _, ok := ru.ready[agent]; !ok {
			ru.ready[agent] = at
		}
	}
	return w.ctx
}

// chat records one inference: from when it could start to its output.
func (t *Traces) chat(ru *run, at time.Time, e events.TurnOutput) {
	if s, ok := ru.chat[e.Agent]; ok { // its usage never came
		s.End(trace.WithTimestamp(ru.ready[e.Agent]))
	}
	start, ok := ru.ready[e.Agent]
	if !ok {
		start = at
	}
	reason := events.FinishReason(e.Partial, len(e.ToolCalls))
	_, s := t.tracer.Start(t.parent(ru, e.Agent, start), "chat "+ru.model, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			semconv.GenAIOperationNameKey.String("chat"), semconv.GenAIConversationIDKey.String(ru.session),
			semconv.GenAIRequestModelKey.String(ru.model), semconv.GenAIResponseFinishReasonsKey.StringSlice([]string{reason}),
			attribute.Int("lathe.step", e.Step)), trace.WithAttributes(t.agents[e.Agent].chat...))
	if e.Partial {
		s.SetStatus(codes.Error, "the inference did not finish")
	}
	if t.content != nil {
		s.SetAttributes(t.content.output(e, reason))
	}
	if e.FirstTokenMS > 0 {
		ttft := time.Duration(e.FirstTokenMS * float64(time.Millisecond))
		s.SetAttributes(FirstTokenKey.Float64(ttft.Seconds()))
		s.AddEvent("gen_ai.first_token", trace.WithTimestamp(start.Add(ttft)))
	}
	// The span ends when its usage arrives (the next event), at the
	// output's time.
	ru.chat[e.Agent], ru.ready[e.Agent] = s, at
}

func (t *Traces) toolStarted(ru *run, at time.Time, e events.ToolCallStarted) {
	attrs := toolAttrs(ru.session, e.Name, e.CallID)
	if t.content != nil {
		attrs = append(attrs, ToolArgumentsKey.String(t.content.scrub(jsonText(e.Arguments))))
	}
	_, s := t.tracer.Start(t.parent(ru, e.Agent, at), "execute_tool "+e.Name, trace.WithTimestamp(at), trace.WithAttributes(attrs...))
	ru.tools[toolKey(e.Agent, e.CallID, e.Occurrence)] = s
	ru.lastTool = s
}

// approvalAsked marks the wait of a call that needs approval on its tool
// span: the turn's latest open call.
func (t *Traces) approvalAsked(r journal.Record, e events.ApprovalRequested) {
	ru := t.runs[e.Session+"/"+e.TurnID]
	if e.Session == "" || ru == nil || ru.lastTool == nil {
		return
	}
	ru.lastTool.AddEvent("approval.requested", trace.WithTimestamp(r.At), trace.WithAttributes(
		attribute.String("lathe.approval.id", r.AggregateID), MCPServerKey.String(e.Server)))
	t.approvals[r.AggregateID] = pending{span: ru.lastTool, at: r.At}
}

// end closes a run's spans: what is still open, its Workers', its own.
func (t *Traces) end(key string, at time.Time, outcome, msg string) {
	ru := t.runs[key]
	if ru == nil {
		return
	}
	delete(t.runs, key)
	end := trace.WithTimestamp(at)
	for _, s := range ru.chat {
		s.End(end)
	}
	for _, s := range ru.tools {
		s.End(end)
	}
	for _, w := range ru.workers {
		w.span.End(end)
	}
	ru.root.SetAttributes(OutcomeKey.String(outcome))
	if outcome == "error" || outcome == "failed" {
		ru.root.SetStatus(codes.Error, msg)
	}
	ru.root.End(end)
}

// keepPhase records a Keep's phase: the ways.keep span opens at its first
// (or, after a restart, at the first this process sees), and each phase
// opens the span of the work that follows it, to the next phase or the
// set's settling.
func (t *Traces) keepPhase(r journal.Record, e events.KeepPhase) {
	at := trace.WithTimestamp(r.At)
	k := t.keeps[r.AggregateID]
	if k == nil {
		attrs := []attribute.KeyValue{AttemptSetKey.String(r.AggregateID), LaneKey.Int(e.Index)}
		if session, ok := t.sets[r.AggregateID]; ok {
			attrs = append(attrs, semconv.GenAIConversationIDKey.String(session))
		}
		k = &keep{}
		k.ctx, k.root = t.tracer.Start(context.Background(), "ways.keep", at, trace.WithAttributes(attrs...))
		t.keeps[r.AggregateID] = k
	} else {
		k.phase.End(at)
	}
	name, ok := keepPhases[e.Phase]
	if !ok {
		name = "ways.keep." + e.Phase
	}
	_, k.phase = t.tracer.Start(k.ctx, name, at, trace.WithAttributes(attribute.String("lathe.keep.phase", e.Phase)))
}

// endEnv ends a Session's sandbox.prepare span: Ready, or failed with msg.
func (t *Traces) endEnv(session string, at time.Time, msg string) {
	span, ok := t.envs[session]
	if !ok {
		return
	}
	delete(t.envs, session)
	if msg != "" {
		span.SetStatus(codes.Error, msg)
	}
	span.End(trace.WithTimestamp(at))
}

func toolKey(agent, callID string, occurrence int) string {
	return agent + "\x00" + callID + "\x00" + strconv.Itoa(occurrence)
}

// toolAttrs are an execute_tool span's attributes: its tool, its call, and
// an MCP tool's server.
func toolAttrs(conversation, name, callID string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameKey.String("execute_tool"), semconv.GenAIConversationIDKey.String(conversation),
		semconv.GenAIToolNameKey.String(name), semconv.GenAIToolCallIDKey.String(callID), semconv.GenAIToolTypeKey.String("function")}
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		server, _, _ := strings.Cut(rest, "__")
		attrs = append(attrs, MCPServerKey.String(server))
	}
	return attrs
}

// hookAttrs are a hook run's span event's attributes.
func hookAttrs(e events.HookRan) trace.SpanStartEventOption {
	return trace.WithAttributes(attribute.String("lathe.hook.name", e.Hook), attribute.String("lathe.hook.event", e.Event),
		attribute.String("lathe.hook.decision", e.Decision), attribute.String("lathe.hook.reason", e.Reason))
}

// newAgent resolves a's attributes once.
func newAgent(a Agent) agent {
	provider := semconv.GenAIProviderNameKey.String(a.Provider)
	out := agent{name: a.Name, invoke: []attribute.KeyValue{provider}, chat: []attribute.KeyValue{provider}}
	if a.Name != "" {
		out.invoke = append(out.invoke, semconv.GenAIAgentNameKey.String(a.Name))
	}
	if host, port, ok := server(a.BaseURL); ok {
		out.chat = append(out.chat, semconv.ServerAddress(host), semconv.ServerPort(port))
	}
	return out
}

// server is the host and port that base (an http or https URL) names, the
// port its scheme's default when it names none.
func server(base string) (host string, port int, ok bool) {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return "", 0, false
	}
	if p := u.Port(); p != "" {
		port, err = strconv.Atoi(p)
		return u.Hostname(), port, err == nil
	}
	switch u.Scheme {
	case "http":
		return u.Hostname(), 80, true
	case "https":
		return u.Hostname(), 443, true
	}
	return "", 0, false
}
