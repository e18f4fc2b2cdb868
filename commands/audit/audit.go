package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"lathe/commands/core"

	"lathe/journal"
	"lathe/projections"
)

// Audit reads a Session's history: its audit trail and the Session as it
// was at any seq. It writes nothing.
type Audit struct{ *core.Core }

// AuditPageMax bounds one page of a trail.
const AuditPageMax = 1000

// SessionAudit returns a page of the Session's trail, each entry with its
// one-line summary, and whether more follow. A deleted Session's trail
// stays readable while the journal holds it.
func (a *Audit) SessionAudit(ctx context.Context, id string, q projections.AuditQuery) ([]projections.AuditEntry, bool, error) {
	if q.Limit < 0 || q.Limit > AuditPageMax {
		return nil, false, fmt.Errorf("%w: limit must be from 1 to %d", core.ErrInvalid, AuditPageMax)
	}
	for k := range q.Kinds {
		if !isAuditKind(k) {
			return nil, false, fmt.Errorf("%w: kind %q is not one of %v", core.ErrInvalid, k, projections.AuditKinds)
		}
	}
	entries, more, err := a.Store.SessionAudit(ctx, a.Journal, id, q)
	if err != nil {
		return nil, false, historyError(id, err)
	}
	for i := range entries {
		if entries[i].Actor.Kind == journal.ActorOperator {
			entries[i].ActorName = a.credentialName(entries[i].Actor.ID)
		}
		entries[i].Summary = a.actorLabel(entries[i].Actor) + " " + entries[i].Action
	}
	return entries, more, nil
}

// SessionAt returns the Session as it was right after seq.
func (a *Audit) SessionAt(ctx context.Context, id string, seq uint64) (projections.SessionAt, error) {
	at, err := a.Store.SessionAt(ctx, a.Journal, id, seq)
	if err != nil {
		return at, historyError(id, err)
	}
	return at, nil
}

func historyError(id string, err error) error {
	var rangeErr *projections.SeqRangeError
	switch {
	case errors.Is(err, projections.ErrNoHistory):
		return fmt.Errorf("%w: session %s has no history in the journal", core.ErrNotFound, id)
	case errors.As(err, &rangeErr):
		return fmt.Errorf("%w: %v", core.ErrNotFound, rangeErr)
	}
	return err
}

func isAuditKind(k string) bool {
	for _, known := range projections.AuditKinds {
		if k == known {
			return true
		}
	}
	return false
}

// actorLabel names an actor in a summary: an operator by the configured
// name of the credential used, when it has one.
func (a *Audit) actorLabel(act journal.Actor) string {
	switch act.Kind {
	case journal.ActorOperator:
		if name := a.credentialName(act.ID); name != "" {
			return "operator (" + name + ")"
		}
		return "operator (" + act.ID + ")"
	case journal.ActorAgent:
		return "agent " + act.ID
	case journal.ActorSystem:
		return "Lathe"
	}
	return act.Kind + " " + act.ID
}

func (a *Audit) credentialName(id string) string {
	return a.Opts.CredentialNames[strings.TrimPrefix(id, "cookie:")]
}
