package tools

import (
	"fmt"
	"strings"
	"sync"
)

// capped is an io.Writer that keeps at most max bytes: the first max/2 and
// the last max/2, counting what falls between. It is safe for concurrent
// use, as stdout and stderr may write to it at once.
type capped struct {
	mu    sync.Mutex
	max   int
	head  []byte
	tail  []byte // the bytes after head, trimmed to max/2 once total > max
	total int64
}

func newCapped(max int) *capped { return &capped{max: max} }

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	if room := c.max/2 - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	c.tail = append(c.tail, p...)
	// Trim lazily, at twice the kept size, so appends stay amortised O(1).
	if keep := c.max - c.max/2; len(c.tail) > 2*keep {
		c.tail = append(c.tail[:0:0], c.tail[len(c.tail)-keep:]...)
	}
	return n, nil
}

// Truncated returns how many bytes were dropped.
func (c *capped) Truncated() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped()
}

func (c *capped) dropped() int64 {
	if c.total <= int64(c.max) {
		return 0
	}
	return c.total - int64(len(c.head)) - int64(min(len(c.tail), c.max-c.max/2))
}

// String returns everything written when it fit, else the head and the tail
// around a "[… N bytes truncated …]" notice.
func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total <= int64(c.max) {
		return strings.ToValidUTF8(string(c.head)+string(c.tail), "\uFFFD")
	}
	tail := c.tail[len(c.tail)-min(len(c.tail), c.max-c.max/2):]
	return strings.ToValidUTF8(string(c.head), "\uFFFD") +
		fmt.Sprintf("\n[… %d bytes truncated …]\n", c.dropped()) +
		strings.ToValidUTF8(string(tail), "\uFFFD")
}
