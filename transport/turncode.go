package transport

// A turn's code and replay (issue 14): what a turn changed in a Git
// Workspace, one file's diff across it, restoring its files, and its frames
// replayed from the journal.
//
//	GET  /api/sessions/:id/turns/:turn_id/changes            → 200 commands.TurnChangeList
//	GET  /api/sessions/:id/turns/:turn_id/changes/diff?path= → 200 commands.TurnDiff
//	POST /api/sessions/:id/turns/:turn_id/restore {paths?, side, force?}
//	                                                          → 200 events.TurnRestored;
//	                                                            409 {error, conflicts} on files changed since
//	GET  /api/sessions/:id/turns/:turn_id/replay             → 200 turnReplay
//
// The code routes run git in the sandbox: 404 for a missing Session, turn
// or change record, 409 unless Ready or while a turn runs.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"lathe/commands/core"
	"lathe/commands/turns"

	"github.com/julienschmidt/httprouter"

	"lathe/journal/events"
)

// TurnCodeCommands are the turn code and replay routes' commands
// (commands.TurnCode).
type TurnCodeCommands interface {
	TurnChanges(ctx context.Context, id, turnID string) (turns.TurnChangeList, error)
	TurnFileDiff(ctx context.Context, id, turnID, path string) (turns.TurnDiff, error)
	RestoreTurn(ctx context.Context, id, turnID string, req turns.RestoreRequest) (events.TurnRestored, error)
	TurnEvents(ctx context.Context, id, turnID string) (turns.TurnEvents, error)
}

func (s *turnCodeRoutes) turnChanges(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	out, err := s.cmds.TurnChanges(r.Context(), p.ByName("id"), p.ByName("turn_id"))
	respond(w, out, err)
}

func (s *turnCodeRoutes) turnDiff(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	switch {
	case err != nil:
		fail(w, fmt.Errorf("%w: malformed query string: %v", core.ErrInvalid, err))
		return
	case q.Get("path") == "":
		fail(w, fmt.Errorf("%w: the path query parameter is required", core.ErrInvalid))
		return
	}
	out, err := s.cmds.TurnFileDiff(r.Context(), p.ByName("id"), p.ByName("turn_id"), q.Get("path"))
	respond(w, out, err)
}

// restoreConflict is the 409 body of a restore over files changed since
// the turn.
type restoreConflict struct {
	Error     string   `json:"error"`
	Conflicts []string `json:"conflicts"`
}

func (s *turnCodeRoutes) restoreTurn(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req turns.RestoreRequest
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	out, err := s.cmds.RestoreTurn(r.Context(), p.ByName("id"), p.ByName("turn_id"), req)
	var rc *turns.RestoreConflict
	if errors.As(err, &rc) {
		writeJSON(w, statusOf(err), restoreConflict{Error: errorMessage(err), Conflicts: rc.Paths})
		return
	}
	respond(w, out, err)
}

// turnReplay is the answer of GET …/replay: the turn's frames as the live
// stream sent them, each with its offset from the turn's accept. Text and
// reasoning come whole per step (tokens are not journaled), at the time
// the step's output was journaled. A live turn answers the frames so far
// with complete false.
type turnReplay struct {
	Session  string        `json:"session"`
	TurnID   string        `json:"turn_id"`
	Status   string        `json:"status"`
	Complete bool          `json:"complete"`
	Frames   []replayFrame `json:"frames"`
}

type replayFrame struct {
	OffsetMS int64 `json:"offset_ms"`
	Frame    any   `json:"frame"`
}

func (s *turnCodeRoutes) replayTurn(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	te, err := s.cmds.TurnEvents(r.Context(), p.ByName("id"), p.ByName("turn_id"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, turnReplay{Session: te.SessionID, TurnID: te.TurnID, Status: te.Status, Complete: te.Complete, Frames: replayFrames(te)})
}

// replayFrames builds a turn's frames with the live stream's own frame
// code (turnEventFrame, deltaFrame): a step's output becomes its reasoning
// and token frames, every other framed event its live frame.
func replayFrames(te turns.TurnEvents) []replayFrame {
	out := []replayFrame{}
	var origin time.Time
	for i, ev := range te.Events {
		if i == 0 {
			origin = ev.At
		}
		off := max(ev.At.Sub(origin).Milliseconds(), 0)
		if o, ok := ev.Payload.(events.TurnOutput); ok {
			for _, d := range [...]struct {
				kind string
				text events.Text
			}{{events.DeltaReasoning, o.Reasoning}, {events.DeltaToken, o.Text}} {
				if !d.text.IsZero() {
					out = append(out, replayFrame{off, deltaFrame{Kind: d.kind, Workflow: te.SessionID, Agent: o.Agent, TurnID: o.TurnID, Delta: d.text.String()}})
				}
			}
			continue
		}
		if f := turnEventFrame(te.SessionID, ev.Payload); f != nil {
			out = append(out, replayFrame{off, f})
		}
	}
	return out
}
