package transport

import (
	"fmt"
	"mime"
	"net/http"
	"unicode/utf8"

	"lathe/commands/turns"

	"github.com/julienschmidt/httprouter"

	"lathe/projections"
)

// Session turn history. These are durable History routes: they answer from
// the projections whatever the environment state (spec Errors 4). Turns
// are accepted, run and stopped by commands/turns/turns.go.

// Search limits.
const (
	maxSearchQuery     = 1000
	searchDefaultLimit = 50
	searchMaxLimit     = 500
)

// pathSession answers the Session named in the path, or writes its 404.
func (s *turnRoutes) pathSession(w http.ResponseWriter, p httprouter.Params) (projections.Session, bool) {
	id := p.ByName("id")
	ss, ok := s.read.Session(id)
	if !ok {
		fail(w, errMissing("session", id))
	}
	return ss, ok
}

// sessionMessages answers the transcript: the visible ended turns as the
// model sees them.
func (s *turnRoutes) sessionMessages(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	ss, ok := s.pathSession(w, p)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, transcriptBody{ss.ID, turns.Transcript(s.read.Turns(ss.ID))})
}

// listTurns answers the visible turns in accept order.
func (s *turnRoutes) listTurns(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	ss, ok := s.pathSession(w, p)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, turnList{s.read.Turns(ss.ID)})
}

type turnList struct {
	Turns []projections.Turn `json:"turns"`
}

// transcriptBody is the answer of GET /api/sessions/:id/messages.
type transcriptBody struct {
	SessionID string          `json:"session_id"`
	Messages  []turns.Message `json:"messages"`
}

// activeTurnBody is the answer of GET /api/sessions/:id/active-turn.
type activeTurnBody struct {
	Turn *projections.Turn `json:"turn"`
	Run  *activeRun        `json:"run"`
}

// turnHits is the answer of GET /api/session-turns/search.
type turnHits struct {
	Hits []projections.TurnHit `json:"hits"`
}

// rewound is the answer of POST /api/sessions/:id/rewind.
type rewound struct {
	SessionID string             `json:"session_id"`
	Hidden    []string           `json:"hidden"`
	Turns     []projections.Turn `json:"turns"`
}

// getTurn answers one turn of the Session, a rewound one too (rewound:true).
func (s *turnRoutes) getTurn(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	ss, ok := s.pathSession(w, p)
	if !ok {
		return
	}
	t, ok := s.read.Turn(ss.ID, p.ByName("turn_id"))
	if !ok {
		fail(w, errMissing("turn", p.ByName("turn_id")))
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// activeRun is the live run that owns a Session's active turn: workflow is
// the run key of its frames (the Session ID), which a Stop names with the
// turn ID.
type activeRun struct {
	Workflow string `json:"workflow"`
	TurnID   string `json:"turn_id"`
	AgentID  string `json:"agent_id"`
	Status   string `json:"status"`
}

// activeTurn answers {turn, run}, both null when no turn is live.
func (s *turnRoutes) activeTurn(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	ss, ok := s.pathSession(w, p)
	if !ok {
		return
	}
	var body activeTurnBody
	if t, ok := s.read.ActiveTurn(ss.ID); ok {
		body.Turn = &t
		body.Run = &activeRun{Workflow: ss.ID, TurnID: t.TurnID, AgentID: t.AgentID, Status: t.Status}
	}
	writeJSON(w, http.StatusOK, body)
}

// searchTurns finds q literally, ignoring case, in visible turns' inputs
// and outputs, newest first: in one Session (session_id) or in all.
func (s *turnRoutes) searchTurns(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	qs := r.URL.Query()
	q := qs.Get("q")
	switch {
	case q == "":
		writeError(w, http.StatusBadRequest, "q is required")
		return
	case len(q) > maxSearchQuery:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("q is longer than %d bytes", maxSearchQuery))
		return
	case !utf8.ValidString(q):
		writeError(w, http.StatusBadRequest, "q must be valid UTF-8")
		return
	}
	limit, err := parseUint(qs.Get("limit"), searchDefaultLimit)
	if err != nil || limit == 0 || limit > searchMaxLimit {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("limit must be an integer from 1 to %d", searchMaxLimit))
		return
	}
	session := qs.Get("session_id")
	if qs.Has("session_id") {
		if session == "" {
			writeError(w, http.StatusBadRequest, "session_id must not be empty; omit it to search every Session")
			return
		}
		if _, ok := s.read.Session(session); !ok {
			fail(w, errMissing("session", session))
			return
		}
	}
	writeJSON(w, http.StatusOK, turnHits{s.read.SearchTurns(q, session, int(limit))})
}

// exportSession downloads the visible turns as Markdown (the default; "md"
// too) or JSON.
func (s *turnRoutes) exportSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	ss, ok := s.pathSession(w, p)
	if !ok {
		return
	}
	var ext, contentType string
	switch f := r.URL.Query().Get("format"); f {
	case "", "markdown", "md":
		ext, contentType = "md", "text/markdown; charset=utf-8"
	case "json":
		ext, contentType = "json", "application/json"
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("format must be markdown, md or json, not %q", f))
		return
	}
	ws, _ := s.read.Workspace(ss.WorkspaceID)
	exp := turns.NewExport(ss, ws.Path, s.read.Turns(ss.ID))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": ss.ID + "." + ext}))
	if ext == "json" {
		writeJSON(w, http.StatusOK, exp)
		return
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(exp.Markdown())
}

// rewindSessionBody is the body of rewindSession.
type rewindSessionBody struct {
	KeepThroughTurnID *string `json:"keep_through_turn_id"`
	Keep              *int    `json:"keep"`
}

// rewindSession takes exactly one of {keep_through_turn_id} or the legacy
// {keep} and answers the hidden turn IDs and the turns still visible.
func (s *turnRoutes) rewindSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	ss, ok := s.pathSession(w, p)
	if !ok {
		return
	}
	var req rewindSessionBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	hidden, err := s.cmds.Rewind(r.Context(), ss.ID, req.KeepThroughTurnID, req.Keep)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rewound{ss.ID, hidden, s.read.Turns(ss.ID)})
}
