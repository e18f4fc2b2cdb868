package commands

import (
	"context"
	"errors"
	"maps"

	"lathe/runtime/sandbox"

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

// Effects settles the effect intents a stop left open.
type Effects struct {
	*core
	// live finds the Session sandbox a task start was cut off in.
	live interface {
		liveSandbox(id string) sandbox.Sandbox
	}
	// by holds each kind's reconciler; a kind without one is settled
	// interrupted with nothing more recorded.
	by map[string]reconcileEffect
	// merging is Worktrees' lock of a Workspace's merges.
	merging *sessionLocks
}

// Reconcile settles, at start-up, every effect intent the last stop left
// without a settlement: each kind's reconciler says what it finds (a file
// write that landed is recorded as written; an execute or an install is
// recorded interrupted). The open intents are a read model
// (projections.EffectModel), so this reads only what a stop cut off.
func (s *Effects) Reconcile(ctx context.Context) error {
	err := s.settleOpen(ctx, func(string) bool { return true })
	collectBases(s.core, s.opts.WorktreesDir) // after the worktree adds a stop cut off are undone
	return err
}

// ReconcileMerges settles the merges a stop cut off, ahead of Reconcile:
// they need no sandbox, and the Workspace folder stays half written until
// they are finished or undone.
func (s *Effects) ReconcileMerges(ctx context.Context) error {
	return s.settleOpen(ctx, func(kind string) bool { return kind == events.EffectWorktreeMerge })
}

// settleOpen settles the open intents of the kinds which holds.
func (s *Effects) settleOpen(ctx context.Context, which func(kind string) bool) error {
	var errs []error
	for _, in := range s.store.OpenEffects() {
		if !which(in.Kind) {
			continue
		}
		found, outcome := "the daemon stopped before the effect was recorded", []journal.Event(nil)
		if r := s.by[in.Kind]; r != nil {
			found, outcome = r(ctx, in)
		}
		st := events.EffectSettled{Intent: in.Intent, Outcome: events.EffectInterrupted, Error: found}
		if err := s.append(ctx, append(outcome, events.New(events.EffectsID, st))); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func newEffects(c *core, live *sandboxes, merging *sessionLocks) *Effects {
	e := &Effects{core: c, live: live, merging: merging}
	e.by = map[string]reconcileEffect{
		events.EffectFileWrite:    e.reconcileWrite,
		events.EffectFileTree:     settledAs("the daemon stopped during the change: the tree shows whether it was made"),
		events.EffectMCPInstall:   settledAs("the daemon stopped during the install; the registry is runtime state, so the server is not installed"),
		events.EffectAgentExecute: settledAs("the daemon stopped during the execute; its conversation is runtime state and kept nothing of it"),
		events.EffectGit:          settledAs("the daemon stopped during the Git operation: the repository shows whether it was made"),
		events.EffectMCPReconnect: settledAs("the daemon stopped during the reconnect; the registry is runtime state and reconnects at start"),
		events.EffectMCPRemove:    settledAs("the daemon stopped during the removal; the registry is runtime state, rebuilt at start from the configuration"),
		events.EffectTaskStart:    e.reconcileTaskStart,
		events.EffectSync:         settledAs("the daemon stopped during the sync: the branch lathe/<session_id> shows whether it landed"),
	}
	maps.Copy(e.by, worktreeReconcilers(e)) // commands/worktree.go
	return e
}

func settledAs(found string) reconcileEffect {
	return func(context.Context, events.EffectIntended) (string, []journal.Event) { return found, nil }
}

// reconcileWrite records a write a stop cut off as written when the file
// holds the intended content.
func (s *Effects) reconcileWrite(_ context.Context, in events.EffectIntended) (string, []journal.Event) {
	ss, ok := s.store.Session(in.Target)
	if !ok {
		return "the Session is gone", nil
	}
	root, err := s.reconcileRoot(in.Target, ss.WorkingDir)
	if err != nil {
		return "the Session root cannot be opened: " + err.Error(), nil
	}
	defer root.Close()
	data, _, err := root.ReadRegular(in.Detail.String(), MaxFileBytes)
	if err != nil || hashOf(data) != in.SHA256 {
		return "the daemon stopped during the write, which did not land", nil
	}
	return "the daemon stopped after the write landed", []journal.Event{events.New(in.Target,
		events.FileWritten{Path: in.Detail.String(), Size: int64(len(data)), SHA256: in.SHA256})}
}
