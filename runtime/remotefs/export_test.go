package remotefs

import (
	"context"
	"syscall"
)

// KillForTest kills c's helper behind its back.
func KillForTest(c *Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		_ = c.proc.Signal(context.Background(), syscall.SIGKILL)
	}
}
