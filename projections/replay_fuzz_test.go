package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"lathe/journal"
	"lathe/journal/journaltest"
)

// The replay's fast envelope parser agrees with encoding/json on every
// envelope it accepts, actor included. Whatever it refuses goes to the slow
// path, and data that is not JSON fails the payload's decoding, so
// agreement on the rest is what matters.
func FuzzParseEnvelope(f *testing.F) {
	j := journaltest.Open(f)
	ctx := context.Background()
	for _, c := range []context.Context{ctx,
		journal.WithActor(ctx, journal.Actor{Kind: journal.ActorOperator, ID: "cookie:0123456789ab"}),
		journal.WithActor(ctx, journal.Actor{Kind: journal.ActorAgent, ID: "coder", Run: "turn one ✓"}),
	} {
		if _, err := j.Append(c, []journal.Event{{Type: "noted", Aggregate: "session", AggregateID: "s1", Data: map[string]string{"a": "b\"}"}}}); err != nil {
			f.Fatal(err)
		}
	}
	_ = j.Scan(ctx, 0, 0, func(_ uint64, raw []byte) error {
		f.Add(bytes.Clone(raw))
		return nil
	})
	f.Add([]byte(`{"seq":1,"id":"x","type":"t","aggregate":"a","aggregate_id":"i","at":"2026-01-01T00:00:00Z","actor":{"kind":"system","id":"lathe"},"data":{}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		fast, ok := parseEnvelope(raw)
		if !ok || !json.Valid(fast.Data) {
			return // the slow path, or the payload decoder refuses it
		}
		slow, err := journal.DecodeEnvelope(raw)
		if err != nil {
			t.Fatalf("the fast parser accepted what encoding/json refuses (%v): %q", err, raw)
		}
		if fast.Seq != slow.Seq || fast.ID != slow.ID || fast.Type != slow.Type || fast.Aggregate != slow.Aggregate ||
			fast.AggregateID != slow.AggregateID || !fast.At.Equal(slow.At) || fast.Actor != slow.Actor || !bytes.Equal(fast.Data, slow.Data) {
			t.Fatalf("parsers disagree on %q:\nfast %+v\nslow %+v", raw, fast, slow)
		}
	})
}
