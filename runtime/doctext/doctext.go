// Package doctext extracts plain text from uploaded documents for a model's
// context: the text of text/* and textual application types, and the text
// of PDF files. The result is valid UTF-8 of at most a given number of
// bytes, cut on a rune boundary.
//
// PDF files are outside input parsed by a library that can crash the whole
// process on a crafted file (a cross-reference table claiming billions of
// objects ends in a fatal out-of-memory error no recover catches) or loop
// forever. So a PDF is never parsed in the calling process: Extract runs
// this same executable again as a child (see child.go) with a memory limit,
// a CPU limit, a deadline and one CPU, feeds it the file and reads back at
// most the bounded text. A child that fails, crashes or overruns is killed
// and the document simply has no text.
package doctext

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

// IsPDF reports whether a document is a PDF: declared application/pdf or
// starting with the %PDF- magic.
func IsPDF(mediaType string, head []byte) bool {
	return mediaType == "application/pdf" || bytes.HasPrefix(head, []byte("%PDF-"))
}

// Extract returns the text of a document of the given (normalised) media
// type whose size bytes r reads: at most limit bytes of valid UTF-8, and
// whether it has any. Images and binary files have none. A text document
// is read only up to its first limit+utf8.UTFMax bytes. A PDF (declared,
// or by its magic) is read whole by a confined child process (at most two
// at a time; see the package comment) within ctx and Timeout, its text
// taken from at most MaxPDFPages pages. A non-nil error says why a PDF
// yielded no text (malformed, encrypted, crashed the parser, timed out,
// ctx done): the document is still valid, so callers log it and go on.
func Extract(ctx context.Context, mediaType string, r io.ReaderAt, size int64, limit int) ([]byte, bool, error) {
	if strings.HasPrefix(mediaType, "image/") || size <= 0 || limit <= 0 {
		return nil, false, nil
	}
	head := make([]byte, min(size, int64(limit+utf8.UTFMax)))
	n, err := r.ReadAt(head, 0)
	if n < len(head) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, false, err
	}
	if IsPDF(mediaType, head) {
		text, err := extractPDF(ctx, r, size, limit)
		return text, err == nil && len(text) > 0, err
	}
	text, ok := Text(mediaType, head, limit)
	return text, ok, nil
}

// Text returns the text of a non-PDF document from its head (its first
// limit+utf8.UTFMax bytes, or all of it): text/* and textual application types
// always have text (NULs dropped, invalid UTF-8 replaced); any other type
// has text only when its head is NUL-free valid UTF-8. Text that is
// empty once cleaned is none.
func Text(mediaType string, head []byte, limit int) ([]byte, bool) {
	if strings.HasPrefix(mediaType, "image/") || len(head) == 0 {
		return nil, false
	}
	b := cut(head, limit)
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		if !strings.HasPrefix(mediaType, "text/") && !isTextualApplication(mediaType) {
			return nil, false
		}
		// A replaced byte grows to three: cut again.
		b = cut([]byte(strings.ToValidUTF8(strings.ReplaceAll(string(b), "\x00", ""), "\uFFFD")), limit)
	}
	return b, len(b) > 0
}

func isTextualApplication(mt string) bool {
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/x-yaml", "application/yaml", "application/toml", "application/x-sh":
		return true
	}
	return strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml")
}

// cut returns b's first limit bytes, less the start of a rune the bound
// cut in two.
func cut(b []byte, limit int) []byte {
	if len(b) <= limit {
		return b
	}
	b = b[:limit]
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return b
}
