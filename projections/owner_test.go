package projections

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"lathe/journal"
	"lathe/journal/events"
)

// Every registered event type has a model that owns it: one that reaches
// the Session fold without being the Sessions' or Workspaces' own fails
// there ("no projection"), and the daemon's feed would stop at it. A new
// event type must be routed (Store.fold) before it can be appended.
func TestEveryEventTypeHasAnOwner(t *testing.T) {
	types := events.Types()
	slices.Sort(types)
	for _, typ := range types {
		p, err := events.Decode(typ, []byte("{}"))
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		env := journal.Envelope{Type: typ, Aggregate: p.Aggregate(), AggregateID: "X1"}
		if err := foldOnce(New(), env, p); err != nil && strings.Contains(err.Error(), "no projection for") {
			t.Errorf("%s (%T) has no read model that folds it: %v", typ, p, err)
		}
	}
}

// foldOnce folds p into s; a zero payload may trip a model's invariants,
// which is not what this test asks, so a panic is only reported.
func foldOnce(s *Store, env journal.Envelope, p events.Payload) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked: %v", r)
		}
	}()
	return s.fold(env, p)
}
