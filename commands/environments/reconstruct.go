package environments

// Reconstruct: at start, each Session's sandbox is reattached, recreated or recorded unreachable, once.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent/tools"
	"lathe/runtime/sandbox"
)

// Reconstruct runs at start-up, before the daemon serves: it reattaches the
// sandboxes of Ready Sessions, recreates those whose sandbox is gone or whose
// lifecycle a crash interrupted, and removes every sandbox no open Session
// owns. A runtime that cannot be reached leaves Ready Sessions failed with
// evidence rather than pretending.
func (s *Environments) Reconstruct(ctx context.Context) error {
	var attached []sandbox.Sandbox
	var drv sandbox.Driver
	var connErr error
	if s.Connect != nil {
		if drv, connErr = s.Connect(ctx); connErr == nil {
			attached, connErr = drv.Attach(ctx)
		}
	}
	if err := ctx.Err(); err != nil {
		// The daemon is stopping (reconstruction runs in the background):
		// a cancelled connect is no verdict on the runtime. The next start
		// finds the same work.
		return err
	}
	var unreachable []journal.Event
	found := map[string]sandbox.Sandbox{}
	for _, sb := range attached {
		found[sandboxName(sb)] = sb
	}
	// Only the open Sessions that were Ready or mid-bracket: a large
	// history of closed or failed ones costs a scan, not a copy.
	candidates := s.Store.SessionsWhere(func(ss *projections.Session) bool {
		return !ss.Closed() && (interruptedBracket(ss.Environment) || ss.Environment.State == events.EnvReady)
	})
	for _, ss := range candidates {
		if err := ctx.Err(); err != nil {
			return err
		}
		env := ss.Environment
		interrupted := interruptedBracket(env)
		name := fmt.Sprintf("%s/g%d", ss.ID, env.Generation)
		sb := found[name]
		if sb != nil && !interrupted && !IsDone(sb) {
			delete(found, name)
			s.setLive(ss.ID, sb)
			go s.watch(ss.ID, sb)
			go s.sweepLeftovers(ss.ID, sb)
			continue
		}
		delete(found, name)
		if connErr != nil {
			// Nothing to reattach or recreate: the whole bracket is one
			// decision, recorded for many Sessions per commit.
			ev := events.Evidence{Error: connErr.Error()}
			if errors.Is(connErr, sandbox.ErrUnavailable) { // else the error says its fix (an unusable sandbox helper)
				ev.Fix = fixUnavailable
			}
			unreachable = append(unreachable,
				events.New(ss.ID, events.EnvironmentChanging{Generation: env.Generation, Owner: events.OwnerReconstruct}),
				events.New(ss.ID, events.EnvironmentFailed{Generation: env.Generation,
					Evidence: s.Remote().evidence(ev, connErr)}),
				events.New(ss.ID, events.EnvironmentSettled{Generation: env.Generation}))
			if len(unreachable) >= reconstructBatch {
				if err := s.Append(ctx, unreachable); err != nil {
					return err
				}
				unreachable = unreachable[:0]
			}
			continue
		}
		release, err := s.LockSession(ctx, ss.ID, true)
		if err != nil {
			return err
		}
		if err := s.Append(ctx, []journal.Event{events.New(ss.ID, events.EnvironmentChanging{Generation: env.Generation, Owner: events.OwnerReconstruct})}); err != nil {
			release()
			return err
		}
		// The stale sandbox (an interrupted setup may still run in it) is
		// removed by the background owner, bounded, so that a wedged runtime
		// never holds up the daemon's start.
		s.StartPrepare(ss.ID, release, s.Remote().rescuing(sb, ss)) // commands/environments/remotesweep.go
	}
	if len(unreachable) > 0 {
		if err := s.Append(ctx, unreachable); err != nil {
			return err
		}
	}
	go func() {
		for name, sb := range found {
			if s.Remote().retainedBy(sb) { // commands/environments/remotesweep.go
				continue
			}
			s.Log.Info("removing orphaned sandbox", "sandbox", name)
			RemoveBounded(sb, s.Log)
		}
	}()
	if connErr != nil && s.Remote().on() && s.Connect != nil {
		go s.Remote().sweepWhenBack(ctx)
	}
	return nil
}

// sweepLeftovers ends, in a sandbox the start found running, the tool
// runs (shell commands, hooks, Checks) that the stopped daemon left under
// way (tools.SweepLeftovers): their timeouts were its to enforce. A runtime
// cleanup, as the removal of orphaned sandboxes is: logged, not journaled;
// the turns they belonged to end at start as interrupted.
func (s *Environments) sweepLeftovers(id string, sb sandbox.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), RemoveTimeout)
	defer cancel()
	n, err := tools.SweepLeftovers(ctx, sb)
	switch {
	case err != nil:
		s.Log.Warn("end the tool runs a stopped daemon left", "session", id, "err", err)
	case n > 0:
		s.Log.Info("ended the tool runs a stopped daemon left", "session", id, "processes", n)
	}
}

// interruptedBracket tells whether a restart found env's lifecycle bracket
// open: an owner held its boundary, or a preparation was under way.
func interruptedBracket(env projections.Environment) bool {
	return env.Owner != "" || env.State == events.EnvPreparing
}

// RemoveBounded tears a sandbox down within removeTimeout.
func RemoveBounded(sb sandbox.Sandbox, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), RemoveTimeout)
	defer cancel()
	if err := sb.Teardown(ctx); err != nil {
		log.Warn("remove sandbox", "sandbox", sandboxName(sb), "err", err)
	}
}

func IsDone(sb sandbox.Sandbox) bool {
	select {
	case <-sb.Done():
		return true
	default:
		return false
	}
}
