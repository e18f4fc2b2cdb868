package events

func init() {
	register[AttachmentAdded]()
	register[AttachmentScopeChanged]()
	register[AttachmentDeleted]()
	register[AttachmentsConsumed]()
}

// Attachment scopes: a one-turn relation is consumed by the next turn that
// uses it; a session relation stays selected until deleted.
const (
	ScopeThisTurn = "this_turn"
	ScopeSession  = "session"
)

// AttachmentAdded: a file was uploaded to a Session. The bytes (and any
// extracted text) live in the blob store under SHA256; the journal keeps
// metadata and the hash only.
type AttachmentAdded struct {
	ReferenceID   string `json:"reference_id"`
	Scope         string `json:"scope"`
	Name          string `json:"name"`
	MediaType     string `json:"media_type"`
	Size          int64  `json:"size"`
	SHA256        string `json:"sha256"`
	TextExtracted bool   `json:"text_extracted"`
}

// AttachmentScopeChanged: a relation not yet consumed changed scope.
type AttachmentScopeChanged struct {
	ReferenceID string `json:"reference_id"`
	Scope       string `json:"scope"`
}

// AttachmentDeleted: a relation left future selection. One a turn used
// keeps its historical pin.
type AttachmentDeleted struct {
	ReferenceID string `json:"reference_id"`
}

// AttachmentsConsumed: a turn used these relations; this_turn ones are
// consumed by it.
type AttachmentsConsumed struct {
	ReferenceIDs []string `json:"reference_ids"`
	TurnID       string   `json:"turn_id"`
}

func (AttachmentAdded) EventType() string        { return "session-attachment-added" }
func (AttachmentScopeChanged) EventType() string { return "session-attachment-scope-changed" }
func (AttachmentDeleted) EventType() string      { return "session-attachment-deleted" }
func (AttachmentsConsumed) EventType() string    { return "session-attachments-consumed" }

func (AttachmentAdded) Aggregate() string        { return Session }
func (AttachmentScopeChanged) Aggregate() string { return Session }
func (AttachmentDeleted) Aggregate() string      { return Session }
func (AttachmentsConsumed) Aggregate() string    { return Session }
