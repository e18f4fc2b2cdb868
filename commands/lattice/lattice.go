package lattice

import (
	"fmt"
	"slices"

	"lathe/commands/core"

	"lathe/journal/events"
	"lathe/projections"
)

// Lattice Sessions: a team, not one Agent. The operator's config names the
// coordinator (plans and synthesises) and the Workers (lattice.coordinator,
// lattice.workers); a Session may narrow the Workers with mode.workers. A
// turn without target_agent is a lattice turn (commands/latticerunner/latticeturn.go);
// one with target_agent runs that one Worker alone, as a single-Agent turn
// inside the Session.

// Team is the configured team, its Workers resolved: every configured
// Agent but the coordinator when lattice.workers names none.
func Team(o core.Options) core.LatticeTeam {
	t := core.LatticeTeam{Coordinator: o.Lattice.Coordinator, Workers: slices.Clone(o.Lattice.Workers)}
	if len(t.Workers) == 0 {
		for _, id := range o.Agents {
			if id != t.Coordinator {
				t.Workers = append(t.Workers, id)
			}
		}
	}
	return t
}

// WorkersOf is the Workers of a lattice Session, in config order: the team's, or
// those of them its mode.workers names.
func WorkersOf(t core.LatticeTeam, ss projections.Session) []string {
	if len(ss.Mode.Workers) == 0 {
		return t.Workers
	}
	return slices.DeleteFunc(slices.Clone(t.Workers), func(id string) bool { return !slices.Contains(ss.Mode.Workers, id) })
}

// CheckLatticeMode validates mode.workers: each a configured Worker, once.
func CheckLatticeMode(t core.LatticeTeam, m events.Mode) (events.Mode, error) {
	if m.Workers == nil {
		return m, nil
	}
	if len(m.Workers) == 0 {
		return m, fmt.Errorf("%w: mode.workers lists no Worker; leave it out for the whole team", core.ErrInvalid)
	}
	for i, w := range m.Workers {
		switch {
		case !slices.Contains(t.Workers, w):
			return m, fmt.Errorf("%w: mode.workers[%d] %q is not a configured lattice Worker (the Workers are %q)", core.ErrInvalid, i, w, t.Workers)
		case slices.Index(m.Workers, w) < i:
			return m, fmt.Errorf("%w: mode.workers names %q twice", core.ErrInvalid, w)
		}
	}
	m.Workers = slices.Clone(m.Workers)
	return m, nil
}

// LatticeAgent is the Agent a lattice Session's turn is accepted on: the target
// Worker, or the coordinator of a lattice turn.
func LatticeAgent(t core.LatticeTeam, ss projections.Session, target *string) (string, error) {
	if target != nil {
		if !slices.Contains(WorkersOf(t, ss), *target) {
			return "", fmt.Errorf("%w: target_agent %q is not a Worker of this lattice session (its Workers are %q)", core.ErrInvalid, *target, WorkersOf(t, ss))
		}
		return *target, nil
	}
	if t.Coordinator == "" {
		return "", fmt.Errorf("%w: no lattice.coordinator is configured; name one Worker with target_agent", core.ErrInvalid)
	}
	if len(WorkersOf(t, ss)) == 0 {
		return "", fmt.Errorf("%w: this lattice session has no Worker", core.ErrInvalid)
	}
	return t.Coordinator, nil
}

// PlanTool is the tool the coordinator submits its plan with.
const PlanTool = "submit_plan"
