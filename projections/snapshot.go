package projections

import "lathe/journal/events"

// Run is one live run in the /ws snapshot: for a Session turn, workflow is
// the Session ID (the run key of its frames), with the Agent buffers
// streamed so far and the tool calls journaled so far. The frames after the
// snapshot continue exactly where these stop.
type Run struct {
	Workflow     string     `json:"workflow"`
	Session      string     `json:"session,omitempty"`
	TurnID       string     `json:"turn_id,omitempty"`
	AttemptSetID string     `json:"attempt_set_id,omitempty"`
	Kind         string     `json:"kind"`
	Status       string     `json:"status"`
	Agents       []RunAgent `json:"agents"`
	ToolCalls    []ToolCall `json:"tool_calls"`
	// The coordinator plan fields of a lattice turn, once planned: each
	// subtask with its Worker and status (Agents has each Worker's buffer
	// and status).
	Coordinator string           `json:"coordinator,omitempty"`
	Goal        string           `json:"goal,omitempty"`
	Subtasks    []LatticeSubtask `json:"subtasks,omitempty"`
	// Agent, Model, AgentName and AgentVersion say what runs the turn
	// once it started (an outside agent's own name and version); Plan is
	// an outside agent's latest plan.
	Agent        string             `json:"agent,omitempty"`
	Model        string             `json:"model,omitempty"`
	AgentName    string             `json:"agent_name,omitempty"`
	AgentVersion string             `json:"agent_version,omitempty"`
	Plan         []events.PlanEntry `json:"plan,omitempty"`
	// Automation and AwaitingHuman are a workflow run's (an Automation run
	// not ended): its Automation and the nodes waiting for an operator.
	Automation    string   `json:"automation_id,omitempty"`
	AwaitingHuman []string `json:"awaiting_human,omitempty"`
	// DisplayInput is a Session turn's user message (its display input,
	// else its input), so every client shows it while the turn runs.
	DisplayInput string `json:"display_input,omitempty"`
}

// Transition is a Session environment transition that owns runtime teardown.
type Transition struct {
	Session    string `json:"session"`
	Generation uint64 `json:"generation"`
}

// Ownership is a Ways set's exclusive hold on a Workspace's primary runtime.
type Ownership struct {
	Workspace    string `json:"workspace"`
	Session      string `json:"session"`
	AttemptSetID string `json:"attempt_set_id"`
}

// Snapshot is the authoritative live state a /ws client hydrates from.
type Snapshot struct {
	Kind                   string       `json:"kind"` // "snapshot"
	Seq                    uint64       `json:"seq"`
	Live                   uint64       `json:"live"` // the last live-delta sequence number it covers
	Runs                   []Run        `json:"runs"`
	Approvals              []Approval   `json:"approvals"`
	EnvironmentTransitions []Transition `json:"environment_transitions"`
	AttemptOwnerships      []Ownership  `json:"attempt_ownerships"`
}

// Snapshot builds the /ws snapshot and the journal seq it reflects. It reads
// only the live-state indexes, never every Session.
func (s *Store) Snapshot() Snapshot {
	snap, r := s.snapshot()
	for i := range snap.Runs {
		snap.Runs[i].ToolCalls = resolveCalls(r, snap.Runs[i].ToolCalls)
		snap.Runs[i].Subtasks = resolveSubtasks(r, snap.Runs[i].Subtasks)
	}
	return snap
}

// snapshot builds the Snapshot under the read lock, its tool calls'
// content still referenced, and returns the reader that resolves it.
func (s *Store) snapshot() (Snapshot, events.BlobReader) {
	s.sh.mu.RLock()
	defer s.sh.mu.RUnlock()
	runs := append(s.LiveModel.runsLocked(), s.AutomationModel.workflowRunsLocked()...)
	return Snapshot{
		Kind:                   "snapshot",
		Seq:                    s.seq,
		Live:                   s.LiveModel.live,
		Runs:                   runs,
		Approvals:              s.ApprovalModel.pendingLocked(),
		EnvironmentTransitions: s.SessionModel.transitionsLocked(),
		AttemptOwnerships:      s.WaysModel.ownershipsLocked(),
	}, s.sh.blobs
}
