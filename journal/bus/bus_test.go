package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"lathe/journal"
	"lathe/journal/bus"
	"lathe/journal/journaltest"
)

func start(t *testing.T) *bus.Bus {
	t.Helper()
	b, err := bus.Start(bus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// The largest event the journal accepts, in its envelope, fits a message.
func TestMaxEventFitsAMessage(t *testing.T) {
	if journal.MaxEventData+4096 > bus.MaxPayload {
		t.Fatalf("MaxEventData %d does not fit MaxPayload %d with its envelope", journal.MaxEventData, bus.MaxPayload)
	}
}

// A record that cannot be published is named in the error and counted, and
// the records after it in the batch are still published.
func TestPublishFailureIsCountedAndDoesNotStopTheBatch(t *testing.T) {
	b := start(t)
	got := make(chan uint64, 3)
	if err := b.Subscribe(bus.SubjectAll, func(data []byte) {
		var env journal.Envelope
		_ = json.Unmarshal(data, &env)
		got <- env.Seq
	}); err != nil {
		t.Fatal(err)
	}
	j := journaltest.Open(t)
	recs, err := j.Append(context.Background(), []journal.Event{
		{Type: "noted", Aggregate: "session", AggregateID: "s1", Data: "one"},
		{Type: "noted", Aggregate: "session", AggregateID: "s1", Data: "two"},
		{Type: "noted", Aggregate: "session", AggregateID: "s1", Data: "three"},
	})
	if err != nil {
		t.Fatal(err)
	}
	recs[1].Raw = []byte(strings.Repeat("x", bus.MaxPayload+1)) // as a pre-guard event would be
	err = b.Publish(recs)
	if !errors.Is(err, nats.ErrMaxPayload) || !strings.Contains(err.Error(), "seq 2") || b.Failed() != 1 {
		t.Fatalf("Publish = %v, failed %d", err, b.Failed())
	}
	timeout := time.After(5 * time.Second)
	for _, want := range []uint64{1, 3} {
		select {
		case seq := <-got:
			if seq != want {
				t.Fatalf("received seq %d, want %d", seq, want)
			}
		case <-timeout:
			t.Fatalf("seq %d not received", want)
		}
	}
}
