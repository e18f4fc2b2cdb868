package transport

// The Session Git and Check routes. The Git routes are live-checkout
// routes: 404 for a missing Session, 409 unless its environment is Ready,
// checked before anything else; git runs inside the sandbox (commands.Git
// and runtime/git), which also confines the client paths as the file
// commands do.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"lathe/commands/core"
	"lathe/commands/scm"

	"github.com/julienschmidt/httprouter"

	"lathe/journal/events"
)

// ready answers 404 for a missing Session and 409 unless its environment
// is Ready, before anything else of the request is read.
func (s *gitRoutes) ready(w http.ResponseWriter, p httprouter.Params) bool {
	if _, _, err := s.sandboxes.Sandbox(p.ByName("id")); err != nil {
		fail(w, err)
		return false
	}
	return true
}

// gitQuery reads ?path= (required) and ?staged= (default false).
func gitQuery(r *http.Request) (string, bool, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", false, fmt.Errorf("%w: malformed query string: %v", core.ErrInvalid, err)
	}
	staged := false
	if v := q.Get("staged"); v != "" {
		if staged, err = strconv.ParseBool(v); err != nil {
			return "", false, fmt.Errorf("%w: staged must be true or false, not %q", core.ErrInvalid, v)
		}
	}
	if q.Get("path") == "" {
		return "", false, fmt.Errorf("%w: the path query parameter is required", core.ErrInvalid)
	}
	return q.Get("path"), staged, nil
}

// gitStatus is GET /api/sessions/:id/git/status.
func (s *gitRoutes) gitStatus(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	out, err := s.cmds.GitStatus(r.Context(), p.ByName("id"))
	respond(w, out, err)
}

// gitBranches is GET /api/sessions/:id/git/branches.
func (s *gitRoutes) gitBranches(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	out, err := s.cmds.GitBranches(r.Context(), p.ByName("id"))
	respond(w, out, err)
}

// gitIdentity is GET /api/sessions/:id/git/identity: who a commit made now
// is signed by, so the workbench can show it before committing.
func (s *gitRoutes) gitIdentity(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	out, err := s.cmds.GitIdentity(r.Context(), p.ByName("id"))
	respond(w, out, err)
}

// gitDiff is GET /api/sessions/:id/git/diff?path=&staged=.
func (s *gitRoutes) gitDiff(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitPathRead(w, r, p, func(rel string, staged bool) (any, error) {
		return s.cmds.GitDiff(r.Context(), p.ByName("id"), rel, staged)
	})
}

// gitHunks is GET /api/sessions/:id/git/hunks?path=&staged=.
func (s *gitRoutes) gitHunks(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitPathRead(w, r, p, func(rel string, staged bool) (any, error) {
		return s.cmds.GitHunks(r.Context(), p.ByName("id"), rel, staged)
	})
}

func (s *gitRoutes) gitPathRead(w http.ResponseWriter, r *http.Request, p httprouter.Params, read func(rel string, staged bool) (any, error)) {
	if !s.ready(w, p) {
		return
	}
	rel, staged, err := gitQuery(r)
	if err != nil {
		fail(w, err)
		return
	}
	out, err := read(rel, staged)
	respond(w, out, err)
}

// gitStage is POST /api/sessions/:id/git/stage {paths}: [] stages all.
func (s *gitRoutes) gitStage(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitPaths(w, r, p, func(paths []string) (any, error) {
		return s.cmds.GitStage(r.Context(), p.ByName("id"), paths)
	})
}

// gitUnstage is POST /api/sessions/:id/git/unstage {paths}: [] unstages all.
func (s *gitRoutes) gitUnstage(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitPaths(w, r, p, func(paths []string) (any, error) {
		return s.cmds.GitUnstage(r.Context(), p.ByName("id"), paths)
	})
}

// gitPathsBody is the body of gitPaths.
type gitPathsBody struct {
	Paths *[]string `json:"paths" required:"true"`
}

func (s *gitRoutes) gitPaths(w http.ResponseWriter, r *http.Request, p httprouter.Params, change func(paths []string) (any, error)) {
	var req gitPathsBody
	if !s.readyBody(w, r, p, &req, false) {
		return
	}
	if req.Paths == nil {
		fail(w, fmt.Errorf("%w: paths is required; an empty list means all", core.ErrInvalid))
		return
	}
	if slices.Contains(*req.Paths, "") {
		fail(w, fmt.Errorf("%w: paths must not hold an empty path; send an empty list to mean all", core.ErrInvalid))
		return
	}
	out, err := change(*req.Paths)
	respond(w, out, err)
}

// gitHunk is POST /api/sessions/:id/git/hunk {path, index, stage?, header?}.
func (s *gitRoutes) gitHunk(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitHunkChange(w, r, p, s.cmds.GitHunk)
}

// gitDiscardHunk is POST /api/sessions/:id/git/hunk/discard {path, index, header?}.
func (s *gitRoutes) gitDiscardHunk(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitHunkChange(w, r, p, s.cmds.GitDiscardHunk)
}

func (s *gitRoutes) gitHunkChange(w http.ResponseWriter, r *http.Request, p httprouter.Params, change func(context.Context, string, scm.GitHunkRequest) (events.GitHunk, error)) {
	var req scm.GitHunkRequest
	if !s.readyBody(w, r, p, &req, false) {
		return
	}
	if req.Path == "" {
		fail(w, fmt.Errorf("%w: path is required", core.ErrInvalid))
		return
	}
	out, err := change(r.Context(), p.ByName("id"), req)
	respond(w, out, err)
}

// gitDiscardBody is the body of gitDiscard.
type gitDiscardBody struct {
	Path *string `json:"path"`
}

// gitDiscard is POST /api/sessions/:id/git/discard {path?}: no path
// discards every unstaged change.
func (s *gitRoutes) gitDiscard(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req gitDiscardBody
	if !s.readyBody(w, r, p, &req, true) {
		return
	}
	rel := ""
	if req.Path != nil {
		if *req.Path == "" {
			fail(w, fmt.Errorf("%w: path must not be empty; omit it to discard every unstaged change", core.ErrInvalid))
			return
		}
		rel = *req.Path
	}
	out, err := s.cmds.GitDiscard(r.Context(), p.ByName("id"), rel)
	respond(w, out, err)
}

// readyBody checks that the Session is Ready (404, 409), then decodes the
// body into v; optional takes no body as {}.
func (s *gitRoutes) readyBody(w http.ResponseWriter, r *http.Request, p httprouter.Params, v any, optional bool) bool {
	if !s.ready(w, p) {
		return false
	}
	decode := decodeJSON
	if optional {
		decode = decodeOptionalJSON
	}
	if err := decode(r, v); err != nil {
		fail(w, err)
		return false
	}
	return true
}

// gitCheckoutBody is the body of gitCheckout.
type gitCheckoutBody struct {
	Ref string `json:"ref"`
}

// gitCheckout is POST /api/sessions/:id/git/checkout {ref}.
func (s *gitRoutes) gitCheckout(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req gitCheckoutBody
	if s.readyBody(w, r, p, &req, false) {
		out, err := s.cmds.GitCheckout(r.Context(), p.ByName("id"), req.Ref)
		respond(w, out, err)
	}
}

// gitCommit is POST /api/sessions/:id/git/commit {message?, stage_all?}.
func (s *gitRoutes) gitCommit(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req scm.GitCommitRequest
	if s.readyBody(w, r, p, &req, true) {
		out, err := s.cmds.GitCommit(r.Context(), p.ByName("id"), req)
		respond(w, out, err)
	}
}

// setCheckBody is the body of setCheck.
type setCheckBody struct {
	CheckCommand json.RawMessage `json:"check_command" required:"true"`
}

// setCheck is PUT /api/sessions/:id/check {check_command}: a string sets
// it, null or "" clears it. It is durable config, so it works whatever
// the environment's state; it answers the Session.
func (s *gitRoutes) setCheck(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req setCheckBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if len(req.CheckCommand) == 0 {
		writeError(w, http.StatusBadRequest, "check_command is required (null or \"\" clears it)")
		return
	}
	var cmd *string
	if err := json.Unmarshal(req.CheckCommand, &cmd); err != nil {
		writeError(w, http.StatusBadRequest, `field "check_command" must be a string or null`)
		return
	}
	ss, err := s.cmds.SetCheck(r.Context(), p.ByName("id"), cmd)
	respond(w, ss, err)
}

// runCheckBody is the body of runCheck.
type runCheckBody struct {
	TimeoutSeconds *int `json:"timeout_seconds"`
}

// runCheck is POST /api/sessions/:id/check/run {timeout_seconds?}: it runs
// the Check synchronously and answers its recorded result.
func (s *gitRoutes) runCheck(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req runCheckBody
	if !s.readyBody(w, r, p, &req, true) {
		return
	}
	var timeout time.Duration
	if req.TimeoutSeconds != nil {
		if *req.TimeoutSeconds <= 0 || time.Duration(*req.TimeoutSeconds) > scm.MaxCheckTimeout/time.Second {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("timeout_seconds must be between 1 and %d", int(scm.MaxCheckTimeout/time.Second)))
			return
		}
		timeout = time.Duration(*req.TimeoutSeconds) * time.Second
	}
	out, err := s.cmds.RunCheck(r.Context(), p.ByName("id"), timeout)
	respond(w, out, err)
}
