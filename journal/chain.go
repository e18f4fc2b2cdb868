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
//
// One entry holds the links of one commit (or backfill chunk): keyed by its
// first seq, the value is the links of that seq and the ones after it, 32
// bytes each. So a group commit adds one record, not one per event, and
// the chain costs appends little. The link of seq is in the entry with the
// greatest first seq at or below it.
var bucketChain = []byte("chain") // first seq (8 bytes BE) → links (32 bytes each)

// chainReader finds links in the chain bucket; sequential lookups reuse
// the entry they are in.
type chainReader struct {
	c     *bolt.Cursor
	first uint64
	links []byte
}

func newChainReader(b *bolt.Bucket) *chainReader { return &chainReader{c: b.Cursor()} }

// link returns the link of seq, if the chain holds one.
func (r *chainReader) link(seq uint64) (Link, bool) {
	var l Link
	size := uint64(len(l))
	if r.links == nil || seq < r.first || (seq-r.first+1)*size > uint64(len(r.links)) {
		k, v := r.c.Seek(seqKey(seq))
		switch {
		case k == nil:
			k, v = r.c.Last()
		case binary.BigEndian.Uint64(k) > seq:
			k, v = r.c.Prev()
		}
		if k == nil {
			return l, false
		}
		r.first, r.links = binary.BigEndian.Uint64(k), v
	}
	i := (seq - r.first) * size
	if seq < r.first || i+size > uint64(len(r.links)) {
		return l, false
	}
	copy(l[:], r.links[i:])
	return l, true
}

// contiguous checks that the chain's entries cover seqs 1 to their end
// with no gap and no overlap (so that every seq's link is in exactly one
// entry); the first seq that breaks it is a *ChainError.
func contiguous(b *bolt.Bucket) error {
	want := uint64(1)
	return b.ForEach(func(k, v []byte) error {
		first := binary.BigEndian.Uint64(k)
		switch {
		case first > want:
			return &ChainError{Seq: want, Reason: "its link is missing"}
		case first < want:
			return &ChainError{Seq: first, Reason: "two links are stored for it"}
		case len(v) == 0 || len(v)%len(Link{}) != 0:
			return &ChainError{Seq: first, Reason: "its links are truncated"}
		}
		want += uint64(len(v) / len(Link{}))
		return nil
	})
}

// last is the newest link of the chain and its seq.
func lastLink(b *bolt.Bucket) (uint64, Link, bool) {
	var l Link
	k, v := b.Cursor().Last()
	if k == nil || len(v) < len(l) || len(v)%len(l) != 0 {
		return 0, l, false
	}
	n := uint64(len(v) / len(l))
	copy(l[:], v[len(v)-len(l):])
	return binary.BigEndian.Uint64(k) + n - 1, l, true
}

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
		b := tx.Bucket(bucketChain)
		var ok bool
		if b != nil {
			l, ok = newChainReader(b).link(seq)
		}
		if !ok {
			return fmt.Errorf("%w: no chain link for seq %d", ErrCorrupt, seq)
		}
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
			seq, l, _ := lastLink(chain)
			c := tx.Bucket(bucketEvents).Cursor()
			from := seq + 1
			var links []byte
			for k, v := c.Seek(seqKey(seq + 1)); k != nil; k, v = c.Next() {
				if len(links) == backfillChunk*len(l) {
					return chain.Put(seqKey(from), links)
				}
				next := binary.BigEndian.Uint64(k)
				if next != seq+1 || len(v) < 8 {
					return fmt.Errorf("%w: event %d follows %d", ErrCorrupt, next, seq)
				}
				seq, l = next, l.next(v[8:])
				links = append(links, l[:]...)
			}
			if len(links) > 0 {
				if err := chain.Put(seqKey(from), links); err != nil {
					return err
				}
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

const backfillChunk = 50_000

// loadHead reads the head of a read-only journal's chain.
func (j *Journal) loadHead() {
	_ = j.db.View(func(tx *bolt.Tx) error {
		if chain := tx.Bucket(bucketChain); chain != nil {
			if seq, l, ok := lastLink(chain); ok {
				j.headSeq, j.head = seq, l
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
		if err := contiguous(chain); err != nil {
			return err
		}
		links := newChainReader(chain)
		var l Link
		if after > 0 {
			var ok bool
			if l, ok = links.link(after); !ok {
				return &ChainError{Seq: after, Reason: "its link is missing"}
			}
		}
		c := tx.Bucket(bucketEvents).Cursor()
		want := after + 1
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			seq := binary.BigEndian.Uint64(k)
			if checked%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			if seq != want {
				return &ChainError{Seq: want, Reason: fmt.Sprintf("the event is missing (the next stored is %d)", seq)}
			}
			if len(v) < 8 {
				return &ChainError{Seq: seq, Reason: "the stored event is truncated"}
			}
			stored, ok := links.link(seq)
			if !ok {
				return &ChainError{Seq: seq, Reason: "its link is missing"}
			}
			l = l.next(v[8:])
			if stored != l {
				return &ChainError{Seq: seq, Reason: "its bytes or an earlier event's changed after it was appended"}
			}
			want++
			checked++
		}
		if last, _, ok := lastLink(chain); ok && last >= want {
			return &ChainError{Seq: want, Reason: "a link has no event"}
		}
		return nil
	})
	return checked, err
}
