package chats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"lathe/commands/attachments"
	"lathe/commands/core"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
)

// SharedFiles is the shared file store that Chats attach from: uploads
// (bytes in the content-addressed blob store, metadata in shared-file-*
// events), names and tags, deletion, and the Chats' relations to entries
// (chat-file-* events). It is not the Session Files editor and never
// reaches a Workspace. It collects the blobs no live record references
// (commands/sweeps/blobgc.go).
type SharedFiles struct{ *attachments.Uploads }

// Tag bounds.
const (
	maxTags   = 32
	maxTagLen = 64
)

// FileUpload is one file uploaded to the shared store.
type FileUpload struct {
	// Name is the client's file name; only its base name is kept.
	Name string
	// MediaType is the declared Content-Type.
	MediaType string
	Body      io.Reader
	// Finish, if set, runs after Body is read whole and before anything
	// is kept (see AttachmentUpload).
	Finish func() error
	Tags   []string
}

// CheckTags validates and normalises tags: trimmed, unique, in order.
func CheckTags(tags []string) ([]string, error) {
	if len(tags) > maxTags {
		return nil, fmt.Errorf("%w: at most %d tags", core.ErrInvalid, maxTags)
	}
	out := []string{}
	for _, t := range tags {
		t = strings.TrimSpace(t)
		if t == "" || utf8.RuneCountInString(t) > maxTagLen || !utf8.ValidString(t) || strings.IndexFunc(t, unicode.IsControl) >= 0 {
			return nil, fmt.Errorf("%w: a tag must be 1-%d printable characters", core.ErrInvalid, maxTagLen)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (s *SharedFiles) sharedFile(id string) (projections.SharedFile, error) {
	f, ok := s.Store.SharedFile(id)
	if !ok {
		return f, fmt.Errorf("%w: file %q", core.ErrNotFound, id)
	}
	return f, nil
}

// upload stores an upload's bytes and returns the event that records it;
// release (see storeUpload) goes after its append.
func (s *SharedFiles) upload(ctx context.Context, up FileUpload) (events.SharedFileStored, func(), error) {
	if s.Opts.Blobs == nil {
		return events.SharedFileStored{}, nil, fmt.Errorf("%w: file storage is not configured", core.ErrUnavailable)
	}
	tags, err := CheckTags(up.Tags)
	if err != nil {
		return events.SharedFileStored{}, nil, err
	}
	u, release, err := s.StoreUpload(ctx, up.Name, up.MediaType, up.Body, up.Finish)
	if err != nil {
		return events.SharedFileStored{}, nil, err
	}
	return events.SharedFileStored{Name: u.Name, ContentType: u.MediaType, Size: u.Size, SHA256: u.Hash, Tags: tags, TextExtracted: u.TextExtracted}, release, nil
}

// Upload stores a file in the shared store (25 MiB, 10 MiB for a declared
// image), attached to no Chat.
func (s *SharedFiles) Upload(ctx context.Context, up FileUpload) (projections.SharedFile, error) {
	ev, release, err := s.upload(ctx, up)
	if err != nil {
		return projections.SharedFile{}, err
	}
	id := ulid.Make().String()
	err = s.AppendExpecting(ctx, id, 0, ev)
	release()
	if err != nil {
		return projections.SharedFile{}, err
	}
	return s.sharedFile(id)
}

// PatchFile renames or retags an entry.
func (s *SharedFiles) PatchFile(ctx context.Context, id string, name *string, tags *[]string) (projections.SharedFile, error) {
	var ev events.SharedFilePatched
	if name != nil {
		n, err := attachments.AttachmentName(*name)
		if err != nil {
			return projections.SharedFile{}, err
		}
		ev.Name = &n
	}
	if tags != nil {
		t, err := CheckTags(*tags)
		if err != nil {
			return projections.SharedFile{}, err
		}
		ev.Tags = &t
	}
	err := s.Retry(ctx, func() error {
		f, err := s.sharedFile(id)
		if err != nil || (ev.Name == nil && ev.Tags == nil) {
			return err
		}
		return s.AppendExpecting(ctx, id, f.Version, ev)
	})
	if err != nil {
		return projections.SharedFile{}, err
	}
	return s.sharedFile(id)
}

// DeleteFile deletes an entry and every Chat's relation to it, unless a
// turn used it as context: that historical context retains it (ErrConflict).
func (s *SharedFiles) DeleteFile(ctx context.Context, id string) error {
	return s.Retry(ctx, func() error {
		f, err := s.sharedFile(id)
		if err != nil {
			return err
		}
		if f.Retained {
			return fmt.Errorf("%w: file %q is retained: a turn used it as context, and that history keeps it", core.ErrConflict, id)
		}
		return s.AppendExpecting(ctx, id, f.Version, events.SharedFileDeleted{})
	})
}

// OpenFile returns an entry's bytes, verified against its hash.
func (s *SharedFiles) OpenFile(id string) (projections.SharedFile, io.ReadCloser, error) {
	f, err := s.sharedFile(id)
	if err != nil {
		return f, nil, err
	}
	return s.openShared(f)
}

func (s *SharedFiles) openShared(f projections.SharedFile) (projections.SharedFile, io.ReadCloser, error) {
	if s.Opts.Blobs == nil {
		return f, nil, fmt.Errorf("%w: file storage is not configured", core.ErrUnavailable)
	}
	r, _, err := s.Opts.Blobs.Open(f.SHA256)
	if err != nil {
		return f, nil, fmt.Errorf("file %q content: %w", f.ID, err)
	}
	return f, r, nil
}

// chatAttachment returns a Chat's relation to a file.
func (s *SharedFiles) chatAttachment(chatID, fileID string) (projections.ChatAttachment, error) {
	c, err := readChat(s.Store, chatID)
	if err != nil {
		return projections.ChatAttachment{}, err
	}
	for _, a := range c.Attachments {
		if a.FileID == fileID {
			return a, nil
		}
	}
	return projections.ChatAttachment{}, fmt.Errorf("%w: chat %q holds no file %q", core.ErrNotFound, chatID, fileID)
}

// attach records a Chat's relation to a file; the file's version is
// expected, so a file deleted meanwhile is never attached. An existing
// relation is answered as it is.
func (s *SharedFiles) attach(ctx context.Context, chatID, fileID string, pinned bool) (projections.ChatAttachment, error) {
	err := s.Retry(ctx, func() error {
		c, err := chatInfo(s.Store, chatID)
		if err != nil {
			return err
		}
		f, err := s.sharedFile(fileID)
		if err != nil {
			return err
		}
		if _, err := s.chatAttachment(chatID, fileID); err == nil {
			return nil
		}
		err = s.Append(ctx, []journal.Event{events.New(chatID, events.ChatFileAttached{FileID: fileID, Pinned: pinned})},
			journal.Expectation{AggregateID: chatID, Version: c.Version}, journal.Expectation{AggregateID: fileID, Version: f.Version})
		if errors.Is(err, core.ErrConflict) {
			return core.LostRace(err)
		}
		return err
	})
	if err != nil {
		return projections.ChatAttachment{}, err
	}
	return s.chatAttachment(chatID, fileID)
}

// AttachUpload stores an upload in the shared store and attaches it to a
// Chat, in one append.
func (s *SharedFiles) AttachUpload(ctx context.Context, chatID string, up FileUpload, pinned bool) (projections.ChatAttachment, error) {
	if _, err := chatInfo(s.Store, chatID); err != nil {
		return projections.ChatAttachment{}, err
	}
	ev, release, err := s.upload(ctx, up)
	if err != nil {
		return projections.ChatAttachment{}, err
	}
	id := ulid.Make().String()
	defer release()
	err = s.Retry(ctx, func() error {
		c, err := chatInfo(s.Store, chatID)
		if err != nil {
			return err
		}
		err = s.Append(ctx, []journal.Event{events.New(id, ev), events.New(chatID, events.ChatFileAttached{FileID: id, Pinned: pinned})},
			journal.Expectation{AggregateID: id}, journal.Expectation{AggregateID: chatID, Version: c.Version})
		if errors.Is(err, core.ErrConflict) {
			return core.LostRace(err)
		}
		return err
	})
	if err != nil {
		return projections.ChatAttachment{}, err
	}
	return s.chatAttachment(chatID, id)
}

// AttachFile attaches an existing entry to a Chat.
func (s *SharedFiles) AttachFile(ctx context.Context, chatID, fileID string, pinned bool) (projections.ChatAttachment, error) {
	if fileID == "" {
		return projections.ChatAttachment{}, fmt.Errorf("%w: file_id is required", core.ErrInvalid)
	}
	return s.attach(ctx, chatID, fileID, pinned)
}

// PinFile pins or unpins a Chat's attachment: a pinned file's text goes
// into every turn, an unpinned one's into the next turn only.
func (s *SharedFiles) PinFile(ctx context.Context, chatID, fileID string, pinned bool) (projections.ChatAttachment, error) {
	err := s.Retry(ctx, func() error {
		c, err := chatInfo(s.Store, chatID)
		if err != nil {
			return err
		}
		a, err := s.chatAttachment(chatID, fileID)
		if err != nil || a.Pinned == pinned {
			return err
		}
		return s.AppendExpecting(ctx, chatID, c.Version, events.ChatFilePinned{FileID: fileID, Pinned: pinned})
	})
	if err != nil {
		return projections.ChatAttachment{}, err
	}
	return s.chatAttachment(chatID, fileID)
}

// DetachFile removes a Chat's relation to a file; the entry stays.
func (s *SharedFiles) DetachFile(ctx context.Context, chatID, fileID string) error {
	return s.Retry(ctx, func() error {
		c, err := chatInfo(s.Store, chatID)
		if err != nil {
			return err
		}
		if _, err := s.chatAttachment(chatID, fileID); err != nil {
			return err
		}
		return s.AppendExpecting(ctx, chatID, c.Version, events.ChatFileDetached{FileID: fileID})
	})
}

// OpenChatFile returns the bytes of a file through a Chat's relation:
// ErrNotFound when the Chat does not hold it.
func (s *SharedFiles) OpenChatFile(chatID, fileID string) (projections.SharedFile, io.ReadCloser, error) {
	if _, err := s.chatAttachment(chatID, fileID); err != nil {
		return projections.SharedFile{}, nil, err
	}
	return s.OpenFile(fileID)
}

// NewSharedFiles returns the shared file store, storing bytes as the
// attachments do.
func NewSharedFiles(a *attachments.Attachments) *SharedFiles { return &SharedFiles{a.Uploads} }
