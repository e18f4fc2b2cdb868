package journal_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lathe/journal"
)

// Every envelope records who appended it: the actor of the append's
// context, or the daemon itself.
func TestAppendRecordsTheActor(t *testing.T) {
	j, _ := openAt(t, filepath.Join(t.TempDir(), "j.db"))
	ctx := context.Background()
	op := journal.Actor{Kind: journal.ActorOperator, ID: "key:0123456789ab"}
	agent := journal.Actor{Kind: journal.ActorAgent, ID: "coder", Run: "01TURN"}
	for _, c := range []struct {
		ctx  context.Context
		want journal.Actor
	}{
		{ctx, journal.System},
		{journal.WithActor(ctx, op), op},
		{journal.WithActor(ctx, agent), agent},
	} {
		recs, err := j.Append(c.ctx, []journal.Event{ev("session", "s1", "a")})
		if err != nil {
			t.Fatal(err)
		}
		env, err := journal.DecodeEnvelope(recs[0].Raw)
		if err != nil || env.Actor != c.want || recs[0].Actor != c.want {
			t.Errorf("actor %+v (record %+v), %v; want %+v", env.Actor, recs[0].Actor, err, c.want)
		}
	}
	for _, bad := range []journal.Actor{{Kind: "root", ID: "x"}, {Kind: journal.ActorOperator}, {Kind: journal.ActorAgent, ID: `a"b`}} {
		if _, err := j.Append(journal.WithActor(ctx, bad), []journal.Event{ev("session", "s1", "a")}); !errors.Is(err, journal.ErrInvalidEvent) {
			t.Errorf("actor %+v: %v, want ErrInvalidEvent", bad, err)
		}
	}
}

// Each event's hash is SHA-256 over the previous hash and its stored
// bytes; it is published and exported with the envelope, and the head
// follows the last commit.
func TestHashChainLinksEveryEvent(t *testing.T) {
	j, _ := openAt(t, filepath.Join(t.TempDir(), "j.db"))
	ctx := context.Background()
	var published []journal.Record
	for i := range 5 {
		recs, err := j.Append(ctx, []journal.Event{ev("session", "s1", "a"), ev("session", string(rune('a'+i)), "b")})
		if err != nil {
			t.Fatal(err)
		}
		published = append(published, recs...)
	}
	var prev [32]byte
	i := 0
	err := j.Scan(ctx, 0, 0, func(seq uint64, raw []byte) error {
		h := sha256.Sum256(append(prev[:], raw...))
		rec := published[i]
		env, err := journal.DecodeEnvelope(rec.Raw)
		if err != nil || rec.Hash != hex.EncodeToString(h[:]) || env.Hash != rec.Hash {
			t.Errorf("seq %d: hash %q (published %q, %v), want %x", seq, rec.Hash, env.Hash, err, h)
		}
		prev = h
		i++
		return nil
	})
	if err != nil || i != 10 {
		t.Fatalf("scanned %d: %v", i, err)
	}
	if seq, head := j.Head(); seq != 10 || head != journal.Link(prev) {
		t.Errorf("head %d %s", seq, head)
	}
	i = 0
	err = j.ScanSealed(ctx, 0, 0, func(seq uint64, raw []byte) error {
		if string(raw) != string(published[i].Raw) {
			t.Errorf("seq %d exported as %s, published as %s", seq, raw, published[i].Raw)
		}
		i++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := j.VerifyChain(ctx, 0); err != nil || n != 10 {
		t.Errorf("verify: %d, %v", n, err)
	}
	if n, err := j.VerifyChain(ctx, 7); err != nil || n != 3 {
		t.Errorf("verify after 7: %d, %v", n, err)
	}
}

// A changed byte, a changed link or a missing link is found, and the first
// seq that breaks is named.
func TestVerifyChainNamesTheFirstBrokenSeq(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(events, chain *bolt.Bucket)
		seq    uint64
	}{
		{"event bytes", func(events, _ *bolt.Bucket) {
			v := append([]byte(nil), events.Get(key(4))...)
			v[len(v)-3] ^= 1
			must(events.Put(key(4), v))
		}, 4},
		{"link", func(_, chain *bolt.Bucket) { must(chain.Put(key(6), make([]byte, 32))) }, 6},
		{"missing link", func(_, chain *bolt.Bucket) { must(chain.Delete(key(3))) }, 3},
		{"missing event", func(events, _ *bolt.Bucket) { must(events.Delete(key(5))) }, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			j, _ := openAt(t, path)
			for range 8 {
				if _, err := j.Append(context.Background(), []journal.Event{ev("session", "s1", "x")}); err != nil {
					t.Fatal(err)
				}
			}
			must(j.Close())
			tamperAt(t, path, c.tamper)
			ro, err := journal.Open(path, journal.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			_, err = ro.VerifyChain(context.Background(), 0)
			var ce *journal.ChainError
			if !errors.As(err, &ce) || ce.Seq != c.seq || !errors.Is(err, journal.ErrCorrupt) {
				t.Fatalf("verify: %v; want a break at seq %d", err, c.seq)
			}
		})
	}
}

// A journal written before the chain gets its links computed once, at
// open, without any stored event changing.
func TestOpenBackfillsTheChainOfAnOlderJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, _ := openAt(t, path)
	var want []string
	for range 3 {
		recs, err := j.Append(context.Background(), []journal.Event{ev("session", "s1", "a"), ev("workspace", "w1", "b")})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			want = append(want, r.Hash)
		}
	}
	must(j.Close())
	before := storedEvents(t, path)
	tamperAt(t, path, func(_, _ *bolt.Bucket) {})
	db, err := bolt.Open(path, 0o600, nil)
	must(err)
	must(db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("chain")) }))
	must(db.Close())

	j, _ = openAt(t, path)
	i := 0
	err = j.ScanSealed(context.Background(), 0, 0, func(seq uint64, raw []byte) error {
		env, err := journal.DecodeEnvelope(raw)
		if err != nil || env.Hash != want[i] {
			t.Errorf("seq %d: hash %q, want %q (%v)", seq, env.Hash, want[i], err)
		}
		i++
		return nil
	})
	if err != nil || i != len(want) {
		t.Fatalf("scanned %d: %v", i, err)
	}
	if _, head := j.Head(); head.String() != want[len(want)-1] {
		t.Errorf("head %s, want %s", head, want[len(want)-1])
	}
	must(j.Close())
	if after := storedEvents(t, path); after != before {
		t.Errorf("the backfill rewrote stored events")
	}
}

func openAt(t *testing.T, path string) (*journal.Journal, string) {
	t.Helper()
	j, err := journal.Open(path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j, path
}

func tamperAt(t *testing.T, path string, fn func(events, chain *bolt.Bucket)) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	must(err)
	defer db.Close()
	must(db.Update(func(tx *bolt.Tx) error {
		fn(tx.Bucket([]byte("events")), tx.Bucket([]byte("chain")))
		return nil
	}))
}

func storedEvents(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	must(err)
	defer db.Close()
	var all []byte
	must(db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("events")).ForEach(func(k, v []byte) error {
			all = append(append(all, k...), v...)
			return nil
		})
	}))
	return string(all)
}

func key(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func must(err error) {
	if err != nil {
		panic(err)
	}
}
