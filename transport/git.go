package transport

// The Session Git and Check routes. The Git routes are live-checkout
// routes: 404 for a missing Session, 409 unless its environment is Ready,
// checked before anything else; git runs inside the sandbox (commands and
// runtime/git). Client paths are confined as the file routes confine them
// (transport/files.go): cleanRelPath refuses absolute paths, NUL and ".."
// (400), and a path whose leading directories resolve outside the Session
// root through a symlink is refused (403) before git sees it. git itself
// never follows a symlink in a path it stages, restores or applies to.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"lathe/commands"
	"lathe/journal/events"
)

// gitPath cleans one client path and refuses one that escapes the Session
// root through a symlinked directory.
func (s *Server) gitPath(root *os.Root, p string) (string, error) {
	rel, err := cleanRelPath(p)
	if err != nil || rel == "." {
		return rel, err
	}
	if _, err := root.Lstat(rel); isEscape(err) {
		return "", errEscape(rel)
	}
	return rel, nil
}

// errEscape is the 403 of a path that resolves outside the Session root.
type errEscape string

func (e errEscape) Error() string { return outsideRoot(string(e)) }

// gitFail answers err, with 403 for a path that escapes the root.
func gitFail(w http.ResponseWriter, err error) {
	var esc errEscape
	if errors.As(err, &esc) {
		writeError(w, http.StatusForbidden, esc.Error())
		return
	}
	fail(w, err)
}

// gitRoot checks that the Session is Ready and opens its root for path
// confinement; the caller closes it.
func (s *Server) gitRoot(w http.ResponseWriter, p httprouter.Params) (*os.Root, bool) {
	root, err := s.sessionRoot(p.ByName("id"))
	if err != nil {
		fail(w, err)
		return nil, false
	}
	return root, true
}

// gitQuery reads ?path= (required) and ?staged= (default false).
func (s *Server) gitQuery(root *os.Root, r *http.Request) (string, bool, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", false, fmt.Errorf("%w: malformed query string: %v", commands.ErrInvalid, err)
	}
	staged := false
	if v := q.Get("staged"); v != "" {
		if staged, err = strconv.ParseBool(v); err != nil {
			return "", false, fmt.Errorf("%w: staged must be true or false, not %q", commands.ErrInvalid, v)
		}
	}
	if q.Get("path") == "" {
		return "", false, fmt.Errorf("%w: the path query parameter is required", commands.ErrInvalid)
	}
	rel, err := s.gitPath(root, q.Get("path"))
	return rel, staged, err
}

// gitStatus is GET /api/sessions/:id/git/status.
func (s *Server) gitStatus(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	out, err := s.deps.Commands.GitStatus(r.Context(), p.ByName("id"))
	answer(w, out, err)
}

// gitBranches is GET /api/sessions/:id/git/branches.
func (s *Server) gitBranches(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	out, err := s.deps.Commands.GitBranches(r.Context(), p.ByName("id"))
	answer(w, out, err)
}

// gitDiff is GET /api/sessions/:id/git/diff?path=&staged=.
func (s *Server) gitDiff(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitPathRead(w, r, p, func(rel string, staged bool) (any, error) {
		return s.deps.Commands.GitDiff(r.Context(), p.ByName("id"), rel, staged)
	})
}

// gitHunks is GET /api/sessions/:id/git/hunks?path=&staged=.
func (s *Server) gitHunks(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitPathRead(w, r, p, func(rel string, staged bool) (any, error) {
		return s.deps.Commands.GitHunks(r.Context(), p.ByName("id"), rel, staged)
	})
}

func (s *Server) gitPathRead(w http.ResponseWriter, r *http.Request, p httprouter.Params, read func(rel string, staged bool) (any, error)) {
	root, ok := s.gitRoot(w, p)
	if !ok {
		return
	}
	defer root.Close()
	rel, staged, err := s.gitQuery(root, r)
	if err != nil {
		gitFail(w, err)
		return
	}
	out, err := read(rel, staged)
	answer(w, out, err)
}

// answer writes out with 200, or err.
func answer(w http.ResponseWriter, out any, err error) {
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// gitStage is POST /api/sessions/:id/git/stage {paths}: [] stages all.
func (s *Server) gitStage(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitPaths(w, r, p, func(paths []string) (any, error) {
		return s.deps.Commands.GitStage(r.Context(), p.ByName("id"), paths)
	})
}

// gitUnstage is POST /api/sessions/:id/git/unstage {paths}: [] unstages all.
func (s *Server) gitUnstage(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitPaths(w, r, p, func(paths []string) (any, error) {
		return s.deps.Commands.GitUnstage(r.Context(), p.ByName("id"), paths)
	})
}

func (s *Server) gitPaths(w http.ResponseWriter, r *http.Request, p httprouter.Params, change func(paths []string) (any, error)) {
	root, ok := s.gitRoot(w, p)
	if !ok {
		return
	}
	defer root.Close()
	var req struct {
		Paths *[]string `json:"paths"`
	}
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.Paths == nil {
		writeError(w, http.StatusBadRequest, "paths is required; an empty list means all")
		return
	}
	paths := make([]string, 0, len(*req.Paths))
	for _, raw := range *req.Paths {
		if raw == "" {
			writeError(w, http.StatusBadRequest, "paths must not hold an empty path; send an empty list to mean all")
			return
		}
		rel, err := s.gitPath(root, raw)
		if err != nil {
			gitFail(w, err)
			return
		}
		paths = append(paths, rel)
	}
	out, err := change(paths)
	answer(w, out, err)
}

// gitHunk is POST /api/sessions/:id/git/hunk {path, index, stage?, header?}.
func (s *Server) gitHunk(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitHunkChange(w, r, p, s.deps.Commands.GitHunk)
}

// gitDiscardHunk is POST /api/sessions/:id/git/hunk/discard {path, index, header?}.
func (s *Server) gitDiscardHunk(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.gitHunkChange(w, r, p, s.deps.Commands.GitDiscardHunk)
}

func (s *Server) gitHunkChange(w http.ResponseWriter, r *http.Request, p httprouter.Params, change func(context.Context, string, commands.GitHunkRequest) (events.GitHunk, error)) {
	root, ok := s.gitRoot(w, p)
	if !ok {
		return
	}
	defer root.Close()
	var req commands.GitHunkRequest
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.Path == "" {
		writeError(w, http.StatusBadRequest, "path is required")
		return
	}
	rel, err := s.gitPath(root, req.Path)
	if err != nil {
		gitFail(w, err)
		return
	}
	req.Path = rel
	out, err := change(r.Context(), p.ByName("id"), req)
	answer(w, out, err)
}

// gitDiscard is POST /api/sessions/:id/git/discard {path?}: no path
// discards every unstaged change.
func (s *Server) gitDiscard(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	root, ok := s.gitRoot(w, p)
	if !ok {
		return
	}
	defer root.Close()
	var req struct {
		Path *string `json:"path"`
	}
	if err := decodeOptionalJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	rel := ""
	if req.Path != nil {
		if *req.Path == "" {
			writeError(w, http.StatusBadRequest, "path must not be empty; omit it to discard every unstaged change")
			return
		}
		var err error
		if rel, err = s.gitPath(root, *req.Path); err != nil {
			gitFail(w, err)
			return
		}
	}
	out, err := s.deps.Commands.GitDiscard(r.Context(), p.ByName("id"), rel)
	answer(w, out, err)
}

// readyBody checks that the Session is Ready (404, 409), then decodes the
// body into v; optional takes no body as {}.
func (s *Server) readyBody(w http.ResponseWriter, r *http.Request, p httprouter.Params, v any, optional bool) bool {
	if _, _, err := s.deps.Commands.Sandbox(p.ByName("id")); err != nil {
		fail(w, err)
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

// gitCheckout is POST /api/sessions/:id/git/checkout {ref}.
func (s *Server) gitCheckout(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req struct {
		Ref string `json:"ref"`
	}
	if s.readyBody(w, r, p, &req, false) {
		out, err := s.deps.Commands.GitCheckout(r.Context(), p.ByName("id"), req.Ref)
		answer(w, out, err)
	}
}

// gitCommit is POST /api/sessions/:id/git/commit {message?, stage_all?}.
func (s *Server) gitCommit(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req commands.GitCommitRequest
	if s.readyBody(w, r, p, &req, true) {
		out, err := s.deps.Commands.GitCommit(r.Context(), p.ByName("id"), req)
		answer(w, out, err)
	}
}

// setCheck is PUT /api/sessions/:id/check {check_command}: a string sets
// it, null or "" clears it. It is durable config, so it works whatever
// the environment's state; it answers the Session.
func (s *Server) setCheck(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req struct {
		CheckCommand json.RawMessage `json:"check_command"`
	}
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
	ss, err := s.deps.Commands.SetCheck(r.Context(), p.ByName("id"), cmd)
	answer(w, ss, err)
}

// runCheck is POST /api/sessions/:id/check/run {timeout_seconds?}: it runs
// the Check synchronously and answers its recorded result.
func (s *Server) runCheck(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req struct {
		TimeoutSeconds *int `json:"timeout_seconds"`
	}
	if !s.readyBody(w, r, p, &req, true) {
		return
	}
	var timeout time.Duration
	if req.TimeoutSeconds != nil {
		if *req.TimeoutSeconds <= 0 || time.Duration(*req.TimeoutSeconds) > commands.MaxCheckTimeout/time.Second {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("timeout_seconds must be between 1 and %d", int(commands.MaxCheckTimeout/time.Second)))
			return
		}
		timeout = time.Duration(*req.TimeoutSeconds) * time.Second
	}
	out, err := s.deps.Commands.RunCheck(r.Context(), p.ByName("id"), timeout)
	answer(w, out, err)
}
