package transport

import (
	"context"
	"encoding/json"

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

// Broadcast sends one `event` frame per applied change to every /ws client,
// preceded by the environment bracket frame for bracket events.
// The daemon calls it from the commit feed, after the projections applied
// the changes, so a client's snapshot and its frames never overlap or gap.
//
// With no client connected nothing is encoded: a client that connects later
// hydrates from a snapshot that already reflects these changes.
func (s *Server) Broadcast(changes []projections.Change) {
	if s.hub.Clients() == 0 {
		return
	}
	for _, c := range changes {
		if c.Session != nil && (c.Type == "session-environment-changing" || c.Type == "session-environment-settled") {
			f := envFrame{Kind: c.Type, Session: c.AggregateID}
			if c.Type == "session-environment-changing" {
				var ev struct{ Generation uint64 }
				_ = json.Unmarshal(c.Data, &ev) // the committed payload: always decodes
				f.Generation = &ev.Generation
			}
			s.broadcast(c.Seq, f)
		}
		if f := turnFrame(c); f != nil {
			s.broadcast(c.Seq, f)
		}
		if f := s.frames.waysFrame(c); f != nil {
			s.broadcast(c.Seq, f)
		}
		if f := approvalFrame(c); f != nil {
			s.broadcast(c.Seq, f)
		}
		if f := automationFrame(c); f != nil { // transport/automations.go
			s.broadcast(c.Seq, f)
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

func (s *Server) broadcast(seq uint64, frame any) {
	data, err := json.Marshal(frame)
	if err != nil {
		s.log.Error("encode frame", "seq", seq, "err", err)
		return
	}
	s.hub.Broadcast(Frame{Seq: seq, Data: data})
}
