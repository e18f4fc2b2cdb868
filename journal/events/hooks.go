package events

import "strings"

func init() {
	register[HookRan]()
	register[LaneHookRan]()
	register[ChatHookRan]()
	register[NodeHookRan]()
	register[AgentHookRan]()
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

// HookRun is HookRan's record without its methods: the record of a hook
// run outside a Session turn, which is not a turn event of a Session.
type HookRun HookRan

// ChatHookRan: a hook ran in a Chat's turn (TurnID).
type ChatHookRan struct{ HookRun }

// NodeHookRan: a hook ran in an Automation run's agent node (Node; TurnID
// is the node too).
type NodeHookRan struct {
	Node string `json:"node"`
	HookRun
}

// AgentHookRan: a hook ran in a direct execute of the Agent (POST
// /api/agents/{id}/execute; TurnID is the execute's effect intent).
type AgentHookRan struct{ HookRun }

func (ChatHookRan) EventType() string  { return "chat-hook-ran" }
func (ChatHookRan) Aggregate() string  { return Chat }
func (NodeHookRan) EventType() string  { return "automation-node-hook-ran" }
func (NodeHookRan) Aggregate() string  { return AutomationRun }
func (AgentHookRan) EventType() string { return "agent-hook-ran" }
func (AgentHookRan) Aggregate() string { return Agent }

// ClipHookOutput keeps at most MaxHookOutput bytes of s: its head and tail
// around a notice, without a broken UTF-8 sequence at either cut.
func ClipHookOutput(s string) string {
	if len(s) <= MaxHookOutput {
		return s
	}
	half := MaxHookOutput / 2
	return strings.ToValidUTF8(s[:half], "") + "\n[… truncated …]\n" + strings.ToValidUTF8(s[len(s)-half:], "")
}
