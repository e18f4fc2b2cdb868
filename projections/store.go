// Package projections builds Lathe's read models from journal events, and
// from nothing else. Each aggregate has its own read model, with its own
// fold and its own readers: Workspaces and Sessions (sessions.go), tasks
// (tasks.go), attachments (attachments.go), turns (turns.go), the live runs
// (live.go), Attempt sets (ways.go), Automations and their runs
// (automations.go), Chats with the shared files and A2A tasks (chats.go),
// approvals and saved decisions (approvals.go), Agent overlays (agents.go),
// the audit trails (audit.go) and the recent log (recent.go). The Store
// holds them, dispatches each event to the model that claims its type, and
// keeps the seq, the await and the checkpoint. Only Apply writes them.
// Replaying the journal rebuilds them exactly.
//
// Each model claims the event types it folds in an init function beside
// its fold (claims.go); the few types no model folds are declared so, each
// with its reason. TestEveryEventTypeHasOneClaim requires every type
// journal/events registers to be claimed exactly once that way. An event of
// a type nobody claims folds into nothing: its seq, frames and NATS message
// go out as any event's, the daemon logs the types at start (Unclaimed),
// and the live feed never stops at it.
//
// The live commit feed's changes (ApplyChanges) carry each event's payload
// as it was decoded once (Change.Payload), so that what is built from them,
// the /ws frames above all, never decodes an event's data again.
package projections

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"lathe/journal"
	"lathe/journal/events"
)

// shared is what the models of one Store share: the lock that guards them
// all (readers take copies under its read lock; Apply is the only writer)
// and the reader of referenced content (content.go).
type shared struct {
	mu    sync.RWMutex
	blobs events.BlobReader
	// journal folds evicted records again (evicted.go); nil: nothing is
	// evicted.
	journal RefoldJournal
}

// Store holds every read model and dispatches the journal's events to
// them. It is safe for concurrent use. Each model's readers are the
// Store's (embedding), so a consumer names the few it uses in an interface
// of its own.
type Store struct {
	*SessionModel
	*TaskModel
	*AttachmentModel
	*TurnModel
	*LiveModel
	*WaysModel
	*AutomationModel
	*ChatModel
	*ApprovalModel
	*AgentModel
	*AuditModel
	*RecentModel
	*EffectModel
	*OutsideModel

	sh    *shared
	seq   uint64 // last applied journal seq
	seqID string // the envelope ID at seq: ties a checkpoint to its journal
	// checkpointSize is the last checkpoint's, to size the next one's buffer.
	checkpointSize atomic.Int64
	// delivered is the seq whose changes went out (frames and NATS); Await
	// waits on it. applied is signalled when it moves; it uses mu.RLocker().
	delivered uint64
	applied   *sync.Cond
}

// New returns an empty store.
func New() *Store {
	sh := &shared{}
	s := &Store{sh: sh}
	s.SessionModel = newSessionModel(sh)
	s.TaskModel = &TaskModel{sh: sh, sessions: s.SessionModel, tasks: map[string][]*Task{}}
	s.AttachmentModel = &AttachmentModel{sh: sh, sessions: s.SessionModel, attachments: map[string]map[string]*Attachment{}}
	s.AutomationModel = &AutomationModel{sh: sh, d: newAutomationState(), refolded: &refoldCache[*AutomationRun]{max: refoldRuns}}
	s.LiveModel = newLiveModel(sh, s.AutomationModel)
	s.TurnModel = &TurnModel{sh: sh, sessions: s.SessionModel, live: s.LiveModel, turns: map[string]*sessionTurns{}}
	s.AuditModel = &AuditModel{sh: sh, related: map[string][]string{}}
	s.WaysModel = newWaysModel(sh, s.LiveModel, s.AuditModel)
	s.ChatModel = newChatModel(sh)
	s.ApprovalModel = &ApprovalModel{sh: sh, audit: s.AuditModel, approvals: map[string]*Approval{}, permissions: map[string]*Permission{}}
	s.AgentModel = &AgentModel{sh: sh, agents: map[string]*AgentOverlay{}}
	s.RecentModel = &RecentModel{sh: sh}
	s.EffectModel = &EffectModel{sh: sh, open: map[string]events.EffectIntended{}}
	s.OutsideModel = &OutsideModel{sh: sh, sessions: map[string]OutsideSession{}}
	s.applied = sync.NewCond(sh.mu.RLocker())
	return s
}

// Seq returns the journal seq the read models reflect.
func (s *Store) Seq() uint64 {
	s.sh.mu.RLock()
	defer s.sh.mu.RUnlock()
	return s.seq
}

// Await blocks until the store has applied seq and its changes were
// delivered (see ApplyChanges), or ctx ends.
func (s *Store) Await(ctx context.Context, seq uint64) error {
	s.sh.mu.RLock()
	defer s.sh.mu.RUnlock()
	if s.delivered >= seq {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		s.sh.mu.Lock()
		s.applied.Broadcast()
		s.sh.mu.Unlock()
	})
	defer stop()
	for s.delivered < seq {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.applied.Wait()
	}
	return nil
}

// Change is one applied event, its payload decoded once, with the record it
// changed as of that event (nil when the event deleted it). Live /ws frames
// are built from changes, so a frame never shows a later state than its
// event, and from the payload, never from Data again.
type Change struct {
	journal.Envelope
	// Payload is the event's typed data, of the Go type its Type names.
	Payload   events.Payload
	Workspace *Workspace
	Session   *Session
	// Typed are the typed events the event caused (TypedEventsOf).
	Typed []TypedEvent
}

// Apply folds committed records into the read models, in order. Records at
// or below the applied seq are skipped, so replaying an overlap is harmless.
func (s *Store) Apply(recs []journal.Record) error {
	_, err := s.apply(recs, false)
	s.markDelivered()
	return err
}

// ApplyChanges is Apply for the live commit feed: it hands deliver, for each
// applied record, the changed record as of that event, and only then lets
// Await return for those records. So a command that appended an event
// returns after the event's frames and NATS messages went out, and what it
// does next (a turn's next delta, say) can never overtake them.
func (s *Store) ApplyChanges(recs []journal.Record, deliver func([]Change)) error {
	changes, err := s.apply(recs, true)
	if deliver != nil {
		deliver(changes)
	}
	s.markDelivered()
	return err
}

func (s *Store) markDelivered() {
	s.sh.mu.Lock()
	s.delivered = s.seq
	s.sh.mu.Unlock()
	s.applied.Broadcast()
}

func (s *Store) apply(recs []journal.Record, capture bool) (changes []Change, err error) {
	s.sh.mu.Lock()
	defer s.sh.mu.Unlock()
	for _, r := range recs {
		if r.Seq <= s.seq {
			continue
		}
		p, ok := r.Payload.(events.Payload)
		if !ok {
			if p, err = events.Decode(r.Type, r.Data); err != nil {
				return changes, fmt.Errorf("projections: seq %d: %w", r.Seq, err)
			}
		}
		if err := s.fold(r.Envelope, p); err != nil {
			return changes, fmt.Errorf("projections: seq %d (%s): %w", r.Seq, r.Type, err)
		}
		s.seq, s.seqID = r.Seq, r.ID
		s.AuditModel.pasts.grew(r.Envelope) // history.go
		typed := TypedEventsOf(r.Envelope, p)
		for _, te := range typed {
			s.RecentModel.noteTyped(te)
		}
		if capture {
			c := s.SessionModel.change(r.Envelope)
			c.Payload, c.Typed = p, typed
			changes = append(changes, c)
		}
	}
	return changes, nil
}

// fold hands one event to the read model that claims its type
// (claims.go). It fails only on an event that contradicts the model (which
// replay of a verified journal never produces). An event no model folds
// changes nothing but its seq and the recent log.
func (s *Store) fold(env journal.Envelope, p events.Payload) error {
	if env.Aggregate == events.Session {
		if ss := s.SessionModel.sessions[env.AggregateID]; ss != nil {
			if err := s.unpark(ss); err != nil {
				return err
			}
		}
	}
	s.RecentModel.note(env)
	if c := claims[env.Type]; c.fold != nil {
		return c.fold(s, env, p)
	}
	return nil
}

// part folds an event of a Session's part (its turns, attachments, tasks):
// the Session must exist, and the event counts as a change of it.
func (s *Store) part(env journal.Envelope, p events.Payload, fold func(journal.Envelope, events.Payload) error) error {
	if _, err := s.SessionModel.session(env.AggregateID); err != nil {
		return err
	}
	if err := fold(env, p); err != nil {
		return err
	}
	return s.SessionModel.update(env.AggregateID, env.At, func(*Session) {})
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// compareIDs orders ULIDs by creation time (their text sorts that way).
func compareIDs(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
