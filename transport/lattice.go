package transport

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"lathe/journal/events"
)

// GET /api/lattice → 200 {coordinator, workers}: the team of lattice
// Sessions (lattice.coordinator, and lattice.workers or every Agent but
// the coordinator); a Session's mode.workers narrows it. The workbench's
// Worker picker offers these for target_agent.
func (s *latticeRoutes) latticeTeam(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	workers := s.team.Workers
	if workers == nil {
		workers = []string{}
	}
	writeJSON(w, http.StatusOK, latticeTeamBody{Coordinator: s.team.Coordinator, Workers: workers})
}

// latticeTeamBody is GET /api/lattice.
type latticeTeamBody struct {
	Coordinator string   `json:"coordinator"`
	Workers     []string `json:"workers"`
}

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

func newPlanFrame(session string, e events.LatticePlanned) planFrame {
	return planFrame{Kind: "coordinator-plan", Workflow: session, TurnID: e.TurnID, Coordinator: e.Coordinator, Goal: e.Goal, Subtasks: e.Subtasks}
}
