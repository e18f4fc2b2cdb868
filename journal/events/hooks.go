package events

import "strings"

func init() {
	register[HookRan]()
	register[LaneHookRan]()
}

// MaxHookOutput bounds each of a hook-ran event's stdout and stderr: the
// event stays small, and a hook that prints more keeps its head and tail.
const MaxHookOutput = 4 << 10

// HookRan: one operator hook ran at a point of a turn (runtime/hooks). A
// tool event's hook names its call (CallID, Occurrence, Tool); the others
// leave them empty. Decision is allow, block or error; Reason says why it
// blocked or failed.
type HookRan struct {
	TurnID     string `json:"turn_id"`
	Agent      string `json:"agent"`
	Event      string `json:"event"`
	Hook       string `json:"hook"`
	CallID     string `json:"call_id,omitempty"`
	Occurrence int    `json:"occurrence,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
	ExitCode   int    `json:"exit_code"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	Stdout     string `json:"stdout,omitempty"`
	Stderr     string `json:"stderr,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

func (HookRan) EventType() string { return "hook-ran" }
func (HookRan) Aggregate() string { return Session }
func (e HookRan) Turn() string    { return e.TurnID }

// LaneHookRan: a hook ran in a Ways lane's turn, filed under its set as the
// lane's other turn events are.
type LaneHookRan struct {
	Lane
	HookRan
}

func (LaneHookRan) EventType() string      { return "attempt-lane-hook-ran" }
func (LaneHookRan) Aggregate() string      { return AttemptSet }
func (e LaneHookRan) LaneRef() Lane        { return e.Lane }
func (e LaneHookRan) TurnPayload() Payload { return e.HookRan }

// ClipHookOutput keeps at most MaxHookOutput bytes of s: its head and tail
// around a notice, without a broken UTF-8 sequence at either cut.
func ClipHookOutput(s string) string {
	if len(s) <= MaxHookOutput {
		return s
	}
	half := MaxHookOutput / 2
	return strings.ToValidUTF8(s[:half], "") + "\n[… truncated …]\n" + strings.ToValidUTF8(s[len(s)-half:], "")
}
