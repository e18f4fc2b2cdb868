package projections_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"lathe/journal/events"
)

// An outside agent's turn records what ran it (its reported name and
// version, the model) and its plan, the latest one winning, bounded even
// when an event holds more than the bounds; a replay, from the journal or
// a checkpoint, folds to the same record.
func TestOutsideTurnPlanAndAgent(t *testing.T) {
	j, live := fedStore(t)
	ctx := context.Background()
	mustAppend(t, j, events.New("W1", events.WorkspaceRegistered{Path: "/repo", Name: "repo"}))
	mustAppend(t, j, events.New("S1", events.SessionCreated{WorkspaceID: "W1", Name: "s", WorkingDir: "/repo",
		Mode: events.Mode{Kind: events.ModeSingleAgent, AgentID: "claude"}, Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}}))
	mustAppend(t, j, events.New("S1", events.TurnAccepted{TurnID: "T1", IdempotencyKey: "T1", AgentID: "claude", Input: events.NewText("go"), Source: "ws"}))
	mustAppend(t, j, events.New("S1", events.TurnStarted{TurnID: "T1", Agent: "claude", Model: "claude-sonnet-4-6",
		AgentName: "@zed-industries/claude-agent-acp", AgentVersion: "0.23.1"}))

	first := []events.PlanEntry{{Content: "read", Status: events.PlanInProgress, Priority: "medium"}, {Content: "write", Status: events.PlanPending, Priority: "medium"}}
	second := []events.PlanEntry{{Content: "read", Status: events.PlanCompleted, Priority: "medium"}, {Content: "write", Status: events.PlanInProgress, Priority: "medium"}}
	// A journal written by another build may hold more than the bounds:
	// the fold bounds it again.
	over := make([]events.PlanEntry, events.MaxPlanEntries+1)
	for i := range over {
		over[i] = events.PlanEntry{Content: strings.Repeat("x", events.MaxPlanEntry+1), Status: "weird"}
	}
	for _, c := range []struct {
		name    string
		entries []events.PlanEntry
		want    []events.PlanEntry
	}{
		{"first plan", first, first},
		{"the latest wins", second, second},
		{"over the bounds", over, events.ClipPlan(over)},
		{"emptied", []events.PlanEntry{}, []events.PlanEntry{}},
		{"again", second, second},
	} {
		mustAppend(t, j, events.New("S1", events.TurnPlanned{TurnID: "T1", Agent: "claude", Entries: c.entries}))
		if err := live.Await(ctx, j.Last()); err != nil {
			t.Fatal(err)
		}
		tr, ok := live.Turn("S1", "T1")
		if !ok || !reflect.DeepEqual(tr.Plan, c.want) {
			t.Fatalf("%s: the turn's plan is %q, want %q", c.name, tr.Plan, c.want)
		}
		if len(tr.Plan) > events.MaxPlanEntries {
			t.Fatalf("%s: %d entries", c.name, len(tr.Plan))
		}
		// The live run, which a reconnecting client hydrates from, has it too.
		snap := live.Snapshot()
		if len(snap.Runs) != 1 || !reflect.DeepEqual(snap.Runs[0].Plan, tr.Plan) || snap.Runs[0].AgentVersion != "0.23.1" {
			t.Fatalf("%s: snapshot runs %+v", c.name, snap.Runs)
		}
	}
	mustAppend(t, j, events.New("S1", events.TurnDone{TurnID: "T1", Output: events.NewText("done")}))
	if err := live.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	tr, _ := live.Turn("S1", "T1")
	if tr.AgentName != "@zed-industries/claude-agent-acp" || tr.AgentVersion != "0.23.1" || tr.Model != "claude-sonnet-4-6" || !reflect.DeepEqual(tr.Plan, second) {
		t.Fatalf("the ended turn: agent %q %q, model %q, plan %q", tr.AgentName, tr.AgentVersion, tr.Model, tr.Plan)
	}

	for name, s := range reloaded(t, j, live) {
		got, _ := s.Turn("S1", "T1")
		if !reflect.DeepEqual(got.Plan, tr.Plan) || got.AgentName != tr.AgentName || got.AgentVersion != tr.AgentVersion || got.Model != tr.Model {
			t.Errorf("%s: %q %q %q %q, want %q %q %q %q", name, got.AgentName, got.AgentVersion, got.Model, got.Plan, tr.AgentName, tr.AgentVersion, tr.Model, tr.Plan)
		}
	}
}
