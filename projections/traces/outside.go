package traces

// The spans of the Agents that run outside a Session: a Chat's turn and an
// Automation run. A Chat turn is a trace whose invoke_agent span runs from
// chat-turn-started to chat-turn-ended, with an execute_tool span per
// chat-tool-called (its start is its commit less its duration) and a chat
// span per inference the turn's end lists (events.Inference). An
// Automation run is a trace: an automation.run span from its start to its
// end, a span per node under it, and under an agent node's (renamed
// invoke_agent once it shows itself an agent's: a tool call, a hook run or
// inferences) its execute_tool and chat spans. The journal seq of the
// chat-turn-started or automation-run-started is lathe.accept_seq, as a
// Session turn's accept is. An Agent execute (POST /api/agents/{id}/execute)
// is a trace too: invoke_agent from its effect intent to agent-executed,
// its tool calls and inferences (kept on agent-executed) under it. So is
// an inbound A2A task: invoke_agent from a2a-task-received to
// a2a-task-ended, in the task's A2A context, its inferences under it.

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"lathe/journal"
	"lathe/journal/events"
)

// Attribute keys of the spans outside Sessions.
const (
	ScopeKey        = attribute.Key("lathe.scope")
	AutomationIDKey = attribute.Key("lathe.automation.id")
	NodeKey         = attribute.Key("lathe.automation.node")
	A2AReceiverKey  = attribute.Key("lathe.a2a.receiver")
)

// open is a span and its context, for its children.
type open struct {
	span trace.Span
	ctx  context.Context
	// conversation is gen_ai.conversation.id of its children: the Chat,
	// or the Automation run.
	conversation string
	// agent, model: an agent node's Agent once known, a Chat turn's.
	agent, model string
	tools        map[string]trace.Span // an agent node's open tool calls
}

// foldOutside folds r when it is a Chat's or an Automation run's, and
// reports whether it was.
func (t *Traces) foldOutside(r journal.Record) bool {
	switch e := r.Payload.(type) {
	case events.ChatTurnStarted:
		attrs := []attribute.KeyValue{TurnIDKey.String(e.TurnID), AcceptSeqKey.Int64(int64(r.Seq)), ScopeKey.String("chat"),
			semconv.GenAIRequestModelKey.String(e.Model)}
		if t.content != nil {
			attrs = append(attrs, t.content.input(e.Content))
		}
		o := t.invokeAgent(context.Background(), r.AggregateID, e.Agent, r.At, attrs...)
		o.model = e.Model
		t.outside[r.AggregateID+"/"+e.TurnID] = o
	case events.ChatToolCalled:
		if o := t.outside[r.AggregateID+"/"+e.TurnID]; o != nil {
			s := t.toolSpan(o, r.At.Add(-time.Duration(e.DurationMS)*time.Millisecond), e.Name, e.CallID, e.Arguments)
			t.toolEnd(s, r.At, e.IsError, e.Result)
		}
	case events.ChatHookRan:
		if o := t.outside[r.AggregateID+"/"+e.TurnID]; o != nil {
			o.span.AddEvent("hook", trace.WithTimestamp(r.At), hookAttrs(events.HookRan(e.HookRun)))
		}
	case events.ChatTurnEnded:
		key := r.AggregateID + "/" + e.TurnID
		if o := t.outside[key]; o != nil {
			delete(t.outside, key)
			t.inferences(o, e.Inferences)
			t.endOpen(o, r.At, e.Outcome, e.Error, e.Outcome == events.ChatError)
		}
	case events.RunStarted:
		ctx, span := t.tracer.Start(context.Background(), "automation.run "+e.AutomationID, trace.WithTimestamp(r.At), trace.WithAttributes(
			AutomationIDKey.String(e.AutomationID), AcceptSeqKey.Int64(int64(r.Seq)), ScopeKey.String("automation"),
			semconv.GenAIConversationIDKey.String(r.AggregateID), attribute.String("lathe.automation.trigger", e.Trigger.Kind)))
		t.outside[r.AggregateID] = &open{span: span, ctx: ctx, conversation: r.AggregateID}
	case events.NodeStarted:
		t.node(r.AggregateID, e.Node, r.At)
	case events.NodeToolCall:
		o := t.agentNode(r.AggregateID, e.Node, e.Agent, r.At)
		if o == nil {
			return true
		}
		k := toolKey(e.Agent, e.CallID, e.Occurrence)
		if e.Phase == "start" {
			o.tools[k] = t.toolSpan(o, r.At, e.Name, e.CallID, e.Arguments)
		} else if s, ok := o.tools[k]; ok {
			delete(o.tools, k)
			t.toolEnd(s, r.At, e.IsError, e.Result)
		}
	case events.NodeHookRan:
		if o := t.agentNode(r.AggregateID, e.Node, e.Agent, r.At); o != nil {
			o.span.AddEvent("hook", trace.WithTimestamp(r.At), hookAttrs(events.HookRan(e.HookRun)))
		}
	case events.NodeFinished:
		t.nodeFinished(r, e)
	case events.RunFinished:
		if o := t.outside[r.AggregateID]; o != nil {
			for k, n := range t.outside { // nodes the run left open
				if n.conversation == r.AggregateID && n != o {
					delete(t.outside, k)
					t.endOpen(n, r.At, e.State, "", false)
				}
			}
			delete(t.outside, r.AggregateID)
			t.endOpen(o, r.At, e.State, e.Error, e.State == events.StateFailed)
		}
	case events.EffectIntended:
		if e.Kind != events.EffectAgentExecute {
			return false
		}
		t.outside[executeKey+e.Intent] = t.invokeAgent(context.Background(), e.Intent, e.Target, r.At,
			TurnIDKey.String(e.Intent), AcceptSeqKey.Int64(int64(r.Seq)), ScopeKey.String("agent"))
	case events.AgentHookRan:
		if o := t.outside[executeKey+e.TurnID]; o != nil {
			o.span.AddEvent("hook", trace.WithTimestamp(r.At), hookAttrs(events.HookRan(e.HookRun)))
		}
	case events.AgentExecuted:
		t.executed(r, e)
	case events.A2ATaskReceived:
		attrs := []attribute.KeyValue{TurnIDKey.String(r.AggregateID), AcceptSeqKey.Int64(int64(r.Seq)), ScopeKey.String("a2a"),
			A2AReceiverKey.String(e.ReceiverID)}
		if t.content != nil {
			attrs = append(attrs, t.content.input(e.Text))
		}
		t.outside[a2aKey+r.AggregateID] = t.invokeAgent(context.Background(), e.ContextID, e.AgentID, r.At, attrs...)
	case events.A2ATaskEnded:
		if o := t.outside[a2aKey+r.AggregateID]; o != nil {
			delete(t.outside, a2aKey+r.AggregateID)
			t.inferences(o, e.Inferences)
			t.endOpen(o, r.At, e.State, e.Error, e.State != "completed")
		}
	case events.EffectSettled:
		// An execute a crash interrupted ends with its settlement alone.
		if o := t.outside[executeKey+e.Intent]; o != nil {
			delete(t.outside, executeKey+e.Intent)
			t.endOpen(o, r.At, e.Outcome, e.Error, true)
		}
		return false
	default:
		return false
	}
	return true
}

// a2aKey prefixes an A2A task's ID in Traces.outside.
const a2aKey = "a2a-task/"

// executeKey prefixes an Agent execute's effect intent in Traces.outside.
const executeKey = "agent-execute/"

// executed ends an Agent execute's invoke_agent span with its tool calls
// and inferences under it.
func (t *Traces) executed(r journal.Record, e events.AgentExecuted) {
	o := t.outside[executeKey+e.Intent]
	if o == nil {
		return
	}
	delete(t.outside, executeKey+e.Intent)
	o.model = e.Model
	o.span.SetAttributes(semconv.GenAIRequestModelKey.String(e.Model))
	if t.content != nil {
		o.span.SetAttributes(t.content.input(e.Input))
	}
	for _, c := range e.Tools {
		t.toolEnd(t.toolSpan(o, c.At, c.Name, c.CallID, events.JSON{}), c.At.Add(time.Duration(c.DurationMS)*time.Millisecond), c.IsError, events.Text{})
	}
	t.inferences(o, e.Inferences)
	outcome := "done"
	if e.Error != "" {
		outcome = "error"
	}
	t.endOpen(o, r.At, outcome, e.Error, e.Error != "")
}

// invokeAgent opens an invoke_agent span of agent under ctx at at, in
// conversation.
func (t *Traces) invokeAgent(ctx context.Context, conversation, agent string, at time.Time, attrs ...attribute.KeyValue) *open {
	a := t.agents[agent]
	attrs = append(attrs, semconv.GenAIOperationNameKey.String("invoke_agent"), semconv.GenAIConversationIDKey.String(conversation),
		semconv.GenAIAgentIDKey.String(agent))
	ctx, span := t.tracer.Start(ctx, invokeAgentName(a, agent), trace.WithTimestamp(at), trace.WithAttributes(attrs...),
		trace.WithAttributes(a.invoke...))
	return &open{span: span, ctx: ctx, conversation: conversation, agent: agent, tools: map[string]trace.Span{}}
}

// invokeAgentName names an invoke_agent span for its Agent's configured
// name, as the conventions ask, or its ID when it has none.
func invokeAgentName(a agent, id string) string {
	if a.name != "" {
		return "invoke_agent " + a.name
	}
	return "invoke_agent " + id
}

// node opens the span of node of run at at.
func (t *Traces) node(run, node string, at time.Time) *open {
	root := t.outside[run]
	if root == nil {
		return nil
	}
	ctx, span := t.tracer.Start(root.ctx, "automation.node "+node, trace.WithTimestamp(at), trace.WithAttributes(
		NodeKey.String(node), semconv.GenAIConversationIDKey.String(run)))
	o := &open{span: span, ctx: ctx, conversation: run, tools: map[string]trace.Span{}}
	t.outside[run+"\x00"+node] = o
	return o
}

// agentNode is node's span, made an agent's (invoke_agent) when it was not
// yet.
func (t *Traces) agentNode(run, node, agent string, at time.Time) *open {
	o := t.outside[run+"\x00"+node]
	if o == nil {
		return nil
	}
	if o.agent == "" && agent != "" {
		o.agent = agent
		a := t.agents[agent]
		o.span.SetName(invokeAgentName(a, agent))
		o.span.SetAttributes(semconv.GenAIOperationNameKey.String("invoke_agent"), semconv.GenAIAgentIDKey.String(agent))
		o.span.SetAttributes(a.invoke...)
	}
	return o
}

// nodeFinished ends a node's span; a node that started and ended in one
// commit (an instant one) gets a span of no length.
func (t *Traces) nodeFinished(r journal.Record, e events.NodeFinished) {
	key := r.AggregateID + "\x00" + e.Node
	o := t.outside[key]
	if o == nil {
		if o = t.node(r.AggregateID, e.Node, r.At); o == nil {
			return
		}
	}
	delete(t.outside, key)
	if len(e.Inferences) > 0 {
		t.agentNode(r.AggregateID, e.Node, e.Inferences[0].Agent, r.At)
		t.inferences(o, e.Inferences)
	}
	t.endOpen(o, r.At, e.State, e.Error, e.State == events.StateFailed)
}

// toolSpan opens an execute_tool span under o at at.
func (t *Traces) toolSpan(o *open, at time.Time, name, callID string, args events.JSON) trace.Span {
	attrs := toolAttrs(o.conversation, name, callID)
	if t.content != nil {
		attrs = append(attrs, ToolArgumentsKey.String(t.content.scrub(jsonText(args))))
	}
	_, s := t.tracer.Start(o.ctx, "execute_tool "+name, trace.WithTimestamp(at), trace.WithAttributes(attrs...))
	return s
}

// toolEnd ends a tool call's span at at.
func (t *Traces) toolEnd(s trace.Span, at time.Time, isError bool, result events.Text) {
	if isError {
		s.SetStatus(codes.Error, "the tool call failed")
		s.SetAttributes(semconv.ErrorTypeKey.String(ToolErrorType))
	}
	if t.content != nil {
		s.SetAttributes(ToolResultKey.String(t.content.scrub(text(result))))
	}
	s.End(trace.WithTimestamp(at))
}

// inferences puts a chat span per inference under o.
func (t *Traces) inferences(o *open, list []events.Inference) {
	for _, in := range list {
		model := in.Model
		if model == "" {
			model = o.model
		}
		_, s := t.tracer.Start(o.ctx, "chat "+model, trace.WithTimestamp(in.At), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			semconv.GenAIOperationNameKey.String("chat"), semconv.GenAIConversationIDKey.String(o.conversation),
			semconv.GenAIRequestModelKey.String(model), semconv.GenAIResponseModelKey.String(model),
			semconv.GenAIResponseFinishReasonsKey.StringSlice([]string{in.FinishReason}),
			semconv.GenAIUsageInputTokensKey.Int(in.InputTokens), semconv.GenAIUsageOutputTokensKey.Int(in.OutputTokens), attribute.Int("lathe.step", in.Step)),
			trace.WithAttributes(t.agents[in.Agent].chat...))
		if in.FinishReason == "error" {
			s.SetStatus(codes.Error, "the inference did not finish")
		}
		if in.FirstTokenMS > 0 {
			ttft := time.Duration(in.FirstTokenMS * float64(time.Millisecond))
			s.SetAttributes(FirstTokenKey.Float64(ttft.Seconds()))
			s.AddEvent("gen_ai.first_token", trace.WithTimestamp(in.At.Add(ttft)))
		}
		s.End(trace.WithTimestamp(in.At.Add(time.Duration(in.DurationMS * float64(time.Millisecond)))))
	}
}

// endOpen ends o, and its tool calls still open, at at with outcome.
func (t *Traces) endOpen(o *open, at time.Time, outcome, msg string, failed bool) {
	end := trace.WithTimestamp(at)
	for _, s := range o.tools {
		s.End(end)
	}
	o.span.SetAttributes(OutcomeKey.String(outcome))
	if failed {
		o.span.SetStatus(codes.Error, msg)
	}
	o.span.End(end)
}
