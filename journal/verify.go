package journal

import (
	"encoding/binary"
	"fmt"
	"runtime"

	bolt "go.etcd.io/bbolt"
)

// Report summarises a verified journal.
type Report struct {
	Events     uint64 `json:"events"`
	Aggregates int    `json:"aggregates"`
	LastSeq    uint64 `json:"last_seq"`
}

// Verify checks every invariant the journal promises: sequence numbers start
// at 1 and have no gaps, every envelope decodes and carries its own key as
// seq, every event chains back to its aggregate's previous event, and every
// aggregate record names its event count and newest event under one aggregate
// name. It
// also runs bbolt's own page consistency check.
func (j *Journal) Verify() (Report, error) {
	var rep Report
	err := j.db.View(func(tx *bolt.Tx) error {
		// bbolt's page check runs alongside the walk of the events, and the
		// envelopes decode on every core; only the chain bookkeeping is
		// sequential.
		pages := tx.Check()
		type chain struct {
			name  string
			count uint64
			head  uint64
		}
		seen := map[string]*chain{}
		want := uint64(1)
		check := func(seq, prev uint64, env Envelope) error {
			if seq != want {
				return fmt.Errorf("%w: expected seq %d, found %d", ErrCorrupt, want, seq)
			}
			want++
			if env.Seq != seq {
				return fmt.Errorf("%w: seq %d stores envelope seq %d", ErrCorrupt, seq, env.Seq)
			}
			for _, f := range [][2]string{{"type", env.Type}, {"aggregate", env.Aggregate}, {"aggregate_id", env.AggregateID}} {
				if err := checkToken(f[0], f[1]); err != nil {
					return fmt.Errorf("%w: seq %d: %v", ErrCorrupt, seq, err)
				}
			}
			if env.ID == "" || env.At.IsZero() || len(env.Data) == 0 {
				return fmt.Errorf("%w: seq %d lacks id, at or data", ErrCorrupt, seq)
			}
			c := seen[env.AggregateID]
			if c == nil {
				c = &chain{name: env.Aggregate}
				seen[env.AggregateID] = c
			}
			if c.name != env.Aggregate {
				return fmt.Errorf("%w: seq %d files %s under %q, earlier under %q", ErrCorrupt, seq, env.AggregateID, env.Aggregate, c.name)
			}
			if prev != c.head {
				return fmt.Errorf("%w: seq %d chains back to %d, the previous event of %s is %d", ErrCorrupt, seq, prev, env.AggregateID, c.head)
			}
			c.count++
			c.head = seq
			rep.Events++
			rep.LastSeq = seq
			return nil
		}
		err := decodeAll(tx.Bucket(bucketEvents), check)
		var pageErr error
		for perr := range pages {
			if pageErr == nil {
				pageErr = fmt.Errorf("%w: bbolt: %v", ErrCorrupt, perr)
			}
		}
		if pageErr != nil {
			return pageErr
		}
		if err != nil {
			return err
		}
		if rep.LastSeq != j.last.Load() {
			return fmt.Errorf("%w: last seq %d, journal reports %d", ErrCorrupt, rep.LastSeq, j.last.Load())
		}
		aggs := tx.Bucket(bucketAggregates)
		records := 0
		err = aggs.ForEach(func(k, v []byte) error {
			records++
			c := seen[string(k)]
			a, ok := decodeAggregate(v)
			if c == nil || !ok {
				return fmt.Errorf("%w: aggregate %s has a record but no events", ErrCorrupt, k)
			}
			if a.version != c.count || a.head != c.head || a.name != c.name {
				return fmt.Errorf("%w: aggregate %s records version %d head %d of %q, has %d events up to %d of %q",
					ErrCorrupt, k, a.version, a.head, a.name, c.count, c.head, c.name)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if records != len(seen) {
			return fmt.Errorf("%w: %d aggregates recorded, %d seen", ErrCorrupt, records, len(seen))
		}
		rep.Aggregates = len(seen)
		return nil
	})
	return rep, err
}

// decodeAll decodes every stored event on every core, in chunks, and hands
// each to check in seq order with its previous-seq link; the first error
// stops it.
func decodeAll(events *bolt.Bucket, check func(seq, prev uint64, env Envelope) error) error {
	type item struct {
		seq, prev uint64
		raw       []byte // valid for the transaction
		env       Envelope
		err       error
	}
	type chunk struct {
		items []item
		done  chan struct{}
	}
	const size = 4096
	workers := runtime.GOMAXPROCS(0)
	todo := make(chan *chunk, workers)
	ordered := make(chan *chunk, workers*2)
	for range workers {
		go func() {
			for c := range todo {
				for i := range c.items {
					it := &c.items[i]
					if it.raw != nil {
						it.env, it.err = DecodeEnvelope(it.raw)
					}
				}
				close(c.done)
			}
		}()
	}
	var walkErr error
	go func() {
		defer close(todo)
		defer close(ordered)
		cur := &chunk{done: make(chan struct{})}
		flush := func() {
			todo <- cur
			ordered <- cur
			cur = &chunk{items: make([]item, 0, size), done: make(chan struct{})}
		}
		walkErr = events.ForEach(func(k, v []byte) error {
			if len(k) != 8 || len(v) < 8 {
				return fmt.Errorf("%w: event key of %d bytes, value of %d", ErrCorrupt, len(k), len(v))
			}
			cur.items = append(cur.items, item{seq: binary.BigEndian.Uint64(k), prev: binary.BigEndian.Uint64(v), raw: v[8:]})
			if len(cur.items) == size {
				flush()
			}
			return nil
		})
		if len(cur.items) > 0 {
			flush()
		}
	}()
	var err error
	for c := range ordered {
		<-c.done
		for _, it := range c.items {
			if err != nil {
				break
			}
			if it.err != nil {
				err = fmt.Errorf("seq %d: %w", it.seq, it.err)
				break
			}
			err = check(it.seq, it.prev, it.env)
		}
	}
	if walkErr != nil {
		return walkErr
	}
	return err
}
