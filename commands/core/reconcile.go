package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Start-up reconciliation brings the runtime and the journal back into
// agreement after a stop, in three passes. Two of them cost what the stop
// interrupted, not what the history holds, and run before the daemon
// serves: ReconcileTurns (end the turns no runner owns) and the expiry of
// the approvals of interrupted runs. The third, Reconstruct (reattach or
// recreate the sandboxes of Ready Sessions, redo interrupted lifecycles,
// remove orphans), followed by ReconcileTasks (detach or end the tasks no
// process of this daemon backs, which depends on what was reattached),
// costs a round of the container runtime and a look at every Session, so
// it runs after the daemon listens (StartReconstruct), and what depends on
// it waits for it:
//
//   - every lifecycle owner: own() (and so ownSession, ownOpenSession, the
//     creates that prepare at once, turn accepts, task starts, Checks and
//     Git changes, which all take the Session's lifecycle lock), so that no
//     lifecycle interleaves with reconstruction's decisions about the same
//     Session or with its orphan sweep;
//   - every use of a live sandbox: Sandbox() (files, tasks, Git, Preview,
//     turns), which would otherwise answer 409 for a Ready Session whose
//     sandbox is not reattached yet.
//
// Reads of the projections do not wait: until reconstruction appends its
// events they show the journal as the stop left it (an interrupted
// lifecycle's owner, a Ready Session whose sandbox is being checked), which
// is a consistent state at that seq; its own events then reach the read
// models and /ws like any command's. Reconstruction runs once, on one
// goroutine; a crash during it leaves a journal from which the next start
// derives the same remaining work, as it always has.

// ReconcileWait bounds how long Sandbox, which has no context, waits for
// start-up reconstruction before answering ErrUnavailable.
const ReconcileWait = 30 * time.Second

// reconcileGate is closed once start-up reconstruction has finished. The
// zero value is open: a Service that never reconciles (tests, tools) does
// not wait.
type reconcileGate struct {
	mu   sync.Mutex
	done chan struct{} // nil: open
	err  error         // set before done closes
}

func (g *reconcileGate) Arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil {
		g.done = make(chan struct{})
	}
}

func (g *reconcileGate) Open(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.err = err
	close(g.done)
}

// Wait returns once reconstruction has finished, its error if it failed, or
// ctx's error.
func (g *reconcileGate) Wait(ctx context.Context) error {
	g.mu.Lock()
	done := g.done
	g.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if g.err != nil {
		return fmt.Errorf("%w: start-up reconstruction of the environments failed: %v", ErrUnavailable, g.err)
	}
	return nil
}

// WaitFor is wait bounded by d, for callers without a context.
func (g *reconcileGate) WaitFor(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := g.Wait(ctx); errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: start-up reconstruction of the environments is still running", ErrUnavailable)
	} else if err != nil {
		return err
	}
	return nil
}
