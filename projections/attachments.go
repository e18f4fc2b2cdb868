package projections

import (
	"fmt"
	"slices"
	"time"

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

// foldAttachment applies an attachment event of Session id.
func (s *Store) foldAttachment(id string, at time.Time, p events.Payload) error {
	if _, err := s.session(id); err != nil {
		return err
	}
	get := func(ref string) (*Attachment, error) {
		if a, ok := s.attachments[id][ref]; ok {
			return a, nil
		}
		return nil, fmt.Errorf("unknown attachment %s of session %s", ref, id)
	}
	switch e := p.(type) {
	case events.AttachmentAdded:
		if s.attachments[id] == nil {
			s.attachments[id] = map[string]*Attachment{}
		}
		s.attachments[id][e.ReferenceID] = &Attachment{
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
	return s.updateSession(id, at, func(*Session) {})
}

// Attachments returns a Session's relations, oldest first: with all false,
// only the active ones (not deleted, not consumed).
func (s *Store) Attachments(sessionID string, all bool) []Attachment {
	s.mu.RLock()
	defer s.mu.RUnlock()
	list := s.attachmentsOf(sessionID)
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
func (s *Store) Attachment(sessionID, ref string) (Attachment, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if a, ok := s.attachmentsOf(sessionID)[ref]; ok {
		return a.clone(), true
	}
	return Attachment{}, false
}
