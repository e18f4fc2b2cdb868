package events

import (
	"slices"

	"lathe/runtime/usage"
)

func init() {
	register[ChatCreated]()
	register[ChatPatched]()
	register[ChatDeleted]()
	register[ChatMessageAdded]()
	register[ChatTurnStarted]()
	register[ChatToolCalled]()
	register[ChatTurnEnded]()
	register[ChatFileAttached]()
	register[ChatFilePinned]()
	register[ChatFileDetached]()
	register[SharedFileStored]()
	register[SharedFilePatched]()
	register[SharedFileDeleted]()
}

// Aggregates of the compatibility Chats and the shared file store.
const (
	// Chat is one lightweight Chat with an Agent, outside any Session.
	Chat = "chat"
	// SharedFile is one entry of the shared file store.
	SharedFile = "shared-file"
)

// Chat message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Chat turn outcomes.
const (
	ChatDone    = "done"
	ChatStopped = "stopped"
	ChatError   = "error"
)

// ChatFork names the Chat a new Chat was forked from: it starts with that
// Chat's messages before TruncateAt, as they stood at the fork.
type ChatFork struct {
	ChatID     string `json:"chat_id"`
	TruncateAt int    `json:"truncate_at"`
}

// ChatCreated: a Chat with AgentID was created, empty or as a fork.
type ChatCreated struct {
	AgentID string    `json:"agent_id"`
	Name    string    `json:"name"`
	ForkOf  *ChatFork `json:"fork_of,omitempty"`
}

// Override is a new value of a Chat override; a nil Value clears it.
type Override struct {
	Value *string `json:"value"`
}

// ChatPatched: an operator changed the fields that are not nil.
type ChatPatched struct {
	Name           *string   `json:"name,omitempty"`
	Starred        *bool     `json:"starred,omitempty"`
	SystemOverride *Override `json:"system_override,omitempty"`
	ModelOverride  *Override `json:"model_override,omitempty"`
}

// ChatDeleted: the Chat was deleted.
type ChatDeleted struct{}

// ChatMessageAdded: a message was added outside a turn (a fork's
// replacement message).
type ChatMessageAdded struct {
	MessageID string `json:"message_id"`
	Role      string `json:"role"`
	Content   Text   `json:"content"`
}

// ChatTurnStarted: a turn began with the user message Content. Files are
// the shared files whose text went into its context (every pinned one and
// the unpinned ones not yet consumed, which it consumes).
type ChatTurnStarted struct {
	TurnID    string   `json:"turn_id"`
	MessageID string   `json:"message_id"`
	Content   Text     `json:"content"`
	Agent     string   `json:"agent"`
	Model     string   `json:"model"`
	Files     []string `json:"files,omitempty"`
}

// ChatToolCalled: a tool call of a Chat turn finished.
type ChatToolCalled struct {
	TurnID    string `json:"turn_id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments JSON   `json:"arguments"`
	Result    Text   `json:"result"`
	IsError   bool   `json:"is_error"`
	// DurationMS is how long the call ran (its start is At less this).
	DurationMS int64 `json:"duration_ms,omitempty"`
}

// ChatTurnEnded: the turn's one end. MessageID and Content are the reply
// (what was streamed before a stop or a failure too), absent when there is
// none. Tokens is the usage, a subtotal when not known.
type ChatTurnEnded struct {
	TurnID    string `json:"turn_id"`
	Outcome   string `json:"outcome"`
	MessageID string `json:"message_id,omitempty"`
	Content   Text   `json:"content"`
	// Reasoning is the reply's reasoning, when the model sent any.
	Reasoning Text   `json:"reasoning,omitzero"`
	Error     string `json:"error,omitempty"`
	// Refused marks a turn whose user message a UserPromptSubmit hook
	// blocked (Error says why): no model saw it, and none ever will.
	Refused bool `json:"refused,omitempty"`
	usage.Tokens
	// Inferences are the turn's model calls, for telemetry.
	Inferences []Inference `json:"inferences,omitempty"`
}

// ChatFileAttached: a shared file was attached to the Chat.
type ChatFileAttached struct {
	FileID string `json:"file_id"`
	Pinned bool   `json:"pinned"`
}

// ChatFilePinned: an attachment's pin changed.
type ChatFilePinned struct {
	FileID string `json:"file_id"`
	Pinned bool   `json:"pinned"`
}

// ChatFileDetached: the relation was removed; the file stays in the store.
type ChatFileDetached struct {
	FileID string `json:"file_id"`
}

// SharedFileStored: a file was uploaded to the shared store. The bytes (and
// any extracted text) are in the blob store under SHA256.
type SharedFileStored struct {
	Name          string   `json:"name"`
	ContentType   string   `json:"content_type"`
	Size          int64    `json:"size"`
	SHA256        string   `json:"sha256"`
	Tags          []string `json:"tags"`
	TextExtracted bool     `json:"text_extracted"`
}

// SharedFilePatched: an operator renamed or retagged the entry.
type SharedFilePatched struct {
	Name *string   `json:"name,omitempty"`
	Tags *[]string `json:"tags,omitempty"`
}

// SharedFileDeleted: the entry was deleted, and every Chat's relation to it.
type SharedFileDeleted struct{}

func (ChatCreated) EventType() string       { return "chat-created" }
func (ChatPatched) EventType() string       { return "chat-patched" }
func (ChatDeleted) EventType() string       { return "chat-deleted" }
func (ChatMessageAdded) EventType() string  { return "chat-message-added" }
func (ChatTurnStarted) EventType() string   { return "chat-turn-started" }
func (ChatToolCalled) EventType() string    { return "chat-tool-called" }
func (ChatTurnEnded) EventType() string     { return "chat-turn-ended" }
func (ChatFileAttached) EventType() string  { return "chat-file-attached" }
func (ChatFilePinned) EventType() string    { return "chat-file-pinned" }
func (ChatFileDetached) EventType() string  { return "chat-file-detached" }
func (SharedFileStored) EventType() string  { return "shared-file-stored" }
func (SharedFilePatched) EventType() string { return "shared-file-patched" }
func (SharedFileDeleted) EventType() string { return "shared-file-deleted" }

func (ChatCreated) Aggregate() string       { return Chat }
func (ChatPatched) Aggregate() string       { return Chat }
func (ChatDeleted) Aggregate() string       { return Chat }
func (ChatMessageAdded) Aggregate() string  { return Chat }
func (ChatTurnStarted) Aggregate() string   { return Chat }
func (ChatToolCalled) Aggregate() string    { return Chat }
func (ChatTurnEnded) Aggregate() string     { return Chat }
func (ChatFileAttached) Aggregate() string  { return Chat }
func (ChatFilePinned) Aggregate() string    { return Chat }
func (ChatFileDetached) Aggregate() string  { return Chat }
func (SharedFileStored) Aggregate() string  { return SharedFile }
func (SharedFilePatched) Aggregate() string { return SharedFile }
func (SharedFileDeleted) Aggregate() string { return SharedFile }

// Offloads reports whether the event data may put content in the blob
// store when appended (Offload).
func Offloads(data any) bool {
	_, ok := data.(offloader)
	return ok
}

// The content fields of Chat events, offloaded when large (content.go).

func (e ChatMessageAdded) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Content)
}

func (e ChatTurnStarted) offload(w BlobWriter, limit int) (Payload, error) {
	e.Files = slices.Clone(e.Files)
	return e, offloadAll(w, limit, &e.Content)
}

func (e ChatToolCalled) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Arguments, &e.Result)
}

func (e ChatTurnEnded) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Content, &e.Reasoning)
}
