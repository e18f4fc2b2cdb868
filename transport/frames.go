package transport

import (
	"context"
	"encoding/json"

	"lathe/journal/events"
	"lathe/projections"
)

// frameSource derives /ws frames from the projections: the snapshot on
// connect, and one broadcast frame per committed event.
type frameSource struct {
	read FrameReader
}

func (f *frameSource) snapshot(context.Context) ([]byte, Cursor, error) {
	snap := f.read.Snapshot()
	data, err := json.Marshal(snap)
	return data, Cursor{Seq: snap.Seq, Live: snap.Live}, err
}

// EventFrame is the broadcast `event` frame: one committed event with the
// record it changed, as projected right after it. A deleted record is absent.
type EventFrame struct {
	Kind        string                 `json:"kind"` // "event"
	Type        string                 `json:"type"`
	Seq         uint64                 `json:"seq"`
	Aggregate   string                 `json:"aggregate"`
	AggregateID string                 `json:"aggregate_id"`
	Workspace   *projections.Workspace `json:"workspace,omitempty"`
	Session     *projections.Session   `json:"session,omitempty"`
}

// envFrame is a Session environment bracket frame:
// session-environment-changing {session, generation} and
// session-environment-settled {session}.
type envFrame struct {
	Kind       string  `json:"kind"`
	Session    string  `json:"session"`
	Generation *uint64 `json:"generation,omitempty"`
}

// Broadcast sends, for each applied change, its event type's frame if it
// has one (liveFrames), then its typed events, then its `event` frame, to
// every /ws client. The daemon calls it from the commit feed, after the
// projections applied the changes, so a client's snapshot and its frames
// never overlap or gap.
//
// With no client connected nothing is encoded: a client that connects later
// hydrates from a snapshot that already reflects these changes.
func (s *Server) Broadcast(changes []projections.Change) {
	if s.hub.Clients() == 0 {
		return
	}
	for _, c := range changes {
		if build := liveFrames[c.Type]; build != nil {
			if f := build(s.frames, c); f != nil {
				s.broadcast(c.Seq, f)
			}
		}
		for _, te := range c.Typed {
			s.broadcast(c.Seq, te)
		}
		s.broadcast(c.Seq, EventFrame{
			Kind: "event", Type: c.Type, Seq: c.Seq, Aggregate: c.Aggregate, AggregateID: c.AggregateID,
			Workspace: c.Workspace, Session: c.Session,
		})
	}
}

// The frames of committed events are registered by event type, each
// builder typed by its event's payload, which the change carries decoded
// (projections.Change.Payload): nothing decodes an event's data again, and
// an event type without a frame has no entry.

// liveFrame builds the frame a committed change carries before its typed
// events and its `event` frame, or nil when it has none.
type liveFrame func(f *frameSource, c projections.Change) any

// liveFrames are the live frame builders by event type: a Session's
// environment brackets, its turns (transport/turnlive.go, the frames a
// replay shows, but for the live session-accepted), the Attempt sets'
// (transport/ways.go), the approvals' (transport/approvals.go) and the
// Automation agent nodes' tool calls (transport/automations.go).
var liveFrames = liveFrameTable()

func liveFrameTable() map[string]liveFrame {
	t := frameTable(
		framed(func(_ *frameSource, c projections.Change, e events.EnvironmentChanging) any {
			return envFrame{Kind: c.Type, Session: c.AggregateID, Generation: &e.Generation}
		}),
		framed(func(_ *frameSource, c projections.Change, _ events.EnvironmentSettled) any {
			return envFrame{Kind: c.Type, Session: c.AggregateID}
		}),
		framed(func(_ *frameSource, c projections.Change, e events.TurnAccepted) any {
			return newAcceptedFrame(c.AggregateID, e) // transport/turnaccepted.go
		}),
		framed((*frameSource).attemptSetStartedFrame), framed((*frameSource).attemptSetSettledFrame),
		framed((*frameSource).laneStartedFrame), framed((*frameSource).laneVerifiedFrame),
		framed((*frameSource).laneToolStartedFrame), framed((*frameSource).laneToolFinishedFrame),
		framed((*frameSource).lanePlannedFrame),
		framed(approvalRequested), framed(approvalResolved),
		framed(nodeToolCallFrame),
	)
	for typ, build := range turnFrames {
		if _, live := t[typ]; !live { // the live session-accepted, above
			t[typ] = func(_ *frameSource, c projections.Change) any { return build(c.AggregateID, c.Payload) }
		}
	}
	return t
}

// typedFrame is a frame builder and the event type it builds from.
type typedFrame[B any] struct {
	typ   string
	build B
}

// frameTable indexes builders by their event types; a type given two
// panics at start.
func frameTable[B any](builders ...typedFrame[B]) map[string]B {
	t := make(map[string]B, len(builders))
	for _, b := range builders {
		if _, dup := t[b.typ]; dup {
			panic("transport: two frames for event type " + b.typ)
		}
		t[b.typ] = b.build
	}
	return t
}

// framed is build as the live frame of the changes of T's event type.
func framed[T events.Payload](build func(f *frameSource, c projections.Change, e T) any) typedFrame[liveFrame] {
	var zero T
	return typedFrame[liveFrame]{zero.EventType(), func(f *frameSource, c projections.Change) any {
		e, ok := c.Payload.(T)
		if !ok {
			return nil
		}
		return build(f, c, e)
	}}
}

// turnFrame is build as the frame of the turn events of T's type, given
// their Session.
func turnFrame[T events.Payload](build func(session string, e T) any) typedFrame[func(string, events.Payload) any] {
	var zero T
	return typedFrame[func(string, events.Payload) any]{zero.EventType(), func(session string, p events.Payload) any {
		e, ok := p.(T)
		if !ok {
			return nil
		}
		return build(session, e)
	}}
}

func (s *Server) broadcast(seq uint64, frame any) {
	data, err := json.Marshal(frame)
	if err != nil {
		s.log.Error("encode frame", "seq", seq, "err", err)
		return
	}
	s.hub.Broadcast(Frame{Seq: seq, Data: data})
}
