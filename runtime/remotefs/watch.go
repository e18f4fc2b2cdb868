package remotefs

import (
	"context"
	"time"

	"lathe/runtime/sandbox"
)

// Watcher polls a tree's fingerprint through the helper (names, sizes,
// modes and times; inside .git only its top entries, lock files aside,
// as runtime/watch does on the host) every interval, or ten times the
// last walk's duration when that is longer, and calls notify debounce
// after a change is seen unless another is seen meanwhile.
type Watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// PollInterval is how often a Watcher fingerprints the tree.
const PollInterval = time.Second

// Watch starts polling the tree at root inside sb every interval, through
// a helper of its own (so a fingerprint never delays a file request).
func Watch(sb sandbox.Sandbox, root string, interval, debounce time.Duration, notify func()) *Watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{cancel: cancel, done: make(chan struct{})}
	c := New(sb, root)
	go func() {
		defer c.Close()
		w.loop(ctx, c, interval, debounce, notify)
	}()
	return w
}

func (w *Watcher) loop(ctx context.Context, c *Client, interval, debounce time.Duration, notify func()) {
	defer close(w.done)
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

// Close stops the polling and waits for it.
func (w *Watcher) Close() {
	w.cancel()
	<-w.done
}
