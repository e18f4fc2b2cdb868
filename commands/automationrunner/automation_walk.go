package automationrunner

// The executor: one walk per run, node by node, appending what happened.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"lathe/commands/agentrun"
	"lathe/commands/automations"
	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/mcp"
)

// walk is one executor's view of its run: every node's state and resolved
// output by run key.
type walk struct {
	s     *AutomationEngine
	run   projections.AutomationRun
	nodes map[string]*walkNode
	// pending holds the records of instant nodes not appended yet, so that
	// a chain of them shares one append instead of waiting out one commit
	// each (and the journal's group commit shares that one with other
	// appends). It is appended before any node with an effect starts, when
	// it reaches maxRunAppend, and before the run waits or ends.
	pending []journal.Event
	// err is the first append the journal refused: the walk stops, and the
	// run fails with it (or, when the daemon is stopping, stays for the
	// next start).
	err error
	// depth is how many subgraphs the walk is inside.
	depth int
}

// Run limits.
const (
	// maxRunAppend bounds the events of one append of a run, well under the
	// journal's per-append limit (journal.Options.MaxBatch, 4096 unless
	// configured).
	maxRunAppend = 1024
	// MaxMapItems bounds the items one map node runs its body for.
	MaxMapItems = 10_000
	// MaxSubgraphDepth bounds how deep subgraphs nest in a run; saves refuse
	// a subgraph cycle, and this stops one a journal holds anyway.
	MaxSubgraphDepth = 32
)

// later queues events of instant nodes behind the walk.
func (w *walk) later(ctx context.Context, evs ...journal.Event) error {
	w.pending = append(w.pending, evs...)
	if len(w.pending) >= maxRunAppend {
		return w.flush(ctx)
	}
	return w.err
}

// flush appends the queued events, at most maxRunAppend per append; it
// survives the executor's stop, so what happened is never lost.
func (w *walk) flush(ctx context.Context) error {
	for w.err == nil && len(w.pending) > 0 {
		n := min(len(w.pending), maxRunAppend)
		if err := w.s.Append(context.WithoutCancel(ctx), w.pending[:n]); err != nil {
			w.err = err
			break
		}
		w.pending = w.pending[n:]
	}
	if len(w.pending) == 0 {
		w.pending = nil
	}
	return w.err
}

type walkNode struct {
	state, output, branch string
}

// nodeOutcome is how a node (or a graph) ended in this walk.
type nodeOutcome int

const (
	outDone nodeOutcome = iota
	outWaiting
	outFailed
	outStopped // the daemon is stopping (or the run was cancelled)
)

// execute walks the run until it ends, waits, or the executor is stopped.
func (s *AutomationEngine) execute(ctx context.Context, runID string) {
	for {
		run, ok := s.read.AutomationRun(runID)
		if !ok || run.EndedAt != nil {
			s.dropRunner(runID)
			return
		}
		w := &walk{s: s, run: run, nodes: map[string]*walkNode{}}
		for key, n := range run.Nodes {
			out, err := n.Output.Resolve(s.Opts.Blobs)
			if err != nil {
				s.Log.Error("automation run: unreadable output", "run", runID, "node", key, "err", err)
			}
			w.nodes[key] = &walkNode{state: n.State, output: out.Inline, branch: n.Branch}
		}
		trigger, err := run.Input.Resolve(s.Opts.Blobs)
		if err != nil {
			s.Log.Error("automation run: unreadable input", "run", runID, "err", err)
		}
		out, outcome, errText := w.graph(ctx, "", run.Graph, trigger.Inline, nil)
		if w.flush(ctx) != nil {
			outcome = outStopped
		}
		// A run that ended records its end outside the engine's lock, so
		// that the ends of many runs share the journal's commits.
		if ctx.Err() == nil && w.err == nil && (outcome == outDone || outcome == outFailed) {
			state, output := events.StateSucceeded, out
			if outcome == outFailed {
				state, output = events.StateFailed, ""
			}
			if w.err = s.recordEnd(ctx, runID, run.AutomationID, state, output, errText); w.err == nil {
				s.mu.Lock()
				s.ended(runID)
				delete(s.runs, runID)
				s.mu.Unlock()
				return
			}
		}
		e := s
		e.mu.Lock()
		r := e.runs[runID]
		switch {
		case ctx.Err() != nil && r != nil && r.cancelled:
			err = s.finishRun(ctx, runID, run.AutomationID, events.StateCancelled, "", "the Automation was deleted")
		case ctx.Err() != nil || errors.Is(w.err, core.ErrUnavailable):
			// Stopping: the run stays as recorded, for the next start.
		case w.err != nil:
			// The journal refused a record of the run: the run fails with
			// the reason rather than stay running with nothing to run it.
			s.Log.Error("automation run: the journal refused its record", "run", runID, "err", w.err)
			err = s.finishRun(ctx, runID, run.AutomationID, events.StateFailed, "", "recording the run failed: "+w.err.Error())
		case outcome == outStopped:
			// Not reached: a walk stops only with its context or an append
			// error. Leave the run for the next start.
		case outcome == outWaiting && r != nil && r.dirty:
			r.dirty = false
			e.mu.Unlock()
			continue
		case outcome == outWaiting:
			err = s.Append(ctx, []journal.Event{events.New(runID, events.RunWaiting{})})
		case outcome == outFailed:
			err = s.finishRun(ctx, runID, run.AutomationID, events.StateFailed, "", errText)
		default:
			err = s.finishRun(ctx, runID, run.AutomationID, events.StateSucceeded, out, "")
		}
		delete(e.runs, runID)
		e.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			s.Log.Error("automation run: record its end", "run", runID, "err", err)
		}
		return
	}
}

func (s *AutomationEngine) dropRunner(runID string) {
	s.mu.Lock()
	delete(s.runs, runID)
	s.mu.Unlock()
}

// graph walks one graph (the run's, or a subgraph's under prefix) in
// topological order. It answers the output of its last succeeded sink, or
// how it stopped.
func (w *walk) graph(ctx context.Context, prefix string, g events.Automation, trigger string, item *string) (string, nodeOutcome, string) {
	bodies := map[string]bool{}
	byID := map[string]*events.Node{}
	for i := range g.Nodes {
		byID[g.Nodes[i].ID] = &g.Nodes[i]
		if g.Nodes[i].Kind == events.NodeMap {
			bodies[g.Nodes[i].BodyNode] = true
		}
	}
	incoming := map[string][]events.Edge{}
	hasOut := map[string]bool{}
	for _, e := range g.Edges {
		incoming[e.To] = append(incoming[e.To], e)
		hasOut[e.From] = true
	}
	order := automations.TopoOrder(g.Nodes, g.Edges)
	waiting := false
	for _, id := range order {
		if bodies[id] {
			continue
		}
		if ctx.Err() != nil {
			return "", outStopped, ""
		}
		key := prefix + id
		switch w.state(key) {
		case events.StateSucceeded, events.StateSkipped:
			continue
		case events.StateFailed:
			return "", outFailed, fmt.Sprintf("node %q failed: %s", key, w.nodes[key].output)
		case events.StateWaiting:
			waiting = true
			continue
		}
		ready, active := true, len(incoming[id]) == 0
		for _, e := range incoming[id] {
			p := w.nodes[prefix+e.From]
			if p == nil || (p.state != events.StateSucceeded && p.state != events.StateSkipped) {
				ready = false
				break
			}
			if p.state == events.StateSucceeded && edgeActive(e, p.branch, byID[e.From]) {
				active = true
			}
		}
		if !ready {
			continue
		}
		if !active {
			if err := w.finish(ctx, key, events.NodeFinished{State: events.StateSkipped}); err != nil {
				return "", outStopped, ""
			}
			continue
		}
		switch outcome, errText := w.node(ctx, prefix, key, g, byID[id], trigger, item); outcome {
		case outFailed:
			return "", outFailed, errText
		case outStopped:
			return "", outStopped, ""
		case outWaiting:
			waiting = true
		}
	}
	if waiting {
		return "", outWaiting, ""
	}
	out := ""
	for _, id := range order {
		if !bodies[id] && !hasOut[id] && w.state(prefix+id) == events.StateSucceeded {
			out = w.nodes[prefix+id].output
		}
	}
	return out, outDone, ""
}

func (w *walk) state(key string) string {
	if n := w.nodes[key]; n != nil {
		return n.state
	}
	return events.StatePending
}

// edgeActive reports whether edge e carries on from its source, which
// succeeded taking branch (a conditional's: a branch name, "default" when
// its default was taken, "" when nothing was).
func edgeActive(e events.Edge, branch string, from *events.Node) bool {
	if e.Branch == "" {
		return true
	}
	if branch == "default" && from != nil && from.Default != "" && e.Branch == from.Default {
		return true
	}
	return e.Branch == branch
}

// append records events of the run; it survives the executor's stop, so
// what happened is never lost.
func (w *walk) append(ctx context.Context, p ...events.Payload) error {
	w.pending = append(w.pending, w.events(p)...)
	return w.flush(ctx)
}

func (w *walk) events(p []events.Payload) []journal.Event {
	evs := make([]journal.Event, len(p))
	for i := range p {
		evs[i] = events.New(w.run.RunID, p[i])
	}
	return evs
}

// finish records a node's end and notes it for the walk.
func (w *walk) finish(ctx context.Context, key string, f events.NodeFinished) error {
	f.AutomationID, f.Node = w.run.AutomationID, key
	if err := w.later(ctx, w.events([]events.Payload{f})...); err != nil {
		return err
	}
	out := f.Output.Inline
	if f.State == events.StateFailed {
		out = f.Error
	}
	w.nodes[key] = &walkNode{state: f.State, output: out, branch: f.Branch}
	return nil
}

// node runs one node at key. Nodes whose work is instant and pure
// (conditional, text_input, a built-in tool) record their start and end
// together, committed behind the walk (later); a crash before that commit
// runs them again, with the same result. The others record their start
// first, durably, so a crash during their work runs them again.
func (w *walk) node(ctx context.Context, prefix, key string, g events.Automation, n *events.Node, trigger string, item *string) (nodeOutcome, string) {
	render := func(tpl string) string { return w.render(tpl, prefix, trigger, item) }
	started := events.NodeStarted{AutomationID: w.run.AutomationID, Node: key}
	instant := n.Kind == events.NodeConditional || n.Kind == events.NodeTextInput || (n.Kind == events.NodeTool && automations.BuiltinTools[n.ToolID] != nil)
	if !instant {
		if err := w.append(ctx, started); err != nil {
			return outStopped, ""
		}
		w.nodes[key] = &walkNode{state: events.StateRunning}
	}
	var f events.NodeFinished
	switch n.Kind {
	case events.NodeTextInput:
		v, ok := w.run.Inputs[n.ID]
		if !ok {
			v = n.DefaultValue
		}
		f = events.NodeFinished{State: events.StateSucceeded, Output: events.NewText(v)}
	case events.NodeConditional:
		in := render(n.Input)
		branch := ""
		for _, b := range n.Branches {
			if branchHolds(b, in) {
				branch = b.Name
				break
			}
		}
		if branch == "" && n.Default != "" {
			branch = "default"
		}
		f = events.NodeFinished{State: events.StateSucceeded, Output: events.NewText(in), Branch: branch}
	case events.NodeTool:
		out, err := w.tool(ctx, n.ToolID, render(n.Input))
		f = events.NodeFinished{State: events.StateSucceeded, Output: events.NewText(out)}
		if err != nil {
			f = events.NodeFinished{State: events.StateFailed, Error: err.Error()}
		}
	case events.NodeAgent:
		f = w.agent(ctx, key, n, render(n.Input))
	case events.NodeInterrupt:
		if err := w.append(ctx, events.NodeWaiting{Node: key, Prompt: events.NewText(render(n.Input)), Strategy: n.ResumeStrategy}); err != nil {
			return outStopped, ""
		}
		w.nodes[key] = &walkNode{state: events.StateWaiting}
		return outWaiting, ""
	case events.NodeSubgraph:
		child, ok := w.s.read.Automation(n.AutomationID)
		if !ok {
			f = events.NodeFinished{State: events.StateFailed, Error: fmt.Sprintf("subgraph Automation %q does not exist", n.AutomationID)}
			break
		}
		if w.depth >= MaxSubgraphDepth {
			f = events.NodeFinished{State: events.StateFailed, Error: fmt.Sprintf("subgraph %q: subgraphs nest deeper than %d levels (a subgraph cycle?)", n.AutomationID, MaxSubgraphDepth)}
			break
		}
		w.depth++
		out, outcome, errText := w.graph(ctx, key+".", child.Automation, render(n.Input), nil)
		w.depth--
		switch outcome {
		case outWaiting, outStopped:
			return outcome, ""
		case outFailed:
			f = events.NodeFinished{State: events.StateFailed, Error: fmt.Sprintf("subgraph %q: %s", n.AutomationID, errText)}
		default:
			f = events.NodeFinished{State: events.StateSucceeded, Output: events.NewText(out)}
		}
	case events.NodeMap:
		var outcome nodeOutcome
		if f, outcome = w.mapNode(ctx, prefix, key, g, n, trigger, render(n.Input)); outcome != outDone {
			return outcome, ""
		}
	default:
		f = events.NodeFinished{State: events.StateFailed, Error: fmt.Sprintf("unknown kind %q", n.Kind)}
	}
	if ctx.Err() != nil {
		return outStopped, "" // mid-flight: it runs again at the next start
	}
	f.AutomationID, f.Node = w.run.AutomationID, key
	if instant {
		if err := w.later(ctx, w.events([]events.Payload{started, f})...); err != nil {
			return outStopped, ""
		}
	} else if err := w.append(ctx, f); err != nil {
		return outStopped, ""
	}
	out := f.Output.Inline
	if f.State == events.StateFailed {
		out = f.Error
	}
	w.nodes[key] = &walkNode{state: f.State, output: out, branch: f.Branch}
	if f.State == events.StateFailed {
		return outFailed, fmt.Sprintf("node %q failed: %s", key, f.Error)
	}
	return outDone, ""
}

// mapNode runs the map's body once per item of the JSON array in, each at
// key.<index>, and outputs the array of their outputs.
func (w *walk) mapNode(ctx context.Context, prefix, key string, g events.Automation, n *events.Node, trigger, in string) (events.NodeFinished, nodeOutcome) {
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(in), &items); err != nil || items == nil {
		return events.NodeFinished{State: events.StateFailed, Error: fmt.Sprintf("map input is not a JSON array: %.200q", in)}, outDone
	}
	if len(items) > MaxMapItems {
		return events.NodeFinished{State: events.StateFailed, Error: fmt.Sprintf("map input has %d items; a map runs at most %d", len(items), MaxMapItems)}, outDone
	}
	body := &g.Nodes[indexNode(g.Nodes, n.BodyNode)]
	outs := make([]string, len(items))
	waiting := false
	for i, raw := range items {
		itemKey := key + "." + strconv.Itoa(i)
		var it string
		if json.Unmarshal(raw, &it) != nil {
			it = string(raw)
		}
		switch w.state(itemKey) {
		case events.StateSucceeded:
			outs[i] = w.nodes[itemKey].output
			continue
		case events.StateWaiting:
			waiting = true
			continue
		case events.StateFailed:
			return events.NodeFinished{State: events.StateFailed, Error: fmt.Sprintf("item %d: %s", i, w.nodes[itemKey].output)}, outDone
		}
		outcome, errText := w.node(ctx, prefix, itemKey, g, body, trigger, &it)
		switch outcome {
		case outStopped:
			return events.NodeFinished{}, outStopped
		case outWaiting:
			waiting = true
		case outFailed:
			return events.NodeFinished{State: events.StateFailed, Error: fmt.Sprintf("item %d: %s", i, errText)}, outDone
		default:
			outs[i] = w.nodes[itemKey].output
		}
	}
	if waiting {
		return events.NodeFinished{}, outWaiting
	}
	b, _ := json.Marshal(outs)
	return events.NodeFinished{State: events.StateSucceeded, Output: events.NewText(string(b))}, outDone
}

// render fills a template: {{trigger}}, {{item}} and {{node:<id>}} (a
// node of the same graph).
func (w *walk) render(tpl, prefix, trigger string, item *string) string {
	return automations.TemplateToken.ReplaceAllStringFunc(tpl, func(tok string) string {
		name := strings.TrimSpace(tok[2 : len(tok)-2])
		switch {
		case name == "trigger":
			return trigger
		case name == "item":
			if item != nil {
				return *item
			}
			return ""
		case strings.HasPrefix(name, "node:"):
			if n := w.nodes[prefix+strings.TrimPrefix(name, "node:")]; n != nil && n.state == events.StateSucceeded {
				return n.output
			}
			return ""
		}
		return tok
	})
}

func branchHolds(b events.Branch, in string) bool {
	switch b.When {
	case "always":
		return true
	case "equals":
		return strings.TrimSpace(in) == b.Value
	case "contains":
		return strings.Contains(in, b.Value)
	case "not_empty":
		return strings.TrimSpace(in) != ""
	case "matches":
		re, err := regexp.Compile(b.Value)
		return err == nil && re.MatchString(in)
	}
	return false
}

// tool calls a tool node's tool with args, the rendered input (JSON; empty
// is {}). An MCP tool goes through the same approval rule as an Agent's
// call.
func (w *walk) tool(ctx context.Context, id, args string) (string, error) {
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	if !json.Valid([]byte(args)) {
		return "", fmt.Errorf("the rendered input is not JSON arguments: %.200q", args)
	}
	if err := core.CheckFreeJSON("the rendered input", []byte(args)); err != nil {
		return "", err
	}
	if f := automations.BuiltinTools[id]; f != nil {
		return f(json.RawMessage(args))
	}
	if !strings.HasPrefix(id, mcp.ToolPrefix) || w.s.Opts.MCP == nil {
		return "", fmt.Errorf("no tool %q", id)
	}
	t := &agentrun.TurnTools{Core: w.s.Core, Sandbox: agentrun.NoTools{}, Caller: core.ApprovalRequest{Run: w.run.RunID, AgentID: "automation:" + w.run.AutomationID}, Stop: ctx.Done()}
	res := t.Call(ctx, id, json.RawMessage(args))
	if res.IsError {
		return "", errors.New(res.Output)
	}
	return res.Output, nil
}

// agent runs an agent node: the Agent's tool loop with its MCP tools,
// outside any Session (so without sandbox tools).
func (w *walk) agent(ctx context.Context, key string, n *events.Node, input string) events.NodeFinished {
	if w.s.Opts.Runtime == nil {
		return events.NodeFinished{State: events.StateFailed, Error: "no Agent runtime"}
	}
	call := core.ApprovalRequest{Run: w.run.RunID, AgentID: n.AgentID}
	rh, done := agentrun.NodeHooks(w.s.Core, w.run.RunID, key, n.AgentID) // commands/agentrun/hooks.go
	defer done()
	input, err := rh.Prompt(ctx, input)
	if err != nil {
		return events.NodeFinished{State: events.StateFailed, Error: err.Error()}
	}
	toolbox := rh.SandboxlessTools(call, ctx.Done())
	obs := &streamTurn{node: key, agent: n.AgentID, automation: w.run.AutomationID,
		record: func(p events.Payload) error { return w.append(ctx, p) },
		deltas: agentrun.TurnObserver{Core: w.s.Core, Ctx: ctx, Turn: projections.Turn{SessionID: w.run.RunID, TurnID: key, AgentID: n.AgentID}, Agent: n.AgentID, Live: &agentrun.LiveCount{}},
		clock:  agentrun.InferenceClock{Agent: n.AgentID}}
	var res agent.TurnResult
	if w.s.Outside != nil && w.s.Outside.Outside(n.AgentID) {
		// An outside agent works in a sandbox of its own for the node.
		res = w.s.Outside.RunAlone(ctx, core.AloneTurn{Run: w.run.RunID, TurnID: key, AgentID: n.AgentID, Input: input, Stop: ctx.Done(),
			Hooks: agentrun.ToolHooks{RunHooks: rh}}, obs)
	} else {
		res = w.s.Opts.Runtime.RunTurn(ctx, agent.TurnRequest{AgentID: n.AgentID, Input: input, Tools: toolbox, Stop: ctx.Done(),
			MaxSteps: w.s.Opts.Turns.MaxSteps, StallTimeout: w.s.Opts.Turns.StallTimeout}, obs)
	}
	rh.Stop(ctx)
	u := res.Usage
	if res.Outcome != agent.OutcomeDone {
		msg := "the Agent stopped"
		if res.Err != nil {
			msg = res.Err.Error()
		}
		return events.NodeFinished{State: events.StateFailed, Error: msg, Usage: &u, Inferences: obs.clock.Done}
	}
	return events.NodeFinished{State: events.StateSucceeded, Output: events.NewText(res.Output), Usage: &u, Inferences: obs.clock.Done}
}

// streamTurn observes an agent node's turn: its text and reasoning go out
// live (token and reasoning frames whose workflow is the run and turn_id
// the node), its tool calls are recorded on the run (tool-call frames), and
// its end is the node's.
type streamTurn struct {
	record                  func(events.Payload) error
	node, agent, automation string
	// deltas publishes the text in pieces as a Session turn's observer does,
	// the run standing for the Session and the node for the turn.
	deltas agentrun.TurnObserver
	clock  agentrun.InferenceClock
}

func (o *streamTurn) Started(string) error { o.clock.Ask(); return nil }
func (o *streamTurn) Delta(kind, text string) {
	o.clock.Delta()
	o.deltas.Delta(kind, text)
}
func (o *streamTurn) Step(st agent.StepOutput) error { o.clock.Step(st); return nil }
func (o *streamTurn) ToolStarted(c agent.Call) error {
	return o.record(events.NodeToolCall{AutomationID: o.automation, Node: o.node, Agent: o.agent, CallID: c.CallID,
		Occurrence: c.Occurrence, Name: c.Name, Phase: "start", Arguments: events.NewJSON(c.Arguments)})
}
func (o *streamTurn) ToolFinished(c agent.Call, r tools.Result, took time.Duration) error {
	defer o.clock.Ask()
	return o.record(events.NodeToolCall{AutomationID: o.automation, Node: o.node, Agent: o.agent, CallID: c.CallID,
		Occurrence: c.Occurrence, Name: c.Name, Phase: "result", Result: events.NewText(r.Output), IsError: r.IsError, DurationMS: took.Milliseconds()})
}
