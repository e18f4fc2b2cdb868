package transport

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"lathe/commands/audit"
	"lathe/commands/core"

	"lathe/projections"
)

func (f *fake) SessionAudit(_ context.Context, id string, q projections.AuditQuery) ([]projections.AuditEntry, bool, error) {
	kinds := slices.Sorted(func(yield func(string) bool) {
		for k := range q.Kinds {
			if !yield(k) {
				return
			}
		}
	})
	return []projections.AuditEntry{{Seq: q.After + 1, Type: "session-renamed"}}, false,
		f.record("SessionAudit", id, q.After, q.Limit, strings.Join(kinds, ","))
}

func (f *fake) SessionAt(_ context.Context, id string, seq uint64) (projections.SessionAt, error) {
	return projections.SessionAt{Seq: seq}, f.record("SessionAt", id, seq)
}

var errOutOfRange = fmt.Errorf("%w: seq 9 is before the Session existed: its history spans seq 10 to 20", core.ErrNotFound)

func TestAuditRoutes(t *testing.T) {
	runRoutes(t, []route{
		{name: "trail", method: "GET", path: "/api/sessions/S/audit", status: 200, call: "SessionAudit", args: []any{"S", 0, 500, ""}},
		{name: "a page of kinds", method: "GET", path: "/api/sessions/S/audit?after=7&limit=20&kind=turn,git", status: 200, call: "SessionAudit", args: []any{"S", 7, 20, "git,turn"}},
		{name: "export", method: "GET", path: "/api/sessions/S/audit?format=ndjson", status: 200, call: "SessionAudit", args: []any{"S", 0, audit.AuditPageMax, ""}},
		{name: "unknown Session", method: "GET", path: "/api/sessions/S/audit", err: errMissingSession, status: 404, errText: "session", call: "SessionAudit"},
		{name: "unknown kind", method: "GET", path: "/api/sessions/S/audit?kind=bogus", err: fmt.Errorf("%w: kind %q is not one of […]", core.ErrInvalid, "bogus"), status: 400, errText: "bogus", call: "SessionAudit"},
		{name: "bad after", method: "GET", path: "/api/sessions/S/audit?after=-1", status: 400, errText: "after must be"},
		{name: "limit zero", method: "GET", path: "/api/sessions/S/audit?limit=0", status: 400, errText: "limit must be an integer from 1 to 1000"},
		{name: "limit too large", method: "GET", path: "/api/sessions/S/audit?limit=1001", status: 400, errText: "limit must be"},
		{name: "bad format", method: "GET", path: "/api/sessions/S/audit?format=csv", status: 400, errText: "format must be ndjson"},
		{name: "wrong method", method: "POST", path: "/api/sessions/S/audit", body: `{}`, status: 405, errText: "not allowed"},

		{name: "at a seq", method: "GET", path: "/api/sessions/S/at/12", status: 200, call: "SessionAt", args: []any{"S", 12}},
		{name: "at a seq out of range", method: "GET", path: "/api/sessions/S/at/9", err: errOutOfRange, status: 404, errText: "spans seq 10 to 20", call: "SessionAt"},
		{name: "at not a seq", method: "GET", path: "/api/sessions/S/at/x", status: 400, errText: "seq must be"},
		{name: "at a negative seq", method: "GET", path: "/api/sessions/S/at/-3", status: 400, errText: "seq must be"},
	})
}
