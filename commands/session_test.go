package commands

import (
	"testing"

	"lathe/journal/events"
)

func ptr[T any](v T) *T { return &v }

// The initial environment decision: a setup command runs only once a
// reviewed approval binds it, and an approval with nothing to bind is void.
func TestDecideSessionEnvironment(t *testing.T) {
	s := &Service{opts: Options{DefaultImage: "img:default"}, agents: map[string]bool{"coder": true}}
	mode := &events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}
	for _, tc := range []struct {
		name               string
		spec               SessionSpec
		state, image, cmd  string
		approved, reviewed bool
	}{
		{name: "no setup", spec: SessionSpec{}, state: events.EnvUnprepared, image: "img:default"},
		{name: "explicit image", spec: SessionSpec{Image: ptr(" lathe.local/sandbox:bookworm ")}, state: events.EnvUnprepared, image: "lathe.local/sandbox:bookworm"},
		{name: "unreviewed setup waits", spec: SessionSpec{SetupCommand: ptr("npm ci")}, state: events.EnvAwaitingApproval, image: "img:default", cmd: "npm ci"},
		{name: "explicit approval binds", spec: SessionSpec{SetupCommand: ptr("npm ci"), SetupApproved: ptr(true)}, state: events.EnvUnprepared, image: "img:default", cmd: "npm ci", approved: true},
		{name: "reviewed veto is authoritative", spec: SessionSpec{SetupCommand: ptr("npm ci"), SetupReviewed: ptr(true), SetupApproved: ptr(false)}, state: events.EnvUnprepared, image: "img:default", cmd: "npm ci", reviewed: true},
		{name: "reviewed approval binds", spec: SessionSpec{SetupCommand: ptr("npm ci"), SetupReviewed: ptr(true), SetupApproved: ptr(true)}, state: events.EnvUnprepared, image: "img:default", cmd: "npm ci", approved: true, reviewed: true},
		{name: "reviewed no-setup decision", spec: SessionSpec{SetupCommand: ptr(""), SetupReviewed: ptr(true), SetupApproved: ptr(true)}, state: events.EnvUnprepared, image: "img:default", reviewed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Name, tc.spec.Mode = "s", mode
			ev, err := s.decideSession(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			env := ev.Environment
			if env.State != tc.state || env.Image != tc.image || env.SetupCommand != tc.cmd || env.SetupApproved != tc.approved || env.SetupReviewed != tc.reviewed || env.Generation != 1 {
				t.Fatalf("environment %+v", env)
			}
		})
	}
}

func TestDecideSessionRejects(t *testing.T) {
	s := &Service{opts: Options{DefaultImage: "img"}, agents: map[string]bool{"coder": true}}
	remote := &Service{opts: Options{DefaultImage: "img", RemoteSandbox: true}, agents: s.agents}
	ok := &events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}
	for _, tc := range []struct {
		name string
		svc  *Service
		spec SessionSpec
	}{
		{"blank name", s, SessionSpec{Name: "  ", Mode: ok}},
		{"control char", s, SessionSpec{Name: "a\x07b", Mode: ok}},
		{"no mode", s, SessionSpec{Name: "n"}},
		{"unknown kind", s, SessionSpec{Name: "n", Mode: &events.Mode{Kind: "swarm"}}},
		{"single agent without id", s, SessionSpec{Name: "n", Mode: &events.Mode{Kind: events.ModeSingleAgent}}},
		{"unknown agent", s, SessionSpec{Name: "n", Mode: &events.Mode{Kind: events.ModeSingleAgent, AgentID: "ghost"}}},
		{"lattice with agent", s, SessionSpec{Name: "n", Mode: &events.Mode{Kind: events.ModeLattice, AgentID: "coder"}}},
		{"port zero", s, SessionSpec{Name: "n", Mode: ok, ExposedPorts: []int{0}}},
		{"port too big", s, SessionSpec{Name: "n", Mode: ok, ExposedPorts: []int{65536}}},
		{"image with space", s, SessionSpec{Name: "n", Mode: ok, Image: ptr("a b")}},
		{"image under remote provider", remote, SessionSpec{Name: "n", Mode: ok, Image: ptr("alpine")}},
		{"empty skill", s, SessionSpec{Name: "n", Mode: ok, EnabledSkills: []string{""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.svc.decideSession(tc.spec); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestPortsAreSortedAndDeduplicated(t *testing.T) {
	got, err := checkPorts([]int{5173, 3000, 5173})
	if err != nil || len(got) != 2 || got[0] != 3000 || got[1] != 5173 {
		t.Fatalf("%v %v", got, err)
	}
}
