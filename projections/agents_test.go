package projections_test

import (
	"context"
	"reflect"
	"testing"

	"lathe/journal/events"
	"lathe/projections"
)

// An Agent patch lasts until the daemon restarts: the live store and a
// replay of the journal agree on the overlay before and after a start.
func TestAgentOverlayEndsAtDaemonStart(t *testing.T) {
	j, live := fixture(t, 1)
	ctx := context.Background()
	model, name := "m2", "Coder 2"
	deps := []string{"reviewer"}
	mustAppend(t, j, events.New("D1", events.DaemonStarted{Version: "v1"}))
	mustAppend(t, j, events.New("coder", events.AgentPatched{Model: &model, Restarted: true}))
	mustAppend(t, j, events.New("coder", events.AgentPatched{Name: &name, Dependencies: &deps, Budget: &events.AgentBudget{MaxUSD: 1}}))
	mustAppend(t, j, events.New("coder", events.AgentRestarted{}))

	check := func(when string, want map[string]projections.AgentOverlay) {
		t.Helper()
		if err := live.Await(ctx, j.Last()); err != nil {
			t.Fatal(err)
		}
		again := reloaded(t, j, live)
		for _, s := range []*projections.Store{live, again["replay"], again["checkpoint"]} {
			for _, id := range []string{"coder", "reviewer"} {
				got, ok := s.AgentOverlay(id)
				w, wok := want[id]
				if ok != wok || !reflect.DeepEqual(got, w) {
					t.Errorf("%s: overlay of %s = %+v %v, want %+v %v", when, id, got, ok, w, wok)
				}
			}
		}
	}
	check("after the patches", map[string]projections.AgentOverlay{"coder": {
		Name: &name, Model: &model, Dependencies: deps, Budget: &events.AgentBudget{MaxUSD: 1}, Restarts: 2, Patches: 2,
	}})
	mustAppend(t, j, events.New("D1", events.DaemonStarted{Version: "v1"}))
	check("after a restart of the daemon", nil)
}
