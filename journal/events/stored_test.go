package events_test

import (
	"encoding/json"
	"errors"
	"testing"

	"lathe/journal"
	"lathe/journal/events"
)

// TestDecodeStored: a stored envelope decodes to itself and its typed
// payload; a broken envelope is journal.ErrCorrupt, an unknown type or
// broken data an error of the payload's.
func TestDecodeStored(t *testing.T) {
	created := events.SessionCreated{WorkspaceID: "W1", Name: "one"}
	stored := func(typ string, data []byte) []byte {
		raw, err := json.Marshal(journal.Envelope{Seq: 7, Type: typ, Aggregate: "session", AggregateID: "S1", Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for _, tc := range []struct {
		name    string
		raw     []byte
		corrupt bool
		fail    bool
	}{
		{name: "a session created", raw: stored(created.EventType(), encode(t, created))},
		{name: "not JSON", raw: []byte(`{"seq":`), corrupt: true, fail: true},
		{name: "an unknown type", raw: stored("no.such", []byte(`{}`)), fail: true},
		{name: "data of another shape", raw: stored(created.EventType(), []byte(`{"name":1}`)), fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, p, err := events.DecodeStored(tc.raw)
			if got := errors.Is(err, journal.ErrCorrupt); got != tc.corrupt {
				t.Errorf("ErrCorrupt %v, want %v (%v)", got, tc.corrupt, err)
			}
			if (err != nil) != tc.fail {
				t.Fatalf("err %v, want a failure %v", err, tc.fail)
			}
			if tc.fail {
				return
			}
			if env.Seq != 7 || env.AggregateID != "S1" || env.Type != created.EventType() {
				t.Errorf("envelope %+v", env)
			}
			if got, ok := p.(events.SessionCreated); !ok || got.WorkspaceID != "W1" || got.Name != "one" {
				t.Errorf("payload %#v, want %#v", p, created)
			}
		})
	}
}
