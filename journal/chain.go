package journal

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The hash chain makes the journal tamper-evident. Event seq's link is
//
//	SHA-256(link of seq-1 || the envelope bytes stored for seq)
//
// with 32 zero bytes before seq 1. The links live in their own bucket,
// beside the events, so the stored events are exactly what they were when
// appended: a journal written before the chain existed gets its links
// computed once, at open, in one pass (backfill), and never rewritten.
// Anyone who records a head (Head) can later prove that nothing up to it
// changed: every link after it depends on it.
var bucketChain = []byte("chain") // seq (8 bytes BE) → link (32 bytes)

// Link is one event's place in the chain.
type Link [sha256.Size]byte

func (l Link) String() string { return hex.EncodeToString(l[:]) }

// next is the link of an event stored as env after l.
func (l Link) next(env []byte) Link {
	h := sha256.New()
	h.Write(l[:])
	h.Write(env)
	var n Link
	h.Sum(n[:0])
	return n
}

// Head is the newest event's seq and link (the zero link before any event).
func (j *Journal) Head() (uint64, Link) {
	j.headMu.Lock()
	defer j.headMu.Unlock()
	return j.headSeq, j.head
}

// HasChain tells whether the journal has its hash chain (a read-only
// journal that no daemon of this version has opened has not).
func (j *Journal) HasChain() bool {
	has := false
	_ = j.db.View(func(tx *bolt.Tx) error {
		has = tx.Bucket(bucketChain) != nil
		return nil
	})
	return has
}

// HeadHash is Head with the link in hex, as envelopes carry it.
func (j *Journal) HeadHash() (uint64, string) {
	seq, l := j.Head()
	return seq, l.String()
}

// LinkAt returns the link of seq.
func (j *Journal) LinkAt(seq uint64) (Link, error) {
	var l Link
	err := j.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketChain).Get(seqKey(seq))
		if len(v) != len(l) {
			return fmt.Errorf("%w: no chain link for seq %d", ErrCorrupt, seq)
		}
		copy(l[:], v)
		return nil
	})
	return l, err
}

// sealed is raw, a stored envelope, with its link added as "hash".
func sealed(raw []byte, l Link) []byte {
	out := make([]byte, 0, len(raw)+len(`,"hash":""`)+2*len(l))
	out = append(out, raw[:len(raw)-1]...)
	out = append(out, `,"hash":"`...)
	out = hex.AppendEncode(out, l[:])
	return append(out, `"}`...)
}

// backfill computes the links of the events stored without one (a journal
// written before the chain), in transactions of backfillChunk events, and
// loads the head.
func (j *Journal) backfill() error {
	for {
		var done bool
		err := j.db.Update(func(tx *bolt.Tx) error {
			chain, err := tx.CreateBucketIfNotExists(bucketChain)
			if err != nil {
				return err
			}
			chain.FillPercent = 1
			var seq uint64
			var l Link
			if k, v := chain.Cursor().Last(); k != nil {
				seq = binary.BigEndian.Uint64(k)
				copy(l[:], v)
			}
			c := tx.Bucket(bucketEvents).Cursor()
			n := 0
			for k, v := c.Seek(seqKey(seq + 1)); k != nil; k, v = c.Next() {
				if n == backfillChunk {
					return nil
				}
				next := binary.BigEndian.Uint64(k)
				if next != seq+1 || len(v) < 8 {
					return fmt.Errorf("%w: event %d follows %d", ErrCorrupt, next, seq)
				}
				seq, l = next, l.next(v[8:])
				if err := chain.Put(seqKey(seq), append([]byte(nil), l[:]...)); err != nil {
					return err
				}
				n++
			}
			done = true
			j.headSeq, j.head = seq, l
			return nil
		})
		if err != nil {
			return fmt.Errorf("journal: hash chain: %w", err)
		}
		if done {
			return nil
		}
	}
}

const backfillChunk = 100_000

// loadHead reads the head of a read-only journal's chain.
func (j *Journal) loadHead() {
	_ = j.db.View(func(tx *bolt.Tx) error {
		if chain := tx.Bucket(bucketChain); chain != nil {
			if k, v := chain.Cursor().Last(); k != nil && len(v) == len(j.head) {
				j.headSeq = binary.BigEndian.Uint64(k)
				copy(j.head[:], v)
			}
		}
		return nil
	})
}

// ChainError names the first event whose link does not follow.
type ChainError struct {
	Seq    uint64
	Reason string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("journal: the hash chain breaks at seq %d: %s", e.Seq, e.Reason)
}

func (e *ChainError) Unwrap() error { return ErrCorrupt }

// VerifyChain recomputes the links of the events after seq `after` from the
// stored link of `after` and compares each with the stored one; the first
// that differs is a *ChainError. VerifyChain(ctx, 0) checks the whole
// journal.
func (j *Journal) VerifyChain(ctx context.Context, after uint64) (checked uint64, err error) {
	err = j.db.View(func(tx *bolt.Tx) error {
		chain := tx.Bucket(bucketChain)
		if chain == nil {
			return &ChainError{Seq: after + 1, Reason: "the journal has no hash chain"}
		}
		var l Link
		if after > 0 {
			v := chain.Get(seqKey(after))
			if len(v) != len(l) {
				return &ChainError{Seq: after, Reason: "its link is missing"}
			}
			copy(l[:], v)
		}
		links := chain.Cursor()
		lk, lv := links.Seek(seqKey(after + 1))
		c := tx.Bucket(bucketEvents).Cursor()
		want := after + 1
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			seq := binary.BigEndian.Uint64(k)
			if checked%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			switch {
			case seq != want:
				return &ChainError{Seq: want, Reason: fmt.Sprintf("the event is missing (the next stored is %d)", seq)}
			case len(v) < 8:
				return &ChainError{Seq: seq, Reason: "the stored event is truncated"}
			case lk == nil || binary.BigEndian.Uint64(lk) != seq || len(lv) != len(l):
				return &ChainError{Seq: seq, Reason: "its link is missing"}
			}
			l = l.next(v[8:])
			if Link(lv) != l {
				return &ChainError{Seq: seq, Reason: "its bytes or an earlier event's changed after it was appended"}
			}
			lk, lv = links.Next()
			want++
			checked++
		}
		if lk != nil {
			return &ChainError{Seq: binary.BigEndian.Uint64(lk), Reason: "a link has no event"}
		}
		return nil
	})
	return checked, err
}
