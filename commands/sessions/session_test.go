package sessions

import (
	"os"
	"path/filepath"
	"testing"

	"lathe/commands/core"
	"lathe/commands/environments"

	"lathe/journal/events"
)

// The initial environment decision: a setup command runs only once a
// reviewed approval binds it, and an approval with nothing to bind is void.
func TestDecideSessionEnvironment(t *testing.T) {
	s := &Sessions{&environments.Sandboxes{Core: &core.Core{Opts: core.Options{DefaultImage: "img:default"}, Agents: map[string]bool{"coder": true}}}}
	mode := &events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}
	for _, tc := range []struct {
		name               string
		spec               SessionSpec
		state, image, cmd  string
		approved, reviewed bool
	}{
		{name: "no setup", spec: SessionSpec{}, state: events.EnvUnprepared, image: "img:default"},
		{name: "explicit image", spec: SessionSpec{Image: new(" lathe.local/sandbox:bookworm ")}, state: events.EnvUnprepared, image: "lathe.local/sandbox:bookworm"},
		{name: "unreviewed setup waits", spec: SessionSpec{SetupCommand: new("npm ci")}, state: events.EnvAwaitingApproval, image: "img:default", cmd: "npm ci"},
		{name: "explicit approval binds", spec: SessionSpec{SetupCommand: new("npm ci"), SetupApproved: new(true)}, state: events.EnvUnprepared, image: "img:default", cmd: "npm ci", approved: true},
		{name: "reviewed veto is authoritative", spec: SessionSpec{SetupCommand: new("npm ci"), SetupReviewed: new(true), SetupApproved: new(false)}, state: events.EnvUnprepared, image: "img:default", cmd: "npm ci", reviewed: true},
		{name: "reviewed approval binds", spec: SessionSpec{SetupCommand: new("npm ci"), SetupReviewed: new(true), SetupApproved: new(true)}, state: events.EnvUnprepared, image: "img:default", cmd: "npm ci", approved: true, reviewed: true},
		{name: "reviewed no-setup decision", spec: SessionSpec{SetupCommand: new(""), SetupReviewed: new(true), SetupApproved: new(true)}, state: events.EnvUnprepared, image: "img:default", reviewed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Name, tc.spec.Mode = "s", mode
			ev, err := s.DecideSession(tc.spec)
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
	s := &Sessions{&environments.Sandboxes{Core: &core.Core{Opts: core.Options{DefaultImage: "img"}, Agents: map[string]bool{"coder": true}}}}
	remote := &Sessions{&environments.Sandboxes{Core: &core.Core{Opts: core.Options{DefaultImage: "img", RemoteSandbox: true}, Agents: s.Agents}}}
	ok := &events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}
	for _, tc := range []struct {
		name string
		svc  *Sessions
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
		{"image with space", s, SessionSpec{Name: "n", Mode: ok, Image: new("a b")}},
		{"image under remote provider", remote, SessionSpec{Name: "n", Mode: ok, Image: new("alpine")}},
		{"empty skill", s, SessionSpec{Name: "n", Mode: ok, EnabledSkills: []string{""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.svc.DecideSession(tc.spec); err == nil {
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

// The devcontainer default: adopted only when the request names neither an
// image nor a setup command; the operator's auto-approve covers its exact
// command only while the Session is unreviewed; lockfiles are never adopted.
func TestAdoptDevcontainer(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".devcontainer"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".devcontainer", "devcontainer.json"),
		[]byte(`{"image": "lathe.local/sandbox:bookworm", // comment
		"postCreateCommand": "make deps",}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	mode := &events.Mode{Kind: events.ModeLattice}
	for _, tc := range []struct {
		name     string
		auto     bool
		spec     SessionSpec
		image    string
		cmd      string
		approved bool
		state    string
	}{
		{"adopted, awaiting", false, SessionSpec{}, "lathe.local/sandbox:bookworm", "make deps", false, events.EnvAwaitingApproval},
		{"operator default approves", true, SessionSpec{}, "lathe.local/sandbox:bookworm", "make deps", true, events.EnvUnprepared},
		{"reviewed veto beats the default", true, SessionSpec{SetupReviewed: new(true), SetupApproved: new(false)}, "lathe.local/sandbox:bookworm", "make deps", false, events.EnvUnprepared},
		{"explicit setup wins", true, SessionSpec{SetupCommand: new("")}, "img", "", false, events.EnvUnprepared},
		{"explicit image wins", true, SessionSpec{Image: new("other")}, "other", "", false, events.EnvUnprepared},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Sessions{&environments.Sandboxes{Core: &core.Core{Opts: core.Options{DefaultImage: "img", AutoApproveDevcontainerSetup: tc.auto}}}}
			tc.spec.Name, tc.spec.Mode = "s", mode
			ev, err := s.DecideSession(tc.spec)
			if err == nil {
				ev, err = s.adoptDevcontainer(ev, tc.spec, dir)
			}
			if err != nil {
				t.Fatal(err)
			}
			env := ev.Environment
			if env.Image != tc.image || env.SetupCommand != tc.cmd || env.SetupApproved != tc.approved || env.State != tc.state {
				t.Fatalf("environment %+v", env)
			}
			if tc.cmd != "" && env.SetupSource != events.SourceDevcontainer {
				t.Fatalf("source %q", env.SetupSource)
			}
		})
	}
}
