// Package events defines every event type Lathe journals, each once, with its
// JSON shape. Commands append them; projections and frames derive from them.
package events

import (
	"encoding/json"
	"fmt"

	"lathe/journal"
)

// Aggregate names.
const (
	Workspace = "workspace"
	Session   = "session"
)

// Payload is an event's typed data. Its type and aggregate are fixed by its Go
// type, so a payload can never be filed under the wrong name.
type Payload interface {
	EventType() string
	Aggregate() string
}

// New wraps a payload as a journal event for the aggregate with id.
func New(id string, p Payload) journal.Event {
	return journal.Event{Type: p.EventType(), Aggregate: p.Aggregate(), AggregateID: id, Data: p}
}

// registry maps each event type to the decoder of its payload.
var registry = map[string]func([]byte) (Payload, error){}

func register[T Payload]() {
	var zero T
	typ := zero.EventType()
	if _, dup := registry[typ]; dup {
		panic("events: duplicate type " + typ)
	}
	registry[typ] = func(data []byte) (Payload, error) {
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("events: decode %s: %w", typ, err)
		}
		return v, nil
	}
}

// Decode parses the data of a stored event of the given type into its typed
// payload value, the same type that was appended.
func Decode(typ string, data []byte) (Payload, error) {
	decode, ok := registry[typ]
	if !ok {
		return nil, fmt.Errorf("events: unknown event type %q", typ)
	}
	return decode(data)
}

// DecodeStored parses one stored envelope, as a journal scan yields it,
// and then its data into the typed payload. The envelope's Data aliases
// raw. A fault of the envelope is journal.ErrCorrupt.
func DecodeStored(raw []byte) (journal.Envelope, Payload, error) {
	env, err := journal.DecodeEnvelope(raw)
	if err != nil {
		return journal.Envelope{}, nil, err
	}
	p, err := Decode(env.Type, env.Data)
	return env, p, err
}

// Types lists every registered event type.
func Types() []string {
	out := make([]string, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	return out
}
