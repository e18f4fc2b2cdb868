package transport

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/sessions"
	"lathe/commands/worktrees"

	"github.com/julienschmidt/httprouter"

	"lathe/projections"
)

func (s *workspaceRoutes) listWorkspaces(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.read.Workspaces())
}

// registerWorkspaceBody is the body of registerWorkspace.
type registerWorkspaceBody struct {
	Path *string `json:"path" required:"true"`
	Name *string `json:"name"`
}

func (s *workspaceRoutes) registerWorkspace(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req registerWorkspaceBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.Path == nil {
		writeError(w, http.StatusBadRequest, "path is required")
		return
	}
	ws, created, err := s.cmds.RegisterWorkspace(r.Context(), *req.Path, req.Name)
	if err != nil {
		fail(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, ws)
}

func (s *workspaceRoutes) getWorkspace(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	ws, ok := s.read.Workspace(p.ByName("id"))
	if !ok {
		fail(w, errMissing("workspace", p.ByName("id")))
		return
	}
	writeJSON(w, http.StatusOK, ws)
}

func (s *workspaceRoutes) renameWorkspace(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	name, err := decodeName(r)
	if err != nil {
		fail(w, err)
		return
	}
	ws, err := s.cmds.RenameWorkspace(r.Context(), p.ByName("id"), name)
	respond(w, ws, err)
}

func (s *workspaceRoutes) removeWorkspace(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	if err := s.cmds.RemoveWorkspace(r.Context(), p.ByName("id")); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": p.ByName("id"), "removed": true})
}

func (s *workspaceRoutes) listWorkspaceSessions(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id := p.ByName("id")
	if _, ok := s.read.Workspace(id); !ok {
		fail(w, errMissing("workspace", id))
		return
	}
	list := s.read.SessionList(id)
	writeJSONTo(w, http.StatusOK, list.Len(), list)
}

func (s *workspaceRoutes) createSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var spec sessions.SessionSpec
	if err := decodeJSON(r, &spec); err != nil {
		fail(w, err)
		return
	}
	ss, err := s.cmds.CreateSession(r.Context(), p.ByName("id"), spec)
	if err != nil {
		fail(w, err)
		return
	}
	writeSession(w, http.StatusCreated, &ss)
}

// sessionPageMax bounds a page of the Session list.
const sessionPageMax = 5000

// listSessions answers every Session, or with ?limit=N a page of them: up
// to N by ID, after the ID ?after names (the last of the page before). The
// workbench's rail reads its first page so, and the rest in pages after it.
func (s *sessionRoutes) listSessions(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	var list projections.SessionList
	if q.Has("limit") {
		limit, err := parseUint(q.Get("limit"), 0)
		if err != nil || limit == 0 || limit > sessionPageMax {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit must be an integer from 1 to %d", sessionPageMax))
			return
		}
		list = s.read.SessionPage(q.Get("after"), int(limit))
	} else if q.Has("after") {
		writeError(w, http.StatusBadRequest, "after needs a limit")
		return
	} else {
		list = s.read.SessionList("")
	}
	write := func(w http.ResponseWriter) { writeJSONTo(w, http.StatusOK, list.Len(), list) }
	if list.Len() > gzipMaxBytes { // Len is the JSON's length in bytes
		write(w)
		return
	}
	gzipped(w, r, write) // transport/gzip.go
}

// createSessionAtBody is the body of createSessionAt.
type createSessionAtBody struct {
	sessions.SessionSpec
	WorkingDir *string `json:"working_dir" required:"true"`
}

// createSessionAt is the compatibility create with working_dir in the body.
func (s *sessionRoutes) createSessionAt(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req createSessionAtBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.WorkingDir == nil {
		writeError(w, http.StatusBadRequest, "working_dir is required")
		return
	}
	ss, err := s.cmds.CreateSessionAt(r.Context(), *req.WorkingDir, req.SessionSpec)
	if err != nil {
		fail(w, err)
		return
	}
	writeSession(w, http.StatusCreated, &ss)
}

func (s *sessionRoutes) getSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	ss, ok := s.read.Session(p.ByName("id"))
	if !ok {
		fail(w, errMissing("session", p.ByName("id")))
		return
	}
	writeSession(w, http.StatusOK, &ss)
}

func (s *sessionRoutes) renameSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	name, err := decodeName(r)
	if err != nil {
		fail(w, err)
		return
	}
	ss, err := s.cmds.RenameSession(r.Context(), p.ByName("id"), name)
	respond(w, ss, err)
}

// deleteSession soft-closes, or with force=true deletes the record.
func (s *sessionRoutes) deleteSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	force := false
	if v := r.URL.Query().Get("force"); v != "" {
		var err error
		if force, err = strconv.ParseBool(v); err != nil {
			writeError(w, http.StatusBadRequest, "force must be true or false")
			return
		}
	}
	id := p.ByName("id")
	if force {
		s.forceDelete(w, r, id)
		return
	}
	ss, err := s.cmds.CloseSession(r.Context(), id)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ss)
}

// deleteSessionBody is the optional body of a forced delete: a worktree
// Session's uncommitted files, named exactly, to throw away with it.
type deleteSessionBody struct {
	DiscardFiles []string `json:"discard_files"`
}

// closedOrDeleted is the body DELETE /api/sessions/:id answers: the closed
// Session, or with force=true its Deletion.
type closedOrDeleted struct{}

// JSONSchemaOneOf is the body's two shapes, for the OpenAPI document.
func (closedOrDeleted) JSONSchemaOneOf() []any {
	return []any{projections.Session{}, sessions.Deletion{}}
}

// ForceRequestBody makes the OpenAPI reflector document the body, which it
// leaves out of a DELETE by default.
func (deleteSessionBody) ForceRequestBody() {}

// forceDelete deletes the record; a worktree Session's worktree goes with
// it (commands.Sessions.DeleteSessionConfirmed).
func (s *sessionRoutes) forceDelete(w http.ResponseWriter, r *http.Request, id string) {
	var req deleteSessionBody
	if err := decodeOptionalJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	out, err := s.cmds.DeleteSessionConfirmed(r.Context(), id, req.DiscardFiles)
	respondFiles(w, out, err)
}

// mergeSession is POST /api/sessions/:id/merge.
func (s *sessionRoutes) mergeSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req worktrees.MergeRequest
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if s.worktrees == nil {
		fail(w, fmt.Errorf("%w: this daemon merges no worktree", core.ErrUnavailable))
		return
	}
	out, err := s.worktrees.Merge(r.Context(), p.ByName("id"), req)
	respondFiles(w, out, err)
}

// filesErrorBody is a refusal, naming the files it is about when it is
// about files: {error, files?}.
type filesErrorBody struct {
	Error string   `json:"error" required:"true"`
	Files []string `json:"files,omitempty"`
}

// respondFiles is respond, answering a commands.FilesError as
// {error, files}.
func respondFiles[T any](w http.ResponseWriter, v T, err error) {
	if fe := (*worktrees.FilesError)(nil); errors.As(err, &fe) {
		writeJSON(w, statusOf(err), filesErrorBody{Error: errorMessage(err), Files: fe.Files})
		return
	}
	respond(w, v, err)
}

func (s *sessionRoutes) reopenSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	ss, err := s.cmds.ReopenSession(r.Context(), p.ByName("id"))
	respond(w, ss, err)
}

// changeEnvironment makes a reviewed plan the next generation and answers
// once it is prepared (Ready, or Failed with evidence).
func (s *environmentRoutes) changeEnvironment(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var plan environments.EnvironmentPlan
	if err := decodeJSON(r, &plan); err != nil {
		fail(w, err)
		return
	}
	s.answerLifecycle(w, func() (projections.Session, error) {
		return s.cmds.ChangeEnvironment(r.Context(), p.ByName("id"), plan)
	})
}

func (s *environmentRoutes) rebuildEnvironment(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.answerLifecycle(w, func() (projections.Session, error) {
		return s.cmds.RebuildEnvironment(r.Context(), p.ByName("id"))
	})
}

// answerLifecycle answers a synchronous lifecycle command: a runtime or
// setup failure is an expected outcome, so it answers 200 with the Session
// in "failed" and its evidence; refused requests keep their error status.
func (s *environmentRoutes) answerLifecycle(w http.ResponseWriter, run func() (projections.Session, error)) {
	ss, err := run()
	if err != nil && !errors.Is(err, core.ErrEnvironmentFailed) {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ss)
}

func (s *environmentRoutes) confirmRuntimeCleanup(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var c environments.CleanupConfirmation
	if err := decodeJSON(r, &c); err != nil {
		fail(w, err)
		return
	}
	ss, err := s.cmds.ConfirmRuntimeCleanup(r.Context(), p.ByName("id"), c)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ss)
}

// syncSession brings a remote Session's committed work home
// (commands/environments/remotesync.go).
func (s *environmentRoutes) syncSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	res, err := s.cmds.Sync(r.Context(), p.ByName("id"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// nameBody is the {name} body of the rename routes.
type nameBody struct {
	Name *string `json:"name" required:"true"`
}

// decodeName decodes the {name} body of the rename routes.
func decodeName(r *http.Request) (string, error) {
	var req nameBody
	if err := decodeJSON(r, &req); err != nil {
		return "", err
	}
	if req.Name == nil {
		return "", fmt.Errorf("%w: name is required", core.ErrInvalid)
	}
	return *req.Name, nil
}

// respond answers 200 with v, or the error with its class's status.
func respond[T any](w http.ResponseWriter, v T, err error) {
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
