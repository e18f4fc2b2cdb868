package attachments

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"path"
	"strings"
	"unicode/utf8"

	"lathe/commands/core"

	"github.com/oklog/ulid/v2"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/blobs"
	"lathe/runtime/doctext"
)

// Attachment limits.
const (
	// MaxImageAttachment bounds a declared image (media type image/*).
	MaxImageAttachment = 10 << 20
	// MaxDocumentAttachment bounds every other document.
	MaxDocumentAttachment = 25 << 20
	// MaxAttachmentText bounds the text extracted for the model context.
	MaxAttachmentText = 64 << 10
	MaxConsumeRefs    = 256
)

// AttachmentLimit is the size limit for a declared media type.
func AttachmentLimit(mediaType string) int64 {
	if strings.HasPrefix(mediaType, "image/") {
		return MaxImageAttachment
	}
	return MaxDocumentAttachment
}

// AttachmentUpload is one uploaded file.
type AttachmentUpload struct {
	// Scope is events.ScopeThisTurn or events.ScopeSession; "" means this_turn.
	Scope string
	// Name is the client's file name; only its base name is kept.
	Name string
	// MediaType is the declared Content-Type; "" means application/octet-stream.
	MediaType string
	Body      io.Reader
	// Finish, if set, runs after Body is read whole and before anything is
	// stored: transport checks there that the request held no further file.
	Finish func() error
}

// CheckScope validates an attachment scope ("" defaults to this_turn).
func CheckScope(scope string) (string, error) {
	switch scope {
	case "":
		return events.ScopeThisTurn, nil
	case events.ScopeThisTurn, events.ScopeSession:
		return scope, nil
	}
	return "", fmt.Errorf("%w: scope must be %q or %q, not %q", core.ErrInvalid, events.ScopeThisTurn, events.ScopeSession, scope)
}

// CheckMediaType normalises a declared media type.
func CheckMediaType(declared string) (string, error) {
	if strings.TrimSpace(declared) == "" {
		return "application/octet-stream", nil
	}
	mt, params, err := mime.ParseMediaType(declared)
	if err != nil || !strings.Contains(mt, "/") {
		return "", fmt.Errorf("%w: the file's Content-Type %q is not a media type", core.ErrInvalid, declared)
	}
	if cs, ok := params["charset"]; ok && strings.HasPrefix(mt, "text/") {
		return mime.FormatMediaType(mt, map[string]string{"charset": strings.ToLower(cs)}), nil
	}
	return mt, nil
}

// AttachmentName keeps the base name of a client file name.
func AttachmentName(name string) (string, error) {
	name = strings.ReplaceAll(name, `\`, "/")
	name = path.Base(strings.TrimSpace(name))
	if name == "." || name == "/" || name == ".." || name == "" {
		name = "attachment"
	}
	return core.CleanName("file name", name)
}

// AddAttachment stores an uploaded file's bytes (content-addressed, once
// per content) and its text, then records the relation. It works whatever
// the Session's environment state. Nothing is stored and nothing appended
// when the file is over its limit or the request is otherwise rejected.
func (s *Attachments) AddAttachment(ctx context.Context, sessionID string, up AttachmentUpload) (projections.Attachment, error) {
	if _, ok := s.Store.Session(sessionID); !ok {
		return projections.Attachment{}, fmt.Errorf("%w: session %q", core.ErrNotFound, sessionID)
	}
	if s.Opts.Blobs == nil {
		return projections.Attachment{}, fmt.Errorf("%w: attachment storage is not configured", core.ErrUnavailable)
	}
	scope, err := CheckScope(up.Scope)
	if err != nil {
		return projections.Attachment{}, err
	}
	f, release, err := s.StoreUpload(ctx, up.Name, up.MediaType, up.Body, up.Finish)
	if err != nil {
		return projections.Attachment{}, err
	}
	defer release()
	ev := events.AttachmentAdded{
		ReferenceID: ulid.Make().String(), Scope: scope, Name: f.Name, MediaType: f.MediaType,
		Size: f.Size, SHA256: f.Hash, TextExtracted: f.TextExtracted,
	}
	err = s.Retry(ctx, func() error {
		ss, ok := s.Store.Session(sessionID)
		if !ok {
			return fmt.Errorf("%w: session %q", core.ErrNotFound, sessionID)
		}
		return s.AppendExpecting(ctx, sessionID, ss.Version, ev)
	})
	if err != nil {
		return projections.Attachment{}, err
	}
	a, _ := s.Store.Attachment(sessionID, ev.ReferenceID)
	return a, nil
}

// uploaded is a file stored in the blob store, with its text if any.
// uploads stores an uploaded file's bytes in the blob store and extracts
// its text: Session attachments and shared files both upload.
type Uploads struct{ *core.Core }

type uploaded struct {
	Name, MediaType, Hash string
	Size                  int64
	TextExtracted         bool
}

// StoreUpload stores an uploaded file's bytes (content-addressed, once per
// content, streamed to disk, within the limit of its declared media type)
// and its model-context text. finish, if set, runs once body is read whole
// and before anything is kept. Nothing is kept when the file is over its
// limit or finish refuses. Once the bytes are committed it holds blob
// collection off (blobWrites) until release, which the caller calls after
// appending the record that names them; on an error it has released.
func (s *Uploads) StoreUpload(ctx context.Context, rawName, declared string, body io.Reader, finish func() error) (u uploaded, release func(), err error) {
	mediaType, err := CheckMediaType(declared)
	if err != nil {
		return uploaded{}, nil, err
	}
	name, err := AttachmentName(rawName)
	if err != nil {
		return uploaded{}, nil, err
	}
	limit := AttachmentLimit(mediaType)
	st, err := s.Opts.Blobs.Stage(body, limit, MaxAttachmentText+utf8.UTFMax)
	if errors.Is(err, blobs.ErrTooLarge) {
		kind := "a document"
		if strings.HasPrefix(mediaType, "image/") {
			kind = "a declared image (" + mediaType + ")"
		}
		return uploaded{}, nil, fmt.Errorf("%w: %q is over the %d MiB limit for %s", core.ErrTooLarge, name, limit>>20, kind)
	}
	if err != nil {
		return uploaded{}, nil, err
	}
	defer st.Discard()
	if finish != nil {
		if err := finish(); err != nil {
			return uploaded{}, nil, err
		}
	}
	s.BlobWrites.RLock()
	defer func() {
		if err != nil {
			s.BlobWrites.RUnlock()
		}
	}()
	if err := st.Commit(); err != nil {
		return uploaded{}, nil, err
	}
	if mediaType == "application/octet-stream" {
		mediaType = sniffMediaType(name, st.Head) // commands/attachments/mediatype.go: a .py is text/x-python
	}
	text, extracted := s.attachmentText(ctx, name, mediaType, st)
	if extracted {
		if err := s.Opts.Blobs.PutText(st.Hash, text); err != nil {
			return uploaded{}, nil, err
		}
	}
	return uploaded{Name: name, MediaType: mediaType, Hash: st.Hash, Size: st.Size, TextExtracted: extracted}, s.BlobWrites.RUnlock, nil
}

// attachmentText returns the model-context text of a stored file (see
// doctext.Extract): at most MaxAttachmentText bytes of valid UTF-8, cut on
// a rune boundary, from text/* and UTF-8-looking files (their staged head)
// and from PDFs (read back from the blob store and parsed in a confined
// child process, bounded in memory, CPU, time and pages). Images and
// binary files have none. A PDF that yields none (malformed, encrypted,
// scanned, over a bound) is still a valid attachment; why is logged.
func (s *Uploads) attachmentText(ctx context.Context, name, mediaType string, st *blobs.Staged) ([]byte, bool) {
	var src io.ReaderAt = bytes.NewReader(st.Head)
	if !strings.HasPrefix(mediaType, "image/") && doctext.IsPDF(mediaType, st.Head) {
		f, _, err := s.Opts.Blobs.Open(st.Hash)
		if err != nil {
			s.Log.Warn("attachment text: reopening the PDF", "name", name, "sha256", st.Hash, "err", err)
			return nil, false
		}
		defer f.Close()
		src = f
	}
	text, ok, err := doctext.Extract(ctx, mediaType, src, st.Size, MaxAttachmentText)
	if err != nil {
		s.Log.Info("attachment text not extracted", "name", name, "media_type", mediaType, "sha256", st.Hash, "err", err)
	}
	return text, ok
}

// findAttachment returns a Session's relation, or the error naming what is
// missing.
func findAttachment(store core.Reader, sessionID, ref string) (projections.Session, projections.Attachment, error) {
	ss, ok := store.Session(sessionID)
	if !ok {
		return ss, projections.Attachment{}, fmt.Errorf("%w: session %q", core.ErrNotFound, sessionID)
	}
	a, ok := store.Attachment(sessionID, ref)
	if !ok {
		return ss, a, fmt.Errorf("%w: attachment %q in session %q", core.ErrNotFound, ref, sessionID)
	}
	return ss, a, nil
}

// ChangeAttachmentScope changes a relation's scope before it is consumed.
func (s *Attachments) ChangeAttachmentScope(ctx context.Context, sessionID, ref, scope string) (projections.Attachment, error) {
	if scope == "" {
		return projections.Attachment{}, fmt.Errorf("%w: scope is required", core.ErrInvalid)
	}
	scope, err := CheckScope(scope)
	if err != nil {
		return projections.Attachment{}, err
	}
	err = s.Retry(ctx, func() error {
		ss, a, err := findAttachment(s.Store, sessionID, ref)
		switch {
		case err != nil:
			return err
		case a.Deleted:
			return fmt.Errorf("%w: attachment %q is deleted", core.ErrConflict, ref)
		case a.Consumed:
			return fmt.Errorf("%w: attachment %q was already consumed by turn %q; its scope is fixed", core.ErrConflict, ref, a.ConsumedTurnID)
		case a.Scope == scope:
			return nil
		}
		return s.AppendExpecting(ctx, sessionID, ss.Version, events.AttachmentScopeChanged{ReferenceID: ref, Scope: scope})
	})
	if err != nil {
		return projections.Attachment{}, err
	}
	a, _ := s.Store.Attachment(sessionID, ref)
	return a, nil
}

// DeleteAttachment removes a relation from future selection. A relation a
// turn used keeps its historical pin: its metadata and bytes stay readable.
func (s *Attachments) DeleteAttachment(ctx context.Context, sessionID, ref string) error {
	return s.Retry(ctx, func() error {
		ss, a, err := findAttachment(s.Store, sessionID, ref)
		if err != nil {
			return err
		}
		if a.Deleted {
			return fmt.Errorf("%w: attachment %q is already deleted", core.ErrConflict, ref)
		}
		return s.AppendExpecting(ctx, sessionID, ss.Version, events.AttachmentDeleted{ReferenceID: ref})
	})
}

// CheckConsumable checks that every relation can be used by a new turn.
func CheckConsumable(store core.Reader, sessionID string, refIDs []string) error {
	for _, ref := range refIDs {
		_, a, err := findAttachment(store, sessionID, ref)
		if err != nil {
			return err
		}
		if a.Deleted {
			return fmt.Errorf("%w: attachment %q is deleted", core.ErrConflict, ref)
		}
		if a.Consumed {
			return fmt.Errorf("%w: attachment %q was already consumed by turn %q", core.ErrConflict, ref, a.ConsumedTurnID)
		}
	}
	return nil
}

// OpenAttachment returns a relation's bytes, verified against its hash.
// Content stays readable through a deleted relation a turn pinned; an
// unpinned deleted relation's content is gone.
func (s *Attachments) OpenAttachment(sessionID, ref string) (projections.Attachment, io.ReadCloser, error) {
	_, a, err := findAttachment(s.Store, sessionID, ref)
	if err != nil {
		return a, nil, err
	}
	if a.Deleted && !a.Pinned() {
		return a, nil, fmt.Errorf("%w: attachment %q was deleted before any turn used it", core.ErrNotFound, ref)
	}
	if s.Opts.Blobs == nil {
		return a, nil, fmt.Errorf("%w: attachment storage is not configured", core.ErrUnavailable)
	}
	f, _, err := s.Opts.Blobs.Open(a.SHA256)
	if err != nil {
		return a, nil, fmt.Errorf("attachment %q content: %w", ref, err)
	}
	return a, f, nil
}

// AttachmentText returns a relation's extracted text for the model context
// (at most MaxAttachmentText bytes), or ok false when it has none.
func (s *Attachments) AttachmentText(sessionID, ref string) (text string, ok bool, err error) {
	_, a, err := findAttachment(s.Store, sessionID, ref)
	if err != nil || !a.TextExtracted {
		return "", false, err
	}
	b, err := s.Opts.Blobs.Text(a.SHA256)
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}

// Attachments stores, rescopes, reads and deletes Session attachments
// (commands/attachments/attachments.go).
type Attachments struct{ *Uploads }

// WriteAttachment adds one attached document to a user message: its text,
// or a note for one without text (ok false) or whose text is unreadable.
func WriteAttachment(b *strings.Builder, name, mediaType string, size int64, text string, ok bool, err error) {
	switch {
	case err != nil:
		fmt.Fprintf(b, "\n\n[Attachment %q (%s, %d bytes): its text could not be read: %v]", name, mediaType, size, err)
	case !ok:
		fmt.Fprintf(b, "\n\n[Attachment %q (%s, %d bytes): no text could be extracted]", name, mediaType, size)
	default:
		fmt.Fprintf(b, "\n\n[Attachment %q (%s)]\n%s\n[End of attachment %q]", name, mediaType, text, name)
	}
}

// NewAttachments returns the Session attachments.
func NewAttachments(c *core.Core) *Attachments { return &Attachments{&Uploads{c}} }
