// Package journal is Lathe's source of truth: an append-only event log in
// bbolt with one global, strictly increasing, gap-free sequence number, a
// per-aggregate index, optimistic concurrency per aggregate and group commit.
//
// The journal imports nothing else from the project. It stores events as the
// exact JSON envelope bytes that are published on NATS and exported for audit,
// so the three always agree.
package journal

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"
)

// Event is one event to append. Data is its typed payload; it is encoded to
// JSON by Append, in the caller's goroutine.
type Event struct {
	Type        string
	Aggregate   string
	AggregateID string
	Data        any
}

// Envelope is the stored, published and exported form of one committed event.
type Envelope struct {
	Seq         uint64          `json:"seq"`
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Aggregate   string          `json:"aggregate"`
	AggregateID string          `json:"aggregate_id"`
	At          time.Time       `json:"at"`
	Actor       Actor           `json:"actor"`
	Data        json.RawMessage `json:"data"`
	// Hash is the event's link in the journal's hash chain (chain.go):
	// hex SHA-256 over the previous event's hash and this envelope's
	// stored bytes. It is not part of the stored bytes; the journal adds it
	// to what it publishes and exports.
	Hash string `json:"hash,omitempty"`
}

// Subject is the NATS subject the event is published on:
// lathe.events.<aggregate>.<id>.<type>.
func (e Envelope) Subject() string {
	return "lathe.events." + e.Aggregate + "." + e.AggregateID + "." + e.Type
}

// Record is a committed event: its envelope, the exact stored bytes, and the
// payload value that was appended (nil when the record was read from disk).
type Record struct {
	Envelope
	Raw     []byte
	Payload any
}

// DecodeEnvelope parses stored envelope bytes. Data aliases raw.
func DecodeEnvelope(raw []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(raw, &e); err != nil {
		return Envelope{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return e, nil
}

// pending is an event encoded up to its sequence number, which only the
// committer knows. buf is headRoom free bytes, then `,"id":…,"data":…}`;
// the stored bytes are prev seq + head + seq + that tail.
type pending struct {
	env  Envelope // everything but Seq
	buf  []byte
	data any
}

// headRoom fits the 8-byte previous seq, `{"seq":` and 20 digits.
const headRoom = 8 + len(`{"seq":`) + 20

var envelopeHead = []byte(`{"seq":`)

// encode prepares ev for the committer: it validates the names and marshals
// everything except the sequence number.
func encode(ev Event, at time.Time, actor Actor) (pending, error) {
	if err := checkToken("type", ev.Type); err != nil {
		return pending{}, err
	}
	if err := checkToken("aggregate", ev.Aggregate); err != nil {
		return pending{}, err
	}
	if err := checkToken("aggregate_id", ev.AggregateID); err != nil {
		return pending{}, err
	}
	if err := actor.check(); err != nil {
		return pending{}, err
	}
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return pending{}, fmt.Errorf("%w: encode %s data: %v", ErrInvalidEvent, ev.Type, err)
	}
	if len(data) > MaxEventData {
		return pending{}, fmt.Errorf("%w: %s data is %d bytes, over the %d-byte limit; large content belongs in the blob store",
			ErrEventTooLarge, ev.Type, len(data), MaxEventData)
	}
	env := Envelope{
		ID:          ulid.Make().String(),
		Type:        ev.Type,
		Aggregate:   ev.Aggregate,
		AggregateID: ev.AggregateID,
		At:          at.UTC(),
		Actor:       actor,
		Data:        data,
	}
	// The buffer leaves room in front for what seal prepends (the previous
	// seq, the head and the seq's digits), so sealing copies nothing.
	buf := make([]byte, headRoom, headRoom+192+len(data))
	tail := append(buf, `,"id":"`...)
	tail = append(tail, env.ID...)
	tail = append(tail, `","type":"`...)
	tail = append(tail, env.Type...)
	tail = append(tail, `","aggregate":"`...)
	tail = append(tail, env.Aggregate...)
	tail = append(tail, `","aggregate_id":"`...)
	tail = append(tail, env.AggregateID...)
	tail = append(tail, `","at":"`...)
	tail = env.At.AppendFormat(tail, time.RFC3339Nano)
	tail = append(tail, '"')
	tail = appendActor(tail, actor)
	tail = append(tail, `,"data":`...)
	tail = append(tail, data...)
	tail = append(tail, '}')
	if len(data) < undecodableData {
		return pending{env: env, buf: tail, data: ev.Data}, nil // decodable: see undecodableData
	}
	if err := decodable(tail); err != nil {
		return pending{}, fmt.Errorf("%w: %s: the stored envelope would not decode again: %v", ErrInvalidEvent, ev.Type, err)
	}
	return pending{env: env, buf: tail, data: ev.Data}, nil
}

// undecodableData is the least data that can make its envelope fail to
// decode. json.Marshal's output is valid JSON nested at most 10,000 levels
// (encoding/json's limit, which Marshal enforces too), so the only way the
// stored envelope can fail to decode is data nested 10,000 levels deep: one
// more level is the envelope's own. That takes an opening and a closing
// bracket per level, so shorter data always decodes, and only longer data
// is checked again, at no cost to the small events that make up the load.
const undecodableData = 2 * 10_000

// decodable checks that the envelope in buf (headRoom free bytes, then the
// tail) decodes again once stored, so that an accepted event always
// replays. json.Marshal accepts a value nested up to encoding/json's depth
// limit, and the envelope adds levels above it: such data marshals, but the
// stored envelope would not unmarshal, and every replay would stop at it.
// Unmarshal starts with exactly this validity scan; the rest of the
// envelope is fields the journal wrote itself. It writes a provisional seq
// into the head room, which seal overwrites.
func decodable(buf []byte) error {
	const provisional = `{"seq":0`
	start := headRoom - len(provisional)
	copy(buf[start:], provisional)
	if json.Valid(buf[start:]) {
		return nil
	}
	var e Envelope
	return json.Unmarshal(buf[start:], &e) // says why
}

// seal completes p with its sequence number. stored is the value kept in the
// events bucket: the aggregate's previous seq, then the envelope (Raw).
func (p pending) seal(seq, prev uint64) (rec Record, stored []byte) {
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], seq, 10)
	start := headRoom - 8 - len(envelopeHead) - len(d)
	stored = p.buf[start:]
	binary.BigEndian.PutUint64(stored, prev)
	copy(stored[8:], envelopeHead)
	copy(stored[8+len(envelopeHead):], d)
	env := p.env
	env.Seq = seq
	return Record{Envelope: env, Raw: stored[8:], Payload: p.data}, stored
}

// checkToken accepts names that are safe as one NATS subject token and as an
// index key: 1–128 bytes of [A-Za-z0-9_-].
func checkToken(field, s string) error {
	if s == "" || len(s) > 128 {
		return fmt.Errorf("%w: %s must be 1 to 128 characters", ErrInvalidEvent, field)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w: %s %q has a character outside [A-Za-z0-9_-]", ErrInvalidEvent, field, s)
		}
	}
	return nil
}

// MaxEventData bounds an event's encoded data. Every event is stored,
// published on NATS and sent in /ws frames whole, so an event stays small:
// large content goes to the blob store and the event names it. The bound
// (with the envelope's few hundred bytes) is far below NATS's payload limit.
const MaxEventData = 256 << 10

// Errors returned by the journal.
var (
	// ErrEventTooLarge: an event's data exceeds MaxEventData. Nothing of
	// its append is written.
	ErrEventTooLarge = errors.New("journal: event too large")
	// ErrVersionConflict: an append's expected aggregate version was stale.
	ErrVersionConflict = errors.New("journal: aggregate version conflict")
	// ErrInvalidEvent: an event's names or payload cannot be stored.
	ErrInvalidEvent = errors.New("journal: invalid event")
	// ErrClosed: the journal is closed or closing.
	ErrClosed = errors.New("journal: closed")
	// ErrCorrupt: stored bytes do not decode or the indexes disagree.
	ErrCorrupt = errors.New("journal: corrupt")
	// ErrLocked: another process holds the journal file.
	ErrLocked = errors.New("journal: locked by another process")
)
