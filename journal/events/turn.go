package events

import (
	"encoding/json"
	"slices"

	"lathe/runtime/usage"
)

func init() {
	register[TurnAccepted]()
	register[TurnStarted]()
	register[TurnOutput]()
	register[TurnUsage]()
	register[ToolCallStarted]()
	register[ToolCallFinished]()
	register[TurnDone]()
	register[TurnCancelled]()
	register[TurnFailed]()
	register[SessionRewound]()
	register[TurnChanges]()
}

// A turn's events live on its Session's aggregate, so that one Session's
// audit trail (journal dump --aggregate) is its whole history. The journal
// keeps what a turn decided and paid for: the accept, the start, each
// inference's assistant output and usage, every tool call with its result,
// and exactly one terminal event. Token and reasoning deltas are live only
// (LiveDelta over NATS); each step's output event carries their sum.

// TurnAccepted: the durable begin of a turn. After its commit the client
// gets session-accepted.
type TurnAccepted struct {
	TurnID         string `json:"turn_id"`
	IdempotencyKey string `json:"idempotency_key"`
	// AgentID is the Agent the turn runs on (the Session's Agent, or the
	// target_agent of a multi-Agent Session).
	AgentID           string   `json:"agent_id"`
	Input             Text     `json:"input"`
	DisplayInput      *Text    `json:"display_input,omitempty"`
	ContextReferences []JSON   `json:"context_references,omitempty"`
	ReferenceIDs      []string `json:"reference_ids,omitempty"`
	ModelOverride     *string  `json:"model_override,omitempty"`
	TargetAgent       *string  `json:"target_agent,omitempty"`
	// Source is how the turn came: "ws" (the session command) or
	// "execute" (POST /api/sessions/{id}/execute).
	Source string `json:"source"`
}

// TurnStarted: execution began on Model.
type TurnStarted struct {
	TurnID string `json:"turn_id"`
	Agent  string `json:"agent"`
	Model  string `json:"model"`
	// AgentName and AgentVersion are what an outside agent said of itself
	// (ACP initialize's agentInfo) when its process started, clipped
	// (ClipReported): kept with the turn, so a later upgrade never
	// rewrites its History. Empty for the built-in loop.
	AgentName    string `json:"agent_name,omitempty"`
	AgentVersion string `json:"agent_version,omitempty"`
}

// StepCall is a tool call the model asked for in one step.
type StepCall struct {
	CallID     string `json:"call_id"`
	Occurrence int    `json:"occurrence"`
	Name       string `json:"name"`
	Arguments  JSON   `json:"arguments"`
}

// TurnOutput: one inference's assistant message: its text, its reasoning and
// the tool calls it asked for. Step counts inferences from 1.
type TurnOutput struct {
	TurnID    string     `json:"turn_id"`
	Agent     string     `json:"agent"`
	Step      int        `json:"step"`
	Text      Text       `json:"text"`
	Reasoning Text       `json:"reasoning,omitzero"`
	ToolCalls []StepCall `json:"tool_calls,omitempty"`
	// Partial marks the text of an inference that did not finish (it failed
	// or was stopped): shown to the user, never replayed to the model.
	Partial bool `json:"partial,omitempty"`
	// FirstTokenMS is the time from the inference's start to its first
	// streamed delta, in milliseconds (fractional); 0: none was streamed.
	FirstTokenMS float64 `json:"first_token_ms,omitempty"`
}

// TurnUsage: what one inference cost, recorded as soon as it ended, so that
// paid work stays visible whatever happens to the turn afterwards. CostUSD
// is nil when the price is unknown (never zero for unknown).
type TurnUsage struct {
	TurnID  string   `json:"turn_id"`
	Agent   string   `json:"agent"`
	Step    int      `json:"step"`
	Model   string   `json:"model"`
	CostUSD *float64 `json:"cost_usd"`
	usage.Tokens
}

// ToolCallStarted: a tool call began. (CallID, Occurrence) identify it
// within the turn: providers may repeat call IDs.
type ToolCallStarted struct {
	TurnID     string `json:"turn_id"`
	Agent      string `json:"agent"`
	CallID     string `json:"call_id"`
	Occurrence int    `json:"occurrence"`
	Name       string `json:"name"`
	Arguments  JSON   `json:"arguments"`
}

// ToolCallFinished: a tool call's result.
type ToolCallFinished struct {
	TurnID     string `json:"turn_id"`
	Agent      string `json:"agent"`
	CallID     string `json:"call_id"`
	Occurrence int    `json:"occurrence"`
	Name       string `json:"name"`
	Result     Text   `json:"result"`
	IsError    bool   `json:"is_error"`
	DurationMS int64  `json:"duration_ms"`
}

// TurnChanges: the files a turn changed in a Git Workspace: the paths whose
// content differs between worktree snapshots (git trees, untracked files
// included) taken before and after it. It precedes the terminal event.
type TurnChanges struct {
	TurnID    string   `json:"turn_id"`
	Before    string   `json:"before"`
	After     string   `json:"after"`
	Paths     []string `json:"paths"`
	Truncated bool     `json:"truncated,omitempty"`
	// Ref is the prefix of the refs that keep the two trees from git's gc
	// (Ref+"/before", Ref+"/after"; commands/turns/turncode.go), "" when none
	// could be made.
	Ref string `json:"ref,omitempty"`
}

// TurnDone: the turn succeeded. Totals sum every inference of the turn.
type TurnDone struct {
	TurnID string       `json:"turn_id"`
	Output Text         `json:"output"`
	Totals usage.Tokens `json:"totals"`
}

// TurnCancelled: a Stop reached a safe boundary. StopReason says why
// when a hook ended the turn (continue: false), clipped to
// MaxHookOutput; empty for an operator's Stop.
type TurnCancelled struct {
	TurnID     string       `json:"turn_id"`
	StopReason string       `json:"stop_reason,omitempty"`
	Totals     usage.Tokens `json:"totals"`
}

// TurnFailed: the turn failed. Interrupted marks a turn the daemon stopped
// under (a crash or a shutdown); Budget names the exceeded budget, if any.
// Refused marks a prompt a UserPromptSubmit hook blocked (Error says why):
// no model saw it, and none ever will, since the conversation leaves it out.
type TurnFailed struct {
	TurnID      string       `json:"turn_id"`
	Error       string       `json:"error"`
	Interrupted bool         `json:"interrupted,omitempty"`
	Budget      string       `json:"budget,omitempty"`
	Refused     bool         `json:"refused,omitempty"`
	Totals      usage.Tokens `json:"totals"`
}

// SessionRewound: the conversation head moved back. Hidden lists the turns
// no longer visible or replayed to the model; files are never touched.
type SessionRewound struct {
	KeepThroughTurnID string   `json:"keep_through_turn_id,omitempty"`
	Keep              *int     `json:"keep,omitempty"`
	Hidden            []string `json:"hidden"`
}

func (TurnAccepted) EventType() string     { return "turn-accepted" }
func (TurnStarted) EventType() string      { return "turn-started" }
func (TurnOutput) EventType() string       { return "turn-output" }
func (TurnUsage) EventType() string        { return "turn-usage" }
func (ToolCallStarted) EventType() string  { return "tool-call-started" }
func (ToolCallFinished) EventType() string { return "tool-call-finished" }
func (TurnDone) EventType() string         { return "turn-done" }
func (TurnCancelled) EventType() string    { return "turn-cancelled" }
func (TurnFailed) EventType() string       { return "turn-failed" }
func (SessionRewound) EventType() string   { return "session-rewound" }
func (TurnChanges) EventType() string      { return "turn-changes" }

func (TurnAccepted) Aggregate() string     { return Session }
func (TurnStarted) Aggregate() string      { return Session }
func (TurnOutput) Aggregate() string       { return Session }
func (TurnUsage) Aggregate() string        { return Session }
func (ToolCallStarted) Aggregate() string  { return Session }
func (ToolCallFinished) Aggregate() string { return Session }
func (TurnDone) Aggregate() string         { return Session }
func (TurnCancelled) Aggregate() string    { return Session }
func (TurnFailed) Aggregate() string       { return Session }
func (SessionRewound) Aggregate() string   { return Session }
func (TurnChanges) Aggregate() string      { return Session }

// The content fields of turn events, offloaded when large (content.go).
// Each method works on a copy: slices and pointers are cloned before
// their elements change.

func (e TurnAccepted) offload(w BlobWriter, limit int) (Payload, error) {
	fields := []field{&e.Input}
	if e.DisplayInput != nil {
		d := *e.DisplayInput
		e.DisplayInput = &d
		fields = append(fields, e.DisplayInput)
	}
	e.ContextReferences = slices.Clone(e.ContextReferences)
	for i := range e.ContextReferences {
		fields = append(fields, &e.ContextReferences[i])
	}
	return e, offloadAll(w, limit, fields...)
}

func (e TurnOutput) offload(w BlobWriter, limit int) (Payload, error) {
	fields := []field{&e.Text, &e.Reasoning}
	e.ToolCalls = slices.Clone(e.ToolCalls)
	for i := range e.ToolCalls {
		fields = append(fields, &e.ToolCalls[i].Arguments)
	}
	return e, offloadAll(w, limit, fields...)
}

func (e ToolCallStarted) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Arguments)
}

func (e ToolCallFinished) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Result)
}

func (e TurnDone) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Output)
}

// TurnEvent is an event of one turn.
type TurnEvent interface {
	Payload
	Turn() string
}

func (e TurnAccepted) Turn() string     { return e.TurnID }
func (e TurnStarted) Turn() string      { return e.TurnID }
func (e TurnOutput) Turn() string       { return e.TurnID }
func (e TurnUsage) Turn() string        { return e.TurnID }
func (e ToolCallStarted) Turn() string  { return e.TurnID }
func (e ToolCallFinished) Turn() string { return e.TurnID }
func (e TurnDone) Turn() string         { return e.TurnID }
func (e TurnCancelled) Turn() string    { return e.TurnID }
func (e TurnFailed) Turn() string       { return e.TurnID }
func (e TurnChanges) Turn() string      { return e.TurnID }

// Live delta kinds.
const (
	DeltaToken     = "token"
	DeltaReasoning = "reasoning"
	// DeltaCheckout says that a live Session's checkout changed, whoever
	// wrote it (debounced); it has no text and belongs to no turn: every
	// client re-reads that Session's file and Git views.
	DeltaCheckout = "checkout"
)

// Chat turn delta kinds: a Chat turn's steps, each a frame for the one
// connection that issued the turn (LiveDelta.Chat names the Chat).
const (
	DeltaChatStart      = "chat-start"
	DeltaChatToken      = "chat-token"
	DeltaChatReasoning  = "chat-reasoning"
	DeltaChatToolStart  = "chat-tool-start"
	DeltaChatToolResult = "chat-tool-result"
	// DeltaChatEnd is the turn's end, published once its chat-turn-ended
	// is committed (or could not be): LiveDelta.ChatEnd says how.
	DeltaChatEnd = "chat-end"
)

// LiveDelta is one streamed text or reasoning delta of a running turn, a
// checkout's change notice, or one step of a Chat turn (DeltaChat*). It
// is not journaled: it travels on the NATS live subject LiveSubject(session)
// (a Chat's: ChatLiveSubject(chat)) into the live-run projection, which
// feeds the /ws snapshot and the token and reasoning frames (a Chat step's
// frame goes to the connection that issued the turn). N numbers a turn's deltas from 1, so that the
// runner can wait until its deltas are delivered before it journals the
// next step.
type LiveDelta struct {
	Session string `json:"session"`
	TurnID  string `json:"turn_id"`
	Agent   string `json:"agent"`
	Kind    string `json:"kind"`
	Delta   string `json:"delta"`
	N       uint64 `json:"n"`
	// Run and AttemptSetID name a Ways lane's run (its frames' workflow)
	// and set; empty for a Session turn.
	Run          string `json:"run,omitempty"`
	AttemptSetID string `json:"attempt_set_id,omitempty"`
	// Chat names the Chat of a Chat turn's delta (a DeltaChat* kind; Session
	// is empty). Tool is set on its tool steps, ChatEnd on its end.
	Chat    string    `json:"chat,omitempty"`
	Tool    *ChatTool `json:"tool,omitempty"`
	ChatEnd *ChatEnd  `json:"chat_end,omitempty"`
}

// ChatTool is the tool call of a Chat turn's tool-start or tool-result
// delta; Result and IsError are set on the result.
type ChatTool struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    string          `json:"result,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// ChatEnd is how a Chat turn ended.
type ChatEnd struct {
	// Outcome is ChatDone, ChatStopped or ChatError.
	Outcome string     `json:"outcome"`
	Error   string     `json:"error,omitempty"`
	Usage   usage.View `json:"usage"`
}

// KnownKind reports whether the delta is of a kind the live-run projection
// makes frames of (DeltaToken, DeltaReasoning, DeltaCheckout, and a Chat
// turn's DeltaChat* kinds); any other is dropped.
func (d LiveDelta) KnownKind() bool {
	switch d.Kind {
	case DeltaToken, DeltaReasoning, DeltaCheckout:
		return true
	case DeltaChatStart, DeltaChatToken, DeltaChatReasoning:
		return d.Chat != ""
	case DeltaChatToolStart, DeltaChatToolResult:
		return d.Chat != "" && d.Tool != nil
	case DeltaChatEnd:
		return d.Chat != "" && d.ChatEnd != nil
	}
	return false
}

// ChatDelta reports whether the delta is a Chat turn's.
func (d LiveDelta) ChatDelta() bool { return d.Chat != "" }

// LiveSubjectAll matches every live subject.
const LiveSubjectAll = "lathe.live.>"

// LiveSubject is the NATS subject of a Session's live deltas. Session IDs are
// ULIDs, always valid subject tokens; turn IDs (client-chosen) travel in the
// payload instead.
func LiveSubject(session string) string { return "lathe.live.session." + session }

// ChatLiveSubject is the NATS subject of a Chat's turn deltas. Chat IDs are
// ULIDs, always valid subject tokens.
func ChatLiveSubject(chat string) string { return "lathe.live.chat." + chat }
