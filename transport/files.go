package transport

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/julienschmidt/httprouter"

	"lathe/commands"
)

// pathQuery reads the "path" query parameter.
func pathQuery(r *http.Request) (string, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", fmt.Errorf("%w: malformed query string: %v", commands.ErrInvalid, err)
	}
	return q.Get("path"), nil
}

func (s *Server) sessionTree(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	rel, err := pathQuery(r)
	if err != nil {
		fail(w, err)
		return
	}
	out, err := s.deps.Files.Tree(r.Context(), p.ByName("id"), rel)
	respond(w, out, err)
}

func (s *Server) readSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	rel, err := pathQuery(r)
	if err != nil {
		fail(w, err)
		return
	}
	out, err := s.deps.Files.Read(r.Context(), p.ByName("id"), rel)
	respond(w, out, err)
}

func (s *Server) writeSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	rel, err := pathQuery(r)
	if err != nil {
		fail(w, err)
		return
	}
	var req struct {
		Content        *string `json:"content"`
		ExpectedSHA256 *string `json:"expected_sha256"`
	}
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	out, err := s.deps.Files.Write(r.Context(), p.ByName("id"), commands.FileWrite{Path: rel, Content: req.Content, ExpectedSHA256: req.ExpectedSHA256})
	respond(w, out, err)
}

// createSessionFile is POST /api/sessions/:id/files/create {path, kind}:
// an empty file or a folder; 201 with its tree entry.
func (s *Server) createSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	}
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	out, err := s.deps.Files.Create(r.Context(), p.ByName("id"), req.Path, req.Kind)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// renameSessionFile is POST /api/sessions/:id/files/rename {from, to}.
func (s *Server) renameSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	out, err := s.deps.Files.Rename(r.Context(), p.ByName("id"), req.From, req.To)
	respond(w, out, err)
}

// deleteSessionFile is POST /api/sessions/:id/files/delete {path,
// recursive?}: recursive is needed for a folder that is not empty.
func (s *Server) deleteSessionFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	}
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	out, err := s.deps.Files.Delete(r.Context(), p.ByName("id"), req.Path, req.Recursive)
	respond(w, out, err)
}
