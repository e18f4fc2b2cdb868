package journal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"unicode/utf8"
)

// Actor is who caused an event: an operator through a credential, an Agent
// in a turn or run, the daemon itself, or an integration. Every envelope
// carries one. Its fields are names, never secrets: an operator's ID is the
// fingerprint of the credential used, not the credential.
type Actor struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// Run is the turn or run an Agent acted in.
	Run string `json:"run,omitempty"`
}

// Actor kinds.
const (
	ActorOperator    = "operator"
	ActorAgent       = "agent"
	ActorSystem      = "system"
	ActorIntegration = "integration"
)

// System is the daemon's own actor: reconciliations, expiries, start-up.
var System = Actor{Kind: ActorSystem, ID: "lathe"}

type actorKey struct{}

// WithActor returns ctx carrying a, which every Append under it records.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom is the actor ctx carries, or System.
func ActorFrom(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok {
		return a
	}
	return System
}

// check accepts what the envelope writes without escaping and the replay
// parser reads back: a known kind, and an ID (at least one byte) and run of
// at most 128 bytes of UTF-8 with no quote, backslash or control character.
func (a Actor) check() error {
	switch a.Kind {
	case ActorOperator, ActorAgent, ActorSystem, ActorIntegration:
	default:
		return fmt.Errorf("%w: actor kind %q", ErrInvalidEvent, a.Kind)
	}
	if a.ID == "" || !actorName(a.ID) || !actorName(a.Run) {
		return fmt.Errorf("%w: actor id %q or run %q is not a name (1-128 bytes of UTF-8, no quote, backslash or control character)", ErrInvalidEvent, a.ID, a.Run)
	}
	return nil
}

func actorName(s string) bool {
	if len(s) > 128 || !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// ActorName is s if an actor may carry it as its ID or run, or else a
// stable stand-in that may: "sha256:" and the first 12 hex digits of its
// SHA-256 (a client-chosen turn ID with a quote, say).
func ActorName(s string) string {
	if s != "" && actorName(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// appendActor writes `,"actor":{…}` for the envelope.
func appendActor(b []byte, a Actor) []byte {
	b = append(b, `,"actor":{"kind":"`...)
	b = append(b, a.Kind...)
	b = append(b, `","id":"`...)
	b = append(b, a.ID...)
	if a.Run != "" {
		b = append(b, `","run":"`...)
		b = append(b, a.Run...)
	}
	return append(b, `"}`...)
}
