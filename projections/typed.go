package projections

import (
	"time"

	"lathe/journal"
	"lathe/journal/events"
)

// TypedEvent is a typed runtime notification (a Skill's emitted event; the
// Lattice and Automation issues add theirs): the `event` frame the /ws
// clients get, and the payload published on lathe.lattice.<type>. Each is
// derived from the journal event that caused it, so a replay gives the same
// log.
type TypedEvent struct {
	Kind     string `json:"kind"` // "event"
	Type     string `json:"type"`
	Name     string `json:"name,omitempty"`
	Agent    string `json:"agent,omitempty"`
	Task     string `json:"task,omitempty"`
	Output   string `json:"output,omitempty"`
	Tokens   *int   `json:"tokens,omitempty"`
	Workflow string `json:"workflow,omitempty"`
	TurnID   string `json:"turn_id,omitempty"`
	Skill    string `json:"skill,omitempty"`
	// Automation names the Automation of an Automation's progress event
	// (published on lathe.automation.<id>.<type>).
	Automation string    `json:"automation,omitempty"`
	Seq        uint64    `json:"seq"` // the journal event it derives from
	At         time.Time `json:"at"`
}

// TypedEventsOf derives the typed events of one committed event (none for
// most).
func TypedEventsOf(env journal.Envelope, p events.Payload) []TypedEvent {
	switch e := p.(type) {
	case events.SkillFired:
		out := make([]TypedEvent, len(e.Emits))
		for i, typ := range e.Emits {
			out[i] = TypedEvent{Kind: "event", Type: typ, Name: e.Name, Skill: env.AggregateID, Seq: env.Seq, At: env.At}
		}
		return out
	case events.LatticeTask:
		return latticeTyped(env, e)
	case events.NodeStarted, events.NodeFinished, events.RunFinished:
		return automationTyped(env, e)
	}
	return nil
}
