package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"lathe/commands/audit"

	"github.com/julienschmidt/httprouter"

	"lathe/projections"
)

// AuditCommands reads a Session's history (commands.Audit).
type AuditCommands interface {
	SessionAudit(ctx context.Context, id string, q projections.AuditQuery) ([]projections.AuditEntry, bool, error)
	SessionAt(ctx context.Context, id string, seq uint64) (projections.SessionAt, error)
}

// auditPageDefault is a page's size when the client names none.
const auditPageDefault = 500

// sessionAudit answers a page of a Session's audit trail,
// {entries, next_after, more}, or with ?format=ndjson the whole trail as
// one entry per line.
func (s *auditRoutes) sessionAudit(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	q := r.URL.Query()
	after, err := parseUint(q.Get("after"), 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, "after must be a non-negative integer seq")
		return
	}
	limit, err := parseUint(q.Get("limit"), auditPageDefault)
	if err != nil || limit == 0 || limit > audit.AuditPageMax {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("limit must be an integer from 1 to %d", audit.AuditPageMax))
		return
	}
	query := projections.AuditQuery{After: after, Limit: int(limit)}
	if k := q.Get("kind"); k != "" {
		query.Kinds = map[string]bool{}
		for kind := range strings.SplitSeq(k, ",") {
			query.Kinds[strings.TrimSpace(kind)] = true
		}
	}
	id := ps.ByName("id")
	switch q.Get("format") {
	case "":
		entries, more, err := s.cmds.SessionAudit(r.Context(), id, query)
		if err != nil {
			fail(w, err)
			return
		}
		next := after
		if len(entries) > 0 {
			next = entries[len(entries)-1].Seq
		}
		writeJSON(w, http.StatusOK, auditPage{Session: id, Entries: entries, NextAfter: next, More: more})
	case "ndjson":
		s.auditExport(w, r, id, query)
	default:
		writeError(w, http.StatusBadRequest, "format must be ndjson or absent")
	}
}

// auditExport streams the whole trail from query.After as NDJSON, a page
// at a time, so a long history never sits in memory at once.
func (s *auditRoutes) auditExport(w http.ResponseWriter, r *http.Request, id string, query projections.AuditQuery) {
	query.Limit = audit.AuditPageMax
	entries, more, err := s.cmds.SessionAudit(r.Context(), id, query)
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="audit-`+id+`.ndjson"`)
	w.Header().Set("Cache-Control", "no-store")
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	for {
		for _, e := range entries {
			if enc.Encode(e) != nil {
				return
			}
		}
		if !more {
			break
		}
		query.After = entries[len(entries)-1].Seq
		if entries, more, err = s.cmds.SessionAudit(r.Context(), id, query); err != nil {
			s.log.Error("audit export", "session", id, "err", err)
			return // the status is sent: the short body is the signal
		}
	}
	_ = bw.Flush()
}

// sessionAt answers the Session as it was right after a journal seq.
func (s *auditRoutes) sessionAt(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	seq, err := strconv.ParseUint(ps.ByName("seq"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "seq must be a non-negative integer")
		return
	}
	at, err := s.cmds.SessionAt(r.Context(), ps.ByName("id"), seq)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, at)
}

// auditPage is one page of GET /api/sessions/{id}/audit: after=next_after
// reads the next while more is true.
type auditPage struct {
	Session   string                   `json:"session"`
	Entries   []projections.AuditEntry `json:"entries"`
	NextAfter uint64                   `json:"next_after"`
	More      bool                     `json:"more"`
}
