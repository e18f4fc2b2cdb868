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

// SetMaxWatchDirsForTest bounds the directories a Watcher's helper
// watches, and returns the bound to put back.
func SetMaxWatchDirsForTest(n int) int {
	old := maxWatchDirs
	maxWatchDirs = n
	return old
}
