package automationrunner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"lathe/commands/automations"
	"lathe/commands/core"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
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
	*core.Core
	read core.AutomationReader

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

func newAutomationEngine(c *core.Core, read core.AutomationReader) *AutomationEngine {
	ctx, stop := context.WithCancel(context.Background())
	return &AutomationEngine{Core: c, read: read, runs: map[string]*runner{}, ends: map[string]chan struct{}{}, base: ctx, stop: stop}
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
		in, err := run.Input.Resolve(s.Opts.Blobs)
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
		return projections.AutomationRun{}, fmt.Errorf("%w: Automation %q has no run %q", core.ErrNotFound, id, runID)
	}
	return run, nil
}

func (s *AutomationEngine) startRun(ctx context.Context, id string, req RunRequest, trig events.RunTrigger) (string, error) {
	rec, ok := s.read.Automation(id)
	if !ok {
		return "", fmt.Errorf("%w: Automation %q", core.ErrNotFound, id)
	}
	if !rec.Enabled {
		return "", fmt.Errorf("%w: Automation %q is disabled", core.ErrConflict, id)
	}
	input := ""
	if req.Input != nil {
		input = *req.Input
	}
	if len(input) > maxRunInput {
		return "", fmt.Errorf("%w: input is larger than %d bytes", core.ErrTooLarge, maxRunInput)
	}
	for k, v := range req.Inputs {
		i := indexNode(rec.Nodes, k)
		if i < 0 || rec.Nodes[i].Kind != events.NodeTextInput {
			return "", fmt.Errorf("%w: inputs names %q, which is not a text_input node", core.ErrInvalid, k)
		}
		if len(v) > maxRunInput {
			return "", fmt.Errorf("%w: input %q is larger than %d bytes", core.ErrTooLarge, k, maxRunInput)
		}
	}
	if err := checkMapInput(rec.Nodes, input); err != nil {
		return "", err
	}
	runID := ulid.Make().String()
	ev := events.RunStarted{AutomationID: id, Graph: rec.Automation, Trigger: trig, Input: events.NewText(input), Inputs: req.Inputs}
	if err := s.Append(ctx, []journal.Event{events.New(runID, ev)}, journal.Expectation{AggregateID: runID, Version: 0}); err != nil {
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
		if n.Kind != events.NodeMap || !automations.TemplateToken.MatchString(n.Input) || strings.TrimSpace(automations.TemplateToken.ReplaceAllString(n.Input, "")) != "" {
			continue
		}
		if m := automations.TemplateToken.FindStringSubmatch(n.Input); m[1] != "trigger" {
			continue
		}
		var items []json.RawMessage
		if json.Unmarshal([]byte(input), &items) == nil && len(items) > MaxMapItems {
			return fmt.Errorf("%w: map %q would run over %d items; a map runs at most %d", core.ErrInvalid, n.ID, len(items), MaxMapItems)
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

// CancelRuns cancels the active runs of Automation id and waits until each
// is recorded cancelled.
func (s *AutomationEngine) CancelRuns(ctx context.Context, id string) error {
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
	return s.Append(context.WithoutCancel(ctx), []journal.Event{events.New(runID, events.RunFinished{
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
		return fmt.Errorf("%w: value is larger than %d bytes", core.ErrTooLarge, maxRunInput)
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
		return fmt.Errorf("%w: run %q has no node %q", core.ErrNotFound, runID, nodeID)
	case n.State != events.StateWaiting || run.EndedAt != nil:
		return fmt.Errorf("%w: node %q of run %q is %s, not waiting", core.ErrConflict, nodeID, runID, n.State)
	}
	how := events.ResumedValue
	if cancel {
		value, how = "", events.ResumedCancel
	}
	out := value
	if n.Strategy == "append" {
		prompt, err := n.Prompt.Resolve(s.Opts.Blobs)
		if err != nil {
			return fmt.Errorf("the prompt of node %q: %w", nodeID, err)
		}
		out = joinNonEmpty(prompt.Inline, value)
	}
	if err := s.Append(ctx, []journal.Event{events.New(runID, events.NodeFinished{AutomationID: id, Node: nodeID,
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
	out, err := run.Output.Resolve(s.Opts.Blobs)
	if err != nil {
		return Execution{}, err
	}
	return Execution{RunID: runID, State: run.State, Output: out.Inline, Error: run.Error, Usage: run.Usage}, nil
}

// Automations is the Automation capability, in three parts: the records
// and their folders (AutomationRecords, here), the runs
// (AutomationEngine, commands/automationrunner/automation_engine.go) and the automatic
// triggers (AutomationTriggers, commands/automationrunner/automation_triggers.go). Every
// change is an event on the Automation's aggregate (automation-saved,
// -moved, -deleted), on the one folders aggregate, or on the run's own
// aggregate; the projection folds the records, folders, runs and pending
// Interrupts from them.
type Automations struct {
	*automations.AutomationRecords
	*AutomationEngine
	*AutomationTriggers
}

func NewAutomations(c *core.Core, read core.AutomationReader) *Automations {
	eng := newAutomationEngine(c, read)
	trig := &AutomationTriggers{Core: c, read: read, runs: eng, wake: make(chan struct{}, 1), sched: make(chan struct{}, 1)}
	recs := &automations.AutomationRecords{Core: c, Read: read, Runs: eng, Sched: trig}
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
