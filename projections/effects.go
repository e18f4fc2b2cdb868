package projections

import (
	"slices"
	"strings"

	"lathe/journal"
	"lathe/journal/events"
)

// EffectModel is the effect intents no settlement has closed yet
// (commands/startup/effects.go: record, then act). Start-up reconciles exactly
// these, so its cost follows what a stop cut off, not every effect ever
// made.
type EffectModel struct {
	sh   *shared
	open map[string]events.EffectIntended // intent ID → its record
}

// The effect intents and their settlements.
func init() {
	fold := func(s *Store, _ journal.Envelope, p events.Payload) error { s.EffectModel.fold(p); return nil }
	claimFor("effects", fold,
		events.EffectIntended{}, events.EffectSettled{})
}

func (m *EffectModel) fold(p events.Payload) {
	switch e := p.(type) {
	case events.EffectIntended:
		m.open[e.Intent] = e
	case events.EffectSettled:
		delete(m.open, e.Intent)
	}
}

// OpenEffects returns the unsettled intents, oldest first (their IDs are
// ULIDs).
func (m *EffectModel) OpenEffects() []events.EffectIntended {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	out := make([]events.EffectIntended, 0, len(m.open))
	for _, in := range m.open {
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b events.EffectIntended) int { return strings.Compare(a.Intent, b.Intent) })
	return out
}
