package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/commands/automationrunner"
	"lathe/commands/automations"
	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/journal/journaltest"
	"lathe/projections"
	"lathe/runtime/polltest"
)

func echo(id, text string) events.Node {
	return events.Node{ID: id, Kind: events.NodeTool, ToolID: "lathe__echo", Input: `{"text": "` + text + `"}`}
}

func auto(id string, nodes []events.Node, edges ...events.Edge) events.Automation {
	return events.Automation{ID: id, Name: id, Enabled: true, Trigger: events.Trigger{Kind: events.TriggerManual}, Nodes: nodes, Edges: edges}
}

func edge(from, to string, branch ...string) events.Edge {
	e := events.Edge{From: from, To: to}
	if len(branch) > 0 {
		e.Branch = branch[0]
	}
	return e
}

// waitRunState polls the run until its state is want.
func waitRunState(t *testing.T, store *projections.Store, runID, want string) projections.AutomationRun {
	t.Helper()
	var run projections.AutomationRun
	polltest.Check(t, func() error {
		var ok bool
		if run, ok = store.AutomationRun(runID); !ok || run.State != want {
			return fmt.Errorf("run %s: state %q, want %q: %+v", runID, run.State, want, run)
		}
		return nil
	}, polltest.Within(10*time.Second))
	return run
}

func TestAutomationValidation(t *testing.T) {
	svc, _ := newTaskService(t)
	s := svc.Automations
	ctx := context.Background()
	if _, err := s.CreateAutomation(ctx, auto("child", []events.Node{echo("a", "x")})); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		a        events.Automation
		node     string
		edge     string
		contains string
	}{
		{"unknown kind", auto("x", []events.Node{{ID: "a", Kind: "loop"}}), "a", "", "unknown kind"},
		{"missing kind", auto("x", []events.Node{{ID: "a"}}), "a", "", "kind is required"},
		{"agent without agent_id", auto("x", []events.Node{{ID: "a", Kind: "agent", Input: "hi"}}), "a", "", "agent_id is required"},
		{"unknown agent", auto("x", []events.Node{{ID: "a", Kind: "agent", AgentID: "ghost", Input: "hi"}}), "a", "", "no Agent"},
		{"tool without tool_id", auto("x", []events.Node{{ID: "a", Kind: "tool"}}), "a", "", "tool_id is required"},
		{"bad template ref", auto("x", []events.Node{echo("a", "{{node:zz}}")}), "a", "", "no such node"},
		{"unknown template", auto("x", []events.Node{echo("a", "{{what}}")}), "a", "", "unknown template"},
		{"edge from missing", auto("x", []events.Node{echo("a", "x")}, edge("nope", "a")), "", "nope->a", "names no node"},
		{"edge to missing", auto("x", []events.Node{echo("a", "x")}, edge("a", "nope")), "", "a->nope", "names no node"},
		{"cycle", auto("x", []events.Node{echo("a", "x"), echo("b", "y")}, edge("a", "b"), edge("b", "a")), "a", "", "cycle"},
		{"bad regex", auto("x", []events.Node{{ID: "c", Kind: "conditional", Input: "x", Branches: []events.Branch{{Name: "m", When: "matches", Value: "(("}}}}), "c", "", "bad regex"},
		{"bad when", auto("x", []events.Node{{ID: "c", Kind: "conditional", Input: "x", Branches: []events.Branch{{Name: "m", When: "roughly"}}}}), "c", "", "unknown when"},
		{"branch of non-conditional", auto("x", []events.Node{echo("a", "x"), echo("b", "y")}, edge("a", "b", "ok")), "", "a->b", "not a conditional"},
		{"map body missing", auto("x", []events.Node{{ID: "m", Kind: "map", Input: "[]", BodyNode: "zz"}}), "m", "", "body_node names no node"},
		{"interrupt strategy", auto("x", []events.Node{{ID: "g", Kind: "interrupt", Input: "ok?", ResumeStrategy: "merge"}}), "g", "", "replace or append"},
		{"subgraph missing", auto("x", []events.Node{{ID: "s", Kind: "subgraph", AutomationID: "ghost"}}), "s", "", "names no Automation"},
		{"subgraph cycle", auto("child", []events.Node{{ID: "s", Kind: "subgraph", AutomationID: "child"}}), "s", "", "subgraph cycle"},
		{"bad every", func() events.Automation {
			a := auto("x", []events.Node{echo("a", "x")})
			a.Trigger = events.Trigger{Kind: "schedule", Every: "500ms"}
			return a
		}(), "", "", "every"},
		{"unknown trigger", func() events.Automation {
			a := auto("x", []events.Node{echo("a", "x")})
			a.Trigger = events.Trigger{Kind: "cron"}
			return a
		}(), "", "", "unknown kind"},
		{"no nodes", auto("x", nil), "", "", "at least one node"},
		{"bad id", auto("a/b", []events.Node{echo("a", "x")}), "", "", "id"},
		{"bad folder", func() events.Automation {
			a := auto("x", []events.Node{echo("a", "x")})
			a.Folder = new("a/../b")
			return a
		}(), "", "", "folder"},
	} {
		_, err := s.PutAutomation(ctx, c.a.ID, c.a)
		var inv *automations.InvalidAutomation
		if !errors.As(err, &inv) || !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%s: %v, want InvalidAutomation", c.name, err)
			continue
		}
		if inv.Node != c.node || inv.Edge != c.edge || !strings.Contains(err.Error(), c.contains) {
			t.Errorf("%s: node %q edge %q %q; want node %q edge %q containing %q", c.name, inv.Node, inv.Edge, err, c.node, c.edge, c.contains)
		}
	}
	if _, ok := s.AutomationRecords.Read.Automation("x"); ok {
		t.Errorf("an invalid record was saved")
	}
	if _, err := s.PutAutomation(ctx, "other", auto("child", []events.Node{echo("a", "x")})); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("path id ≠ body id: %v", err)
	}
	if _, err := s.CreateAutomation(ctx, auto("child", []events.Node{echo("a", "x")})); !errors.Is(err, core.ErrConflict) {
		t.Errorf("create over an existing one: %v", err)
	}
}

func TestAutomationFolders(t *testing.T) {
	svc, store := newTaskService(t)
	s := svc.Automations
	ctx := context.Background()
	a := auto("a", []events.Node{echo("n", "x")})
	a.Folder = new("ops/daily")
	if _, err := s.CreateAutomation(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateFolder(ctx, "ops/daily/deep", ""); err != nil {
		t.Fatal(err)
	}
	paths := func() (out []string) {
		for _, f := range store.AutomationFolders() {
			out = append(out, f.Path)
		}
		return out
	}
	if got := strings.Join(paths(), ","); got != "ops,ops/daily,ops/daily/deep" {
		t.Fatalf("folders %s", got)
	}
	if err := s.RenameFolder(ctx, "ops", "team", ""); err != nil {
		t.Fatal(err)
	}
	if r, _ := store.Automation("a"); r.Folder == nil || *r.Folder != "team/daily" {
		t.Fatalf("after rename: folder %v", r.Folder)
	}
	if got := strings.Join(paths(), ","); got != "team,team/daily,team/daily/deep" {
		t.Fatalf("folders after rename %s", got)
	}
	// Delete keeping contents: they move up.
	if err := s.DeleteFolder(ctx, "team/daily", true); err != nil {
		t.Fatal(err)
	}
	if r, _ := store.Automation("a"); r.Folder == nil || *r.Folder != "team" {
		t.Fatalf("after delete keeping: folder %v", r.Folder)
	}
	if got := strings.Join(paths(), ","); got != "team,team/deep" {
		t.Fatalf("folders after delete keeping %s", got)
	}
	// Recursive delete removes the Automations inside.
	if err := s.DeleteFolder(ctx, "team", false); err != nil {
		t.Fatal(err)
	}
	if _, ok := store.Automation("a"); ok || len(paths()) != 0 {
		t.Fatalf("after recursive delete: %v", paths())
	}
	if _, err := s.MoveAutomation(ctx, "a", nil); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("move of a missing Automation: %v", err)
	}
}

func TestAutomationRunsEveryKind(t *testing.T) {
	svc, store := newTaskService(t)
	s := svc.Automations
	ctx := context.Background()
	child := auto("child", []events.Node{
		{ID: "up", Kind: "tool", ToolID: "lathe__sha256", Input: `{"text": "{{trigger}}"}`},
		{ID: "gate", Kind: "interrupt", Input: "child asks {{node:up}}", ResumeStrategy: "append"},
	}, edge("up", "gate"))
	if _, err := s.CreateAutomation(ctx, child); err != nil {
		t.Fatal(err)
	}
	parent := auto("parent", []events.Node{
		{ID: "name", Kind: "text_input", Label: "Name", DefaultValue: "anon"},
		echo("hello", "hi {{node:name}} / {{trigger}}"),
		{ID: "route", Kind: "conditional", Input: "{{node:hello}}", Branches: []events.Branch{{Name: "bob", When: "contains", Value: "bob"}}, Default: "other"},
		echo("forbob", "bob path"),
		echo("forother", "other path"),
		{ID: "each", Kind: "map", Input: `["x", "y"]`, BodyNode: "body"},
		echo("body", "item {{item}}"),
		{ID: "first", Kind: "interrupt", Input: "approve {{node:each}}", ResumeStrategy: "replace"},
		{ID: "sub", Kind: "subgraph", AutomationID: "child", Input: "{{node:first}}"},
		echo("end", "{{node:sub}}"),
	}, edge("name", "hello"), edge("hello", "route"), edge("route", "forbob", "bob"), edge("route", "forother", "default"),
		edge("forbob", "each"), edge("forother", "each"), edge("each", "first"), edge("first", "sub"), edge("sub", "end"))
	if _, err := s.CreateAutomation(ctx, parent); err != nil {
		t.Fatal(err)
	}
	runID, err := s.Run(ctx, "parent", automationrunner.RunRequest{Input: new("go"), Inputs: map[string]string{"name": "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	run := waitRunState(t, store, runID, events.StateWaiting)
	for key, want := range map[string]string{"name": "succeeded", "hello": "succeeded", "route": "succeeded", "forbob": "succeeded",
		"forother": "skipped", "each": "succeeded", "each.0": "succeeded", "each.1": "succeeded", "first": "waiting", "sub": "pending", "end": "pending"} {
		if got := run.Nodes[key]; got == nil || got.State != want {
			t.Errorf("node %s: %+v, want %s", key, got, want)
		}
	}
	if got := run.Nodes["hello"].Output.Inline; got != "hi bob / go" {
		t.Errorf("hello output %q", got)
	}
	if got := run.Nodes["each"].Output.Inline; got != `["item x","item y"]` {
		t.Errorf("map output %q", got)
	}
	if in := store.Interrupts(); len(in) != 1 || in[0].NodeID != "first" || in[0].Prompt.Inline != `approve ["item x","item y"]` {
		t.Fatalf("interrupts %+v", in)
	}
	// Resuming a node that is not waiting is a conflict; a wrong node or run is not found.
	if err := s.ResumeNode(ctx, "parent", runID, "hello", "v", false); !errors.Is(err, core.ErrConflict) {
		t.Errorf("resume of a finished node: %v", err)
	}
	if err := s.ResumeNode(ctx, "parent", runID, "ghost", "v", false); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("resume of a missing node: %v", err)
	}
	if err := s.ResumeNode(ctx, "parent", "ghost", "first", "v", false); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("resume of a missing run: %v", err)
	}
	if err := s.ResumeNode(ctx, "parent", runID, "first", "ship it", false); err != nil {
		t.Fatal(err)
	}
	// The second interrupt, inside the subgraph, surfaces at the top-level run.
	polltest.Check(t, func() error {
		in := store.Interrupts()
		if len(in) != 1 || in[0].NodeID != "sub.gate" {
			return fmt.Errorf("no interrupt in the subgraph: %+v", in)
		}
		if !strings.HasPrefix(in[0].Prompt.Inline, "child asks ") || in[0].RunID != runID {
			t.Fatalf("sub interrupt %+v", in[0])
		}
		return nil
	}, polltest.Within(10*time.Second))
	run = waitRunState(t, store, runID, events.StateWaiting)
	if run.Nodes["first"].Output.Inline != "ship it" {
		t.Errorf("replace output %q", run.Nodes["first"].Output.Inline)
	}
	if err := s.ResumeNode(ctx, "parent", runID, "sub.gate", "", true); err != nil {
		t.Fatal(err)
	}
	run = waitRunState(t, store, runID, events.StateSucceeded)
	if got := run.Nodes["sub.gate"]; got.Resumed != events.ResumedCancel || !strings.HasPrefix(got.Output.Inline, "child asks ") {
		t.Errorf("cancelled append interrupt: %+v", got)
	}
	if !strings.HasPrefix(run.Output.Inline, "child asks ") || run.Nodes["end"].State != events.StateSucceeded {
		t.Errorf("run output %q, end %+v", run.Output.Inline, run.Nodes["end"])
	}
	if err := s.ResumeNode(ctx, "parent", runID, "sub.gate", "again", false); !errors.Is(err, core.ErrConflict) {
		t.Errorf("second resume: %v", err)
	}
	if len(store.Interrupts()) != 0 {
		t.Errorf("interrupts left: %+v", store.Interrupts())
	}

	// Fork reruns the whole graph with the same input and inputs.
	fork, err := s.Fork(ctx, "parent", runID, nil)
	if err != nil {
		t.Fatal(err)
	}
	fr := waitRunState(t, store, fork, events.StateWaiting)
	if fr.Trigger.ForkOf != runID || fr.Nodes["hello"].Output.Inline != "hi bob / go" {
		t.Errorf("fork: %+v", fr)
	}
	// Deleting the Automation cancels the waiting fork first.
	if err := s.DeleteAutomation(ctx, "parent"); err != nil {
		t.Fatal(err)
	}
	if len(store.Interrupts()) != 0 || len(store.ActiveAutomationRuns("")) != 0 {
		t.Errorf("after delete: interrupts %+v", store.Interrupts())
	}
}

func TestAutomationRunFailures(t *testing.T) {
	svc, store := newTaskService(t)
	s := svc.Automations
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		a     events.Automation
		error string
	}{
		{"map over a non-array", auto("m", []events.Node{{ID: "m", Kind: "map", Input: `{"a":1}`, BodyNode: "b"}, echo("b", "x")}), "not a JSON array"},
		{"tool error", auto("t", []events.Node{{ID: "t", Kind: "tool", ToolID: "lathe__echo", Input: `{"nope": 1}`}}), "unknown field"},
		// Issue 23, finding 1: a rendered input too deep to journal.
		{"tool input nested too deeply", auto("d", []events.Node{{ID: "t", Kind: "tool", ToolID: "lathe__echo",
			Input: `{"text":"x","d":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`}}), "nests too deeply"},
		{"unknown tool", auto("u", []events.Node{{ID: "t", Kind: "tool", ToolID: "nothing", Input: `{}`}}), `no tool "nothing"`},
		{"failing subgraph", auto("p", []events.Node{{ID: "s", Kind: "subgraph", AutomationID: "t"}}), `subgraph "t"`},
	} {
		if _, err := s.PutAutomation(ctx, c.a.ID, c.a); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ex, err := s.Execute(ctx, c.a.ID, automationrunner.RunRequest{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ex.State != events.StateFailed || !strings.Contains(ex.Error, c.error) || !ex.Usage.TokenUsageKnown {
			t.Errorf("%s: %+v, want failed with %q", c.name, ex, c.error)
		}
	}
	// A failed run never blocks the next.
	ok := auto("ok", []events.Node{echo("a", "fine")})
	if _, err := s.PutAutomation(ctx, "ok", ok); err != nil {
		t.Fatal(err)
	}
	if ex, err := s.Execute(ctx, "ok", automationrunner.RunRequest{}); err != nil || ex.State != events.StateSucceeded || ex.Output != "fine" {
		t.Errorf("ok run: %+v %v", ex, err)
	}
	ok.Enabled = false
	if _, err := s.PutAutomation(ctx, "ok", ok); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, "ok", automationrunner.RunRequest{}); !errors.Is(err, core.ErrConflict) {
		t.Errorf("run of a disabled Automation: %v", err)
	}
	if _, err := s.Run(ctx, "ghost", automationrunner.RunRequest{}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("run of a missing Automation: %v", err)
	}
	if _, err := s.Run(ctx, "t", automationrunner.RunRequest{Inputs: map[string]string{"t": "x"}}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("inputs naming a non-text_input node: %v", err)
	}
	_ = store
}

// FuzzAutomationRecord feeds arbitrary JSON records to the validation:
// it never panics, and a record it accepts has unique, well-formed node IDs,
// edges between its nodes, and no cycle.
func FuzzAutomationRecord(f *testing.F) {
	f.Add(`{"id":"a","name":"A","trigger":{"kind":"manual"},"nodes":[{"id":"x","kind":"tool","tool_id":"lathe__echo","input":"{{trigger}}"}],"edges":[]}`)
	f.Add(`{"id":"a","name":"A","trigger":{"kind":"schedule","every":"5m"},"nodes":[{"id":"c","kind":"conditional","input":"{{node:c}}","branches":[{"name":"m","when":"matches","value":"(a|b)+"}],"default":"d"},{"id":"g","kind":"interrupt","input":"?","resume_strategy":"append"}],"edges":[{"from":"c","to":"g","branch":"m"}]}`)
	f.Add(`{"id":"a","name":"A","trigger":{"kind":"manual"},"nodes":[{"id":"m","kind":"map","input":"[1]","body_node":"b"},{"id":"b","kind":"tool","tool_id":"t"}],"edges":[{"from":"b","to":"m"}]}`)
	j := journaltest.Open(f)
	svc := New(j, projections.New(), core.Options{Agents: []string{"coder"}})
	f.Fuzz(func(t *testing.T, raw string) {
		var a events.Automation
		if json.Unmarshal([]byte(raw), &a) != nil {
			return
		}
		err := svc.Automations.CheckAutomation(&a, func(string) (events.Automation, bool) { return events.Automation{}, false })
		if err != nil {
			if !errors.Is(err, core.ErrInvalid) && !errors.Is(err, core.ErrTooLarge) {
				t.Fatalf("error of no class: %v", err)
			}
			return
		}
		ids := map[string]bool{}
		for _, n := range a.Nodes {
			if !automations.IdPattern.MatchString(n.ID) || ids[n.ID] {
				t.Fatalf("accepted node id %q", n.ID)
			}
			ids[n.ID] = true
		}
		for _, e := range a.Edges {
			if !ids[e.From] || !ids[e.To] {
				t.Fatalf("accepted edge %+v", e)
			}
		}
		if len(automations.TopoOrder(a.Nodes, a.Edges)) != len(a.Nodes) {
			t.Fatalf("accepted a cycle")
		}
	})
}

// FuzzParseEvery: never a panic, and an accepted interval is at least 1s.
func FuzzParseEvery(f *testing.F) {
	for _, s := range []string{"30s", "5m", "2h", "1d", "0s", "500ms", "99999999999d", "", "s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := automations.ParseEvery(s); err == nil && d < time.Second {
			t.Fatalf("%q = %v", s, d)
		}
	})
}

// A map over more items than one append of the journal may hold records
// them in several appends and succeeds; a map over more than maxMapItems
// fails its run with the reason, or, over {{trigger}}, is refused at run.
func TestAutomationLargeMap(t *testing.T) {
	svc, _ := newTaskService(t)
	s := svc.Automations
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mapOver := func(id, input string) events.Automation {
		return auto(id, []events.Node{{ID: "each", Kind: "map", Input: input, BodyNode: "body"}, echo("body", "x")})
	}
	items := func(n int) string {
		b, _ := json.Marshal(make([]int, n))
		return string(b)
	}
	if _, err := s.PutAutomation(ctx, "big", mapOver("big", "{{trigger}}")); err != nil {
		t.Fatal(err)
	}
	ex, err := s.Execute(ctx, "big", automationrunner.RunRequest{Input: new(items(5000))})
	if err != nil {
		t.Fatalf("a map over 5000 items: %v (state %q)", err, ex.State)
	}
	var outs []string
	if ex.State != events.StateSucceeded || json.Unmarshal([]byte(ex.Output), &outs) != nil || len(outs) != 5000 {
		t.Fatalf("a map over 5000 items: %s %q, %d outputs", ex.State, ex.Error, len(outs))
	}

	_, err = s.Run(ctx, "big", automationrunner.RunRequest{Input: new(items(automationrunner.MaxMapItems + 1))})
	if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a run whose map over {{trigger}} is too long: %v, want ErrInvalid", err)
	}
	if _, err := s.PutAutomation(ctx, "fixed", mapOver("fixed", items(automationrunner.MaxMapItems+1))); err != nil {
		t.Fatal(err)
	}
	ex, err = s.Execute(ctx, "fixed", automationrunner.RunRequest{})
	if err != nil || ex.State != events.StateFailed || !strings.Contains(ex.Error, "at most") {
		t.Errorf("a map over too many items: %+v %v, want failed naming the limit", ex, err)
	}
}

// A record the journal refuses (here: a map's output too large to hold
// inline, with no blob store) fails the run with the reason instead of
// leaving it running.
func TestAutomationRefusedRecordFailsTheRun(t *testing.T) {
	svc, _ := newTaskService(t)
	s := svc.Automations
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	long := strings.Repeat("y", 200)
	a := auto("wide", []events.Node{{ID: "each", Kind: "map", Input: "{{trigger}}", BodyNode: "body"}, echo("body", long)})
	if _, err := s.PutAutomation(ctx, "wide", a); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(make([]int, 2000)) // 2000 × 200 bytes of output: over the journal's event limit
	ex, err := s.Execute(ctx, "wide", automationrunner.RunRequest{Input: new(string(b))})
	if err != nil || ex.State != events.StateFailed || !strings.Contains(ex.Error, "recording the run failed") {
		t.Errorf("= %s %q %v, want failed with the journal's reason", ex.State, ex.Error, err)
	}
}

// Two saves at once, A→B and B→A, cannot both succeed: one sees the
// other's record and refuses the subgraph cycle.
func TestAutomationConcurrentSavesMakeNoSubgraphCycle(t *testing.T) {
	svc, _ := newTaskService(t)
	s := svc.Automations
	ctx := context.Background()
	for round := range 20 {
		a, b := fmt.Sprintf("a%d", round), fmt.Sprintf("b%d", round)
		for _, id := range []string{a, b} {
			if _, err := s.PutAutomation(ctx, id, auto(id, []events.Node{echo("n", "x")})); err != nil {
				t.Fatal(err)
			}
		}
		sub := func(id, to string) events.Automation {
			return auto(id, []events.Node{{ID: "s", Kind: "subgraph", AutomationID: to, Input: "x"}})
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for i, pair := range [][2]string{{a, b}, {b, a}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = s.PutAutomation(ctx, pair[0], sub(pair[0], pair[1]))
			}()
		}
		close(start)
		wg.Wait()
		if errs[0] == nil && errs[1] == nil {
			t.Fatalf("round %d: both saves succeeded: the subgraphs make a cycle", round)
		}
		for _, err := range errs {
			if err != nil && !strings.Contains(err.Error(), "subgraph cycle") {
				t.Errorf("round %d: %v, want a subgraph cycle refusal", round, err)
			}
		}
	}
}

// A subgraph cycle the journal holds anyway (saved before saves were
// checked against each other) fails its run at the depth bound instead of
// recursing without end.
func TestAutomationSubgraphDepthIsBounded(t *testing.T) {
	svc, store := newTaskService(t)
	s := svc.Automations
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range [][2]string{{"ping", "pong"}, {"pong", "ping"}} {
		a := auto(p[0], []events.Node{{ID: "s", Kind: "subgraph", AutomationID: p[1], Input: "x"}})
		if err := svc.Turns.Append(ctx, []journal.Event{events.New(p[0], events.AutomationSaved{Automation: a})}); err != nil {
			t.Fatal(err)
		}
	}
	ex, err := s.Execute(ctx, "ping", automationrunner.RunRequest{})
	if err != nil || ex.State != events.StateFailed || !strings.Contains(ex.Error, "nest deeper than") {
		t.Fatalf("= %s %q %v, want failed at the depth bound", ex.State, ex.Error, err)
	}
	if run, _ := store.AutomationRun(ex.RunID); len(run.Nodes) > 2*automationrunner.MaxSubgraphDepth+2 {
		t.Errorf("the run recorded %d nodes", len(run.Nodes))
	}
}
