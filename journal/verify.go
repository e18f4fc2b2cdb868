package journal

import (
	"encoding/binary"
	"fmt"

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
		var pageErr error
		for err := range tx.Check() {
			if pageErr == nil {
				pageErr = fmt.Errorf("%w: bbolt: %v", ErrCorrupt, err)
			}
		}
		if pageErr != nil {
			return pageErr
		}
		type chain struct {
			name  string
			count uint64
			head  uint64
		}
		seen := map[string]*chain{}
		want := uint64(1)
		err := tx.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
			if len(k) != 8 || len(v) < 8 {
				return fmt.Errorf("%w: event key of %d bytes, value of %d", ErrCorrupt, len(k), len(v))
			}
			seq := binary.BigEndian.Uint64(k)
			if seq != want {
				return fmt.Errorf("%w: expected seq %d, found %d", ErrCorrupt, want, seq)
			}
			want++
			env, err := DecodeEnvelope(v[8:])
			if err != nil {
				return fmt.Errorf("seq %d: %w", seq, err)
			}
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
			if prev := binary.BigEndian.Uint64(v); prev != c.head {
				return fmt.Errorf("%w: seq %d chains back to %d, the previous event of %s is %d", ErrCorrupt, seq, prev, env.AggregateID, c.head)
			}
			c.count++
			c.head = seq
			rep.Events++
			rep.LastSeq = seq
			return nil
		})
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
