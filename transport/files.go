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
