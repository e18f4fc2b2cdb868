package journal_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"

	"lathe/journal"
)

// BenchmarkAppend measures durable appends (envelope encoding included) from
// 64 concurrent writers, each acknowledged only after its commit, against two
// baselines measured in the same run: one bbolt commit per event, and
// bbolt's db.Batch with its defaults.
func BenchmarkAppend(b *testing.B) {
	const writers = 64
	b.Run("group-commit", func(b *testing.B) {
		j, err := journal.Open(filepath.Join(b.TempDir(), "j.db"), journal.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer j.Close()
		runWriters(b, writers, func(w, i int) error {
			_, err := j.Append(context.Background(), []journal.Event{benchEvent(w)})
			return err
		})
	})
	for _, mode := range []string{"commit-per-event", "db-batch"} {
		b.Run(mode, func(b *testing.B) {
			db, err := bolt.Open(filepath.Join(b.TempDir(), "b.db"), 0o600, &bolt.Options{InitialMmapSize: 1 << 30, FreelistType: bolt.FreelistMapType})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			_ = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("events")); return err })
			update := db.Update
			if mode == "db-batch" {
				update = db.Batch
			}
			runWriters(b, writers, func(w, i int) error {
				e := benchEvent(w)
				data, _ := json.Marshal(e.Data)
				return update(func(tx *bolt.Tx) error {
					bk := tx.Bucket([]byte("events"))
					seq, _ := bk.NextSequence()
					env, _ := json.Marshal(journal.Envelope{Seq: seq, ID: ulid.Make().String(), Type: e.Type, Aggregate: e.Aggregate, AggregateID: e.AggregateID, At: time.Now().UTC(), Data: data})
					k := make([]byte, 8)
					binary.BigEndian.PutUint64(k, seq)
					return bk.Put(k, env)
				})
			})
		})
	}
}

// benchIDs are the writers' aggregate IDs, one Session each.
var benchIDs = func() (ids [64]string) {
	for i := range ids {
		ids[i] = fmt.Sprintf("01JBENCH%018d", i)
	}
	return ids
}()

// renamed has the shape of a typical small event payload.
type renamed struct {
	Name string `json:"name"`
}

func benchEvent(w int) journal.Event {
	return journal.Event{Type: "session-renamed", Aggregate: "session", AggregateID: benchIDs[w%len(benchIDs)], Data: renamed{Name: "a session name of ordinary length"}}
}

// runWriters spreads b.N appends over n writers and reports events/s and the
// append latency percentiles.
func runWriters(b *testing.B, n int, appendOne func(w, i int) error) {
	var next atomic.Int64
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > b.N {
					return
				}
				t0 := time.Now()
				if err := appendOne(w, i); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*50/100].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkVerify1M measures what `lathe journal verify` does on a journal
// of 1,000,000 events (goal: at most 5 s): the structural check (seq
// contiguity, every envelope, every aggregate chain, bbolt's pages) and the
// hash chain.
func BenchmarkVerify1M(b *testing.B) {
	j, err := journal.Open(filepath.Join(b.TempDir(), "j.db"), journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	const total, batch = 1_000_000, 4000
	evs := make([]journal.Event, batch)
	for done := 0; done < total; done += batch {
		for i := range evs {
			evs[i] = benchEvent(done + i)
		}
		if _, err := j.Append(context.Background(), evs); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		rep, err := j.Verify()
		if err != nil || rep.Events != total {
			b.Fatalf("verify: %+v %v", rep, err)
		}
		if n, err := j.VerifyChain(context.Background(), 0); err != nil || n != total {
			b.Fatalf("chain: %d %v", n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/verify")
}
