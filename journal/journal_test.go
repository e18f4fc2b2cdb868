package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"lathe/journal"
	"lathe/journal/journaltest"
)

type note struct {
	Text string `json:"text"`
}

func ev(agg, id, text string) journal.Event {
	return journal.Event{Type: "noted", Aggregate: agg, AggregateID: id, Data: note{Text: text}}
}

func TestAppendAssignsContiguousSeqAndStoresTheEnvelope(t *testing.T) {
	j := journaltest.Open(t)
	ctx := context.Background()
	recs, err := j.Append(ctx, []journal.Event{ev("session", "s1", "a"), ev("session", "s1", "b")})
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Seq != 1 || recs[1].Seq != 2 || j.Last() != 2 {
		t.Fatalf("seqs %d,%d last %d", recs[0].Seq, recs[1].Seq, j.Last())
	}
	var got []journal.Envelope
	err = j.Scan(ctx, 0, 0, func(seq uint64, raw []byte) error {
		env, err := journal.DecodeEnvelope(raw)
		if err != nil {
			return err
		}
		got = append(got, env)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Seq != 2 || got[1].Type != "noted" || got[1].Aggregate != "session" || got[1].AggregateID != "s1" {
		t.Fatalf("scan: %+v", got)
	}
	if string(got[1].Data) != `{"text":"b"}` || got[1].ID != recs[1].ID || !got[1].At.Equal(recs[1].At) {
		t.Fatalf("envelope %+v vs record %+v", got[1], recs[1].Envelope)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(recs[0].Raw, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"seq", "id", "type", "aggregate", "aggregate_id", "at", "data"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("envelope lacks %q: %s", k, recs[0].Raw)
		}
	}
	if s := recs[0].Subject(); s != "lathe.events.session.s1.noted" {
		t.Errorf("subject %q", s)
	}
}

func TestConcurrentAppendsShareCommitsWithoutGaps(t *testing.T) {
	j := journaltest.Open(t)
	ctx := context.Background()
	const writers, each = 64, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("agg%d", w)
			for i := range each {
				if _, err := j.Append(ctx, []journal.Event{ev("session", id, fmt.Sprint(i))}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rep, err := j.Verify()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != writers*each || rep.Aggregates != writers || rep.LastSeq != writers*each {
		t.Fatalf("report %+v", rep)
	}
	// Each writer's events are in its own order in the per-aggregate index.
	var texts []string
	err = j.ScanAggregate(ctx, "agg7", 0, 0, func(_ uint64, raw []byte) error {
		env, err := journal.DecodeEnvelope(raw)
		if err != nil {
			return err
		}
		var n note
		_ = json.Unmarshal(env.Data, &n)
		texts = append(texts, n.Text)
		return nil
	})
	if err != nil || len(texts) != each || texts[0] != "0" || texts[each-1] != fmt.Sprint(each-1) {
		t.Fatalf("aggregate scan %v %v", texts, err)
	}
}

func TestExpectedVersion(t *testing.T) {
	j := journaltest.Open(t)
	ctx := context.Background()
	if _, err := j.Append(ctx, []journal.Event{ev("session", "s", "1")}, journal.Expectation{AggregateID: "s", Version: 0}); err != nil {
		t.Fatal(err)
	}
	_, err := j.Append(ctx, []journal.Event{ev("session", "s", "2")}, journal.Expectation{AggregateID: "s", Version: 0})
	if !errors.Is(err, journal.ErrVersionConflict) {
		t.Fatalf("stale expectation: %v", err)
	}
	if j.Last() != 1 {
		t.Fatalf("a conflicting append wrote something: last %d", j.Last())
	}
	if _, err := j.Append(ctx, []journal.Event{ev("session", "s", "2")}, journal.Expectation{AggregateID: "s", Version: 1}); err != nil {
		t.Fatal(err)
	}
	if v, _ := j.Version("s"); v != 2 {
		t.Fatalf("version %d", v)
	}
}

func TestRacingCreatorsOnlyOneWins(t *testing.T) {
	j := journaltest.Open(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := j.Append(context.Background(), []journal.Event{ev("workspace", "path-key", "x")}, journal.Expectation{AggregateID: "path-key"})
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, journal.ErrVersionConflict) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || j.Last() != 1 {
		t.Fatalf("wins %d last %d", wins, j.Last())
	}
}

func TestRejectsInvalidEvents(t *testing.T) {
	j := journaltest.Open(t)
	for name, e := range map[string]journal.Event{
		"empty type":    {Type: "", Aggregate: "session", AggregateID: "x", Data: 1},
		"dot in id":     {Type: "t", Aggregate: "session", AggregateID: "a.b", Data: 1},
		"wildcard":      {Type: "t", Aggregate: "*", AggregateID: "x", Data: 1},
		"unmarshalable": {Type: "t", Aggregate: "session", AggregateID: "x", Data: func() {}},
	} {
		if _, err := j.Append(context.Background(), []journal.Event{e}); !errors.Is(err, journal.ErrInvalidEvent) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := j.Append(context.Background(), []journal.Event{ev("session", "x", "1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(context.Background(), []journal.Event{ev("workspace", "x", "1")}); !errors.Is(err, journal.ErrInvalidEvent) {
		t.Errorf("second aggregate name for one id: %v", err)
	}
	if j.Last() != 1 {
		t.Fatalf("last %d", j.Last())
	}
}

func TestOnCommitDeliversEveryRecordInOrder(t *testing.T) {
	j := journaltest.Open(t)
	var mu sync.Mutex
	var seqs []uint64
	j.OnCommit(func(batch []journal.Record) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range batch {
			seqs = append(seqs, r.Seq)
			if r.Payload == nil {
				t.Errorf("seq %d delivered without its payload", r.Seq)
			}
		}
	})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				_, _ = j.Append(context.Background(), []journal.Event{ev("session", fmt.Sprintf("w%d", w), fmt.Sprint(i))})
			}
		}()
	}
	wg.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 320 {
		t.Fatalf("delivered %d", len(seqs))
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("delivery %d has seq %d", i, s)
		}
	}
}

func TestReopenKeepsEverythingAndAppendsAfterClosedFail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := journal.Open(path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := j.Append(context.Background(), []journal.Event{ev("session", "s", fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(context.Background(), []journal.Event{ev("session", "s", "late")}); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	j = journaltest.OpenAt(t, path)
	if j.Last() != 10 {
		t.Fatalf("last after reopen %d", j.Last())
	}
	recs, err := j.Append(context.Background(), []journal.Event{ev("session", "s", "10")}, journal.Expectation{AggregateID: "s", Version: 10})
	if err != nil || recs[0].Seq != 11 {
		t.Fatalf("append after reopen: %v %v", recs, err)
	}
	if _, err := j.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestSecondOpenFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	journaltest.OpenAt(t, path)
	start := time.Now()
	_, err := journal.Open(path, journal.Options{LockTimeout: 200 * time.Millisecond})
	if !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("second open took %v", d)
	}
}

func TestVerifyFindsDamage(t *testing.T) {
	for name, damage := range map[string]func(tx *bolt.Tx) error{
		"gap": func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("events")).Delete([]byte{0, 0, 0, 0, 0, 0, 0, 2})
		},
		"garbage": func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("events")).Put([]byte{0, 0, 0, 0, 0, 0, 0, 3}, []byte("\x00\x00\x00\x00\x00\x00\x00\x02{not json"))
		},
		"wrong seq inside": func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("events"))
			v := append([]byte(nil), b.Get([]byte{0, 0, 0, 0, 0, 0, 0, 1})...)
			v[7] = 2
			return b.Put([]byte{0, 0, 0, 0, 0, 0, 0, 3}, v)
		},
		"broken chain": func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("events"))
			v := append([]byte(nil), b.Get([]byte{0, 0, 0, 0, 0, 0, 0, 3})...)
			v[7] = 1 // seq 3 now claims seq 1 came just before it
			return b.Put([]byte{0, 0, 0, 0, 0, 0, 0, 3}, v)
		},
		"wrong version": func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("aggregates")).Put([]byte("s"), append([]byte{0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 3}, "session"...))
		},
		"orphan aggregate": func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("aggregates")).Put([]byte("ghost"), append([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3}, "session"...))
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			j, err := journal.Open(path, journal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, err := j.Append(context.Background(), []journal.Event{ev("session", "s", fmt.Sprint(i))}); err != nil {
					t.Fatal(err)
				}
			}
			j.Close()
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(damage); err != nil {
				t.Fatal(err)
			}
			db.Close()
			j = journaltest.OpenAt(t, path)
			if _, err := j.Verify(); !errors.Is(err, journal.ErrCorrupt) {
				t.Fatalf("verify: %v", err)
			}
		})
	}
}

// An event too large for NATS and /ws frames is refused at append, loudly,
// and nothing of its batch is written: large content belongs in the blob
// store (journal/events.Offload).
func TestAppendRefusesAnEventOverMaxEventData(t *testing.T) {
	j := journaltest.Open(t)
	ctx := context.Background()
	fits := ev("session", "s1", strings.Repeat("a", journal.MaxEventData-len(`{"text":""}`)))
	if _, err := j.Append(ctx, []journal.Event{fits}); err != nil {
		t.Fatalf("an event of exactly MaxEventData: %v", err)
	}
	big := ev("session", "s1", strings.Repeat("a", journal.MaxEventData))
	_, err := j.Append(ctx, []journal.Event{ev("session", "s1", "small"), big})
	if !errors.Is(err, journal.ErrEventTooLarge) {
		t.Fatalf("append of %d bytes: %v, want ErrEventTooLarge", journal.MaxEventData, err)
	}
	if j.Last() != 1 {
		t.Fatalf("a refused batch wrote events: last seq %d", j.Last())
	}
}

// TestAppendRefusesAnEnvelopeThatWouldNotDecode: data nested just inside
// encoding/json's depth limit marshals, but the envelope adds levels above
// it, so the stored event would stop every replay (issue 23, finding 1).
// The append is refused and nothing is written.
func TestAppendRefusesAnEnvelopeThatWouldNotDecode(t *testing.T) {
	j := journaltest.Open(t)
	ctx := context.Background()
	deep := json.RawMessage(strings.Repeat("[", 9999) + strings.Repeat("]", 9999))
	_, err := j.Append(ctx, []journal.Event{ev("session", "s1", "before"),
		{Type: "noted", Aggregate: "session", AggregateID: "s1", Data: map[string]any{"args": deep}}})
	if !errors.Is(err, journal.ErrInvalidEvent) || !strings.Contains(err.Error(), "would not decode") {
		t.Fatalf("append of a too-deep event = %v, want ErrInvalidEvent", err)
	}
	// The shortest data that cannot decode in its envelope: exactly 10,000
	// levels, 20,000 bytes.
	deepest := json.RawMessage(strings.Repeat("[", 10000) + strings.Repeat("]", 10000))
	if _, err := j.Append(ctx, []journal.Event{{Type: "noted", Aggregate: "session", AggregateID: "s1", Data: deepest}}); !errors.Is(err, journal.ErrInvalidEvent) {
		t.Fatalf("append of data 10,000 deep = %v, want ErrInvalidEvent", err)
	}
	if j.Last() != 0 {
		t.Fatalf("the refused append wrote %d events", j.Last())
	}
	// One level less decodes: it is accepted.
	recs, err := j.Append(ctx, []journal.Event{ev("session", "s1", "after"),
		{Type: "noted", Aggregate: "session", AggregateID: "s1", Data: deep}})
	if err != nil || recs[0].Seq != 1 || recs[1].Seq != 2 {
		t.Fatalf("the next append: %v %v", recs, err)
	}
	err = j.Scan(ctx, 0, 0, func(seq uint64, raw []byte) error {
		_, err := journal.DecodeEnvelope(raw)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A scan after the head is empty, up to the largest seq: after+1 must not
// wrap around to the start (issue 23, finding 8).
func TestScanPastTheHeadIsEmpty(t *testing.T) {
	j := journaltest.Open(t)
	ctx := context.Background()
	if _, err := j.Append(ctx, []journal.Event{ev("session", "s1", "a"), ev("session", "s1", "b")}); err != nil {
		t.Fatal(err)
	}
	for _, after := range []uint64{2, 3, 1 << 63, math.MaxUint64 - 1, math.MaxUint64} {
		for name, scan := range map[string]func(context.Context, uint64, int, func(uint64, []byte) error) error{
			"Scan": j.Scan, "ScanSealed": j.ScanSealed,
			"ScanAggregate": func(ctx context.Context, after uint64, limit int, fn func(uint64, []byte) error) error {
				return j.ScanAggregate(ctx, "s1", after, limit, fn)
			},
		} {
			n := 0
			if err := scan(ctx, after, 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != 0 {
				t.Errorf("%s after %d: %d events, %v; want none", name, after, n, err)
			}
		}
	}
}
