package commands

import (
	"fmt"
	"slices"

	"lathe/journal/events"
	"lathe/projections"
)

// Lattice Sessions: a team, not one Agent. The operator's config names the
// coordinator (plans and synthesises) and the Workers (lattice.coordinator,
// lattice.workers); a Session may narrow the Workers with mode.workers. A
// turn without target_agent is a lattice turn (commands/latticeturn.go);
// one with target_agent runs that one Worker alone, as a single-Agent turn
// inside the Session.

// LatticeTeam is the configured team of lattice Sessions.
type LatticeTeam struct {
	// Coordinator plans and synthesises; "" means lattice turns need
	// target_agent.
	Coordinator string
	// Workers are the Worker Agent IDs; empty means every configured Agent
	// but the coordinator.
	Workers []string
}

// latticeWorkers is the configured Worker set, in config order.
func latticeWorkers(o Options) []string {
	if len(o.Lattice.Workers) > 0 {
		return o.Lattice.Workers
	}
	out := make([]string, 0, len(o.Agents))
	for _, id := range o.Agents {
		if id != o.Lattice.Coordinator {
			out = append(out, id)
		}
	}
	return out
}

// LatticeTeam is the configured team, its Workers resolved: a lattice
// Session's Workers are these, or those of them its mode.workers names.
func (s *Turns) LatticeTeam() LatticeTeam {
	return LatticeTeam{Coordinator: s.opts.Lattice.Coordinator, Workers: slices.Clone(latticeWorkers(s.opts))}
}

// teamOf is the Workers of a lattice Session, in config order.
func (s *Turns) teamOf(ss projections.Session) []string {
	all := latticeWorkers(s.opts)
	if len(ss.Mode.Workers) == 0 {
		return all
	}
	return slices.DeleteFunc(slices.Clone(all), func(id string) bool { return !slices.Contains(ss.Mode.Workers, id) })
}

// checkLatticeMode validates mode.workers: each a configured Worker, once.
func (s *Sessions) checkLatticeMode(m events.Mode) (events.Mode, error) {
	if m.Workers == nil {
		return m, nil
	}
	if len(m.Workers) == 0 {
		return m, fmt.Errorf("%w: mode.workers lists no Worker; leave it out for the whole team", ErrInvalid)
	}
	all := latticeWorkers(s.opts)
	for i, w := range m.Workers {
		switch {
		case !slices.Contains(all, w):
			return m, fmt.Errorf("%w: mode.workers[%d] %q is not a configured lattice Worker (the Workers are %q)", ErrInvalid, i, w, all)
		case slices.Index(m.Workers, w) < i:
			return m, fmt.Errorf("%w: mode.workers names %q twice", ErrInvalid, w)
		}
	}
	m.Workers = slices.Clone(m.Workers)
	return m, nil
}

// latticeAgent is the Agent a lattice Session's turn is accepted on: the
// target Worker, or the coordinator of a lattice turn.
func (s *Turns) latticeAgent(ss projections.Session, target *string) (string, error) {
	if target != nil {
		if !slices.Contains(s.teamOf(ss), *target) {
			return "", fmt.Errorf("%w: target_agent %q is not a Worker of this lattice session (its Workers are %q)", ErrInvalid, *target, s.teamOf(ss))
		}
		return *target, nil
	}
	if s.opts.Lattice.Coordinator == "" {
		return "", fmt.Errorf("%w: no lattice.coordinator is configured; name one Worker with target_agent", ErrInvalid)
	}
	if len(s.teamOf(ss)) == 0 {
		return "", fmt.Errorf("%w: this lattice session has no Worker", ErrInvalid)
	}
	return s.opts.Lattice.Coordinator, nil
}
