package startup

import (
	"context"
	"errors"
	"maps"

	"lathe/commands/core"
	"lathe/commands/worktrees"

	"lathe/journal"
	"lathe/journal/events"
)

// Effects settles the effect intents a stop left open.
type Effects struct {
	*core.Core
	// by holds each kind's reconciler; a kind without one is settled
	// interrupted with nothing more recorded.
	by map[string]core.ReconcileEffect
}

// Reconcile settles, at start-up, every effect intent the last stop left
// without a settlement: each kind's reconciler says what it finds (a file
// write that landed is recorded as written; an execute or an install is
// recorded interrupted). The open intents are a read model
// (projections.EffectModel), so this reads only what a stop cut off.
func (s *Effects) Reconcile(ctx context.Context) error {
	err := s.settleOpen(ctx, func(string) bool { return true })
	worktrees.CollectBases(s.Core, s.Opts.WorktreesDir) // after the worktree adds a stop cut off are undone
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
	for _, in := range s.Store.OpenEffects() {
		if !which(in.Kind) {
			continue
		}
		found, outcome := "the daemon stopped before the effect was recorded", []journal.Event(nil)
		if r := s.by[in.Kind]; r != nil {
			found, outcome = r(ctx, in)
		}
		st := events.EffectSettled{Intent: in.Intent, Outcome: events.EffectInterrupted, Error: found}
		if err := s.Append(ctx, append(outcome, events.New(events.EffectsID, st))); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NewEffects settles the intents of every kind: the capabilities that can
// say more than "interrupted" of a cut-off effect hand their reconcilers in
// (active); the others are settled with what the journal alone tells.
func NewEffects(c *core.Core, active ...map[string]core.ReconcileEffect) *Effects {
	e := &Effects{Core: c}
	e.by = map[string]core.ReconcileEffect{
		events.EffectFileTree:     core.SettledAs("the daemon stopped during the change: the tree shows whether it was made"),
		events.EffectMCPInstall:   core.SettledAs("the daemon stopped during the install; the registry is runtime state, so the server is not installed"),
		events.EffectAgentExecute: core.SettledAs("the daemon stopped during the execute; its conversation is runtime state and kept nothing of it"),
		events.EffectGit:          core.SettledAs("the daemon stopped during the Git operation: the repository shows whether it was made"),
		events.EffectMCPReconnect: core.SettledAs("the daemon stopped during the reconnect; the registry is runtime state and reconnects at start"),
		events.EffectMCPRemove:    core.SettledAs("the daemon stopped during the removal; the registry is runtime state, rebuilt at start from the configuration"),
		events.EffectSync:         core.SettledAs("the daemon stopped during the sync: the branch lathe/<session_id> shows whether it landed"),
	}
	for _, a := range active {
		maps.Copy(e.by, a)
	}
	return e
}
