package turns

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lathe/commands/core"

	"lathe/journal/events"
)

// ReplayEvent is one journaled event of a turn, its content resolved.
type ReplayEvent struct {
	Seq     uint64
	At      time.Time
	Payload events.Payload
}

// TurnEvents is a turn's journaled events in seq order, from its accept to
// its terminal event. Complete is false for a live turn: the events so far.
type TurnEvents struct {
	SessionID string
	TurnID    string
	Status    string
	Complete  bool
	Events    []ReplayEvent
}

// TurnEvents reads a turn's events back from the journal, following its
// Session's chain from the accept, with each content field resolved from
// the blob store (a reference that cannot be read stays one). Nothing is
// written. A live turn answers what the journal holds so far.
func (s *TurnCode) TurnEvents(ctx context.Context, id, turnID string) (TurnEvents, error) {
	if _, ok := s.Store.Session(id); !ok {
		return TurnEvents{}, fmt.Errorf("%w: session %q", core.ErrNotFound, id)
	}
	t, ok := s.Store.Turn(id, turnID)
	if !ok {
		return TurnEvents{}, fmt.Errorf("%w: session %q has no turn %q", core.ErrNotFound, id, turnID)
	}
	out := TurnEvents{SessionID: id, TurnID: turnID, Status: t.Status, Complete: !t.Live(), Events: []ReplayEvent{}}
	err := s.Journal.ScanAggregate(ctx, id, t.Seq-1, 0, func(seq uint64, raw []byte) error {
		env, p, err := events.DecodeStored(raw)
		if err != nil {
			return err
		}
		te, ok := p.(events.TurnEvent)
		if !ok || te.Turn() != turnID {
			return nil
		}
		out.Events = append(out.Events, ReplayEvent{Seq: seq, At: env.At, Payload: p})
		switch p.(type) {
		case events.TurnDone, events.TurnCancelled, events.TurnFailed:
			return core.ErrStopScan
		}
		return nil
	})
	if err != nil && !errors.Is(err, core.ErrStopScan) {
		return TurnEvents{}, err
	}
	// Content is read from the blob store after the journal's read
	// transaction ended, never while it is open.
	for i := range out.Events {
		out.Events[i].Payload = s.resolvePayload(out.Events[i].Payload)
	}
	return out, nil
}

// resolvePayload reads back the content fields of the turn events that
// have them.
func (s *TurnCode) resolvePayload(p events.Payload) events.Payload {
	if s.Opts.Blobs == nil {
		return p
	}
	r := s.Opts.Blobs
	text := func(t events.Text) events.Text {
		if out, err := t.Resolve(r); err == nil {
			return out
		}
		return t
	}
	switch e := p.(type) {
	case events.TurnOutput:
		e.Text, e.Reasoning = text(e.Text), text(e.Reasoning)
		return e
	case events.ToolCallStarted:
		if a, err := e.Arguments.Resolve(r); err == nil {
			e.Arguments = a
		}
		return e
	case events.ToolCallFinished:
		e.Result = text(e.Result)
		return e
	case events.TurnDone:
		e.Output = text(e.Output)
		return e
	}
	return p
}
