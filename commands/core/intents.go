package core

import (
	"context"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
)

// Record, then act (docs/ARCHITECTURE.md). Every effect a command makes
// outside the journal — the editor's writes and file tree changes, MCP
// installs, Agent executes — is bracketed by two appends: an
// effect-intended event before the effect, and the effect's own outcome
// event together with effect-settled after it. A stop between the two
// leaves an intent without its settlement, which the next start settles
// (ReconcileEffects): so the journal always says what may have changed
// behind its back.

// Effect is one intended effect, recorded; settle records its end.
type Effect struct {
	Core   *Core
	Intent events.EffectIntended
}

// Intend records that the effect kind on target is about to be made.
func (s *Core) Intend(ctx context.Context, kind, target, detail, sha string) (*Effect, error) {
	in := events.EffectIntended{Intent: ulid.Make().String(), Kind: kind, Target: target, Detail: events.NewText(detail), SHA256: sha}
	if err := s.Append(ctx, []journal.Event{events.New(events.EffectsID, in)}); err != nil {
		return nil, err
	}
	return &Effect{Core: s, Intent: in}, nil
}

// Settle records the effect's end: its outcome events (none when it
// failed before changing anything) and the settlement, in one append. It
// outlives the caller's context, as the effect did.
func (e *Effect) Settle(ctx context.Context, failure error, outcome ...journal.Event) error {
	st := events.EffectSettled{Intent: e.Intent.Intent, Outcome: events.EffectDone}
	if failure != nil {
		st.Outcome, st.Error = events.EffectFailed, failure.Error()
	}
	evs := append(outcome, events.New(events.EffectsID, st))
	return e.Core.Append(context.WithoutCancel(ctx), evs)
}

// ReconcileEffect settles an intent that a stop left open: what the next
// start finds of it (the settlement's Error) and any outcome event it can
// still record.
type ReconcileEffect func(ctx context.Context, in events.EffectIntended) (found string, outcome []journal.Event)

func SettledAs(found string) ReconcileEffect {
	return func(context.Context, events.EffectIntended) (string, []journal.Event) { return found, nil }
}
