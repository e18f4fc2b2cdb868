package commands

// A generation's life: prepare it in the background, run its setup, settle it, watch it, tear it down.

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

// startPrepare prepares a freshly planned generation in the background: the
// caller already appended the EnvironmentChanging that owns the boundary and
// holds the lock, which this releases when it settles, or hands over to an
// operator's change that supersedes it (supersede).
//
// stale, when not nil, is a sandbox of an interrupted bracket that the
// preparation removes first (bounded), already supersedable.
func (s *sandboxes) startPrepare(id string, release func(), stale sandbox.Sandbox) {
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
			removeBounded(stale, s.log)
		}
		ss, ok := s.store.Session(id)
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
			if err := s.teardown(context.Background(), id); err != nil {
				s.log.Warn("remove a superseded preparation", "session", id, "err", err)
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
			s.log.Warn("prepare environment", "session", id, "err", err)
		}
	}()
}

// removeGeneration removes one generation's sandbox from the provider, for
// a preparation cut short before it handed its sandbox over.
func removeGeneration(s *sandboxes, id string, generation uint64) {
	if s.connect == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	if drv, err := s.connect(ctx); err == nil {
		if err := drv.Remove(ctx, id, generation); err != nil {
			s.log.Warn("remove a superseded sandbox", "session", id, "generation", generation, "err", err)
		}
	}
}

// runGeneration prepares one generation and returns the event that records
// its outcome.
func (s *sandboxes) runGeneration(ctx context.Context, ss projections.Session) events.Payload {
	env := ss.Environment
	fail := func(err error, code *int, tail string) events.Payload {
		ev := events.Evidence{Error: err.Error(), ExitCode: code, OutputTail: tail}
		if errors.Is(err, sandbox.ErrUnavailable) {
			ev.Fix = fixUnavailable
		}
		return events.EnvironmentFailed{Generation: env.Generation, Evidence: s.remote().evidence(ev, err)}
	}
	if s.connect == nil {
		return fail(fmt.Errorf("%w: no sandbox provider is configured", sandbox.ErrUnavailable), nil, "")
	}
	pctx, cancel := context.WithTimeout(ctx, prepareTimeout)
	defer cancel()
	drv, err := s.connect(pctx)
	if err != nil {
		return fail(err, nil, "")
	}
	spec := sandbox.Spec{
		SessionID: ss.ID, Generation: env.Generation, Image: env.Image, WorkingDir: ss.WorkingDir,
		Mounts:  sessionMounts(s, ss), // commands/worktree.go
		Masked:  s.configMasked(ss),   // commands/paths.go
		Network: s.sandboxOpts.Network, Limits: s.sandboxOpts.Limits,
	}
	if err := s.remote().begin(pctx, ss, &spec); err != nil { // commands/remote.go
		return fail(err, nil, "")
	}
	prep := s.remote().prepareSeed(pctx, ss) // commands/remoteseed.go
	defer prep.cleanup()
	sb, err := drv.Prepare(pctx, spec)
	if berr := s.remote().bound(pctx, ss, spec, sb, err); err == nil && berr != nil {
		s.remote().discard(ctx, ss.ID, sb)
		return fail(berr, nil, "")
	}
	if err != nil {
		return fail(err, nil, "")
	}
	if err := s.remote().seed(pctx, ss, sb, prep); err != nil {
		s.remote().discard(ctx, ss.ID, sb)
		return fail(fmt.Errorf("seed the clone: %w", err), nil, "")
	}
	ready := events.EnvironmentReady{Generation: env.Generation, Sandbox: sandboxName(sb)}
	switch {
	case env.SetupCommand == "":
	case env.SetupApproved:
		code, tail, err := runSetup(ctx, sb, env.SetupCommand)
		if err != nil || code != 0 {
			s.remote().discard(ctx, ss.ID, sb)
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

// runSetup runs the approved setup command in the sandbox and keeps the
// tail of its combined output as evidence.
func runSetup(ctx context.Context, sb sandbox.Sandbox, command string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	out := NewTail(tailBytes)
	p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"bash", "-lc", command}, Stdout: out, Stderr: out})
	if err != nil {
		return -1, "", fmt.Errorf("start setup command: %w", err)
	}
	code, err := p.Wait(ctx)
	return code, out.String(), err
}

// settle appends a lifecycle outcome together with the settlement that
// releases the boundary, and returns the Session as it then stands.
func (s *sandboxes) settle(ctx context.Context, id string, outcome events.Payload, settled events.EnvironmentSettled) (projections.Session, error) {
	evs := []journal.Event{}
	if outcome != nil {
		evs = append(evs, events.New(id, outcome))
	}
	evs = append(evs, events.New(id, settled))
	if err := s.append(context.WithoutCancel(ctx), evs); err != nil {
		return projections.Session{}, err
	}
	ss, _ := s.store.Session(id)
	if f, ok := outcome.(events.EnvironmentFailed); ok {
		return ss, fmt.Errorf("%w: generation %d: %s", ErrEnvironmentFailed, f.Generation, f.Evidence.Error)
	}
	return ss, nil
}

// watch turns a sandbox that ends behind the daemon's back into a failed
// environment. A sandbox the daemon tears down is no longer live first.
func (s *sandboxes) watch(id string, sb sandbox.Sandbox) {
	<-sb.Done()
	ctx := context.Background()
	release, err := s.own(ctx, id, true)
	if err != nil {
		return
	}
	defer release()
	if s.liveSandbox(id) != sb {
		return // torn down on purpose, or replaced
	}
	s.setLive(id, nil)
	msg := "the sandbox stopped unexpectedly"
	if err := sb.Err(); err != nil {
		msg += ": " + err.Error()
	}
	s.remote().discard(ctx, id, sb)
	err = s.append(ctx, []journal.Event{events.New(id, events.EnvironmentFailed{Generation: sb.Generation(),
		Evidence: s.remote().evidence(events.Evidence{Error: msg, Fix: "rebuild the environment"}, sb.Err())})})
	if err != nil {
		s.log.Error("record lost sandbox", "session", id, "err", err)
	}
}

// teardown removes the live sandbox of a Session, if any.
func (s *sandboxes) teardown(ctx context.Context, id string) error {
	sb := s.liveSandbox(id)
	if sb == nil {
		return nil
	}
	s.setLive(id, nil)
	if s.remote().on() {
		return s.remote().teardown(ctx, id, sb) // commands/remote.go
	}
	return sb.Teardown(context.WithoutCancel(ctx))
}
