package projections

import "slices"

// Run is one live run in the /ws snapshot. Turns (a later issue) project
// into it; until then no run is ever live.
type Run struct {
	Workflow     string `json:"workflow"`
	TurnID       string `json:"turn_id,omitempty"`
	AttemptSetID string `json:"attempt_set_id,omitempty"`
	Kind         string `json:"kind"`
	Status       string `json:"status"`
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

// Approval is a pending MCP tool-call approval.
type Approval struct {
	ApprovalID string `json:"approval_id"`
}

// Snapshot is the authoritative live state a /ws client hydrates from.
type Snapshot struct {
	Kind                   string       `json:"kind"` // "snapshot"
	Seq                    uint64       `json:"seq"`
	Runs                   []Run        `json:"runs"`
	Approvals              []Approval   `json:"approvals"`
	EnvironmentTransitions []Transition `json:"environment_transitions"`
	AttemptOwnerships      []Ownership  `json:"attempt_ownerships"`
}

// Snapshot builds the /ws snapshot and the journal seq it reflects. It reads
// only the live-state indexes, never every Session.
func (s *Store) Snapshot() Snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	transitions := make([]Transition, 0, len(s.owned))
	for id, gen := range s.owned {
		transitions = append(transitions, Transition{Session: id, Generation: gen})
	}
	slices.SortFunc(transitions, func(a, b Transition) int { return compareIDs(a.Session, b.Session) })
	return Snapshot{
		Kind:                   "snapshot",
		Seq:                    s.seq,
		Runs:                   []Run{},
		Approvals:              []Approval{},
		EnvironmentTransitions: transitions,
		AttemptOwnerships:      []Ownership{},
	}
}
