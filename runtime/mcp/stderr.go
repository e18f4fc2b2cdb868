package mcp

import (
	"bytes"
	"log/slog"
	"sync"
)

// stderrLog logs a stdio server's stderr line by line, each line masked
// whole (a secret is never cut before it is masked), at most limit bytes
// per connection. A line that does not fit what is left is dropped whole,
// with everything after it, and one line says so.
type stderrLog struct {
	log    *slog.Logger
	server string
	mask   func(string) string

	mu        sync.Mutex
	left      int
	partial   []byte
	truncated bool
}

func newStderrLog(log *slog.Logger, server string, limit int, mask func(string) string) *stderrLog {
	return &stderrLog{log: log, server: server, mask: mask, left: limit}
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 && !w.truncated {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if len(w.partial)+len(chunk) > w.left {
			w.truncated, w.partial = true, nil
			w.log.Warn("mcp server stderr: the rest of this connection's output is dropped", "server", w.server)
			break
		}
		w.partial = append(w.partial, chunk...)
		if i < 0 {
			break
		}
		w.left -= len(w.partial) + 1
		w.log.Info("mcp server stderr", "server", w.server, "line", w.mask(string(w.partial)))
		w.partial = w.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}
