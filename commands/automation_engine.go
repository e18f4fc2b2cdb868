package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/mcp"
	"lathe/runtime/usage"
)

// The run engine. Each run is its own aggregate: automation-run-started
// (with the graph as it was), then per node automation-node-started and
// automation-node-finished (output, error, branch, usage; a large output
// goes to the blob store), automation-node-waiting for an interrupt,
// automation-run-waiting when only operators can move it on, and
// automation-run-finished. An executor walks the graph in topological
// order and skips what the run's record says is done, so the same walk
// starts a run, continues it after a resume, and resumes it after a crash:
// a node that was mid-flight (started, not finished) runs again, once; a
// waiting run stays waiting until an operator answers.
//
// Run keys of nodes: a node's ID at the top level; inside a subgraph node
// or a map item, the container's key, a dot, and the inner node's ID or the
// item's index ("sub.gate", "each.0", "each.0.inner"), so an interrupt
// inside a subgraph is a node of the top-level run.

// AutomationEngine runs Automations: one executor per running run.
type AutomationEngine struct {
	*core
	read automationReader

	mu   sync.Mutex
	runs map[string]*runner
	ends map[string]chan struct{} // run → closed when it ends (waitRun)
	// base ends with the daemon: executors stop without recording, and the
	// next start resumes their runs.
	base   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

// runner is one run's executor.
type runner struct {
	cancel context.CancelFunc
	// dirty: an interrupt was answered while the executor ran; it walks the
	// graph again before it stops waiting.
	dirty bool
	// cancelled: the run was cancelled (its Automation deleted); the
	// executor records it so.
	cancelled bool
}

func newAutomationEngine(c *core, read automationReader) *AutomationEngine {
	ctx, stop := context.WithCancel(context.Background())
	return &AutomationEngine{core: c, read: read, runs: map[string]*runner{}, ends: map[string]chan struct{}{}, base: ctx, stop: stop}
}

// RunRequest is POST /api/automations/{id}/run's body.
type RunRequest struct {
	Input  *string           `json:"input,omitempty"`
	Inputs map[string]string `json:"inputs,omitempty"`
}

// maxRunInput bounds a run's input and each text_input value.
const maxRunInput = 1 << 20

// Run starts a run of Automation id in the background and answers its run
// ID. A missing Automation is ErrNotFound, a disabled one ErrConflict.
func (s *AutomationEngine) Run(ctx context.Context, id string, req RunRequest) (string, error) {
	return s.startRun(ctx, id, req, events.RunTrigger{Kind: events.TriggerManual})
}

// Fork starts a fresh run of the whole graph from the start, with the
// forked run's input unless input is given, and its text_input values.
func (s *AutomationEngine) Fork(ctx context.Context, id, runID string, input *string) (string, error) {
	run, err := s.runOf(id, runID)
	if err != nil {
		return "", err
	}
	if input == nil {
		in, err := run.Input.Resolve(s.opts.Blobs)
		if err != nil {
			return "", fmt.Errorf("the input of run %q: %w", runID, err)
		}
		input = &in.Inline
	}
	return s.startRun(ctx, id, RunRequest{Input: input, Inputs: run.Inputs}, events.RunTrigger{Kind: events.TriggerFork, ForkOf: runID})
}

func (s *AutomationEngine) runOf(id, runID string) (projections.AutomationRun, error) {
	run, ok := s.read.AutomationRun(runID)
	if !ok || run.AutomationID != id {
		return projections.AutomationRun{}, fmt.Errorf("%w: Automation %q has no run %q", ErrNotFound, id, runID)
	}
	return run, nil
}

func (s *AutomationEngine) startRun(ctx context.Context, id string, req RunRequest, trig events.RunTrigger) (string, error) {
	rec, ok := s.read.Automation(id)
	if !ok {
		return "", fmt.Errorf("%w: Automation %q", ErrNotFound, id)
	}
	if !rec.Enabled {
		return "", fmt.Errorf("%w: Automation %q is disabled", ErrConflict, id)
	}
	input := ""
	if req.Input != nil {
		input = *req.Input
	}
	if len(input) > maxRunInput {
		return "", fmt.Errorf("%w: input is larger than %d bytes", ErrTooLarge, maxRunInput)
	}
	for k, v := range req.Inputs {
		i := indexNode(rec.Nodes, k)
		if i < 0 || rec.Nodes[i].Kind != events.NodeTextInput {
			return "", fmt.Errorf("%w: inputs names %q, which is not a text_input node", ErrInvalid, k)
		}
		if len(v) > maxRunInput {
			return "", fmt.Errorf("%w: input %q is larger than %d bytes", ErrTooLarge, k, maxRunInput)
		}
	}
	if err := checkMapInput(rec.Nodes, input); err != nil {
		return "", err
	}
	runID := ulid.Make().String()
	ev := events.RunStarted{AutomationID: id, Graph: rec.Automation, Trigger: trig, Input: events.NewText(input), Inputs: req.Inputs}
	if err := s.append(ctx, []journal.Event{events.New(runID, ev)}, journal.Expectation{AggregateID: runID, Version: 0}); err != nil {
		return "", err
	}
	s.mu.Lock()
	s.startLocked(runID)
	s.mu.Unlock()
	return runID, nil
}

// checkMapInput refuses a run whose input is a JSON array longer than a
// map over {{trigger}} may run, before the run starts.
func checkMapInput(nodes []events.Node, input string) error {
	for _, n := range nodes {
		if n.Kind != events.NodeMap || !templateToken.MatchString(n.Input) || strings.TrimSpace(templateToken.ReplaceAllString(n.Input, "")) != "" {
			continue
		}
		if m := templateToken.FindStringSubmatch(n.Input); m[1] != "trigger" {
			continue
		}
		var items []json.RawMessage
		if json.Unmarshal([]byte(input), &items) == nil && len(items) > maxMapItems {
			return fmt.Errorf("%w: map %q would run over %d items; a map runs at most %d", ErrInvalid, n.ID, len(items), maxMapItems)
		}
	}
	return nil
}

func indexNode(nodes []events.Node, id string) int {
	for i := range nodes {
		if nodes[i].ID == id {
			return i
		}
	}
	return -1
}

// startLocked starts the executor of runID, or, if it runs, has it walk the
// graph again; e.mu is held.
func (s *AutomationEngine) startLocked(runID string) {
	e := s
	if r := e.runs[runID]; r != nil {
		r.dirty = true
		return
	}
	if e.closed {
		return // the next start resumes it
	}
	ctx, cancel := context.WithCancel(e.base)
	e.runs[runID] = &runner{cancel: cancel}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer cancel()
		s.execute(ctx, runID)
	}()
}

// ResumeRuns starts the executors of the runs the last stop left running;
// waiting runs stay waiting. The daemon calls it once at start.
func (s *AutomationEngine) ResumeRuns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, run := range s.read.ActiveAutomationRuns("") {
		if run.State == events.StateRunning {
			s.startLocked(run.RunID)
		}
	}
}

// StopRuns stops every executor without recording anything: the runs stay
// running in the journal and the next start resumes them.
func (s *AutomationEngine) StopRuns() {
	e := s
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.stop()
	e.wg.Wait()
}

// cancelRuns cancels the active runs of Automation id and waits until each
// is recorded cancelled.
func (s *AutomationEngine) cancelRuns(ctx context.Context, id string) error {
	for _, run := range s.read.ActiveAutomationRuns(id) {
		e := s
		e.mu.Lock()
		if r := e.runs[run.RunID]; r != nil {
			r.cancelled = true
			r.cancel()
			e.mu.Unlock()
		} else {
			// Waiting: no executor to tell.
			err := s.finishRun(ctx, run.RunID, id, events.StateCancelled, "", "the Automation was deleted")
			e.mu.Unlock()
			if err != nil {
				return err
			}
		}
		if err := s.waitRun(ctx, run.RunID); err != nil {
			return err
		}
	}
	return nil
}

// finishRun records the end of a run and wakes whoever waits for it;
// s.mu is held.
func (s *AutomationEngine) finishRun(ctx context.Context, runID, automationID, state, output, errText string) error {
	err := s.recordEnd(ctx, runID, automationID, state, output, errText)
	if err == nil {
		s.ended(runID)
	}
	return err
}

// recordEnd appends the end of a run with the usage its nodes paid.
func (s *AutomationEngine) recordEnd(ctx context.Context, runID, automationID, state, output, errText string) error {
	run, _ := s.read.AutomationRun(runID)
	return s.append(context.WithoutCancel(ctx), []journal.Event{events.New(runID, events.RunFinished{
		AutomationID: automationID, State: state, Output: events.NewText(output), Error: errText, Usage: run.Usage})})
}

// ended wakes whoever waits for the end of runID; s.mu is held.
func (s *AutomationEngine) ended(runID string) {
	if ch := s.ends[runID]; ch != nil {
		close(ch)
		delete(s.ends, runID)
	}
}

// waitRun waits until run runID has ended (or ctx ends).
func (s *AutomationEngine) waitRun(ctx context.Context, runID string) error {
	e := s
	e.mu.Lock()
	ch := e.ends[runID]
	if ch == nil {
		ch = make(chan struct{})
		e.ends[runID] = ch
	}
	e.mu.Unlock()
	if run, ok := s.read.AutomationRun(runID); !ok || run.EndedAt != nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ResumeNode answers the waiting interrupt nodeID (a run key) of a run:
// with value, or, when cancel, with an empty value. Its output is the
// value (replace) or its prompt followed by the value (append); the run
// then continues. A node that is not waiting is ErrConflict.
func (s *AutomationEngine) ResumeNode(ctx context.Context, id, runID, nodeID string, value string, cancel bool) error {
	if len(value) > maxRunInput {
		return fmt.Errorf("%w: value is larger than %d bytes", ErrTooLarge, maxRunInput)
	}
	e := s
	e.mu.Lock()
	defer e.mu.Unlock()
	run, err := s.runOf(id, runID)
	if err != nil {
		return err
	}
	n := run.Nodes[nodeID]
	switch {
	case n == nil:
		return fmt.Errorf("%w: run %q has no node %q", ErrNotFound, runID, nodeID)
	case n.State != events.StateWaiting || run.EndedAt != nil:
		return fmt.Errorf("%w: node %q of run %q is %s, not waiting", ErrConflict, nodeID, runID, n.State)
	}
	how := events.ResumedValue
	if cancel {
		value, how = "", events.ResumedCancel
	}
	out := value
	if n.Strategy == "append" {
		prompt, err := n.Prompt.Resolve(s.opts.Blobs)
		if err != nil {
			return fmt.Errorf("the prompt of node %q: %w", nodeID, err)
		}
		out = joinNonEmpty(prompt.Inline, value)
	}
	if err := s.append(ctx, []journal.Event{events.New(runID, events.NodeFinished{AutomationID: id, Node: nodeID,
		State: events.StateSucceeded, Output: events.NewText(out), Resumed: how})}); err != nil {
		return err
	}
	s.startLocked(runID)
	return nil
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n" + b
}

// Execution is the outcome of a run that a caller waited for (the legacy
// workflow execute and schedule run routes).
type Execution struct {
	RunID string
	State string
	// Output is the run's output, Error its failure.
	Output string
	Error  string
	Usage  usage.Tokens
}

// Execute runs Automation id and waits for its end (through any
// interrupts it waits on), or for ctx.
func (s *AutomationEngine) Execute(ctx context.Context, id string, req RunRequest) (Execution, error) {
	runID, err := s.Run(ctx, id, req)
	if err != nil {
		return Execution{}, err
	}
	return s.Await(ctx, runID)
}

// Await waits for run runID to end and answers its outcome.
func (s *AutomationEngine) Await(ctx context.Context, runID string) (Execution, error) {
	if err := s.waitRun(ctx, runID); err != nil {
		return Execution{RunID: runID}, err
	}
	run, ok := s.read.AutomationRun(runID)
	if !ok {
		return Execution{RunID: runID, State: events.StateCancelled, Error: "the Automation was deleted"}, nil
	}
	out, err := run.Output.Resolve(s.opts.Blobs)
	if err != nil {
		return Execution{}, err
	}
	return Execution{RunID: runID, State: run.State, Output: out.Inline, Error: run.Error, Usage: run.Usage}, nil
}

// ---- the executor ----

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
	// maxMapItems bounds the items one map node runs its body for.
	maxMapItems = 10_000
	// maxSubgraphDepth bounds how deep subgraphs nest in a run; saves refuse
	// a subgraph cycle, and this stops one a journal holds anyway.
	maxSubgraphDepth = 32
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
		if err := w.s.append(context.WithoutCancel(ctx), w.pending[:n]); err != nil {
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
			out, err := n.Output.Resolve(s.opts.Blobs)
			if err != nil {
				s.log.Error("automation run: unreadable output", "run", runID, "node", key, "err", err)
			}
			w.nodes[key] = &walkNode{state: n.State, output: out.Inline, branch: n.Branch}
		}
		trigger, err := run.Input.Resolve(s.opts.Blobs)
		if err != nil {
			s.log.Error("automation run: unreadable input", "run", runID, "err", err)
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
		case ctx.Err() != nil || errors.Is(w.err, ErrUnavailable):
			// Stopping: the run stays as recorded, for the next start.
		case w.err != nil:
			// The journal refused a record of the run: the run fails with
			// the reason rather than stay running with nothing to run it.
			s.log.Error("automation run: the journal refused its record", "run", runID, "err", w.err)
			err = s.finishRun(ctx, runID, run.AutomationID, events.StateFailed, "", "recording the run failed: "+w.err.Error())
		case outcome == outStopped:
			// Not reached: a walk stops only with its context or an append
			// error. Leave the run for the next start.
		case outcome == outWaiting && r != nil && r.dirty:
			r.dirty = false
			e.mu.Unlock()
			continue
		case outcome == outWaiting:
			err = s.append(ctx, []journal.Event{events.New(runID, events.RunWaiting{})})
		case outcome == outFailed:
			err = s.finishRun(ctx, runID, run.AutomationID, events.StateFailed, "", errText)
		default:
			err = s.finishRun(ctx, runID, run.AutomationID, events.StateSucceeded, out, "")
		}
		delete(e.runs, runID)
		e.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			s.log.Error("automation run: record its end", "run", runID, "err", err)
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
	order := topoOrder(g.Nodes, g.Edges)
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
	instant := n.Kind == events.NodeConditional || n.Kind == events.NodeTextInput || (n.Kind == events.NodeTool && builtinTools[n.ToolID] != nil)
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
		if w.depth >= maxSubgraphDepth {
			f = events.NodeFinished{State: events.StateFailed, Error: fmt.Sprintf("subgraph %q: subgraphs nest deeper than %d levels (a subgraph cycle?)", n.AutomationID, maxSubgraphDepth)}
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
	if len(items) > maxMapItems {
		return events.NodeFinished{State: events.StateFailed, Error: fmt.Sprintf("map input has %d items; a map runs at most %d", len(items), maxMapItems)}, outDone
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
	return templateToken.ReplaceAllStringFunc(tpl, func(tok string) string {
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
	if err := checkFreeJSON("the rendered input", []byte(args)); err != nil {
		return "", err
	}
	if f := builtinTools[id]; f != nil {
		return f(json.RawMessage(args))
	}
	if !strings.HasPrefix(id, mcp.ToolPrefix) || w.s.opts.MCP == nil {
		return "", fmt.Errorf("no tool %q", id)
	}
	t := &turnTools{s: w.s.core, sandbox: noTools{}, call: ApprovalRequest{Run: w.run.RunID, AgentID: "automation:" + w.run.AutomationID}, stop: ctx.Done()}
	res := t.Call(ctx, id, json.RawMessage(args))
	if res.IsError {
		return "", errors.New(res.Output)
	}
	return res.Output, nil
}

// agent runs an agent node: the Agent's tool loop with its MCP tools,
// outside any Session (so without sandbox tools).
func (w *walk) agent(ctx context.Context, key string, n *events.Node, input string) events.NodeFinished {
	if w.s.opts.Runtime == nil {
		return events.NodeFinished{State: events.StateFailed, Error: "no Agent runtime"}
	}
	call := ApprovalRequest{Run: w.run.RunID, AgentID: n.AgentID}
	rh, done := nodeHooks(w.s.core, w.run.RunID, key, n.AgentID) // commands/hooks.go
	defer done()
	input, err := rh.prompt(ctx, input)
	if err != nil {
		return events.NodeFinished{State: events.StateFailed, Error: err.Error()}
	}
	toolbox := rh.tools(newTurnTools(w.s.core, noTools{}, call, ctx.Done()))
	obs := &streamTurn{node: key, agent: n.AgentID, automation: w.run.AutomationID,
		record: func(p events.Payload) error { return w.append(ctx, p) },
		deltas: turnObserver{s: w.s.core, ctx: ctx, t: projections.Turn{SessionID: w.run.RunID, TurnID: key, AgentID: n.AgentID}, agent: n.AgentID, live: &liveCount{}},
		clock:  inferenceClock{agent: n.AgentID}}
	res := w.s.opts.Runtime.RunTurn(ctx, agent.TurnRequest{AgentID: n.AgentID, Input: input, Tools: toolbox, Stop: ctx.Done(),
		MaxSteps: w.s.opts.Turns.MaxSteps, StallTimeout: w.s.opts.Turns.StallTimeout}, obs)
	rh.stop(ctx)
	u := res.Usage
	if res.Outcome != agent.OutcomeDone {
		msg := "the Agent stopped"
		if res.Err != nil {
			msg = res.Err.Error()
		}
		return events.NodeFinished{State: events.StateFailed, Error: msg, Usage: &u, Inferences: obs.clock.done}
	}
	return events.NodeFinished{State: events.StateSucceeded, Output: events.NewText(res.Output), Usage: &u, Inferences: obs.clock.done}
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
	deltas turnObserver
	clock  inferenceClock
}

func (o *streamTurn) Started(string) error { o.clock.ask(); return nil }
func (o *streamTurn) Delta(kind, text string) {
	o.clock.delta()
	o.deltas.Delta(kind, text)
}
func (o *streamTurn) Step(st agent.StepOutput) error { o.clock.step(st); return nil }
func (o *streamTurn) ToolStarted(c agent.Call) error {
	return o.record(events.NodeToolCall{AutomationID: o.automation, Node: o.node, Agent: o.agent, CallID: c.CallID,
		Occurrence: c.Occurrence, Name: c.Name, Phase: "start", Arguments: events.NewJSON(c.Arguments)})
}
func (o *streamTurn) ToolFinished(c agent.Call, r tools.Result, took time.Duration) error {
	defer o.clock.ask()
	return o.record(events.NodeToolCall{AutomationID: o.automation, Node: o.node, Agent: o.agent, CallID: c.CallID,
		Occurrence: c.Occurrence, Name: c.Name, Phase: "result", Result: events.NewText(r.Output), IsError: r.IsError, DurationMS: took.Milliseconds()})
}

// Automations is the Automation capability, in three parts: the records
// and their folders (AutomationRecords, here), the runs
// (AutomationEngine, commands/automation_engine.go) and the automatic
// triggers (AutomationTriggers, commands/automation_triggers.go). Every
// change is an event on the Automation's aggregate (automation-saved,
// -moved, -deleted), on the one folders aggregate, or on the run's own
// aggregate; the projection folds the records, folders, runs and pending
// Interrupts from them.
type Automations struct {
	*AutomationRecords
	*AutomationEngine
	*AutomationTriggers
}

func newAutomations(c *core, read automationReader) *Automations {
	eng := newAutomationEngine(c, read)
	trig := &AutomationTriggers{core: c, read: read, runs: eng, wake: make(chan struct{}, 1), sched: make(chan struct{}, 1)}
	recs := &AutomationRecords{core: c, read: read, runs: eng, sched: trig}
	trig.records = recs
	return &Automations{AutomationRecords: recs, AutomationEngine: eng, AutomationTriggers: trig}
}

// StopRuns stops the triggers, then every executor, without recording
// anything: the runs stay running in the journal and the next start
// resumes them.
func (s *Automations) StopRuns() {
	s.AutomationTriggers.stop()
	s.AutomationEngine.StopRuns()
}
