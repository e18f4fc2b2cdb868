package projections

import (
	"fmt"
	"slices"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/usage"
)

// A lattice turn's record: the coordinator's plan, each subtask's Worker
// and how it went. The Workers' steps and tool calls are the turn's own,
// keyed by Agent; the synthesis is the turn's output.

// Lattice is the plan of a lattice turn.
type Lattice struct {
	Coordinator string           `json:"coordinator"`
	Goal        string           `json:"goal"`
	Subtasks    []LatticeSubtask `json:"subtasks"`
}

// LatticeSubtask is one planned subtask with its state.
type LatticeSubtask struct {
	events.LatticeSubtask
	// Status is pending, then the LatticeTask states (activated,
	// completed, failed, skipped, cancelled, panicked); a subtask the turn
	// ended before is cancelled (a Stop) or interrupted (anything else).
	Status string        `json:"status"`
	Output events.Text   `json:"output,omitzero"`
	Error  string        `json:"error,omitempty"`
	Tokens *usage.Tokens `json:"tokens,omitempty"`
}

// Lattice subtask statuses beyond the LatticeTask states.
const (
	SubtaskPending     = "pending"
	SubtaskInterrupted = "interrupted"
)

// Live-run Agent statuses of a lattice turn's Workers.
const (
	WorkerWaiting = "waiting"
)

func (l *Lattice) clone() *Lattice {
	if l == nil {
		return nil
	}
	c := *l
	c.Subtasks = slices.Clone(l.Subtasks)
	return &c
}

func (l *Lattice) subtask(id string) *LatticeSubtask {
	for i := range l.Subtasks {
		if l.Subtasks[i].ID == id {
			return &l.Subtasks[i]
		}
	}
	return nil
}

// foldLattice applies a lattice event to its live turn.
func foldLattice(t *Turn, run *liveRun, p events.Payload) error {
	switch e := p.(type) {
	case events.LatticePlanned:
		if t.Lattice != nil {
			return fmt.Errorf("turn %s planned twice", t.TurnID)
		}
		l := &Lattice{Coordinator: e.Coordinator, Goal: e.Goal, Subtasks: make([]LatticeSubtask, len(e.Subtasks))}
		for i, st := range e.Subtasks {
			l.Subtasks[i] = LatticeSubtask{LatticeSubtask: st, Status: SubtaskPending}
			if run != nil {
				if a := run.agent(st.Worker); a.Status == TurnAccepted {
					a.Status = WorkerWaiting
				}
			}
		}
		t.Lattice = l
	case events.LatticeTask:
		if t.Lattice == nil {
			return fmt.Errorf("lattice-task for turn %s before its plan", t.TurnID)
		}
		st := t.Lattice.subtask(e.Subtask)
		if st == nil {
			return fmt.Errorf("lattice-task for unknown subtask %s of turn %s", e.Subtask, t.TurnID)
		}
		st.Status, st.Error, st.Tokens = e.State, e.Error, e.Tokens
		if !e.Output.IsZero() {
			st.Output = e.Output
		}
		if run != nil {
			run.agent(e.Agent).Status = e.State
		}
	}
	return nil
}

// endLattice marks the subtasks a turn ended before: cancelled by a Stop,
// interrupted otherwise.
func (t *Turn) endLattice() {
	if t.Lattice == nil {
		return
	}
	for i := range t.Lattice.Subtasks {
		st := &t.Lattice.Subtasks[i]
		if st.Status == SubtaskPending || st.Status == events.TaskActivated {
			st.Status = SubtaskInterrupted
			if t.Status == TurnCancelled {
				st.Status = events.TaskCancelled
			}
		}
	}
}

// Worker lifecycle event types (spec: coordinator Worker lifecycle).
const (
	TypeAgentActivated = "AgentActivated"
	TypeTaskCompleted  = "TaskCompleted"
	TypeAgentFailed    = "AgentFailed"
	TypeAgentCancelled = "AgentCancelled"
	TypeAgentPanicked  = "AgentPanicked"
)

// latticeTyped is the typed event of a subtask's state change: the Worker
// lifecycle notice, its agent the logical Worker ID. A skipped subtask is
// an AgentFailed named "skipped".
func latticeTyped(env journal.Envelope, e events.LatticeTask) []TypedEvent {
	te := TypedEvent{Kind: "event", Agent: e.Agent, Task: e.Subtask, Workflow: env.AggregateID, TurnID: e.TurnID, Seq: env.Seq, At: env.At}
	switch e.State {
	case events.TaskActivated:
		te.Type = TypeAgentActivated
	case events.TaskCompleted:
		te.Type, te.Output = TypeTaskCompleted, e.Output.String()
	case events.TaskFailed, events.TaskSkipped:
		te.Type, te.Output = TypeAgentFailed, e.Error
		if e.State == events.TaskSkipped {
			te.Name = events.TaskSkipped
		}
	case events.TaskCancelled:
		te.Type = TypeAgentCancelled
	case events.TaskPanicked:
		te.Type, te.Output = TypeAgentPanicked, e.Error
	default:
		return nil
	}
	if e.Tokens != nil {
		n := e.Tokens.Total()
		te.Tokens = &n
	}
	return []TypedEvent{te}
}
