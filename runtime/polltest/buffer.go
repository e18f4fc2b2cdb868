package polltest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that another goroutine or a process writes (its
// output, a logger's sink) while the test reads what it holds so far, as a
// poll does: safe for concurrent writes and reads. Its zero value is empty
// and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
