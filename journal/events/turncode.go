package events

func init() {
	register[TurnRestored]()
}

// TurnRestored: an operator wrote files of a turn's snapshot back into the
// Session's worktree (POST …/turns/{turn_id}/restore), as uncommitted
// changes: Side is "before" or "after" the turn, Paths the files restored
// (at most MaxEventPaths, More counting the rest), Forced that the operator
// overrode the conflict check. It is the Session's event, not the turn's:
// the turn ended long before.
type TurnRestored struct {
	TurnID string   `json:"turn_id"`
	Side   string   `json:"side"`
	Paths  []string `json:"paths"`
	More   int      `json:"more,omitempty"`
	Forced bool     `json:"forced,omitempty"`
}

func (TurnRestored) EventType() string { return "session-turn-restored" }
func (TurnRestored) Aggregate() string { return Session }
