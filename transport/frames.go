package transport

import (
	"context"
	"encoding/json"

	"lathe/projections"
)

// frameSource derives /ws frames from the projections: the snapshot on
// connect, and one broadcast frame per committed event.
type frameSource struct {
	store *projections.Store
}

func (f *frameSource) snapshot(context.Context) ([]byte, uint64, error) {
	snap := f.store.Snapshot()
	data, err := json.Marshal(snap)
	return data, snap.Seq, err
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

// Broadcast sends one `event` frame per applied change to every /ws client.
// The daemon calls it from the commit feed, after the projections applied
// the changes, so a client's snapshot and its frames never overlap or gap.
func (s *Server) Broadcast(changes []projections.Change) {
	for _, c := range changes {
		data, err := json.Marshal(EventFrame{
			Kind: "event", Type: c.Type, Seq: c.Seq, Aggregate: c.Aggregate, AggregateID: c.AggregateID,
			Workspace: c.Workspace, Session: c.Session,
		})
		if err != nil {
			s.log.Error("encode event frame", "seq", c.Seq, "err", err)
			continue
		}
		s.hub.Broadcast(Frame{Seq: c.Seq, Data: data})
	}
}
