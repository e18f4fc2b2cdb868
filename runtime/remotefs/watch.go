package remotefs

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"lathe/runtime/sandbox"
)

// Watcher follows a tree in a sandbox through a helper of its own (so a
// wait never delays a file request) and calls notify debounce after a
// change is seen unless another is seen meanwhile. It is event-driven:
// the helper watches the tree with inotify (every directory, .git itself
// but not its insides, git's lock files aside, as runtime/watch does on
// the host) and each call waits in the sandbox until something changed.
// Where the helper cannot (no inotify, more than maxWatchDirs
// directories, the kernel's watch limit), it polls instead: a fingerprint
// of names, sizes, modes and times every interval, or ten times the last
// walk's duration when that is longer, at most 200,000 entries a walk.
type Watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// PollInterval is how often a polling Watcher fingerprints the tree.
const PollInterval = time.Second

// waitFor bounds one wait in the helper, well inside callTimeout.
const waitFor = 5 * time.Second

// maxWatchRestarts: a helper that dies this many times in a row while
// waiting leaves the Watcher polling.
const maxWatchRestarts = 3

// maxWatchDirs bounds the directories the helper watches.
var maxWatchDirs = 10_000

// Watch starts following the tree at root inside sb.
func Watch(sb sandbox.Sandbox, root string, interval, debounce time.Duration, notify func()) *Watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{cancel: cancel, done: make(chan struct{})}
	c := New(sb, root)
	go func() {
		defer close(w.done)
		defer c.Close()
		if !w.events(ctx, c, debounce, notify) {
			w.poll(ctx, c, interval, debounce, notify)
		}
	}()
	return w
}

// events follows the tree through the helper's inotify until ctx ends
// (true), or returns false when the helper cannot watch it, for the caller
// to poll. A helper that died is started again, and since a change may
// have slipped by meanwhile, a notice follows.
func (w *Watcher) events(ctx context.Context, c *Client, debounce time.Duration, notify func()) bool {
	pending, restarts := false, 0
	for {
		wait := waitFor
		if pending {
			wait = debounce
		}
		rep, _, err := c.Call(ctx, Request{Op: "wait", TimeoutMS: max(wait.Milliseconds(), 1), Max: maxWatchDirs}, nil)
		var refused *fs.PathError
		switch {
		case ctx.Err() != nil:
			return true
		case errors.As(err, &refused):
			return false
		case err != nil:
			if restarts++; restarts > maxWatchRestarts {
				return false
			}
			pending = true
			continue
		case rep.Changed:
			pending = true
		case pending:
			pending = false
			notify()
		}
		restarts = 0
	}
}

// poll fingerprints the tree every interval (or ten times the last walk)
// and notifies debounce after the fingerprint last moved.
func (w *Watcher) poll(ctx context.Context, c *Client, interval, debounce time.Duration, notify func()) {
	last := ""
	var changed time.Time // when the last unannounced change was seen
	tick := time.NewTicker(min(interval, debounce))
	defer tick.Stop()
	next := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if !changed.IsZero() && now.Sub(changed) >= debounce {
				changed = time.Time{}
				notify()
			}
			if now.Before(next) {
				continue
			}
			rep, _, err := c.Call(ctx, Request{Op: "fingerprint", Max: 200_000}, nil)
			// A large tree is polled less often: its walk costs at most a
			// tenth of the sandbox's time.
			next = now.Add(max(interval, 10*time.Since(now)))
			if err != nil {
				continue // the helper restarts on the next call
			}
			if last != "" && rep.Fingerprint != last {
				changed = time.Now()
			}
			last = rep.Fingerprint
		}
	}
}

// Close stops the watching and waits for it.
func (w *Watcher) Close() {
	w.cancel()
	<-w.done
}
