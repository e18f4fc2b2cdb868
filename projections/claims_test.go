package projections

import (
	"slices"
	"strings"
	"testing"

	"lathe/journal/events"
)

// Every registered event type is claimed by exactly one read model, or
// declared folded by none with a reason: an event type added without a
// claim fails here instead of reaching the live feed unclaimed.
func TestEveryEventTypeHasOneClaim(t *testing.T) {
	types := events.Types()
	slices.Sort(types)
	for _, typ := range types {
		c, ok := claims[typ]
		switch {
		case !ok:
			t.Errorf("event type %s: no read model claims it; claim it beside the fold that applies it (claimFor), or declare why none does (unfolded, claims.go)", typ)
		case c.fold == nil && strings.TrimSpace(c.why) == "":
			t.Errorf("event type %s: folded by no read model, without a reason", typ)
		case c.fold != nil && c.model == "":
			t.Errorf("event type %s: claimed by a fold of no named model", typ)
		}
	}
	for typ := range claims {
		if !slices.Contains(types, typ) {
			t.Errorf("claimed event type %s is not registered in journal/events", typ)
		}
	}
	if u := Unclaimed(); len(u) > 0 {
		t.Errorf("Unclaimed() = %v", u)
	}
}

// A type claimed twice is refused, as journal/events refuses a type
// registered twice: exactly one model folds each.
func TestClaimingATypeTwicePanics(t *testing.T) {
	for _, second := range []claim{{model: "turns", fold: claims["turn-done"].fold}, {why: "audit only"}} {
		table := claimTable{}
		table.add(claim{model: "sessions", fold: claims["session-created"].fold}, events.SessionCreated{})
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), "session-created claimed by "+second.owner()+" and sessions") {
					t.Errorf("second claim by %s: recovered %v", second.owner(), r)
				}
			}()
			table.add(second, events.SessionCreated{})
		}()
	}
}
