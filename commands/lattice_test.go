package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/latticerunner"
	"lathe/commands/sessions"
	"lathe/commands/turns"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/llm/catalog"
)

func latticeCore(team core.LatticeTeam) *core.Core {
	ids := []string{"planner", "coder", "tester", "writer"}
	agents := map[string]bool{}
	for _, id := range ids {
		agents[id] = true
	}
	return &core.Core{Opts: core.Options{DefaultImage: "img", Agents: ids, Lattice: team}, Agents: agents}
}

// mode.workers narrows the configured team; anything else is refused at
// create (400).
func TestLatticeMode(t *testing.T) {
	whole := latticeCore(core.LatticeTeam{Coordinator: "planner"})
	listed := latticeCore(core.LatticeTeam{Coordinator: "planner", Workers: []string{"coder", "tester"}})
	for _, tc := range []struct {
		name    string
		svc     *core.Core
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
			ev, err := (&sessions.Sessions{Sandboxes: &environments.Sandboxes{Core: tc.svc}}).DecideSession(sessions.SessionSpec{Name: "n", Mode: &events.Mode{Kind: events.ModeLattice, Workers: tc.workers}})
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (!errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want ErrInvalid with %q", err, tc.want)
			case tc.want == "" && !slices.Equal(ev.Mode.Workers, tc.workers):
				t.Fatalf("mode %+v", ev.Mode)
			}
		})
	}
	if _, err := (&sessions.Sessions{Sandboxes: &environments.Sandboxes{Core: whole}}).DecideSession(sessions.SessionSpec{Name: "n", Mode: &events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder", Workers: []string{"coder"}}}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("single_agent with workers: %v", err)
	}
}

// target_agent: only in a lattice Session, only naming one of its Workers;
// without it a lattice turn runs on the coordinator.
func TestLatticeTurnAgent(t *testing.T) {
	s := latticeCore(core.LatticeTeam{Coordinator: "planner"})
	noCoordinator := latticeCore(core.LatticeTeam{})
	single := projections.Session{ID: "S", Mode: events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}, Status: projections.StatusOpen}
	team := projections.Session{ID: "L", Mode: events.Mode{Kind: events.ModeLattice}, Status: projections.StatusOpen}
	narrow := projections.Session{ID: "N", Mode: events.Mode{Kind: events.ModeLattice, Workers: []string{"tester"}}, Status: projections.StatusOpen}
	for _, tc := range []struct {
		name   string
		svc    *core.Core
		ss     projections.Session
		target *string
		agent  string // "" for refused
	}{
		{"single agent", s, single, nil, "coder"},
		{"single agent with its own agent as target", s, single, new("coder"), ""},
		{"single agent with another target", s, single, new("tester"), ""},
		{"lattice turn", s, team, nil, "planner"},
		{"lattice target", s, team, new("writer"), "writer"},
		{"lattice target the coordinator", s, team, new("planner"), ""},
		{"lattice target outside the narrowed team", s, narrow, new("coder"), ""},
		{"lattice target inside the narrowed team", s, narrow, new("tester"), "tester"},
		{"lattice target unknown", s, team, new("ghost"), ""},
		{"no coordinator: lattice turn refused", noCoordinator, team, nil, ""},
		{"no coordinator: target still runs", noCoordinator, team, new("planner"), "planner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := (&turns.Turns{Sandboxes: &environments.Sandboxes{Core: tc.svc}}).TurnAgentID(tc.ss, tc.target)
			switch {
			case tc.agent == "" && !errors.Is(err, core.ErrInvalid):
				t.Fatalf("agent %q, err %v; want ErrInvalid", got, err)
			case tc.agent != "" && (err != nil || got != tc.agent):
				t.Fatalf("agent %q, err %v; want %q", got, err, tc.agent)
			}
		})
	}
}

// A plan is structured output checked strictly: a malformed one, a cycle or
// a reference to an unknown subtask is refused before any Worker starts.
func TestParsePlan(t *testing.T) {
	for _, tc := range []struct {
		name, args, want string // want: error text, "" for accepted
	}{
		{"ok", `{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"do a"},{"id":"b","title":"B","instruction":"do b","depends_on":["a"],"needs_tools":["shell"]}]}`, ""},
		{"not JSON", `{"goal":`, "not a plan object"},
		{"unknown field", `{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"x","owner":"w"}]}`, "unknown field"},
		{"trailing value", `{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"x"}]} {}`, "more than one"},
		{"no goal", `{"subtasks":[{"id":"a","title":"A","instruction":"x"}]}`, "goal"},
		{"no subtasks", `{"goal":"g","subtasks":[]}`, "1 to 32 subtasks"},
		{"bad id", `{"goal":"g","subtasks":[{"id":"a b","title":"A","instruction":"x"}]}`, "must be 1-64"},
		{"duplicate id", `{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"x"},{"id":"a","title":"B","instruction":"y"}]}`, "used twice"},
		{"no instruction", `{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":" "}]}`, "instruction"},
		{"unknown dependency", `{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"x","depends_on":["z"]}]}`, `unknown subtask "z"`},
		{"self dependency", `{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"x","depends_on":["a"]}]}`, "depends on itself"},
		{"cycle", `{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"x","depends_on":["c"]},{"id":"b","title":"B","instruction":"y","depends_on":["a"]},{"id":"c","title":"C","instruction":"z","depends_on":["b"]}]}`, "cycle: a → c → b → a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			goal, subtasks, err := latticerunner.ParsePlan([]byte(tc.args))
			switch {
			case tc.want == "" && (err != nil || goal != "g" || len(subtasks) != 2 || subtasks[1].DependsOn[0] != "a"):
				t.Fatalf("%q %+v %v", goal, subtasks, err)
			case tc.want != "" && (!errors.Is(err, latticerunner.ErrPlan) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want errPlan with %q", err, tc.want)
			}
		})
	}
}

// The auction is deterministic: tools first, then load, then budget, then
// the team's order; a subtask nobody can take fails it.
func TestAuction(t *testing.T) {
	sandboxTools := []string{"read_file", "shell"}
	st := func(id string, needs ...string) events.LatticeSubtask {
		return events.LatticeSubtask{ID: id, NeedsTools: needs}
	}
	for _, tc := range []struct {
		name     string
		subtasks []events.LatticeSubtask
		bidders  []latticerunner.Bidder
		want     []string // each subtask's Worker; nil: refused
	}{
		{"spread by load", []events.LatticeSubtask{st("a"), st("b"), st("c"), st("d"), st("e")},
			[]latticerunner.Bidder{{Id: "w1", Tools: sandboxTools}, {Id: "w2", Tools: sandboxTools}}, []string{"w1", "w2", "w1", "w2", "w1"}},
		{"current load counts", []events.LatticeSubtask{st("a"), st("b")},
			[]latticerunner.Bidder{{Id: "w1", Tools: sandboxTools, Load: 1}, {Id: "w2", Tools: sandboxTools}}, []string{"w2", "w1"}},
		{"needed tools", []events.LatticeSubtask{st("a", "mcp__db__query"), st("b", "mcp__db__query")},
			[]latticerunner.Bidder{{Id: "w1", Tools: sandboxTools}, {Id: "w2", Tools: append(sandboxTools, "mcp__db__query")}}, []string{"w2", "w2"}},
		{"budget breaks a tie", []events.LatticeSubtask{st("a")},
			[]latticerunner.Bidder{{Id: "w1", Tools: sandboxTools, Budget: catalog.Budget{MaxOutputTokens: 100}}, {Id: "w2", Tools: sandboxTools}}, []string{"w2"}},
		{"larger budget wins", []events.LatticeSubtask{st("a")},
			[]latticerunner.Bidder{{Id: "w1", Tools: sandboxTools, Budget: catalog.Budget{MaxUSD: 1}}, {Id: "w2", Tools: sandboxTools, Budget: catalog.Budget{MaxUSD: 2}}}, []string{"w2"}},
		{"nobody has the tool", []events.LatticeSubtask{st("a"), st("b", "browser")},
			[]latticerunner.Bidder{{Id: "w1", Tools: sandboxTools}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := latticerunner.Auction(tc.subtasks, tc.bidders)
			if tc.want == nil {
				if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), `"b"`) {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var workers []string
			for _, s := range got {
				workers = append(workers, s.Worker)
			}
			if !slices.Equal(workers, tc.want) {
				t.Fatalf("workers %v, want %v", workers, tc.want)
			}
		})
	}
}

// An Agent's dependencies make its subtasks wait for every subtask of the
// Workers it depends on; a cycle through them is refused.
func TestPrerequisites(t *testing.T) {
	subtasks := []events.LatticeSubtask{{ID: "a", Worker: "w1"}, {ID: "a2", Worker: "w1"}, {ID: "b", Worker: "w2"}, {ID: "c", Worker: "w3", DependsOn: []string{"b"}}}
	deps := map[string][]string{"w2": {"w1", "w2"}}
	pre, err := latticerunner.Prerequisites(subtasks, func(w string) []string { return deps[w] })
	if err != nil || !slices.Equal(pre["b"], []string{"a", "a2"}) || !slices.Equal(pre["c"], []string{"b"}) || len(pre["a"]) != 0 {
		t.Fatalf("%v %v", pre, err)
	}
	deps = map[string][]string{"w1": {"w2"}}
	if _, err := latticerunner.Prerequisites([]events.LatticeSubtask{{ID: "a", Worker: "w1"}, {ID: "b", Worker: "w2", DependsOn: []string{"a"}}},
		func(w string) []string { return deps[w] }); !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("cycle through an Agent dependency: %v", err)
	}
}

// jobRecorder records a latticeJob's journaled ends.
type jobRecorder struct {
	mu    sync.Mutex
	ended []string // "id:state"
}

func (r *jobRecorder) record(st events.LatticeSubtask, res latticerunner.TaskResult) {
	r.mu.Lock()
	r.ended = append(r.ended, st.ID+":"+res.State)
	r.mu.Unlock()
}

func (r *jobRecorder) state(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.ended {
		if s, ok := strings.CutPrefix(e, id+":"); ok {
			return s
		}
	}
	return ""
}

// The scheduler: independent Workers run at once, a subtask waits for its
// prerequisites and gets their results, a failure skips its dependents and
// no others, a panic is caught and reported, and a Stop starts nothing more.
func TestLatticeJob(t *testing.T) {
	plan := []events.LatticeSubtask{
		{ID: "a", Worker: "w1"}, {ID: "b", Worker: "w2"}, {ID: "c", Worker: "w3", DependsOn: []string{"a", "b"}},
		{ID: "d", Worker: "w1", DependsOn: []string{"x"}}, {ID: "x", Worker: "w2"}, {ID: "p", Worker: "w4"}, {ID: "q", Worker: "w4", DependsOn: []string{"p"}},
	}
	pre := map[string][]string{}
	for _, st := range plan {
		pre[st.ID] = st.DependsOn
	}
	bothStarted := make(chan struct{})
	var started sync.WaitGroup
	started.Add(2)
	go func() { started.Wait(); close(bothStarted) }()
	var gotInputs []string
	rec := &jobRecorder{}
	job := &latticerunner.LatticeJob{Subtasks: plan, Prereq: pre, Stop: make(chan struct{}), Ctx: t.Context(), Record: rec.record,
		Run: func(st events.LatticeSubtask, inputs []latticerunner.TaskInput) latticerunner.TaskResult {
			switch st.ID {
			case "a", "b": // each waits until the other started: they run at once
				started.Done()
				<-bothStarted
			case "c":
				for _, in := range inputs {
					gotInputs = append(gotInputs, in.Subtask.ID+"="+in.Output)
				}
			case "x":
				return latticerunner.TaskResult{State: events.TaskFailed, Err: "boom", Ran: true}
			case "p":
				panic("worker bug")
			}
			return latticerunner.TaskResult{State: events.TaskCompleted, Output: "out-" + st.ID, Ran: true}
		}}
	results := job.RunAll()
	want := map[string]string{"a": events.TaskCompleted, "b": events.TaskCompleted, "c": events.TaskCompleted, "x": events.TaskFailed,
		"d": events.TaskSkipped, "p": events.TaskPanicked, "q": events.TaskSkipped}
	for id, state := range want {
		if results[id].State != state || rec.state(id) != state {
			t.Errorf("subtask %s: %s (recorded %s), want %s", id, results[id].State, rec.state(id), state)
		}
	}
	if !slices.Equal(gotInputs, []string{"a=out-a", "b=out-b"}) {
		t.Errorf("c's inputs %v", gotInputs)
	}
	if !strings.Contains(results["p"].Err, "worker bug") || !strings.Contains(results["d"].Err, `"x"`) {
		t.Errorf("panic %q, skip %q", results["p"].Err, results["d"].Err)
	}

	// Stop: the running subtask ends at its boundary, nothing else starts.
	stop := make(chan struct{})
	running, bRan := make(chan struct{}), make(chan struct{})
	rec = &jobRecorder{}
	job = &latticerunner.LatticeJob{Subtasks: plan[:3], Prereq: pre, Stop: stop, Ctx: t.Context(), Record: rec.record,
		Run: func(st events.LatticeSubtask, _ []latticerunner.TaskInput) latticerunner.TaskResult {
			if st.ID == "b" {
				close(bRan)
				return latticerunner.TaskResult{State: events.TaskCompleted, Ran: true}
			}
			<-bRan
			close(running)
			<-stop
			return latticerunner.TaskResult{State: events.TaskCancelled, Ran: true}
		}}
	go func() { <-running; close(stop) }()
	results = job.RunAll()
	if results["a"].State != events.TaskCancelled || rec.state("c") != "" || len(results) != 2 {
		t.Errorf("after a Stop: %v, recorded %v", results, rec.ended)
	}
}

// FuzzParsePlan: a model's plan is outside input. Whatever it is, parsing
// never panics, and an accepted plan is one a scheduler can run: unique
// IDs, known dependencies, no cycle, within the bounds.
func FuzzParsePlan(f *testing.F) {
	for _, s := range []string{
		`{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"x"},{"id":"b","title":"B","instruction":"y","depends_on":["a"]}]}`,
		`{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"x","depends_on":["a"]}]}`,
		`{"goal":"g","subtasks":[]}`, `[]`, `null`, `{"goal":1}`, `{"goal":"g","subtasks":[{"id":"a","title":"A","instruction":"x","needs_tools":["shell","shell"]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		goal, subtasks, err := latticerunner.ParsePlan(args)
		if err != nil {
			if !errors.Is(err, latticerunner.ErrPlan) {
				t.Fatalf("error %v is not errPlan", err)
			}
			return
		}
		if goal == "" || len(subtasks) == 0 || len(subtasks) > latticerunner.MaxSubtasks {
			t.Fatalf("accepted %q with %d subtasks", goal, len(subtasks))
		}
		ids := map[string]bool{}
		deps := map[string][]string{}
		var order []string
		for _, st := range subtasks {
			if ids[st.ID] || st.Worker != "" {
				t.Fatalf("subtask %+v", st)
			}
			ids[st.ID] = true
			deps[st.ID] = st.DependsOn
			order = append(order, st.ID)
		}
		for _, st := range subtasks {
			for _, d := range st.DependsOn {
				if !ids[d] || d == st.ID {
					t.Fatalf("subtask %s depends on %q", st.ID, d)
				}
			}
		}
		if c := latticerunner.CycleIn(order, deps); c != nil {
			t.Fatalf("accepted a cycle %v", c)
		}
	})
}

// The largest plan parsePlan accepts is one event the journal takes, with
// the longest Worker names and turn ID.
func TestLargestPlanFitsOneEvent(t *testing.T) {
	big := func(n int) string { return strings.Repeat("<", n) } // escaped to 6 bytes each in JSON
	p := latticerunner.PlanArgs{Goal: big(latticerunner.MaxPlanGoal)}
	for i := range latticerunner.MaxSubtasks {
		p.Subtasks = append(p.Subtasks, latticerunner.PlanSubtask{ID: fmt.Sprintf("%064d", i), Title: big(latticerunner.MaxSubtaskTitle), Instruction: big(latticerunner.MaxSubtaskText)})
	}
	// Shrink the instructions until the plan is accepted: the largest one.
	var goal string
	var subtasks []events.LatticeSubtask
	for n := latticerunner.MaxSubtaskText; ; n -= 128 {
		for i := range p.Subtasks {
			p.Subtasks[i].Instruction = big(n)
		}
		args, _ := json.Marshal(p)
		var err error
		if goal, subtasks, err = latticerunner.ParsePlan(args); err == nil {
			break
		} else if !strings.Contains(err.Error(), "bytes as JSON") {
			t.Fatal(err)
		}
	}
	for i := range subtasks {
		subtasks[i].Worker = strings.Repeat("w", 64)
	}
	data, _ := json.Marshal(events.LatticePlanned{TurnID: strings.Repeat("t", 128), Coordinator: strings.Repeat("c", 64), Goal: goal, Subtasks: subtasks})
	if len(data) > journal.MaxEventData {
		t.Fatalf("the largest plan is %d bytes; an event holds %d", len(data), journal.MaxEventData)
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{{"short", 10, "short"}, {"abcdef", 3, "abc…"}, {"aé", 2, "a…"}} {
		if got := latticerunner.Clip(tc.in, tc.n); got != tc.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
