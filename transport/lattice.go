package transport

import "lathe/journal/events"

// Lattice turn frames: coordinator-plan, from the journaled plan. The
// Workers' lifecycle notices are typed events (projections.TypedEventsOf),
// framed as `event` by Broadcast; their stream frames are the turn's own,
// keyed by agent.

// planFrame is coordinator-plan: the coordinator's decomposition and the
// auction's outcome, each subtask with its assigned Worker.
type planFrame struct {
	Kind        string                  `json:"kind"` // "coordinator-plan"
	Workflow    string                  `json:"workflow"`
	TurnID      string                  `json:"turn_id"`
	Coordinator string                  `json:"coordinator"`
	Goal        string                  `json:"goal"`
	Subtasks    []events.LatticeSubtask `json:"subtasks"`
}

func init() {
	framedTurnEvents[events.LatticePlanned{}.EventType()] = true
}

func newPlanFrame(session string, e events.LatticePlanned) planFrame {
	return planFrame{Kind: "coordinator-plan", Workflow: session, TurnID: e.TurnID, Coordinator: e.Coordinator, Goal: e.Goal, Subtasks: e.Subtasks}
}
