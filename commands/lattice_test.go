package commands

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"lathe/journal/events"
	"lathe/projections"
)

func latticeCore(team LatticeTeam) *core {
	ids := []string{"planner", "coder", "tester", "writer"}
	agents := map[string]bool{}
	for _, id := range ids {
		agents[id] = true
	}
	return &core{opts: Options{DefaultImage: "img", Agents: ids, Lattice: team}, agents: agents}
}

// mode.workers narrows the configured team; anything else is refused at
// create (400).
func TestLatticeMode(t *testing.T) {
	whole := latticeCore(LatticeTeam{Coordinator: "planner"})
	listed := latticeCore(LatticeTeam{Coordinator: "planner", Workers: []string{"coder", "tester"}})
	for _, tc := range []struct {
		name    string
		svc     *core
		workers []string
		want    string // error text, "" for accepted
	}{
		{"whole team", whole, nil, ""},
		{"narrowed", whole, []string{"tester", "coder"}, ""},
		{"narrowed listed", listed, []string{"tester"}, ""},
		{"empty list", whole, []string{}, "lists no Worker"},
		{"unknown", whole, []string{"ghost"}, `"ghost" is not a configured lattice Worker`},
		{"the coordinator", whole, []string{"planner"}, `"planner" is not a configured lattice Worker`},
		{"outside the configured workers", listed, []string{"writer"}, `"writer" is not a configured lattice Worker`},
		{"twice", whole, []string{"coder", "coder"}, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := tc.svc.decideSession(SessionSpec{Name: "n", Mode: &events.Mode{Kind: events.ModeLattice, Workers: tc.workers}})
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want ErrInvalid with %q", err, tc.want)
			case tc.want == "" && !slices.Equal(ev.Mode.Workers, tc.workers):
				t.Fatalf("mode %+v", ev.Mode)
			}
		})
	}
	if _, err := whole.decideSession(SessionSpec{Name: "n", Mode: &events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder", Workers: []string{"coder"}}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("single_agent with workers: %v", err)
	}
}

// target_agent: only in a lattice Session, only naming one of its Workers;
// without it a lattice turn runs on the coordinator.
func TestLatticeTurnAgent(t *testing.T) {
	s := latticeCore(LatticeTeam{Coordinator: "planner"})
	noCoordinator := latticeCore(LatticeTeam{})
	single := projections.Session{ID: "S", Mode: events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}, Status: projections.StatusOpen}
	team := projections.Session{ID: "L", Mode: events.Mode{Kind: events.ModeLattice}, Status: projections.StatusOpen}
	narrow := projections.Session{ID: "N", Mode: events.Mode{Kind: events.ModeLattice, Workers: []string{"tester"}}, Status: projections.StatusOpen}
	for _, tc := range []struct {
		name   string
		svc    *core
		ss     projections.Session
		target *string
		agent  string // "" for refused
	}{
		{"single agent", s, single, nil, "coder"},
		{"single agent with its own agent as target", s, single, ptr("coder"), ""},
		{"single agent with another target", s, single, ptr("tester"), ""},
		{"lattice turn", s, team, nil, "planner"},
		{"lattice target", s, team, ptr("writer"), "writer"},
		{"lattice target the coordinator", s, team, ptr("planner"), ""},
		{"lattice target outside the narrowed team", s, narrow, ptr("coder"), ""},
		{"lattice target inside the narrowed team", s, narrow, ptr("tester"), "tester"},
		{"lattice target unknown", s, team, ptr("ghost"), ""},
		{"no coordinator: lattice turn refused", noCoordinator, team, nil, ""},
		{"no coordinator: target still runs", noCoordinator, team, ptr("planner"), "planner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.svc.turnAgentID(tc.ss, tc.target)
			switch {
			case tc.agent == "" && !errors.Is(err, ErrInvalid):
				t.Fatalf("agent %q, err %v; want ErrInvalid", got, err)
			case tc.agent != "" && (err != nil || got != tc.agent):
				t.Fatalf("agent %q, err %v; want %q", got, err, tc.agent)
			}
		})
	}
}
