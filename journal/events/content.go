package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Large content never rides in an event. The journal, NATS and every /ws
// event frame carry events whole, so an event stays small: a field that can
// be large (model output, reasoning, tool call arguments and results, turn
// inputs) is a Text or a JSON. Content up to InlineMax bytes is inline, and
// encodes exactly as the plain field did before these types existed, so old
// journals decode unchanged. Larger content is offloaded (Offload) into the
// content-addressed blob store, and the field encodes as a reference:
//
//	{"$blob": {"sha256": "<hex>", "size": <bytes>, "preview": "<first bytes>"}}
//
// Readers resolve references (Resolve) to the whole content.

// Content bounds.
const (
	// InlineMax is the largest content a field carries inline.
	InlineMax = 64 << 10
	// PreviewMax bounds a reference's preview: the content's first bytes,
	// cut on a rune boundary.
	PreviewMax = 1 << 10
	// MaxContent bounds one offloaded field.
	MaxContent = 1 << 30
)

// Blob is a reference to content kept in the blob store: its SHA-256 (the
// blob's name), its size in bytes, and a bounded preview of its start.
type Blob struct {
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	Preview string `json:"preview"`
}

// BlobWriter stores content under its SHA-256 (runtime/blobs.Store is one).
type BlobWriter interface {
	Put(r io.Reader, limit int64) (hash string, size int64, err error)
}

// BlobReader reads stored content by its SHA-256, verified against it
// (runtime/blobs.Store is one).
type BlobReader interface {
	ReadBlob(hash string) ([]byte, error)
}

// ErrUnresolved: a reference's content could not be read back.
var ErrUnresolved = errors.New("events: content reference not resolved")

// blobField is the encoded form of a reference.
type blobField struct {
	Blob *Blob `json:"$blob"`
}

func preview(b []byte) string {
	if len(b) <= PreviewMax {
		return string(b)
	}
	n := PreviewMax
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n])
}

// decodeRef reads data as a reference: ok is false when it is not one.
func decodeRef(data []byte) (*Blob, bool) {
	if len(data) == 0 || data[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil || len(m) != 1 || m["$blob"] == nil {
		return nil, false
	}
	var b Blob
	if json.Unmarshal(m["$blob"], &b) != nil || b.SHA256 == "" {
		return nil, false
	}
	return &b, true
}

func store(w BlobWriter, content []byte) (*Blob, error) {
	hash, size, err := w.Put(bytes.NewReader(content), MaxContent)
	if err != nil {
		return nil, fmt.Errorf("events: offload %d bytes: %w", len(content), err)
	}
	return &Blob{SHA256: hash, Size: size, Preview: preview(content)}, nil
}

func fetch(r BlobReader, b *Blob) ([]byte, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: no blob reader for %s", ErrUnresolved, b.SHA256)
	}
	data, err := r.ReadBlob(b.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnresolved, b.SHA256, err)
	}
	if int64(len(data)) != b.Size {
		return nil, fmt.Errorf("%w: %s holds %d bytes, the reference says %d", ErrUnresolved, b.SHA256, len(data), b.Size)
	}
	return data, nil
}

// Content is an event field that can be large: inline, or a reference to
// the blob store (Blob set, Inline empty). Text and JSON are its two kinds.
type Content[T string | json.RawMessage] struct {
	Inline T
	Blob   *Blob
}

// Text is a string field that can be large.
type Text = Content[string]

// JSON is a JSON-valued field that can be large (tool call arguments,
// context references), kept as its raw JSON. An inline value that reads as
// a reference (an object whose only key is "$blob") is always offloaded, so
// the encoding is never ambiguous.
type JSON = Content[json.RawMessage]

// NewText is s inline; Offload moves it out if it is large.
func NewText(s string) Text { return Text{Inline: s} }

// TextPtr is NewText for an optional field.
func TextPtr(s *string) *Text {
	if s == nil {
		return nil
	}
	t := NewText(*s)
	return &t
}

// NewJSON is raw inline; Offload moves it out if it is large.
func NewJSON(raw json.RawMessage) JSON { return JSON{Inline: raw} }

// NewJSONs is NewJSON of each raw value (nil for nil).
func NewJSONs(raws []json.RawMessage) []JSON {
	if raws == nil {
		return nil
	}
	out := make([]JSON, len(raws))
	for i, r := range raws {
		out[i] = NewJSON(r)
	}
	return out
}

// String is the content: whole when inline (or resolved), else the preview.
func (c Content[T]) String() string {
	if c.Blob != nil {
		return c.Blob.Preview
	}
	return string(c.Inline)
}

// Value is the field as it encodes: for JSON the raw value when inline (or
// resolved), else the reference (valid JSON carrying the preview).
func (c Content[T]) Value() json.RawMessage {
	b, _ := c.MarshalJSON()
	return b
}

// Stored reports whether the content is a reference to the blob store.
func (c Content[T]) Stored() bool { return c.Blob != nil }

// IsZero reports empty inline content (for omitzero).
func (c Content[T]) IsZero() bool { return c.Blob == nil && len(c.Inline) == 0 }

func (c Content[T]) MarshalJSON() ([]byte, error) {
	if c.Blob != nil {
		return json.Marshal(blobField{c.Blob})
	}
	if raw, ok := any(c.Inline).(json.RawMessage); ok {
		if len(raw) == 0 {
			return []byte("null"), nil
		}
		return raw, nil
	}
	return json.Marshal(string(c.Inline))
}

func (c *Content[T]) UnmarshalJSON(data []byte) error {
	if b, ok := decodeRef(data); ok {
		*c = Content[T]{Blob: b}
		return nil
	}
	*c = Content[T]{}
	switch v := any(&c.Inline).(type) {
	case *json.RawMessage:
		*v = bytes.Clone(data)
	case *string:
		var s *string
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("events: text is neither a string nor a blob reference: %w", err)
		}
		if s != nil {
			*v = *s
		}
	}
	return nil
}

// offload moves the content into w if it is longer than limit bytes (or,
// for JSON, could be mistaken for a reference).
func (c *Content[T]) offload(w BlobWriter, limit int) error {
	if c.Blob != nil {
		return nil
	}
	_, raw := any(c.Inline).(json.RawMessage)
	if _, ambiguous := decodeRef([]byte(c.Inline)); len(c.Inline) <= limit && !(raw && ambiguous) {
		return nil
	}
	b, err := store(w, []byte(c.Inline))
	if err == nil {
		*c = Content[T]{Blob: b}
	}
	return err
}

// Resolve returns the content inline, read from r if it is a reference.
// An unreadable reference is an ErrUnresolved error.
func (c Content[T]) Resolve(r BlobReader) (Content[T], error) {
	if c.Blob == nil {
		return c, nil
	}
	data, err := fetch(r, c.Blob)
	if err != nil {
		return c, err
	}
	return Content[T]{Inline: T(data)}, nil
}

// MaxInlineEvent is the size of encoded data over which Offload moves every
// content field longer than a preview, not only those over InlineMax: many
// mid-sized fields (a step's tool calls) must not add up to a large event.
const MaxInlineEvent = 128 << 10

// offloader is a payload with content fields: offload returns a copy with
// every one longer than limit bytes moved into w.
type offloader interface {
	offload(w BlobWriter, limit int) (Payload, error)
}

// field is a content field (*Text or *JSON).
type field interface {
	offload(w BlobWriter, limit int) error
}

// Offload returns p with its large content fields stored in w and replaced
// by their references: each field over InlineMax, and, if the data is still
// over MaxInlineEvent, each field longer than PreviewMax. Payloads without
// content fields, and all payloads when w is nil, are returned unchanged:
// the journal's event size limit refuses one that is still too large.
func Offload(p Payload, w BlobWriter) (Payload, error) {
	o, ok := p.(offloader)
	if !ok || w == nil {
		return p, nil
	}
	p, err := o.offload(w, InlineMax)
	if err != nil {
		return nil, err
	}
	if data, err := json.Marshal(p); err != nil || len(data) <= MaxInlineEvent {
		return p, err
	}
	return p.(offloader).offload(w, PreviewMax)
}

// offloadAll offloads each field, stopping at the first error.
func offloadAll(w BlobWriter, limit int, fields ...field) error {
	for _, f := range fields {
		if err := f.offload(w, limit); err != nil {
			return err
		}
	}
	return nil
}
