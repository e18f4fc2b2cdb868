package projections

import (
	"slices"

	"lathe/journal"
	"lathe/journal/events"
)

// Which read model folds which event. Each model claims the event types it
// folds, by their payload types, in an init function beside its fold
// (claimFor); a type that no model folds is declared as such, with why
// (unfolded, below). The Store hands each event to its type's fold alone;
// what that fold does to another model (a Session part's event touches its
// Session, a deletion drops the Session's parts) it does in plain sight.
//
// A type claimed twice panics at start, like a type registered twice in
// journal/events. A registered event type nobody claims is a bug that
// TestEveryEventTypeHasOneClaim names; should a binary carry one anyway,
// its events fold into no read model and the feed goes on (seq, frames,
// NATS and Await as for any event), and the daemon logs the types at start
// (Unclaimed): a missing claim never stops the live feed.

// A claim is how the Store folds the events of one type: the read model
// that owns them and its fold, or, with no fold, why no model does.
type claim struct {
	model string
	fold  func(s *Store, env journal.Envelope, p events.Payload) error
	why   string
}

// claimTable maps event types to their claims.
type claimTable map[string]claim

// claims is every event type's claim, filled by the models' init functions.
var claims = claimTable{}

// add registers c for the types of ps; a type claimed before panics.
func (t claimTable) add(c claim, ps ...events.Payload) {
	for _, p := range ps {
		typ := p.EventType()
		if old, dup := t[typ]; dup {
			panic("projections: event type " + typ + " claimed by " + c.owner() + " and " + old.owner())
		}
		t[typ] = c
	}
}

func (c claim) owner() string {
	if c.fold == nil {
		return "no read model"
	}
	return c.model
}

// claimFor registers model's fold as the fold of the types of ps.
func claimFor(model string, fold func(s *Store, env journal.Envelope, p events.Payload) error, ps ...events.Payload) {
	claims.add(claim{model: model, fold: fold}, ps...)
}

// unfolded registers the types of ps as folded by no read model, for why.
func unfolded(why string, ps ...events.Payload) {
	claims.add(claim{why: why}, ps...)
}

func init() {
	unfolded("audit only: the live MCP registry is runtime state",
		events.MCPServerInstalled{}, events.MCPServerReconnected{}, events.MCPServerRemoved{})
	unfolded("audit only: a direct execute answered its request; the telemetry folds count it (projections/metrics, traces)",
		events.AgentExecuted{}, events.AgentHookRan{})
	unfolded("its typed events are what it changes: noted as every event is applied (TypedEventsOf, RecentModel)",
		events.SkillFired{})
}

// Unclaimed lists, sorted, the registered event types that no read model
// claims and none declares unfolded: empty unless a claim was forgotten.
// Their events fold into nothing; the daemon logs them at start.
func Unclaimed() []string {
	var out []string
	for _, typ := range events.Types() {
		if _, ok := claims[typ]; !ok {
			out = append(out, typ)
		}
	}
	slices.Sort(out)
	return out
}
