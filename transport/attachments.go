package transport

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"

	"lathe/commands/attachments"
	"lathe/commands/core"

	"github.com/julienschmidt/httprouter"
)

// Session attachments. They are durable Session data, not live-checkout
// routes: every one works whatever the environment state (spec Errors 4).

// listAttachments answers the active composer relations: not deleted, and
// this_turn ones not yet consumed, oldest first.
func (s *attachmentRoutes) listAttachments(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id := p.ByName("id")
	if _, ok := s.read.Session(id); !ok {
		fail(w, errMissing("session", id))
		return
	}
	writeJSON(w, http.StatusOK, s.read.Attachments(id, false))
}

// uploadAttachment takes a multipart/form-data body holding exactly one
// file part (a part with a filename), as a browser FormData or curl -F
// sends it. scope is this_turn (the default) or session, given as ?scope=
// or as a form field before or after the file part (both: they must agree;
// a field after the file must agree with the query or the default, since
// the file is streamed before it is read); other form fields are ignored. A declared image (image/*) may be 10 MiB, any
// other document 25 MiB.
func (s *attachmentRoutes) uploadAttachment(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id := p.ByName("id")
	if _, ok := s.read.Session(id); !ok {
		fail(w, errMissing("session", id))
		return
	}
	q := r.URL.Query()
	if q.Has("scope") && q.Get("scope") == "" {
		fail(w, fmt.Errorf("%w: scope must not be empty; use this_turn or session", core.ErrInvalid))
		return
	}
	scope := q.Get("scope")
	if _, err := attachments.CheckScope(scope); err != nil {
		fail(w, err)
		return
	}
	file, finish, err := singleFile(r, func(part *multipart.Part) (err error) {
		if part.FormName() == "scope" {
			scope, err = scopeField(part, scope)
			return err
		}
		return skipPart(part)
	}, func(part *multipart.Part) error {
		if part.FormName() == "scope" {
			return lateScopeField(part, scope)
		}
		return skipPart(part)
	})
	if err != nil {
		fail(w, err)
		return
	}
	// scope stays as given: a field after the file compares with it.
	effective, err := attachments.CheckScope(scope)
	if err != nil {
		fail(w, err)
		return
	}
	a, err := s.cmds.AddAttachment(r.Context(), id, attachments.AttachmentUpload{
		Scope: effective, Name: file.FileName(), MediaType: file.Header.Get("Content-Type"),
		Body: partReader{file}, Finish: finish,
	})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

// singleFile reads a multipart/form-data body up to its one file part (a
// part with a filename), as a browser FormData or curl -F sends it,
// handing each form field before it to field. finish, called once the file
// is read, checks that no further file part follows, handing later fields
// to late. A body without a file part is ErrInvalid.
func singleFile(r *http.Request, field, late func(*multipart.Part) error) (*multipart.Part, func() error, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the body must be multipart/form-data with one file part: %v", core.ErrInvalid, err)
	}
	for {
		part, err := mr.NextPart()
		switch {
		case errors.Is(err, io.EOF):
			return nil, nil, fmt.Errorf("%w: the multipart body has no file part", core.ErrInvalid)
		case err != nil:
			return nil, nil, multipartError(err)
		case part.FileName() != "":
			return part, func() error {
				for {
					part, err := mr.NextPart()
					switch {
					case errors.Is(err, io.EOF):
						return nil
					case err != nil:
						return multipartError(err)
					case part.FileName() != "":
						return fmt.Errorf("%w: the multipart body has more than one file part; upload one file per request", core.ErrInvalid)
					}
					if err := late(part); err != nil {
						return err
					}
				}
			}, nil
		}
		if err := field(part); err != nil {
			return nil, nil, err
		}
	}
}

// scopeField reads the scope form field; given is the scope the request
// named before it, in the query or an earlier field ("" if none).
func scopeField(part *multipart.Part, given string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(part, 64))
	if err != nil {
		return "", multipartError(err)
	}
	if err := skipPart(part); err != nil {
		return "", err
	}
	v := string(b)
	switch {
	case v == "":
		return "", fmt.Errorf("%w: the scope field must not be empty; use this_turn or session", core.ErrInvalid)
	case given != "" && v != given:
		return "", fmt.Errorf("%w: scope is given twice, as %q and as %q", core.ErrInvalid, given, v)
	}
	return v, nil
}

// lateScopeField reads a scope form field that follows the file part, as
// curl -F file=@x -F scope=session sends it. The file is already streamed
// under scope (the query's, an earlier field's, or "" for the default), so
// the field must agree with it; a conflict is refused naming both values.
func lateScopeField(part *multipart.Part, scope string) error {
	effective, err := attachments.CheckScope(scope)
	if err != nil {
		return err
	}
	v, err := scopeField(part, "")
	if err != nil {
		return err
	}
	if v != effective {
		given := fmt.Sprintf("the default %q", effective)
		if scope != "" {
			given = fmt.Sprintf("%q (before the file)", scope)
		}
		return fmt.Errorf("%w: scope is given twice, as %s and as %q after the file part; send one scope, or make them agree", core.ErrInvalid, given, v)
	}
	return nil
}

// skipPart reads past a form field the upload does not use.
func skipPart(part *multipart.Part) error {
	if _, err := io.Copy(io.Discard, part); err != nil {
		return multipartError(err)
	}
	return nil
}

// partReader reports a malformed multipart body as a client error.
type partReader struct{ r io.Reader }

func (p partReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err != nil && err != io.EOF {
		err = multipartError(err)
	}
	return n, err
}

// multipartError classes a multipart read failure: a body over the cap
// stays 413, a client gone stays as is, anything else is malformed input.
func multipartError(err error) error {
	var maxBytes *http.MaxBytesError
	if errors.As(err, &maxBytes) || isClientGone(err) || errors.Is(err, core.ErrInvalid) {
		return err
	}
	return fmt.Errorf("%w: malformed multipart body: %v", core.ErrInvalid, err)
}

// getAttachment answers one relation's metadata, deleted or consumed too.
func (s *attachmentRoutes) getAttachment(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id, ref := p.ByName("id"), p.ByName("ref")
	if _, ok := s.read.Session(id); !ok {
		fail(w, errMissing("session", id))
		return
	}
	a, ok := s.read.Attachment(id, ref)
	if !ok {
		fail(w, errMissing("attachment", ref))
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// changeAttachmentScopeBody is the body of changeAttachmentScope.
type changeAttachmentScopeBody struct {
	Scope *string `json:"scope" required:"true"`
}

// changeAttachmentScope takes {scope}; 409 once a this_turn relation is
// consumed or the relation is deleted.
func (s *attachmentRoutes) changeAttachmentScope(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req changeAttachmentScopeBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.Scope == nil {
		writeError(w, http.StatusBadRequest, "scope is required")
		return
	}
	a, err := s.cmds.ChangeAttachmentScope(r.Context(), p.ByName("id"), p.ByName("ref"), *req.Scope)
	respond(w, a, err)
}

// deleteAttachment removes a relation from future selection and answers
// its metadata (deleted: true).
func (s *attachmentRoutes) deleteAttachment(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id, ref := p.ByName("id"), p.ByName("ref")
	if err := s.cmds.DeleteAttachment(r.Context(), id, ref); err != nil {
		fail(w, err)
		return
	}
	a, _ := s.read.Attachment(id, ref)
	writeJSON(w, http.StatusOK, a)
}

// attachmentContent serves a relation's bytes, hash-verified, with its
// stored media type, as a download that is never sniffed.
func (s *attachmentRoutes) attachmentContent(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	a, f, err := s.cmds.OpenAttachment(p.ByName("id"), p.ByName("ref"))
	if err != nil {
		fail(w, err)
		return
	}
	defer f.Close()
	if err := serveBytes(w, r, a.Name, a.MediaType, a.Size, f); err != nil {
		s.log.Warn("attachment content", "session", a.SessionID, "ref", a.ReferenceID, "err", err)
	}
}

// serveBytes serves stored bytes with their media type, as a download that
// is never sniffed nor run. The error is a failed copy, not a client gone.
func serveBytes(w http.ResponseWriter, r *http.Request, name, mediaType string, size int64, f io.Reader) error {
	h := w.Header()
	h.Set("Content-Type", mediaType)
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		if _, err := io.Copy(w, f); err != nil && !isClientGone(err) {
			return err
		}
	}
	return nil
}
