package environments

import (
	"context"
	"time"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/sandbox"
)

// Reconciliation under the remote provider. Start-up reconstruction
// (Reconstruct) lists this daemon's containers by its lathe.daemon label
// (Driver.Attach) and removes every one no open Session owns, the container
// of a provisioning attempt a kill -9 interrupted included (the attempt's
// bracket is open in the journal, with its token, so the next preparation
// removes it first). When the engine could not be reached at start, the
// same sweep runs once it answers again. A runtime a Session retains is
// never swept: its work may still be in it, and the operator deletes it.

// EngineRetry is how often a daemon that could not reach its engine at
// start asks again (a variable for tests).
var EngineRetry = 10 * time.Second

// retainedBy tells whether sb is a runtime its Session retains.
func (r remote) retainedBy(sb sandbox.Sandbox) bool {
	if !r.on() {
		return false
	}
	ss, ok := r.c.Store.Session(sb.SessionID())
	if !ok {
		return false
	}
	id := ""
	if ri, ok := sb.(RuntimeIDer); ok {
		id = ri.RuntimeID()
	}
	for _, rr := range ss.Environment.RetainedRuntimes {
		if rr.Generation == sb.Generation() || (id != "" && rr.RuntimeID == id) {
			return true
		}
	}
	return false
}

// Owned tells whether an open Session owns sb now: its live sandbox, the
// one a lifecycle is preparing, or one it retains.
func (r remote) Owned(sb sandbox.Sandbox) bool {
	ss, ok := r.c.Store.Session(sb.SessionID())
	if !ok {
		return false
	}
	if live := r.c.LiveSandbox(ss.ID); live != nil && live.Generation() == sb.Generation() {
		return true
	}
	if ss.Environment.Owner != "" && ss.Environment.Generation == sb.Generation() {
		return true
	}
	return r.retainedBy(sb)
}

// sweepWhenBack waits until the engine answers again and then removes
// every container of this daemon that no Session owns.
func (r remote) sweepWhenBack(ctx context.Context) {
	t := time.NewTicker(EngineRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, RemoveTimeout)
		drv, err := r.c.Connect(cctx)
		var found []sandbox.Sandbox
		if err == nil {
			found, err = drv.Attach(cctx)
		}
		cancel()
		if err != nil {
			continue
		}
		for _, sb := range found {
			if !r.Owned(sb) {
				r.c.Log.Info("removing orphaned sandbox", "sandbox", sandboxName(sb))
				RemoveBounded(sb, r.c.Log)
			}
		}
		return
	}
}

// rescuing wraps the stale sandbox of a lifecycle a stop interrupted
// (reconstruction removes it): when that lifecycle was one that brings the
// clone's work home first (close, delete, rebuild, change), its removal
// does so, as the lifecycle would have.
func (r remote) rescuing(sb sandbox.Sandbox, ss projections.Session) sandbox.Sandbox {
	if !r.on() || sb == nil {
		return sb
	}
	switch ss.Environment.Owner {
	case events.OwnerClose, events.OwnerDelete, events.OwnerRebuild, events.OwnerChange:
		return rescued{Sandbox: sb, r: r, ss: ss}
	}
	return sb
}

type rescued struct {
	sandbox.Sandbox
	r  remote
	ss projections.Session
}

// Teardown brings the clone's work home (bounded by syncTimeout), then
// removes the sandbox.
func (w rescued) Teardown(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncTimeout)
	_, err := w.r.bringHome(hctx, w.ss, w.Sandbox, events.OwnerReconstruct)
	cancel()
	if err != nil {
		w.r.c.Log.Warn("bring an interrupted lifecycle's work home", "session", w.ss.ID, "err", err)
	}
	return w.Sandbox.Teardown(ctx)
}
