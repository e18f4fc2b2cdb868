package mcp

import (
	"bytes"
	"log/slog"
	"sync"
)

// stderrLog logs a stdio server's stderr line by line, at most limit bytes
// per connection, then one line saying the rest was dropped. Secrets are
// masked.
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
	for len(p) > 0 {
		if w.left <= 0 {
			if !w.truncated {
				w.truncated = true
				w.log.Warn("mcp server stderr: the rest of this connection's output is dropped", "server", w.server)
			}
			return n, nil
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			take := min(len(p), w.left)
			w.partial = append(w.partial, p[:take]...)
			w.left -= take
			return n, nil
		}
		take := min(i, w.left)
		line := append(w.partial, p[:take]...)
		w.partial = nil
		w.left -= take + 1
		w.log.Info("mcp server stderr", "server", w.server, "line", w.mask(string(line)))
		p = p[i+1:]
	}
	return n, nil
}
