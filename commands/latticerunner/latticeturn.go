package latticerunner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"lathe/commands/agentrun"
	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/lattice"

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

// IsLatticeTurn reports whether t is a lattice turn: a lattice Session's
// turn without target_agent.
func IsLatticeTurn(ss projections.Session, t projections.Turn) bool {
	return ss.Mode.Kind == events.ModeLattice && t.TargetAgent == nil
}

// LatticeInput is what a lattice turn runs with.
type LatticeInput struct {
	Sb      sandbox.Sandbox
	Ss      projections.Session
	History []llm.Message
	Input   string
	Stop    <-chan struct{}
}

// LatticeRunner runs lattice turns: the coordinator plans, the Workers bid
// for the subtasks and run them on the Session's tools, the coordinator
// synthesises (commands/latticerunner/latticeplan.go).
type LatticeRunner struct{ *environments.Sandboxes }

// runLattice runs a lattice turn to its result; obs records the
// coordinator's work (its Started is the turn's session-start).
func (s *LatticeRunner) Run(ctx context.Context, obs *agentrun.TurnObserver, in LatticeInput) agent.TurnResult {
	t, rt := obs.Turn, s.Opts.Runtime
	total := usage.Tokens{TokenUsageKnown: true}
	fail := func(err error) agent.TurnResult {
		return agent.TurnResult{Outcome: agent.OutcomeError, Err: err, Usage: total}
	}
	bidders, boxes := s.bidders(t, in)
	coordinator := map[string]int{} // the coordinator's call IDs over plan and synthesis

	// 1. The plan.
	box := &planBox{}
	res := rt.RunTurn(ctx, agent.TurnRequest{
		AgentID: t.AgentID, Model: t.ModelOverride, History: in.History, Input: planPrompt(in.Input, bidders),
		Tools: box, Stop: in.Stop, FinishOn: lattice.PlanTool, Occurrences: coordinator,
		MaxSteps: s.Opts.Turns.MaxSteps, StallTimeout: s.Opts.Turns.StallTimeout,
	}, obs)
	total = total.Add(res.Usage)
	res.Usage = total
	if res.Outcome != agent.OutcomeDone {
		if res.Err != nil && errors.Is(res.Err, ErrPlan) {
			res.Err = fmt.Errorf("the coordinator's plan was refused: %w", res.Err)
		}
		return res
	}
	if box.subtasks == nil {
		return fail(fmt.Errorf("%w: the coordinator answered without calling %s; a lattice turn needs its plan as structured output", ErrPlan, lattice.PlanTool))
	}

	// 2. The auction, and the wait lists it implies.
	subtasks, err := Auction(box.subtasks, bidders)
	if err != nil {
		return fail(err)
	}
	pre, err := Prerequisites(subtasks, func(w string) []string {
		v, _ := rt.Agent(w)
		return v.Dependencies
	})
	if err != nil {
		return fail(err)
	}

	// 3. The plan and its assignment, durable before any Worker starts.
	if err := obs.AppendTurn(events.LatticePlanned{TurnID: t.TurnID, Coordinator: t.AgentID, Goal: box.goal, Subtasks: subtasks}); err != nil {
		return fail(err)
	}

	// 4. The Workers.
	occurrences := map[string]map[string]int{}
	for _, st := range subtasks {
		occurrences[st.Worker] = map[string]int{}
	}
	job := &LatticeJob{
		Subtasks: subtasks, Prereq: pre, Stop: in.Stop, Ctx: ctx,
		Run: func(st events.LatticeSubtask, inputs []TaskInput) TaskResult {
			wobs := &workerObserver{TurnObserver: &agentrun.TurnObserver{Core: s.Core, Turn: t, Ctx: obs.Ctx, Agent: st.Worker, Live: obs.Live}, subtask: st.ID}
			var r agent.TurnResult
			if s.Outside != nil && s.Outside.Outside(st.Worker) {
				r = s.runOutside(ctx, t, st, in, workerPrompt(box.goal, st, inputs), wobs)
			} else {
				r = rt.RunTurn(ctx, agent.TurnRequest{
					AgentID: st.Worker, Input: workerPrompt(box.goal, st, inputs), Tools: boxes[st.Worker], Stop: in.Stop,
					Occurrences: occurrences[st.Worker], MaxSteps: s.Opts.Turns.MaxSteps, StallTimeout: s.Opts.Turns.StallTimeout,
				}, wobs)
			}
			out := TaskResult{usage: r.Usage, Ran: true}
			switch r.Outcome {
			case agent.OutcomeDone:
				out.State, out.Output = events.TaskCompleted, r.Output
			case agent.OutcomeCancelled:
				out.State = events.TaskCancelled
			default:
				out.State, out.Err = events.TaskFailed, "the turn failed"
				if r.Err != nil {
					out.Err = Clip(r.Err.Error(), maxTaskError)
				}
			}
			return out
		},
		Record: func(st events.LatticeSubtask, r TaskResult) {
			ev := events.LatticeTask{TurnID: t.TurnID, Subtask: st.ID, Agent: st.Worker, State: r.State, Error: r.Err}
			if r.State == events.TaskCompleted {
				ev.Output = events.NewText(r.Output)
			}
			if r.Ran {
				tok := r.usage
				ev.Tokens = &tok
			}
			if err := obs.AppendTurn(ev); err != nil {
				s.Log.Warn("lattice task", "session", t.SessionID, "turn", t.TurnID, "subtask", st.ID, "err", err)
			}
		},
	}
	results := job.RunAll()
	for _, r := range results {
		total = total.Add(r.usage)
	}
	switch {
	case ctx.Err() != nil:
		return fail(context.Cause(ctx))
	case agent.Stopped(in.Stop):
		return agent.TurnResult{Outcome: agent.OutcomeCancelled, Usage: total}
	}

	// 5. The synthesis: the coordinator answers from the Workers' results,
	// with no tools.
	res = rt.RunTurn(ctx, agent.TurnRequest{
		AgentID: t.AgentID, Model: t.ModelOverride, Input: synthesisPrompt(in.Input, box.goal, subtasks, results),
		Stop: in.Stop, Occurrences: coordinator, MaxSteps: s.Opts.Turns.MaxSteps, StallTimeout: s.Opts.Turns.StallTimeout,
	}, continuedObserver{obs})
	res.Usage = total.Add(res.Usage)
	if res.Outcome == agent.OutcomeError && res.Err != nil {
		res.Err = fmt.Errorf("the coordinator could not synthesise the answer: %w", res.Err)
	}
	return res
}

// runOutside runs subtask st on an outside Worker: an agent process of its
// own in the Session's sandbox, beside any other, ended with the subtask.
func (s *LatticeRunner) runOutside(ctx context.Context, t projections.Turn, st events.LatticeSubtask, in LatticeInput, prompt string, obs agent.TurnObserver) agent.TurnResult {
	call := core.ApprovalRequest{Run: t.SessionID, Session: t.SessionID, TurnID: t.TurnID, AgentID: st.Worker}
	process := t.SessionID + "/" + t.TurnID + "/" + st.ID
	defer s.Outside.End(process)
	return s.Outside.Run(ctx, core.OutsideTurn{Run: t.SessionID, Process: process, SessionID: t.SessionID, TurnID: t.TurnID, AgentID: st.Worker,
		Sandbox: in.Sb, Dir: in.Ss.WorkingDir, Input: prompt, Stop: in.Stop,
		Hooks: agentrun.ToolHooks{RunHooks: agentrun.TurnHooks{Core: s.Core}.Run(call, in.Sb, in.Ss.WorkingDir, false)}}, obs)
}

// bidders are the Session's Workers as the auction sees them, with the
// toolbox each runs its subtasks with.
func (s *LatticeRunner) bidders(t projections.Turn, in LatticeInput) ([]Bidder, map[string]agent.Toolbox) {
	team := lattice.WorkersOf(lattice.Team(s.Opts), in.Ss)
	out := make([]Bidder, 0, len(team))
	boxes := map[string]agent.Toolbox{}
	for _, id := range team {
		v, err := s.Opts.Runtime.Agent(id)
		if err != nil {
			continue
		}
		box := agentrun.NewTurnTools(s.Core, tools.New(in.Sb, in.Ss.WorkingDir), core.ApprovalRequest{Run: t.SessionID, Session: t.SessionID, TurnID: t.TurnID, AgentID: id}, in.Stop)
		b := Bidder{Id: id, name: v.Name, Load: s.Opts.Runtime.Load(id), Budget: v.Budget}
		for _, tl := range box.Tools() {
			b.Tools = append(b.Tools, tl.Name)
		}
		boxes[id] = box
		out = append(out, b)
	}
	return out, boxes
}

// workerObserver records one Worker's subtask: its start is the subtask's
// activation (AgentActivated), not another session-start.
type workerObserver struct {
	*agentrun.TurnObserver
	subtask string
}

func (o *workerObserver) Started(string) error {
	return o.AppendTurn(events.LatticeTask{TurnID: o.Turn.TurnID, Subtask: o.subtask, Agent: o.Agent, State: events.TaskActivated})
}

// StartedBy is an outside Worker's start: its subtask's activation too.
func (o *workerObserver) StartedBy(model, _, _ string) error { return o.Started(model) }

// continuedObserver records the coordinator's synthesis: the turn started
// already.
type continuedObserver struct{ *agentrun.TurnObserver }

func (continuedObserver) Started(string) error { return nil }

// TaskResult is how one subtask went.
type TaskResult struct {
	State  string // an events.Task* state
	Output string
	Err    string
	usage  usage.Tokens
	Ran    bool // its Worker ran (usage is its own)
}

// TaskInput is a finished subtask a Worker's subtask depends on.
type TaskInput struct {
	Subtask events.LatticeSubtask
	Output  string
}

// LatticeJob runs a plan's subtasks: one goroutine per Worker runs its
// subtasks one at a time (its load), each once everything on its wait list
// completed; one whose prerequisite did not complete is skipped. A Stop
// lets running subtasks reach their safe boundary and starts nothing more.
type LatticeJob struct {
	Subtasks []events.LatticeSubtask
	Prereq   map[string][]string
	Stop     <-chan struct{}
	Ctx      context.Context
	// Run runs one subtask on its Worker; it may panic.
	Run func(st events.LatticeSubtask, inputs []TaskInput) TaskResult
	// Record journals a subtask's end.
	Record func(st events.LatticeSubtask, r TaskResult)

	mu      sync.Mutex
	results map[string]TaskResult
	changed chan struct{} // closed (and replaced) whenever a result lands
}

// RunAll runs the plan and returns each ended subtask's result; those a
// Stop or shutdown left unstarted have none.
func (j *LatticeJob) RunAll() map[string]TaskResult {
	j.results, j.changed = map[string]TaskResult{}, make(chan struct{})
	var order []string
	queues := map[string][]events.LatticeSubtask{}
	for _, st := range j.Subtasks {
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
func (j *LatticeJob) work(queue []events.LatticeSubtask) {
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
		var inputs []TaskInput
		if i >= 0 && blocker == "" {
			inputs = j.inputs(queue[i])
		}
		j.mu.Unlock()
		if i < 0 {
			select {
			case <-changed:
				continue
			case <-j.Stop:
				return
			case <-j.Ctx.Done():
				return
			}
		}
		if agent.Stopped(j.Stop) || j.Ctx.Err() != nil {
			return
		}
		st := queue[i]
		queue = slices.Delete(queue, i, i+1)
		var r TaskResult
		if blocker != "" {
			r = TaskResult{State: events.TaskSkipped, Err: fmt.Sprintf("skipped: subtask %q, which it waits for, did not complete", blocker)}
		} else {
			r = j.safeRun(st, inputs)
		}
		if j.Ctx.Err() == nil || r.State != events.TaskFailed {
			// A Worker cut off by a shutdown did not fail: the turn's one
			// interrupted record marks its subtask interrupted.
			j.Record(st, r)
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
func (j *LatticeJob) readiness(st events.LatticeSubtask) (ready bool, blocker string) {
	for _, p := range j.Prereq[st.ID] {
		r, ok := j.results[p]
		switch {
		case !ok:
			return false, ""
		case r.State != events.TaskCompleted:
			return false, p
		}
	}
	return true, ""
}

// inputs are the results of the subtasks st depends on; j.mu is held.
func (j *LatticeJob) inputs(st events.LatticeSubtask) []TaskInput {
	var out []TaskInput
	for _, d := range st.DependsOn {
		for _, p := range j.Subtasks {
			if p.ID == d {
				out = append(out, TaskInput{Subtask: p, Output: j.results[d].Output})
			}
		}
	}
	return out
}

// safeRun runs one subtask, turning a panic in the Worker's code path into
// its panicked result.
func (j *LatticeJob) safeRun(st events.LatticeSubtask, inputs []TaskInput) (r TaskResult) {
	defer func() {
		if p := recover(); p != nil {
			r = TaskResult{State: events.TaskPanicked, Err: fmt.Sprintf("the Worker failed unexpectedly: %v", p), Ran: true}
		}
	}()
	return j.Run(st, inputs)
}

// planPrompt asks the coordinator for its plan.
func planPrompt(input string, workers []Bidder) string {
	var b strings.Builder
	b.WriteString("You coordinate a team of Workers. Decompose the user's request below into subtasks and submit them with one call of " +
		lattice.PlanTool + ": {goal, subtasks: [{id, title, instruction, needs_tools?, depends_on?}]}. Each subtask goes to one Worker, who sees " +
		"only its instruction and the results of the subtasks it depends_on, and works in the same workspace. Subtasks without " +
		"dependencies run at the same time.\n\nThe Workers and their tools:\n")
	for _, w := range workers {
		fmt.Fprintf(&b, "- %s", w.Id)
		if w.name != "" && w.name != w.Id {
			fmt.Fprintf(&b, " (%s)", w.name)
		}
		fmt.Fprintf(&b, ": %s\n", strings.Join(w.Tools, ", "))
	}
	b.WriteString("\nThe user's request:\n")
	b.WriteString(input)
	return b.String()
}

// workerPrompt is a Worker's task.
func workerPrompt(goal string, st events.LatticeSubtask, inputs []TaskInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are one Worker of a team working towards: %s\n\nYour subtask %q: %s\n\n%s\n", goal, st.ID, st.Title, st.Instruction)
	for _, in := range inputs {
		fmt.Fprintf(&b, "\nResult of subtask %q (%s), done by %s:\n%s\n", in.Subtask.ID, in.Subtask.Title, in.Subtask.Worker, in.Output)
	}
	b.WriteString("\nDo your subtask with your tools and answer with its result.")
	return b.String()
}

// synthesisPrompt asks the coordinator for the final answer.
func synthesisPrompt(input, goal string, subtasks []events.LatticeSubtask, results map[string]TaskResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Your team worked on the user's request:\n%s\n\nThe goal: %s\n\nThe subtasks' results:\n", input, goal)
	for _, st := range subtasks {
		r := results[st.ID]
		fmt.Fprintf(&b, "\n## %s: %s (Worker %s): %s\n", st.ID, st.Title, st.Worker, r.State)
		switch {
		case r.State == events.TaskCompleted:
			b.WriteString(r.Output + "\n")
		case r.Err != "":
			b.WriteString(r.Err + "\n")
		}
	}
	b.WriteString("\nWrite the final answer to the user from these results. Say plainly which subtasks failed or were skipped and what that means for the answer.")
	return b.String()
}

// maxTaskError bounds a subtask's error in its event.
const maxTaskError = 4 << 10

// Clip cuts s to at most n bytes on a rune boundary, marking the cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
