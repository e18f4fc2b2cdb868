package transport

import (
	"fmt"
	"net/http"
	"net/url"

	"lathe/commands/core"
	"lathe/commands/files"

	"github.com/julienschmidt/httprouter"
)

// pathQuery reads the "path" query parameter.
func pathQuery(r *http.Request) (string, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", fmt.Errorf("%w: malformed query string: %v", core.ErrInvalid, err)
	}
	return q.Get("path"), nil
}

func (s *fileRoutes) sessionTree(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	rel, err := pathQuery(r)
	if err != nil {
		fail(w, err)
		return
	}
	out, err := s.cmds.Tree(r.Context(), p.ByName("id"), rel)
	respond(w, out, err)
}

func (s *fileRoutes) readSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	rel, err := pathQuery(r)
	if err != nil {
		fail(w, err)
		return
	}
	out, err := s.cmds.Read(r.Context(), p.ByName("id"), rel)
	respond(w, out, err)
}

// writeSessionFileBody is the body of writeSessionFile.
type writeSessionFileBody struct {
	Content        *string `json:"content"`
	ExpectedSHA256 *string `json:"expected_sha256"`
}

func (s *fileRoutes) writeSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	rel, err := pathQuery(r)
	if err != nil {
		fail(w, err)
		return
	}
	var req writeSessionFileBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	out, err := s.cmds.Write(r.Context(), p.ByName("id"), files.FileWrite{Path: rel, Content: req.Content, ExpectedSHA256: req.ExpectedSHA256})
	respond(w, out, err)
}

// createSessionFileBody is the body of createSessionFile.
type createSessionFileBody struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

// createSessionFile is POST /api/sessions/:id/files/create {path, kind}:
// an empty file or a folder; 201 with its tree entry.
func (s *fileRoutes) createSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req createSessionFileBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	out, err := s.cmds.Create(r.Context(), p.ByName("id"), req.Path, req.Kind)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// renameSessionFileBody is the body of renameSessionFile.
type renameSessionFileBody struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// renameSessionFile is POST /api/sessions/:id/files/rename {from, to}.
func (s *fileRoutes) renameSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req renameSessionFileBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	out, err := s.cmds.Rename(r.Context(), p.ByName("id"), req.From, req.To)
	respond(w, out, err)
}

// deleteSessionFileBody is the body of deleteSessionFile.
type deleteSessionFileBody struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
}

// deleteSessionFile is POST /api/sessions/:id/files/delete {path,
// recursive?}: recursive is needed for a folder that is not empty.
func (s *fileRoutes) deleteSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req deleteSessionFileBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	out, err := s.cmds.Delete(r.Context(), p.ByName("id"), req.Path, req.Recursive)
	respond(w, out, err)
}
