package environments

// A generation's life: prepare it in the background, run its setup, settle it, watch it, tear it down.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"lathe/commands/core"
	"lathe/commands/lattice"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/sandbox"
)

// backgroundPrepare is a preparation that holds a Session's lifecycle lock
// in the background (after create or reopen). An operator's change of plan
// supersedes it: the preparation stops without settling, removes what it
// made, and hands its lock, and so its open bracket, to the change, which
// settles it. So the first environment review of a new Session never meets
// "another change is in progress".
type backgroundPrepare struct {
	cancel context.CancelFunc
	// handedOver is closed once a superseded preparation has stopped and
	// cleaned up; its lock then belongs to the superseder.
	handedOver chan struct{}
	// done is closed once the preparation has ended: settled and released,
	// or handed over.
	done chan struct{}

	mu         sync.Mutex
	superseded bool // an operator took the bracket over
	settling   bool // too late: the preparation is appending its outcome
}

// StartPrepare prepares a freshly planned generation in the background: the
// caller already appended the EnvironmentChanging that owns the boundary and
// holds the lock, which this releases when it settles, or hands over to an
// operator's change that supersedes it (supersede).
//
// stale, when not nil, is a sandbox of an interrupted bracket that the
// preparation removes first (bounded), already supersedable.
func (s *Sandboxes) StartPrepare(id string, release func(), stale sandbox.Sandbox) {
	ctx, cancel := context.WithCancel(context.Background())
	bp := &backgroundPrepare{cancel: cancel, handedOver: make(chan struct{}), done: make(chan struct{})}
	s.envs.mu.Lock()
	s.envs.background[id] = bp
	s.envs.mu.Unlock()
	go func() {
		defer cancel()
		// The preparation stays findable until it has released its lock or
		// handed it over, so an operator's change never meets its bracket
		// open with nothing to supersede or wait for.
		defer func() {
			s.envs.mu.Lock()
			if s.envs.background[id] == bp {
				delete(s.envs.background, id)
			}
			s.envs.mu.Unlock()
			close(bp.done)
		}()
		if stale != nil {
			RemoveBounded(stale, s.Log)
		}
		ss, ok := s.Store.Session(id)
		var outcome events.Payload
		if ok {
			outcome = s.runGeneration(ctx, ss)
		}
		bp.mu.Lock()
		superseded := bp.superseded
		bp.settling = !superseded
		bp.mu.Unlock()
		if superseded {
			// Remove what this made; the superseder owns the lock now and
			// closes the bracket.
			if err := s.Teardown(context.Background(), id); err != nil {
				s.Log.Warn("remove a superseded preparation", "session", id, "err", err)
			}
			if ok {
				removeGeneration(s, id, ss.Environment.Generation)
			}
			close(bp.handedOver)
			return
		}
		defer release()
		if !ok {
			return
		}
		if _, err := s.settle(ctx, id, outcome, events.EnvironmentSettled{Generation: ss.Environment.Generation}); err != nil {
			s.Log.Warn("prepare environment", "session", id, "err", err)
		}
	}()
}

// removeGeneration removes one generation's sandbox from the provider, for
// a preparation cut short before it handed its sandbox over.
func removeGeneration(s *Sandboxes, id string, generation uint64) {
	if s.Connect == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), RemoveTimeout)
	defer cancel()
	if drv, err := s.Connect(ctx); err == nil {
		if err := drv.Remove(ctx, id, generation); err != nil {
			s.Log.Warn("remove a superseded sandbox", "session", id, "generation", generation, "err", err)
		}
	}
}

// runGeneration prepares one generation and returns the event that records
// its outcome.
func (s *Sandboxes) runGeneration(ctx context.Context, ss projections.Session) events.Payload {
	env := ss.Environment
	fail := func(err error, code *int, tail string) events.Payload {
		ev := events.Evidence{Error: err.Error(), ExitCode: code, OutputTail: tail}
		if errors.Is(err, sandbox.ErrUnavailable) {
			ev.Fix = fixUnavailable
		}
		return events.EnvironmentFailed{Generation: env.Generation, Evidence: s.Remote().evidence(ev, err)}
	}
	if s.Connect == nil {
		return fail(fmt.Errorf("%w: no sandbox provider is configured", sandbox.ErrUnavailable), nil, "")
	}
	pctx, cancel := context.WithTimeout(ctx, PrepareTimeout)
	defer cancel()
	drv, err := s.Connect(pctx)
	if err != nil {
		return fail(err, nil, "")
	}
	spec := sandbox.Spec{
		SessionID: ss.ID, Generation: env.Generation, Image: env.Image, WorkingDir: ss.WorkingDir,
		Mounts:  sessionMounts(s, ss), // commands/worktrees/worktree.go
		Masked:  s.ConfigMasked(ss),   // commands/core/paths.go
		Network: s.SandboxOpts.Network, Limits: s.SandboxOpts.Limits,
	}
	if s.Opts.Outside != nil {
		// The Session's own Agents: its Agent, or its lattice team.
		agents := []string{ss.Mode.AgentID}
		if ss.Mode.Kind == events.ModeLattice {
			team := lattice.Team(s.Opts)
			agents = append(lattice.WorkersOf(team, ss), team.Coordinator)
		}
		tools, err := s.Opts.Outside.Tools(pctx, agents...)
		if err != nil {
			return fail(err, nil, "")
		}
		spec.Tools = tools
	}
	if err := s.Remote().begin(pctx, ss, &spec); err != nil { // commands/environments/remote.go
		return fail(err, nil, "")
	}
	prep := s.Remote().prepareSeed(pctx, ss) // commands/environments/remoteseed.go
	defer prep.cleanup()
	sb, err := drv.Prepare(pctx, spec)
	if berr := s.Remote().bound(pctx, ss, spec, sb, err); err == nil && berr != nil {
		s.Remote().discard(ctx, ss.ID, sb)
		return fail(berr, nil, "")
	}
	if err != nil {
		return fail(err, nil, "")
	}
	if err := s.Remote().seed(pctx, ss, sb, prep); err != nil {
		s.Remote().discard(ctx, ss.ID, sb)
		return fail(fmt.Errorf("seed the clone: %w", err), nil, "")
	}
	ready := events.EnvironmentReady{Generation: env.Generation, Sandbox: sandboxName(sb)}
	switch {
	case env.SetupCommand == "":
	case env.SetupApproved:
		code, tail, err := RunSetup(ctx, sb, env.SetupCommand)
		if err != nil || code != 0 {
			s.Remote().discard(ctx, ss.ID, sb)
			if err == nil {
				err = fmt.Errorf("setup command exited with code %d", code)
			}
			return fail(err, &code, tail)
		}
		ready.SetupRan, ready.SetupOutput = true, tail
	case env.SetupReviewed:
		ready.SetupSkipped = "vetoed by review"
	}
	s.setLive(ss.ID, sb)
	go s.watch(ss.ID, sb)
	return ready
}

func sandboxName(sb sandbox.Sandbox) string {
	return fmt.Sprintf("%s/g%d", sb.SessionID(), sb.Generation())
}

// RunSetup runs the approved setup command in the sandbox and keeps the
// tail of its combined output as evidence.
func RunSetup(ctx context.Context, sb sandbox.Sandbox, command string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	out := core.NewTail(TailBytes)
	p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"bash", "-lc", command}, Stdout: out, Stderr: out})
	if err != nil {
		return -1, "", fmt.Errorf("start setup command: %w", err)
	}
	code, err := p.Wait(ctx)
	return code, out.String(), err
}

// settle appends a lifecycle outcome together with the settlement that
// releases the boundary, and returns the Session as it then stands.
func (s *Sandboxes) settle(ctx context.Context, id string, outcome events.Payload, settled events.EnvironmentSettled) (projections.Session, error) {
	evs := []journal.Event{}
	if outcome != nil {
		evs = append(evs, events.New(id, outcome))
	}
	evs = append(evs, events.New(id, settled))
	if err := s.Append(context.WithoutCancel(ctx), evs); err != nil {
		return projections.Session{}, err
	}
	ss, _ := s.Store.Session(id)
	if f, ok := outcome.(events.EnvironmentFailed); ok {
		return ss, fmt.Errorf("%w: generation %d: %s", core.ErrEnvironmentFailed, f.Generation, f.Evidence.Error)
	}
	return ss, nil
}

// watch turns a sandbox that ends behind the daemon's back into a failed
// environment. A sandbox the daemon tears down is no longer live first.
func (s *Sandboxes) watch(id string, sb sandbox.Sandbox) {
	<-sb.Done()
	ctx := context.Background()
	release, err := s.Own(ctx, id, true)
	if err != nil {
		return
	}
	defer release()
	if s.LiveSandbox(id) != sb {
		return // torn down on purpose, or replaced
	}
	s.setLive(id, nil)
	msg := "the sandbox stopped unexpectedly"
	if err := sb.Err(); err != nil {
		msg += ": " + err.Error()
	}
	s.Remote().discard(ctx, id, sb)
	err = s.Append(ctx, []journal.Event{events.New(id, events.EnvironmentFailed{Generation: sb.Generation(),
		Evidence: s.Remote().evidence(events.Evidence{Error: msg, Fix: "rebuild the environment"}, sb.Err())})})
	if err != nil {
		s.Log.Error("record lost sandbox", "session", id, "err", err)
	}
}

// Teardown removes the live sandbox of a Session, if any.
func (s *Sandboxes) Teardown(ctx context.Context, id string) error {
	sb := s.LiveSandbox(id)
	if sb == nil {
		return nil
	}
	s.setLive(id, nil)
	if s.Outside != nil {
		s.Outside.End(id) // its outside agent's process, if one runs
	}
	if s.Remote().on() {
		return s.Remote().teardown(ctx, id, sb) // commands/environments/remote.go
	}
	return sb.Teardown(context.WithoutCancel(ctx))
}
