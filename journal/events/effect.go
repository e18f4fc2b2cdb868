package events

import (
	"time"

	"lathe/runtime/usage"
)

func init() {
	register[EffectIntended]()
	register[EffectSettled]()
	register[AgentExecuted]()
}

// Effects outside the journal (a file write or tree change, a Git
// operation or a turn restore, a task's start, an MCP install, reconnect or
// removal, an Agent execute) follow one rule, record then act: the command
// appends EffectIntended before the effect and EffectSettled (with the
// effect's own outcome event, in one append) after it. An intent a crash
// left unsettled is settled by the next start (commands/startup/effects.go).
const (
	// Effect is the aggregate of the effect intents.
	Effect = "effect"
	// EffectsID is the one Effect aggregate's ID: its chain is the list of
	// intents that start-up reconciliation reads.
	EffectsID = "effects"
)

// Effect kinds.
const (
	EffectFileWrite    = "file-write"
	EffectFileTree     = "file-tree"
	EffectMCPInstall   = "mcp-install"
	EffectAgentExecute = "agent-execute"
	// EffectGit is a Source Control change or a turn restore in a
	// Session's checkout; Detail is the event type it records.
	EffectGit = "git"
	// EffectTaskStart is a task's process starting in a Session's sandbox;
	// Detail is the task ID its processes carry.
	EffectTaskStart    = "task-start"
	EffectMCPReconnect = "mcp-reconnect"
	EffectMCPRemove    = "mcp-remove"
	// EffectSync fetches a remote clone's work into the Workspace
	// repository (commands/environments/remotesync.go).
	EffectSync = "session-sync"
)

// EffectIntended: a command is about to make an effect outside the
// journal. Intent is its ID (a ULID); Target the aggregate ID its outcome
// is recorded on (a Session, an MCP server, an Agent); Detail what it
// changes (a path, "rename a -> b", a server name, a merge's intent with
// every path it writes: large ones go to the blob store, content.go);
// SHA256 a file write's new content, by which reconciliation tells
// whether it landed.
type EffectIntended struct {
	Intent string `json:"intent"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Detail Text   `json:"detail,omitzero"`
	SHA256 string `json:"sha256,omitempty"`
}

func (e EffectIntended) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Detail)
}

// Effect outcomes.
const (
	EffectDone   = "done"
	EffectFailed = "failed"
	// EffectInterrupted: a stop came between the intent and its outcome;
	// the next start settled it (Error says what it found).
	EffectInterrupted = "interrupted"
)

// EffectSettled: the effect of Intent ended with Outcome.
type EffectSettled struct {
	Intent  string `json:"intent"`
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

func (EffectIntended) EventType() string { return "effect-intended" }
func (EffectSettled) EventType() string  { return "effect-settled" }
func (EffectIntended) Aggregate() string { return Effect }
func (EffectSettled) Aggregate() string  { return Effect }

// AgentExecuted: POST /api/agents/{id}/execute ran on the Agent (the
// envelope's actor asked for it). Intent is the execute's effect intent;
// Stateless when it was one inference with no tools; Calls counts the tool
// calls of a stateful execute's tool loop; Error is a failure's message.
type AgentExecuted struct {
	Intent    string       `json:"intent"`
	Input     Text         `json:"input"`
	Output    Text         `json:"output"`
	Model     string       `json:"model,omitempty"`
	Stateless bool         `json:"stateless"`
	Calls     int          `json:"calls,omitempty"`
	Error     string       `json:"error,omitempty"`
	Usage     usage.Tokens `json:"usage"`
	// Inferences and Tools are the execute's model calls and tool calls,
	// for telemetry.
	Inferences []Inference    `json:"inferences,omitempty"`
	Tools      []ExecutedTool `json:"tools,omitempty"`
}

// ExecutedTool is a tool call of a stateful execute: when it started, how
// long it took and whether it failed.
type ExecutedTool struct {
	CallID     string    `json:"call_id"`
	Name       string    `json:"name"`
	At         time.Time `json:"at"`
	DurationMS int64     `json:"duration_ms"`
	IsError    bool      `json:"is_error,omitempty"`
}

func (AgentExecuted) EventType() string { return "agent-executed" }
func (AgentExecuted) Aggregate() string { return Agent }

func (e AgentExecuted) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Input, &e.Output)
}
