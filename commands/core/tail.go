package core

import (
	"sync"
	"unicode/utf8"
)

// Tail is an io.Writer that keeps the last n bytes written to it, for the
// output tails that events keep as evidence. It is safe for concurrent use,
// so a process's stdout and stderr can share one.
type Tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
	cut bool
}

// NewTail returns a Tail keeping the last n bytes.
func NewTail(n int) *Tail { return &Tail{n: n} }

// Write keeps the newest bytes of p. It never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.n; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}

// String returns the kept bytes as valid UTF-8, starting at a character
// boundary, marked when older output was dropped.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	s := string(b)
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // replaces invalid bytes
	}
	if t.cut {
		return "…[earlier output truncated]\n" + s
	}
	return s
}
