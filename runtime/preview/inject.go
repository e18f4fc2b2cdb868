package preview

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"golang.org/x/net/html"
)

// maxPrologue bounds how much of a document is read looking for the place
// to inject: past it (a huge comment or doctype), the tag goes in where the
// scan stopped.
const maxPrologue = 64 << 10

// ScriptTag is the element that loads the picker bridge from src.
func ScriptTag(src string) []byte {
	return []byte(`<script src="` + html.EscapeString(src) + `" async data-lathe-picker></script>`)
}

// NewInjector returns a reader of src with tag inserted once, as early in
// the document as is valid: right after the <head> start tag, or before the
// first thing that does not belong in the prologue (any other element,
// an end tag, non-blank text). A document of only a prologue gets it at
// the end; an empty one gets nothing. Everything else is src byte for byte.
//
// It streams: only the prologue is tokenized, one token at a time, then
// the rest is copied through as it arrives.
func NewInjector(src io.Reader, tag []byte) io.Reader {
	return newInjector(src, tag, maxPrologue)
}

func newInjector(src io.Reader, tag []byte, limit int) *injector {
	z := html.NewTokenizer(src)
	z.SetMaxBuf(limit)
	return &injector{src: src, z: z, tag: tag, limit: limit}
}

type injector struct {
	src     io.Reader
	z       *html.Tokenizer
	tag     []byte
	limit   int    // prologue bytes scanned at most
	pending []byte // output not yet returned
	scanned int    // prologue bytes passed through
	seen    bool   // any input at all
	done    bool   // the tokenizer is finished with; read src directly
	err     error  // returned once pending is drained
}

func (j *injector) Read(p []byte) (int, error) {
	for len(j.pending) == 0 {
		if j.err != nil {
			return 0, j.err
		}
		if j.done {
			return j.src.Read(p)
		}
		j.step()
	}
	n := copy(p, j.pending)
	j.pending = j.pending[n:]
	return n, nil
}

// step tokenizes one prologue token and queues its output.
func (j *injector) step() {
	tt := j.z.Next()
	raw := bytes.Clone(j.z.Raw()) // TagName lowercases the buffer in place
	j.seen = j.seen || len(raw) > 0
	j.scanned += len(raw)
	err := j.z.Err()
	switch {
	case err != nil && err != io.EOF && err != html.ErrBufferExceeded:
		j.pending = append(raw, j.z.Buffered()...) // a read error: pass on what came, then the error
		j.err = err
		return
	case tt == html.ErrorToken && len(raw) == 0 && err == io.EOF:
		if j.seen {
			j.pending = j.tag // the whole document was prologue
		}
		j.err = io.EOF
		return
	case err != nil:
		j.finish(raw, true) // a token cut short by the end or the limit
		return
	}
	switch tt {
	case html.DoctypeToken, html.CommentToken:
		if bytes.HasSuffix(raw, []byte(">")) { // else cut short by the end or the limit
			j.pass(raw)
			return
		}
	case html.TextToken:
		if len(bytes.TrimLeft(raw, " \t\r\n\f\ufeff")) == 0 {
			j.pass(raw)
			return
		}
	case html.StartTagToken, html.SelfClosingTagToken:
		switch name, _ := j.z.TagName(); string(name) {
		case "html":
			j.pass(raw)
			return
		case "head":
			j.finish(raw, false)
			return
		}
	}
	j.finish(raw, true)
}

// pass queues a prologue token, or injects before the next one once the
// prologue is too long.
func (j *injector) pass(raw []byte) {
	if j.scanned > j.limit {
		j.finish(raw, false)
		return
	}
	j.pending = raw
}

// finish queues raw with the tag before or after it, then whatever the
// tokenizer has buffered, and switches to copying src.
func (j *injector) finish(raw []byte, before bool) {
	out := make([]byte, 0, len(raw)+len(j.tag)+len(j.z.Buffered()))
	if before {
		out = append(append(out, j.tag...), raw...)
	} else {
		out = append(append(out, raw...), j.tag...)
	}
	j.pending = append(out, j.z.Buffered()...)
	j.done = true
	j.z = nil
}

// IsHTML reports whether a Content-Type header value is text/html.
func IsHTML(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/html"
}

// InjectResponse rewrites an HTML response so that it loads the picker
// bridge: the body is decoded if it is gzip or brotli, tag is injected as
// it streams (NewInjector), and the response goes on as identity-encoded
// with no Content-Length. It reports whether it rewrote resp. It leaves
// alone everything that is not HTML, responses without a document body
// (HEAD, 1xx, 204, 206, 304), and encodings it cannot decode.
func InjectResponse(resp *http.Response, tag []byte) bool {
	if !IsHTML(resp.Header.Get("Content-Type")) {
		return false
	}
	switch c := resp.StatusCode; {
	case c < 200, c == http.StatusNoContent, c == http.StatusPartialContent, c == http.StatusNotModified:
		return false
	}
	decode, ok := decoder(resp.Header.Get("Content-Encoding"))
	if !ok {
		return false
	}
	resp.Header.Del("Content-Length")
	resp.Header.Del("Content-Encoding")
	resp.ContentLength = -1
	if resp.Request != nil && resp.Request.Method == http.MethodHead {
		return true
	}
	body := resp.Body
	resp.Body = readCloser{NewInjector(decode(body), tag), body}
	return true
}

// decoder returns the streaming decoder of a Content-Encoding value, if
// it is one InjectResponse handles.
func decoder(encoding string) (func(io.Reader) io.Reader, bool) {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		return func(r io.Reader) io.Reader { return r }, true
	case "gzip", "x-gzip":
		return func(r io.Reader) io.Reader { return &lazyGzip{src: r} }, true
	case "br":
		return func(r io.Reader) io.Reader { return brotli.NewReader(r) }, true
	}
	return nil, false
}

// AcceptEncoding narrows a request's Accept-Encoding to the codings
// InjectResponse can decode (gzip, br, identity), keeping their order and
// weights, so that an upstream never picks one the picker cannot be
// injected into. It returns "" when nothing is left (send no header).
func AcceptEncoding(v string) string {
	var keep []string
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		coding, _, _ := strings.Cut(part, ";")
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip", "br", "identity":
			keep = append(keep, part)
		}
	}
	return strings.Join(keep, ", ")
}

// lazyGzip opens the gzip stream on first read, so that nothing blocks
// or fails before the body is read.
type lazyGzip struct {
	src io.Reader
	zr  *gzip.Reader
	err error
}

var gzipReaders sync.Pool

func (g *lazyGzip) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.zr == nil {
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(g.src)
		} else {
			err = zr.Reset(g.src)
		}
		if err != nil {
			g.err = err
			return 0, err
		}
		g.zr = zr
	}
	n, err := g.zr.Read(p)
	if err != nil {
		g.err = err
		if err == io.EOF {
			gzipReaders.Put(g.zr)
			g.zr = nil
		}
	}
	return n, err
}

type readCloser struct {
	io.Reader
	io.Closer
}
