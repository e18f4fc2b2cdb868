package helper

import (
	"errors"
	"io"
	"sync"
)

// batchWriter writes to w from one goroutine of its own: what callers
// write while it writes gathers, and goes out in its next single write.
// Under load the frames of many streams share one write (for the remote
// driver, one wakeup of dockerd and of the shim instead of one per frame;
// yamux writes a frame's header and body apart); alone, a frame goes out
// at once. A caller waits only when batchLimit bytes are waiting. The
// first error of w is every later Write's.
type batchWriter struct {
	w     io.Writer
	mu    sync.Mutex
	cond  sync.Cond
	buf   []byte
	spare []byte
	err   error
}

const batchLimit = 1 << 20

var errBatchClosed = errors.New("helper stream closed")

func newBatchWriter(w io.Writer) *batchWriter {
	b := &batchWriter{w: w}
	b.cond.L = &b.mu
	go b.run()
	return b
}

func (b *batchWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.err == nil && len(b.buf) >= batchLimit {
		b.cond.Wait()
	}
	if b.err != nil {
		return 0, b.err
	}
	b.buf = append(b.buf, p...)
	b.cond.Broadcast()
	return len(p), nil
}

// Close ends the writer: what waits is dropped.
func (b *batchWriter) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = errBatchClosed
	}
	b.cond.Broadcast()
}

func (b *batchWriter) run() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for b.err == nil && len(b.buf) == 0 {
			b.cond.Wait()
		}
		if b.err != nil {
			return
		}
		out := b.buf
		b.buf = b.spare[:0]
		b.mu.Unlock()
		_, err := b.w.Write(out)
		b.mu.Lock()
		b.spare = out[:0]
		if err != nil && b.err == nil {
			b.err = err
		}
		b.cond.Broadcast()
	}
}
