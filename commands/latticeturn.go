package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/llm"
	"lathe/runtime/sandbox"
	"lathe/runtime/usage"
)

// A lattice turn, on the Session's turn aggregate and the one turn loop
// (agent.RunTurn): the coordinator plans (structured output, latticeplan.go),
// the auction assigns the subtasks, the plan is journaled (coordinator-plan),
// the Workers run their subtasks concurrently in the Session's sandbox, each
// waiting for what it depends on, and the coordinator synthesises the answer.
// Every inference and tool call is the turn's usual record keyed by Agent;
// each subtask's lifecycle is a lattice-task event, whose typed event is the
// Worker lifecycle notice. The turn ends with its one terminal event, usage
// summed over every Agent.

// isLatticeTurn reports whether t is a lattice turn: a lattice Session's
// turn without target_agent.
func isLatticeTurn(ss projections.Session, t projections.Turn) bool {
	return ss.Mode.Kind == events.ModeLattice && t.TargetAgent == nil
}

// latticeInput is what a lattice turn runs with.
type latticeInput struct {
	sb      sandbox.Sandbox
	ss      projections.Session
	history []llm.Message
	input   string
	stop    <-chan struct{}
}

// LatticeRunner runs lattice turns: the coordinator plans, the Workers bid
// for the subtasks and run them on the Session's tools, the coordinator
// synthesises (commands/latticeplan.go).
type LatticeRunner struct{ *sandboxes }

// runLattice runs a lattice turn to its result; obs records the
// coordinator's work (its Started is the turn's session-start).
func (s *LatticeRunner) run(ctx context.Context, obs *turnObserver, in latticeInput) agent.TurnResult {
	t, rt := obs.t, s.opts.Runtime
	total := usage.Tokens{TokenUsageKnown: true}
	fail := func(err error) agent.TurnResult {
		return agent.TurnResult{Outcome: agent.OutcomeError, Err: err, Usage: total}
	}
	bidders, boxes := s.bidders(t, in)
	coordinator := map[string]int{} // the coordinator's call IDs over plan and synthesis

	// 1. The plan.
	box := &planBox{}
	res := rt.RunTurn(ctx, agent.TurnRequest{
		AgentID: t.AgentID, Model: t.ModelOverride, History: in.history, Input: planPrompt(in.input, bidders),
		Tools: box, Stop: in.stop, FinishOn: planTool, Occurrences: coordinator,
		MaxSteps: s.opts.Turns.MaxSteps, StallTimeout: s.opts.Turns.StallTimeout,
	}, obs)
	total = total.Add(res.Usage)
	res.Usage = total
	if res.Outcome != agent.OutcomeDone {
		if res.Err != nil && errors.Is(res.Err, errPlan) {
			res.Err = fmt.Errorf("the coordinator's plan was refused: %w", res.Err)
		}
		return res
	}
	if box.subtasks == nil {
		return fail(fmt.Errorf("%w: the coordinator answered without calling %s; a lattice turn needs its plan as structured output", errPlan, planTool))
	}

	// 2. The auction, and the wait lists it implies.
	subtasks, err := auction(box.subtasks, bidders)
	if err != nil {
		return fail(err)
	}
	pre, err := prerequisites(subtasks, func(w string) []string {
		v, _ := rt.Agent(w)
		return v.Dependencies
	})
	if err != nil {
		return fail(err)
	}

	// 3. The plan and its assignment, durable before any Worker starts.
	if err := obs.appendTurn(events.LatticePlanned{TurnID: t.TurnID, Coordinator: t.AgentID, Goal: box.goal, Subtasks: subtasks}); err != nil {
		return fail(err)
	}

	// 4. The Workers.
	occurrences := map[string]map[string]int{}
	for _, st := range subtasks {
		occurrences[st.Worker] = map[string]int{}
	}
	job := &latticeJob{
		subtasks: subtasks, prereq: pre, stop: in.stop, ctx: ctx,
		run: func(st events.LatticeSubtask, inputs []taskInput) taskResult {
			wobs := &workerObserver{turnObserver: &turnObserver{s: s.core, t: t, ctx: obs.ctx, agent: st.Worker, live: obs.live}, subtask: st.ID}
			r := rt.RunTurn(ctx, agent.TurnRequest{
				AgentID: st.Worker, Input: workerPrompt(box.goal, st, inputs), Tools: boxes[st.Worker], Stop: in.stop,
				Occurrences: occurrences[st.Worker], MaxSteps: s.opts.Turns.MaxSteps, StallTimeout: s.opts.Turns.StallTimeout,
			}, wobs)
			out := taskResult{usage: r.Usage, ran: true}
			switch r.Outcome {
			case agent.OutcomeDone:
				out.state, out.output = events.TaskCompleted, r.Output
			case agent.OutcomeCancelled:
				out.state = events.TaskCancelled
			default:
				out.state, out.err = events.TaskFailed, "the turn failed"
				if r.Err != nil {
					out.err = clip(r.Err.Error(), maxTaskError)
				}
			}
			return out
		},
		record: func(st events.LatticeSubtask, r taskResult) {
			ev := events.LatticeTask{TurnID: t.TurnID, Subtask: st.ID, Agent: st.Worker, State: r.state, Error: r.err}
			if r.state == events.TaskCompleted {
				ev.Output = events.NewText(r.output)
			}
			if r.ran {
				tok := r.usage
				ev.Tokens = &tok
			}
			if err := obs.appendTurn(ev); err != nil {
				s.log.Warn("lattice task", "session", t.SessionID, "turn", t.TurnID, "subtask", st.ID, "err", err)
			}
		},
	}
	results := job.runAll()
	for _, r := range results {
		total = total.Add(r.usage)
	}
	switch {
	case ctx.Err() != nil:
		return fail(context.Cause(ctx))
	case agent.Stopped(in.stop):
		return agent.TurnResult{Outcome: agent.OutcomeCancelled, Usage: total}
	}

	// 5. The synthesis: the coordinator answers from the Workers' results,
	// with no tools.
	res = rt.RunTurn(ctx, agent.TurnRequest{
		AgentID: t.AgentID, Model: t.ModelOverride, Input: synthesisPrompt(in.input, box.goal, subtasks, results),
		Stop: in.stop, Occurrences: coordinator, MaxSteps: s.opts.Turns.MaxSteps, StallTimeout: s.opts.Turns.StallTimeout,
	}, continuedObserver{obs})
	res.Usage = total.Add(res.Usage)
	if res.Outcome == agent.OutcomeError && res.Err != nil {
		res.Err = fmt.Errorf("the coordinator could not synthesise the answer: %w", res.Err)
	}
	return res
}

// bidders are the Session's Workers as the auction sees them, with the
// toolbox each runs its subtasks with.
func (s *LatticeRunner) bidders(t projections.Turn, in latticeInput) ([]bidder, map[string]agent.Toolbox) {
	team := workersOf(team(s.opts), in.ss)
	out := make([]bidder, 0, len(team))
	boxes := map[string]agent.Toolbox{}
	for _, id := range team {
		v, err := s.opts.Runtime.Agent(id)
		if err != nil {
			continue
		}
		box := newTurnTools(s.core, tools.New(in.sb, in.ss.WorkingDir), ApprovalRequest{Run: t.SessionID, Session: t.SessionID, TurnID: t.TurnID, AgentID: id}, in.stop)
		b := bidder{id: id, name: v.Name, load: s.opts.Runtime.Load(id), budget: v.Budget}
		for _, tl := range box.Tools() {
			b.tools = append(b.tools, tl.Name)
		}
		boxes[id] = box
		out = append(out, b)
	}
	return out, boxes
}

// workerObserver records one Worker's subtask: its start is the subtask's
// activation (AgentActivated), not another session-start.
type workerObserver struct {
	*turnObserver
	subtask string
}

func (o *workerObserver) Started(string) error {
	return o.appendTurn(events.LatticeTask{TurnID: o.t.TurnID, Subtask: o.subtask, Agent: o.agent, State: events.TaskActivated})
}

// continuedObserver records the coordinator's synthesis: the turn started
// already.
type continuedObserver struct{ *turnObserver }

func (continuedObserver) Started(string) error { return nil }

// taskResult is how one subtask went.
type taskResult struct {
	state  string // an events.Task* state
	output string
	err    string
	usage  usage.Tokens
	ran    bool // its Worker ran (usage is its own)
}

// taskInput is a finished subtask a Worker's subtask depends on.
type taskInput struct {
	subtask events.LatticeSubtask
	output  string
}

// latticeJob runs a plan's subtasks: one goroutine per Worker runs its
// subtasks one at a time (its load), each once everything on its wait list
// completed; one whose prerequisite did not complete is skipped. A Stop
// lets running subtasks reach their safe boundary and starts nothing more.
type latticeJob struct {
	subtasks []events.LatticeSubtask
	prereq   map[string][]string
	stop     <-chan struct{}
	ctx      context.Context
	// run runs one subtask on its Worker; it may panic.
	run func(st events.LatticeSubtask, inputs []taskInput) taskResult
	// record journals a subtask's end.
	record func(st events.LatticeSubtask, r taskResult)

	mu      sync.Mutex
	results map[string]taskResult
	changed chan struct{} // closed (and replaced) whenever a result lands
}

// runAll runs the plan and returns each ended subtask's result; those a
// Stop or shutdown left unstarted have none.
func (j *latticeJob) runAll() map[string]taskResult {
	j.results, j.changed = map[string]taskResult{}, make(chan struct{})
	var order []string
	queues := map[string][]events.LatticeSubtask{}
	for _, st := range j.subtasks {
		if _, ok := queues[st.Worker]; !ok {
			order = append(order, st.Worker)
		}
		queues[st.Worker] = append(queues[st.Worker], st)
	}
	var wg sync.WaitGroup
	for _, w := range order {
		wg.Add(1)
		go func(queue []events.LatticeSubtask) {
			defer wg.Done()
			j.work(queue)
		}(queues[w])
	}
	wg.Wait()
	return j.results
}

// work runs one Worker's queue.
func (j *latticeJob) work(queue []events.LatticeSubtask) {
	for len(queue) > 0 {
		j.mu.Lock()
		i, blocker := -1, ""
		for k, st := range queue {
			ready, b := j.readiness(st)
			if ready || b != "" {
				i, blocker = k, b
				break
			}
		}
		changed := j.changed
		var inputs []taskInput
		if i >= 0 && blocker == "" {
			inputs = j.inputs(queue[i])
		}
		j.mu.Unlock()
		if i < 0 {
			select {
			case <-changed:
				continue
			case <-j.stop:
				return
			case <-j.ctx.Done():
				return
			}
		}
		if agent.Stopped(j.stop) || j.ctx.Err() != nil {
			return
		}
		st := queue[i]
		queue = slices.Delete(queue, i, i+1)
		var r taskResult
		if blocker != "" {
			r = taskResult{state: events.TaskSkipped, err: fmt.Sprintf("skipped: subtask %q, which it waits for, did not complete", blocker)}
		} else {
			r = j.safeRun(st, inputs)
		}
		if j.ctx.Err() == nil || r.state != events.TaskFailed {
			// A Worker cut off by a shutdown did not fail: the turn's one
			// interrupted record marks its subtask interrupted.
			j.record(st, r)
		}
		j.mu.Lock()
		j.results[st.ID] = r
		close(j.changed)
		j.changed = make(chan struct{})
		j.mu.Unlock()
	}
}

// readiness reports whether st may run now, or else the prerequisite that
// ended without completing (st is then skipped); neither means wait. j.mu
// is held.
func (j *latticeJob) readiness(st events.LatticeSubtask) (ready bool, blocker string) {
	for _, p := range j.prereq[st.ID] {
		r, ok := j.results[p]
		switch {
		case !ok:
			return false, ""
		case r.state != events.TaskCompleted:
			return false, p
		}
	}
	return true, ""
}

// inputs are the results of the subtasks st depends on; j.mu is held.
func (j *latticeJob) inputs(st events.LatticeSubtask) []taskInput {
	var out []taskInput
	for _, d := range st.DependsOn {
		for _, p := range j.subtasks {
			if p.ID == d {
				out = append(out, taskInput{subtask: p, output: j.results[d].output})
			}
		}
	}
	return out
}

// safeRun runs one subtask, turning a panic in the Worker's code path into
// its panicked result.
func (j *latticeJob) safeRun(st events.LatticeSubtask, inputs []taskInput) (r taskResult) {
	defer func() {
		if p := recover(); p != nil {
			r = taskResult{state: events.TaskPanicked, err: fmt.Sprintf("the Worker failed unexpectedly: %v", p), ran: true}
		}
	}()
	return j.run(st, inputs)
}

// planPrompt asks the coordinator for its plan.
func planPrompt(input string, workers []bidder) string {
	var b strings.Builder
	b.WriteString("You coordinate a team of Workers. Decompose the user's request below into subtasks and submit them with one call of " +
		planTool + ": {goal, subtasks: [{id, title, instruction, needs_tools?, depends_on?}]}. Each subtask goes to one Worker, who sees " +
		"only its instruction and the results of the subtasks it depends_on, and works in the same workspace. Subtasks without " +
		"dependencies run at the same time.\n\nThe Workers and their tools:\n")
	for _, w := range workers {
		fmt.Fprintf(&b, "- %s", w.id)
		if w.name != "" && w.name != w.id {
			fmt.Fprintf(&b, " (%s)", w.name)
		}
		fmt.Fprintf(&b, ": %s\n", strings.Join(w.tools, ", "))
	}
	b.WriteString("\nThe user's request:\n")
	b.WriteString(input)
	return b.String()
}

// workerPrompt is a Worker's task.
func workerPrompt(goal string, st events.LatticeSubtask, inputs []taskInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are one Worker of a team working towards: %s\n\nYour subtask %q: %s\n\n%s\n", goal, st.ID, st.Title, st.Instruction)
	for _, in := range inputs {
		fmt.Fprintf(&b, "\nResult of subtask %q (%s), done by %s:\n%s\n", in.subtask.ID, in.subtask.Title, in.subtask.Worker, in.output)
	}
	b.WriteString("\nDo your subtask with your tools and answer with its result.")
	return b.String()
}

// synthesisPrompt asks the coordinator for the final answer.
func synthesisPrompt(input, goal string, subtasks []events.LatticeSubtask, results map[string]taskResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Your team worked on the user's request:\n%s\n\nThe goal: %s\n\nThe subtasks' results:\n", input, goal)
	for _, st := range subtasks {
		r := results[st.ID]
		fmt.Fprintf(&b, "\n## %s: %s (Worker %s): %s\n", st.ID, st.Title, st.Worker, r.state)
		switch {
		case r.state == events.TaskCompleted:
			b.WriteString(r.output + "\n")
		case r.err != "":
			b.WriteString(r.err + "\n")
		}
	}
	b.WriteString("\nWrite the final answer to the user from these results. Say plainly which subtasks failed or were skipped and what that means for the answer.")
	return b.String()
}

// maxTaskError bounds a subtask's error in its event.
const maxTaskError = 4 << 10

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
