package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"lathe/projections"

	"lathe/journal"
	"lathe/journal/events"
)

// Core is the plumbing every capability shares: the journal it appends to
// (append with an expected version, awaiting its own seq, retry on a lost
// race), the projections it decides against, and each Session's lifecycle
// lock. Each capability below embeds it and exports only its own commands;
// the runtime state of one capability lives on that capability's type
// (sandboxes: commands/environments/sandboxes.go).
type Core struct {
	Journal *journal.Journal
	Store   Reader
	Opts    Options
	Agents  map[string]bool
	Log     *slog.Logger

	Locks      SessionLocks  // commands/environments/environment.go
	Reconciled reconcileGate // start-up reconciliation (commands/core/reconcile.go)
	// Approver decides the tool calls that need an operator's decision
	// (commands/approvals/approvals.go).
	Approver Approver
	// Outside runs the outside Agents' turns (commands/acprunner).
	Outside OutsideRunner
	// Turns are the runs this process holds: Session turns, Chat turns, A2A
	// tasks and Ways lanes (commands/core/runs.go).
	Turns *turnRuns

	// BlobWrites keeps blob collection from seeing a blob between its
	// commit and the append that names it: uploads and appends that
	// offload content hold it shared across both, a collection's removals
	// hold it exclusively (commands/sweeps/blobgc.go).
	BlobWrites sync.RWMutex

	// Membership serialises the decisions that span aggregates: registering
	// a path, removing a Workspace, adding a Session to one. Session creation
	// shares it; path registration and removal hold it alone.
	Membership sync.RWMutex
}

// Append commits events and waits until the projections reflect them, so a
// caller that reads right after a command sees its effect.
func (s *Core) Append(ctx context.Context, evs []journal.Event, expect ...journal.Expectation) error {
	// Large content goes to the blob store and the event names it, so every
	// event stays small enough for the journal, NATS and /ws frames.
	if s.Opts.Blobs != nil && slices.ContainsFunc(evs, func(ev journal.Event) bool { return events.Offloads(ev.Data) }) {
		s.BlobWrites.RLock()
		defer s.BlobWrites.RUnlock()
	}
	for i, ev := range evs {
		if p, ok := ev.Data.(events.Payload); ok && s.Opts.Blobs != nil {
			var err error
			if evs[i].Data, err = events.Offload(p, s.Opts.Blobs); err != nil {
				return fmt.Errorf("%s: %w", ev.Type, err)
			}
		}
	}
	recs, err := s.Journal.Append(ctx, evs, expect...)
	switch {
	case errors.Is(err, journal.ErrVersionConflict):
		return fmt.Errorf("%w: the record changed concurrently; retry", ErrConflict)
	case errors.Is(err, journal.ErrClosed):
		return fmt.Errorf("%w: the daemon is shutting down", ErrUnavailable)
	case err != nil:
		return err
	}
	// The events are durable; wait for their projection even if the
	// caller has gone, so that a follow-up decision never reads stale state.
	return s.Store.Await(context.WithoutCancel(ctx), recs[len(recs)-1].Seq)
}

// MaxRetries bounds optimistic-concurrency retries of one command.
const MaxRetries = 8

// Retry runs decide-and-append until it does not lose an optimistic
// concurrency race, waiting for the projection to catch up between tries.
func (s *Core) Retry(ctx context.Context, try func() error) error {
	var err error
	for range MaxRetries {
		var lost raced
		if err = try(); !errors.As(err, &lost) {
			return err
		}
		if err := s.Store.Await(ctx, s.Journal.Last()); err != nil {
			return err
		}
	}
	return err
}

// raced marks an ErrConflict that came from a lost optimistic race, which
// retry may repeat, as opposed to a decided conflict.
type raced struct{ error }

func (r raced) Unwrap() error { return r.error }

// LostRace marks err, a conflict of an append under an expected version,
// as a lost race that retry repeats.
func LostRace(err error) error { return raced{err} }

func (s *Core) AppendExpecting(ctx context.Context, id string, version uint64, p ...events.Payload) error {
	evs := make([]journal.Event, len(p))
	for i := range p {
		evs[i] = events.New(id, p[i])
	}
	err := s.Append(ctx, evs, journal.Expectation{AggregateID: id, Version: version})
	if errors.Is(err, ErrConflict) {
		return raced{err}
	}
	return err
}

// UpdateSession decides one event from the Session's current state and
// appends it under optimistic concurrency. decide returning nil changes
// nothing.
func (s *Core) UpdateSession(ctx context.Context, id string, decide func(projections.Session) (events.Payload, error)) (projections.Session, error) {
	var out projections.Session
	err := s.Retry(ctx, func() error {
		ss, ok := s.Store.Session(id)
		if !ok {
			return fmt.Errorf("%w: session %q", ErrNotFound, id)
		}
		p, err := decide(ss)
		if err != nil || p == nil {
			out = ss
			return err
		}
		if err := s.AppendExpecting(ctx, id, ss.Version, p); err != nil {
			return err
		}
		out, _ = s.Store.Session(id)
		return nil
	})
	return out, err
}

// LivePublisher carries a turn's streamed deltas, and a Chat turn's steps,
// to the live-run projection (the daemon publishes them on their NATS live
// subject).
type LivePublisher interface {
	PublishLive(d events.LiveDelta) error
}

// ErrStopScan ends a journal scan early.
var ErrStopScan = errors.New("stop scan")

// NewCore returns the core appending to j and deciding against store.
func NewCore(j *journal.Journal, store Reader, opts Options) *Core {
	agents := map[string]bool{}
	for _, id := range opts.Agents {
		agents[id] = true
	}
	log := opts.Logger
	if log == nil {
		log = defaultLogger
	}
	return &Core{Journal: j, Store: store, Opts: opts, Agents: agents, Log: log, Turns: newTurnRuns()}
}

// defaultLogger discards, for Services built without a logger.
var defaultLogger = slog.New(slog.DiscardHandler)
