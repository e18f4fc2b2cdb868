package events

import "lathe/runtime/usage"

func init() {
	register[LatticePlanned]()
	register[LatticeTask]()
}

// A lattice turn's events live on its Session's aggregate with the rest of
// the turn: the coordinator's plan with the auction's assignment, then each
// subtask's lifecycle as its Worker runs it. The Workers' inferences and
// tool calls are the turn's usual events, keyed by Agent.

// LatticeSubtask is one subtask of a coordinator's plan and the Worker the
// auction assigned it to.
type LatticeSubtask struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Instruction string   `json:"instruction"`
	NeedsTools  []string `json:"needs_tools,omitempty"`
	DependsOn   []string `json:"depends_on,omitempty"`
	Worker      string   `json:"worker"`
}

// LatticePlanned: the coordinator's validated plan and its assignment,
// journaled before any Worker starts. Its frame is coordinator-plan.
type LatticePlanned struct {
	TurnID      string           `json:"turn_id"`
	Coordinator string           `json:"coordinator"`
	Goal        string           `json:"goal"`
	Subtasks    []LatticeSubtask `json:"subtasks"`
}

// Lattice subtask states (LatticeTask.State).
const (
	TaskActivated = "activated"
	TaskCompleted = "completed"
	TaskFailed    = "failed"
	// TaskSkipped: a subtask it depends on did not complete; it never ran.
	TaskSkipped   = "skipped"
	TaskCancelled = "cancelled"
	// TaskPanicked: the Worker's code path failed unexpectedly; the panic
	// was caught and is reported in Error.
	TaskPanicked = "panicked"
)

// LatticeTask: a subtask's Worker changed state. Agent is the stable
// logical Worker ID. A completed subtask carries its output; every ended
// one that ran carries the tokens its inferences used.
type LatticeTask struct {
	TurnID  string        `json:"turn_id"`
	Subtask string        `json:"subtask"`
	Agent   string        `json:"agent"`
	State   string        `json:"state"`
	Output  Text          `json:"output,omitzero"`
	Error   string        `json:"error,omitempty"`
	Tokens  *usage.Tokens `json:"tokens,omitempty"`
}

func (LatticePlanned) EventType() string { return "lattice-planned" }
func (LatticeTask) EventType() string    { return "lattice-task" }

func (LatticePlanned) Aggregate() string { return Session }
func (LatticeTask) Aggregate() string    { return Session }

func (e LatticePlanned) Turn() string { return e.TurnID }
func (e LatticeTask) Turn() string    { return e.TurnID }

func (e LatticeTask) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Output)
}
