package projections

import (
	"fmt"
	"slices"
	"time"

	"lathe/journal"
	"lathe/journal/events"
)

// Attachment is the read model of one Session attachment relation.
// Consumed: a this_turn relation a turn used. UsedBy: every turn that used
// it (its historical pins). Deleted: out of future selection.
type Attachment struct {
	ReferenceID    string     `json:"reference_id"`
	SessionID      string     `json:"session_id"`
	Scope          string     `json:"scope"`
	Name           string     `json:"name"`
	MediaType      string     `json:"media_type"`
	Size           int64      `json:"size"`
	SHA256         string     `json:"sha256"`
	TextExtracted  bool       `json:"text_extracted"`
	Consumed       bool       `json:"consumed"`
	ConsumedTurnID string     `json:"consumed_turn_id,omitempty"`
	UsedBy         []string   `json:"used_by_turns"`
	Deleted        bool       `json:"deleted"`
	DeletedAt      *time.Time `json:"deleted_at,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// Active reports whether the relation is offered for the next turn.
func (a Attachment) Active() bool { return !a.Deleted && !a.Consumed }

// Pinned reports whether a turn used the relation.
func (a Attachment) Pinned() bool { return len(a.UsedBy) > 0 }

func (a *Attachment) clone() Attachment {
	c := *a
	c.UsedBy = slices.Clone(nonNil(a.UsedBy))
	if a.DeletedAt != nil {
		t := *a.DeletedAt
		c.DeletedAt = &t
	}
	return c
}

// AttachmentModel is the read model of the Sessions' attachment
// relations.
type AttachmentModel struct {
	sh       *shared
	sessions *SessionModel // for the parked parts (checkpoint.go)
	// attachments: session id → reference id → relation
	attachments map[string]map[string]*Attachment
}

// An attachment's events, each a change of its Session.
func init() {
	fold := func(s *Store, env journal.Envelope, p events.Payload) error {
		return s.part(env, p, s.AttachmentModel.fold)
	}
	claimFor("attachments", fold,
		events.AttachmentAdded{}, events.AttachmentScopeChanged{}, events.AttachmentDeleted{}, events.AttachmentsConsumed{})
}

// fold applies an attachment event of a Session (Store.part checked the
// Session).
func (m *AttachmentModel) fold(env journal.Envelope, p events.Payload) error {
	id, at := env.AggregateID, env.At
	get := func(ref string) (*Attachment, error) {
		if a, ok := m.attachments[id][ref]; ok {
			return a, nil
		}
		return nil, fmt.Errorf("unknown attachment %s of session %s", ref, id)
	}
	switch e := p.(type) {
	case events.AttachmentAdded:
		if m.attachments[id] == nil {
			m.attachments[id] = map[string]*Attachment{}
		}
		m.attachments[id][e.ReferenceID] = &Attachment{
			ReferenceID: e.ReferenceID, SessionID: id, Scope: e.Scope, Name: e.Name, MediaType: e.MediaType,
			Size: e.Size, SHA256: e.SHA256, TextExtracted: e.TextExtracted, UsedBy: []string{}, CreatedAt: at, UpdatedAt: at,
		}
	case events.AttachmentScopeChanged:
		a, err := get(e.ReferenceID)
		if err != nil {
			return err
		}
		a.Scope, a.UpdatedAt = e.Scope, at
	case events.AttachmentDeleted:
		a, err := get(e.ReferenceID)
		if err != nil {
			return err
		}
		a.Deleted, a.DeletedAt, a.UpdatedAt = true, &at, at
	case events.AttachmentsConsumed:
		for _, ref := range e.ReferenceIDs {
			a, err := get(ref)
			if err != nil {
				return err
			}
			a.UsedBy = append(a.UsedBy, e.TurnID)
			if a.Scope == events.ScopeThisTurn {
				a.Consumed, a.ConsumedTurnID = true, e.TurnID
			}
			a.UpdatedAt = at
		}
	default:
		return fmt.Errorf("no attachment projection for %T", p)
	}
	return nil
}

// attachmentsOf is a Session's relations for a reader (the read lock is
// held): the read model's, or a decoded copy of what is still parked.
func (m *AttachmentModel) attachmentsOf(id string) map[string]*Attachment {
	if p := m.sessions.parkedOf(id); p != nil {
		_, attachments, _, _ := parked{attachments: p.attachments}.decode(id)
		return attachments
	}
	return m.attachments[id]
}

// Attachments returns a Session's relations, oldest first: with all false,
// only the active ones (not deleted, not consumed).
func (m *AttachmentModel) Attachments(sessionID string, all bool) []Attachment {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	list := m.attachmentsOf(sessionID)
	out := make([]Attachment, 0, len(list))
	for _, a := range list {
		if all || a.Active() {
			out = append(out, a.clone())
		}
	}
	slices.SortFunc(out, func(a, b Attachment) int { return compareIDs(a.ReferenceID, b.ReferenceID) })
	return out
}

// Attachment returns one relation of a Session; another Session's
// reference is not found.
func (m *AttachmentModel) Attachment(sessionID, ref string) (Attachment, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	if a, ok := m.attachmentsOf(sessionID)[ref]; ok {
		return a.clone(), true
	}
	return Attachment{}, false
}
