package commands

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

// effect is one intended effect, recorded; settle records its end.
type effect struct {
	s      *core
	intent events.EffectIntended
}

// intend records that the effect kind on target is about to be made.
func (s *core) intend(ctx context.Context, kind, target, detail, sha string) (*effect, error) {
	in := events.EffectIntended{Intent: ulid.Make().String(), Kind: kind, Target: target, Detail: events.NewText(detail), SHA256: sha}
	if err := s.append(ctx, []journal.Event{events.New(events.EffectsID, in)}); err != nil {
		return nil, err
	}
	return &effect{s: s, intent: in}, nil
}

// settle records the effect's end: its outcome events (none when it
// failed before changing anything) and the settlement, in one append. It
// outlives the caller's context, as the effect did.
func (e *effect) settle(ctx context.Context, failure error, outcome ...journal.Event) error {
	st := events.EffectSettled{Intent: e.intent.Intent, Outcome: events.EffectDone}
	if failure != nil {
		st.Outcome, st.Error = events.EffectFailed, failure.Error()
	}
	evs := append(outcome, events.New(events.EffectsID, st))
	return e.s.append(context.WithoutCancel(ctx), evs)
}

// reconcileEffect settles an intent that a stop left open: what the next
// start finds of it (the settlement's Error) and any outcome event it can
// still record.
type reconcileEffect func(ctx context.Context, in events.EffectIntended) (found string, outcome []journal.Event)

func settledAs(found string) reconcileEffect {
	return func(context.Context, events.EffectIntended) (string, []journal.Event) { return found, nil }
}
