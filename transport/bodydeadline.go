package transport

import (
	"io"
	"mime"
	"net/http"
	"sync"
	"time"
)

// Read deadlines of request bodies, per route class. Slow headers are cut
// off by the server's ReadHeaderTimeout; a body that trickles is cut off
// here: a JSON body (at most 1 MiB) must arrive within BodyTimeout, an
// upload (multipart/form-data, up to 25 MiB) within UploadBodyTimeout.
const (
	DefaultBodyTimeout       = 30 * time.Second
	DefaultUploadBodyTimeout = 10 * time.Minute
)

// BodyTimeouts are the two classes' deadlines (SecurityOptions); zero
// means the default.
type BodyTimeouts struct {
	JSON, Upload time.Duration
}

// of returns the deadline of r's body.
func (t BodyTimeouts) of(r *http.Request) time.Duration {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "multipart/form-data" {
		if t.Upload > 0 {
			return t.Upload
		}
		return DefaultUploadBodyTimeout
	}
	if t.JSON > 0 {
		return t.JSON
	}
	return DefaultBodyTimeout
}

// deadlineBody sets the connection's read deadline at the body's first
// read and lifts it once the body is read to its end: a deadline left in
// place while the handler still runs would end the request's context when
// it passes. A body not read to its end keeps the deadline, so that the
// server's discard of the rest is cut off too.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	start   sync.Once
}

func withBodyDeadline(w http.ResponseWriter, body io.ReadCloser, timeout time.Duration) io.ReadCloser {
	return &deadlineBody{ReadCloser: body, rc: http.NewResponseController(w), timeout: timeout}
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	b.start.Do(func() { _ = b.rc.SetReadDeadline(time.Now().Add(b.timeout)) })
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
