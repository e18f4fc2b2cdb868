package projections

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"time"
	"unicode/utf8"

	"lathe/journal"
	"lathe/journal/events"
)

// Load builds a store from the checkpoint at checkpointPath (if usable) and
// the journal events after it. It reports how many events it replayed.
func Load(ctx context.Context, j *journal.Journal, checkpointPath string) (*Store, int, error) {
	s := New()
	s.RefoldFrom(j) // ended records leave memory (evicted.go)
	if checkpointPath != "" {
		ok, err := s.restore(checkpointPath, j)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			s = New()
			s.RefoldFrom(j)
		}
	}
	n, err := s.Replay(ctx, j)
	return s, n, err
}

// replayChunk is how many events one decode task handles; replaySlab is the
// size of the buffers the scan copies stored values into.
const (
	replayChunk = 2048
	replaySlab  = 1 << 20
)

// Replay applies every journal event after the store's seq. Decoding runs
// on every core in parallel; applying stays in seq order on one goroutine.
func (s *Store) Replay(ctx context.Context, j *journal.Journal) (int, error) {
	type task struct {
		recs []journal.Record
		err  error
		done chan struct{}
	}
	workers := runtime.GOMAXPROCS(0)
	todo := make(chan *task, workers*2)
	ordered := make(chan *task, workers*2)
	for range workers {
		go func() {
			for t := range todo {
				for i := range t.recs {
					if err := decodeRecord(&t.recs[i]); err != nil {
						t.err = fmt.Errorf("projections: replay seq %d: %w", t.recs[i].Seq, err)
						break
					}
				}
				close(t.done)
			}
		}()
	}

	scanErr := make(chan error, 1)
	go func() {
		defer close(todo)
		defer close(ordered)
		newTask := func() *task {
			return &task{recs: make([]journal.Record, 0, replayChunk), done: make(chan struct{})}
		}
		cur := newTask()
		flush := func() {
			todo <- cur
			ordered <- cur
			cur = newTask()
		}
		// Values are copied out of the transaction into shared slabs: one
		// allocation per slab, not per event. Nothing the store keeps
		// aliases them, so a slab is garbage once its chunks are applied.
		var slab []byte
		err := j.Scan(ctx, s.Seq(), 0, func(seq uint64, raw []byte) error {
			if cap(slab)-len(slab) < len(raw) {
				slab = make([]byte, 0, max(replaySlab, len(raw)))
			}
			start := len(slab)
			slab = append(slab, raw...)
			cur.recs = append(cur.recs, journal.Record{Envelope: journal.Envelope{Seq: seq}, Raw: slab[start:len(slab):len(slab)]})
			if len(cur.recs) == replayChunk {
				flush()
			}
			return nil
		})
		if len(cur.recs) > 0 {
			flush()
		}
		scanErr <- err
	}()

	n := 0
	var applyErr error
	for t := range ordered {
		<-t.done
		if applyErr == nil {
			applyErr = t.err
		}
		if applyErr == nil {
			applyErr = s.Apply(t.recs)
			n += len(t.recs)
		}
	}
	if err := <-scanErr; err != nil {
		return n, fmt.Errorf("projections: replay: %w", err)
	}
	return n, applyErr
}

// decodeRecord decodes r.Raw into r's envelope and payload. Data aliases
// Raw.
func decodeRecord(r *journal.Record) error {
	env, ok := parseEnvelope(r.Raw)
	var err error
	if ok {
		r.Envelope = env
		r.Payload, err = events.Decode(env.Type, env.Data)
	}
	if !ok || err != nil {
		// The general decoder decides, and names the fault of, whatever
		// the fast path did not take.
		var p events.Payload
		if env, p, err = events.DecodeStored(r.Raw); err == nil {
			r.Envelope, r.Payload = env, p
		}
	}
	return err
}

// parseEnvelope is the replay fast path of journal.DecodeEnvelope. It accepts
// only the exact layout the journal writes,
//
//	{"seq":N,"id":"…","type":"…","aggregate":"…","aggregate_id":"…","at":"RFC 3339","data":…}
//
// with the names drawn from [A-Za-z0-9_-], and reports false for anything
// else, which the caller then decodes with journal.DecodeEnvelope. Data
// aliases raw and is validated by the payload's decoder; when that fails,
// the caller falls back too, so that a damaged value gets the general
// decoder's error. It replaces an encoding/json pass that validates the
// whole value, data included, before decoding it, and allocates only the ID
// and aggregate ID strings.
func parseEnvelope(raw []byte) (journal.Envelope, bool) {
	var env journal.Envelope
	b, ok := bytes.CutPrefix(raw, []byte(`{"seq":`))
	if !ok {
		return env, false
	}
	n := 0
	for n < len(b) && n < 19 && b[n] >= '0' && b[n] <= '9' { // 19 digits never overflow
		env.Seq = env.Seq*10 + uint64(b[n]-'0')
		n++
	}
	if n == 0 || (b[0] == '0' && n > 1) {
		return env, false
	}
	b = b[n:]
	var id, typ, agg, aggID, at []byte
	if b, id, ok = envelopeField(b, `,"id":"`, true); !ok {
		return env, false
	}
	if b, typ, ok = envelopeField(b, `","type":"`, true); !ok {
		return env, false
	}
	if b, agg, ok = envelopeField(b, `","aggregate":"`, true); !ok {
		return env, false
	}
	if b, aggID, ok = envelopeField(b, `","aggregate_id":"`, true); !ok {
		return env, false
	}
	if b, at, ok = envelopeField(b, `","at":"`, false); !ok {
		return env, false
	}
	b = b[1:] // the closing quote of at
	if b, env.Actor, ok = envelopeActor(b); !ok {
		return env, false
	}
	data, ok := bytes.CutPrefix(b, []byte(`,"data":`))
	if !ok || len(data) < 2 || data[len(data)-1] != '}' {
		return env, false
	}
	if at[len(at)-1] != 'Z' || bytes.IndexByte(at, ',') >= 0 { // the journal writes UTC, RFC 3339
		return env, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(at))
	if err != nil {
		return env, false
	}
	env.ID, env.Type, env.Aggregate, env.AggregateID = string(id), intern(typ), intern(agg), string(aggID)
	env.At, env.Data = t, data[:len(data)-1:len(data)-1]
	return env, true
}

// envelopeActor cuts the optional `,"actor":{…}` (journal/actor.go writes
// it, with names that need no escapes); a journal written before actors
// has none.
func envelopeActor(b []byte) (rest []byte, a journal.Actor, ok bool) {
	b, ok = bytes.CutPrefix(b, []byte(`,"actor":{`))
	if !ok {
		return b, a, true
	}
	var kind, id, run []byte
	if b, kind, ok = envelopeField(b, `"kind":"`, true); !ok {
		return nil, a, false
	}
	if b, id, ok = envelopeField(b, `","id":"`, false); !ok {
		return nil, a, false
	}
	if bytes.HasPrefix(b, []byte(`","run":"`)) {
		if b, run, ok = envelopeField(b, `","run":"`, false); !ok {
			return nil, a, false
		}
	}
	if b, ok = bytes.CutPrefix(b, []byte(`"}`)); !ok || !utf8.Valid(id) || !utf8.Valid(run) {
		return nil, a, false // not what the journal writes: the slow path decides
	}
	return b, journal.Actor{Kind: intern(kind), ID: string(id), Run: string(run)}, true
}

// envelopeField cuts key and the string value up to the next quote. A token
// value must be 1–128 bytes of [A-Za-z0-9_-]; any other value must not hold
// an escape.
func envelopeField(b []byte, key string, token bool) (rest, value []byte, ok bool) {
	b, ok = bytes.CutPrefix(b, []byte(key))
	if !ok {
		return nil, nil, false
	}
	end := bytes.IndexByte(b, '"')
	if end <= 0 || (token && end > 128) {
		return nil, nil, false
	}
	value = b[:end]
	for _, c := range value {
		switch {
		case c == '\\' || c < 0x20:
			return nil, nil, false
		case token && !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'):
			return nil, nil, false
		}
	}
	return b[end:], value, true
}

// interned holds the event type and aggregate names, so that replay does not
// allocate them once per event.
var interned = func() map[string]string {
	m := map[string]string{events.Workspace: events.Workspace, events.Session: events.Session}
	for _, t := range events.Types() {
		m[t] = t
	}
	return m
}()

func intern(b []byte) string {
	if s, ok := interned[string(b)]; ok {
		return s
	}
	return string(b)
}

// sameJournal reports whether the journal's event at seq has the envelope
// ID a checkpoint recorded, so that a checkpoint is never applied to a
// journal it was not taken from.
func sameJournal(j *journal.Journal, seq uint64, id string) bool {
	if seq == 0 {
		return true
	}
	var got string
	err := j.Scan(context.Background(), seq-1, 1, func(_ uint64, raw []byte) error {
		env, err := journal.DecodeEnvelope(raw)
		got = env.ID
		return err
	})
	return err == nil && got == id
}
