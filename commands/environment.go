package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent/tools"
	"lathe/runtime/sandbox"
)

// Connect returns the sandbox driver, connecting on first use and again
// after a failure, so a runtime started after the daemon is picked up.
type Connect func(ctx context.Context) (sandbox.Driver, error)

// SandboxOptions are what every Session sandbox gets from the operator.
type SandboxOptions struct {
	Network string
	Limits  sandbox.Limits
}

// Lifecycle bounds.
const (
	prepareTimeout = 2 * time.Minute
	removeTimeout  = 30 * time.Second
	// reconstructBatch bounds the events of one start-up append.
	reconstructBatch = 3 * 512
	setupTimeout     = 30 * time.Minute
	tailBytes        = 16 << 10 // output kept as evidence
	fixUnavailable   = "start the container runtime with `make containerd-up`, then rebuild the environment"
)

// environments is the live runtime state the lifecycle owners keep: the
// Ready sandbox of each Session's current generation.
type environments struct {
	mu   sync.Mutex
	live map[string]sandbox.Sandbox
	// watches follow the checkout of each live sandbox (runtime/watch).
	watches map[string]interface{ Close() }
	// files are the remote Sessions' file helpers (commands/sessionfs.go).
	files fileHelpers
	// background is the preparation running in the background of each
	// Session that has one (startPrepare), which an operator's change may
	// supersede.
	background map[string]*backgroundPrepare
}

func newEnvironments() environments {
	return environments{live: map[string]sandbox.Sandbox{}, watches: map[string]interface{ Close() }{},
		background: map[string]*backgroundPrepare{}}
}

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

// sessionLocks holds one lifecycle lock per Session: a lifecycle owner
// holds it for the whole bracket.
type sessionLocks struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// forget drops the lock of a deleted Session. A caller still waiting on the
// old lock finds the Session gone.
func (e *sessionLocks) forget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, id)
}

// take waits for the lock of id, or ctx's end, and returns its release.
func (e *sessionLocks) take(ctx context.Context, id string) (func(), error) {
	l := e.lock(id)
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (e *sessionLocks) lock(id string) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]chan struct{}{}
	}
	l, ok := e.m[id]
	if !ok {
		l = make(chan struct{}, 1)
		e.m[id] = l
	}
	return l
}

// own takes a Session's lifecycle lock, or fails with ErrConflict when
// another owner holds it and wait is false. It first waits for start-up
// reconciliation (commands/reconcile.go).
func (s *core) own(ctx context.Context, id string, wait bool) (release func(), err error) {
	if err := s.reconciled.wait(ctx); err != nil {
		return nil, err
	}
	return s.lockSession(ctx, id, wait)
}

// lockSession is own without the reconciliation wait, for reconciliation
// itself.
func (s *core) lockSession(ctx context.Context, id string, wait bool) (release func(), err error) {
	l := s.locks.lock(id)
	if !wait {
		select {
		case l <- struct{}{}:
			return func() { <-l }, nil
		default:
			return nil, fmt.Errorf("%w: another environment change of session %q is in progress", ErrConflict, id)
		}
	}
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ownSession takes a Session's lifecycle lock and reads the Session under
// it; a missing Session releases the lock and is ErrNotFound.
func (s *core) ownSession(ctx context.Context, id string, wait bool) (projections.Session, func(), error) {
	release, err := s.own(ctx, id, wait)
	if err != nil {
		return projections.Session{}, nil, err
	}
	ss, ok := s.store.Session(id)
	if !ok {
		release()
		return ss, nil, fmt.Errorf("%w: session %q", ErrNotFound, id)
	}
	return ss, release, nil
}

// ownOpenSession is ownSession without waiting, for an operator's change
// that a closed Session, or one running a turn, refuses. A closed Session is refused before the
// lock: its close may still be tearing the runtime down under the lock, and
// "closed" is the answer the operator needs, not "in progress".
func (s *Environments) ownOpenSession(ctx context.Context, id string) (projections.Session, func(), error) {
	ss, ok := s.store.Session(id)
	if ok && ss.Closed() {
		return ss, nil, closedErr(id)
	}
	// An operator's change supersedes a background preparation (after
	// create or reopen) and takes its bracket over.
	release, superseded, err := s.supersede(ctx, id)
	if err != nil {
		return ss, nil, err
	}
	// Read again: supersede may have waited out a settling preparation.
	ss, ok = s.store.Session(id)
	if !superseded && ok && ss.Environment.Owner != "" {
		return ss, nil, fmt.Errorf("%w: another environment change of session %q is in progress (%s)", ErrConflict, id, ss.Environment.Owner)
	}
	if superseded {
		release = s.closeTakenBracket(id, release)
		if ss, ok = s.store.Session(id); !ok {
			release()
			return ss, nil, fmt.Errorf("%w: session %q", ErrNotFound, id)
		}
	} else {
		// No lifecycle owns the boundary: the lock is free, or about to
		// be (a lifecycle releases it just after its settled event), so a
		// short wait tells the two apart.
		lockCtx, cancel := context.WithTimeout(ctx, acceptLockWait)
		ss, release, err = s.ownSession(lockCtx, id, true)
		cancel()
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("%w: another environment change of session %q is in progress", ErrConflict, id)
	}
	if err != nil {
		return ss, nil, err
	}
	if ss.Closed() {
		release()
		return ss, nil, closedErr(id)
	}
	if err := s.refuseLiveTurn(id); err != nil {
		release()
		return ss, nil, err
	}
	return ss, release, nil
}

func closedErr(id string) error {
	return fmt.Errorf("%w: session %q is closed; reopen it first", ErrConflict, id)
}

func (s *sandboxes) liveSandbox(id string) sandbox.Sandbox {
	s.envs.mu.Lock()
	defer s.envs.mu.Unlock()
	return s.envs.live[id]
}

func (s *sandboxes) setLive(id string, sb sandbox.Sandbox) {
	s.envs.mu.Lock()
	old := s.envs.watches[id]
	delete(s.envs.watches, id)
	s.envs.files.drop(id, sb)
	if sb == nil {
		delete(s.envs.live, id)
	} else {
		s.envs.live[id] = sb
	}
	s.envs.mu.Unlock()
	if old != nil {
		old.Close()
	}
	if sb == nil || s.opts.CheckoutChanged == nil {
		return
	}
	// The checkout's views follow every writer while the sandbox lives.
	// The tree walk runs outside the lock.
	ss, ok := s.store.Session(id)
	if !ok {
		return
	}
	notify := s.opts.CheckoutChanged
	w, err := s.watchCheckout(sb, ss.WorkingDir, func() { notify(id) })
	if err != nil {
		s.log.Warn("watch the checkout", "session", id, "err", err)
		return
	}
	s.envs.mu.Lock()
	if s.envs.live[id] == sb && s.envs.watches[id] == nil {
		s.envs.watches[id], w = w, nil
	}
	s.envs.mu.Unlock()
	if w != nil {
		w.Close() // replaced or torn down meanwhile
	}
}

// checkoutDebounce is how quiet a checkout must be before its change
// notice goes out.
const checkoutDebounce = 250 * time.Millisecond

// Sandbox returns the Ready sandbox of a Session for the live-checkout
// routes: ErrNotFound for a missing Session, ErrConflict unless Ready.
func (s *sandboxes) sandbox(id string) (sandbox.Sandbox, projections.Session, error) {
	sb, ss, err := s.primarySandbox(id)
	if err == nil {
		err = s.refuseOwned(ss)
	}
	if err != nil {
		return nil, ss, err
	}
	return sb, ss, nil
}

// primarySandbox is sandbox without the Ways ownership rule: the Ways
// commands themselves reach the primary checkout through it.
func (s *sandboxes) primarySandbox(id string) (sandbox.Sandbox, projections.Session, error) {
	if err := s.reconciled.waitFor(reconcileWait); err != nil {
		return nil, projections.Session{}, err
	}
	ss, ok := s.store.Session(id)
	if !ok {
		return nil, ss, fmt.Errorf("%w: session %q", ErrNotFound, id)
	}
	sb := s.liveSandbox(id)
	if ss.Closed() || ss.Environment.State != events.EnvReady || ss.Environment.Owner != "" || sb == nil || sb.Generation() != ss.Environment.Generation {
		return nil, ss, fmt.Errorf("%w: the environment of session %q is %s, not ready", ErrConflict, id, describeState(ss))
	}
	return sb, ss, nil
}

func describeState(ss projections.Session) string {
	switch {
	case ss.Closed():
		return "closed"
	case ss.Environment.Owner != "":
		return "changing (" + ss.Environment.Owner + ")"
	}
	return ss.Environment.State
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

// closeTakenBracket wraps the release of a lock taken over from a
// superseded preparation: if the taker ends without closing the bracket it
// inherited (it was refused before its own changing event), the bracket is
// settled as failed, so it never stays open.
func (s *Environments) closeTakenBracket(id string, release func()) func() {
	ss, _ := s.store.Session(id)
	owner, gen := ss.Environment.Owner, ss.Environment.Generation
	return func() {
		if cur, ok := s.store.Session(id); ok && owner != "" && cur.Environment.Owner == owner && cur.Environment.Generation == gen {
			_, err := s.settle(context.Background(), id, events.EnvironmentFailed{Generation: gen, Evidence: events.Evidence{
				Error: "the preparation was stopped for an operator's change that was then refused", Fix: "rebuild the environment"}},
				events.EnvironmentSettled{Generation: gen})
			if err != nil && !errors.Is(err, ErrEnvironmentFailed) {
				s.log.Error("settle a superseded preparation", "session", id, "err", err)
			}
		}
		release()
	}
}

// supersede takes over the Session's background preparation, if one runs
// and has not begun settling: it stops it, waits until it removed what it
// made, and returns the lifecycle lock it held. One that is already
// settling (a runtime that cannot be reached fails it at once) is waited
// for instead, so its bracket is closed when supersede returns. false:
// there is none to take over (the caller waits for the lock as usual).
func (s *Environments) supersede(ctx context.Context, id string) (release func(), ok bool, err error) {
	s.envs.mu.Lock()
	bp := s.envs.background[id]
	s.envs.mu.Unlock()
	if bp == nil {
		return nil, false, nil
	}
	bp.mu.Lock()
	switch {
	case bp.superseded:
		// Another change took it over already and holds its bracket.
		bp.mu.Unlock()
		return nil, false, nil
	case bp.settling:
		bp.mu.Unlock()
		select {
		case <-bp.done:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	bp.superseded = true
	bp.mu.Unlock()
	bp.cancel()
	select {
	case <-bp.handedOver:
	case <-ctx.Done():
		// The hand-over still happens; nobody is left to take it, so
		// close the bracket it inherits and release the lock once it does.
		go func() {
			<-bp.handedOver
			s.closeTakenBracket(id, func() { <-s.locks.lock(id) })()
		}()
		return nil, false, ctx.Err()
	}
	return func() { <-s.locks.lock(id) }, true, nil
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

// EnvironmentPlan is the body of PUT /environment.
type EnvironmentPlan struct {
	Image         *string `json:"image"`
	SetupCommand  *string `json:"setup_command"`
	SetupApproved *bool   `json:"setup_approved"`
	SetupReviewed *bool   `json:"setup_reviewed"`
}

// ChangeEnvironment makes a reviewed plan the next generation and prepares
// it synchronously. Consent must be explicit: setup_reviewed:true, and
// setup_approved stated whenever a setup command is.
func (s *Environments) ChangeEnvironment(ctx context.Context, id string, plan EnvironmentPlan) (projections.Session, error) {
	if plan.SetupReviewed == nil || !*plan.SetupReviewed {
		return projections.Session{}, fmt.Errorf("%w: setup_reviewed must be true: an environment change is a reviewed decision", ErrInvalid)
	}
	cmd := ""
	if plan.SetupCommand != nil {
		var err error
		if cmd, err = checkSetup(*plan.SetupCommand); err != nil {
			return projections.Session{}, err
		}
	}
	if cmd != "" && plan.SetupApproved == nil {
		return projections.Session{}, fmt.Errorf("%w: setup_approved must be stated for a setup command (true runs it, false vetoes it)", ErrInvalid)
	}
	approved := plan.SetupApproved != nil && *plan.SetupApproved && cmd != ""
	image, err := s.planImage(plan.Image)
	if err != nil {
		return projections.Session{}, err
	}
	ss, release, err := s.ownOpenSession(ctx, id)
	if err != nil {
		return ss, err
	}
	defer release()
	source := events.SourceUser
	if cmd == ss.Environment.SetupCommand && ss.Environment.SetupSource != "" {
		source = ss.Environment.SetupSource
	}
	if cmd == "" {
		source = ""
	}
	next := ss.Environment.Generation + 1
	return s.replaceGeneration(ctx, ss, events.OwnerChange, events.EnvironmentPlanned{
		Generation: next, Image: image, SetupCommand: cmd, SetupSource: source, SetupApproved: approved, SetupReviewed: true,
	})
}

// RebuildEnvironment removes the runtime and reproduces the persisted plan
// as a new generation.
func (s *Environments) RebuildEnvironment(ctx context.Context, id string) (projections.Session, error) {
	ss, release, err := s.ownOpenSession(ctx, id)
	if err != nil {
		return ss, err
	}
	defer release()
	env := ss.Environment
	switch {
	case env.State == events.EnvAwaitingApproval:
		return ss, fmt.Errorf("%w: the setup command awaits review; approve or veto it with PUT /environment", ErrConflict)
	}
	return s.replaceGeneration(ctx, ss, events.OwnerRebuild, events.EnvironmentPlanned{
		Generation: env.Generation + 1, Image: env.Image, SetupCommand: env.SetupCommand, SetupSource: env.SetupSource,
		SetupApproved: env.SetupApproved, SetupReviewed: env.SetupReviewed,
	})
}

// replaceGeneration brackets a teardown of the current generation and the
// preparation of the planned one. The lifecycle lock is held.
func (s *Environments) replaceGeneration(ctx context.Context, ss projections.Session, owner string, plan events.EnvironmentPlanned) (projections.Session, error) {
	id := ss.ID
	err := s.append(ctx, []journal.Event{events.New(id, events.EnvironmentChanging{Generation: ss.Environment.Generation, Owner: owner})},
		journal.Expectation{AggregateID: id, Version: ss.Version})
	if err != nil {
		return ss, err
	}
	if err := s.teardown(ctx, id); err != nil {
		return s.settle(ctx, id, events.EnvironmentFailed{Generation: ss.Environment.Generation,
			Evidence: events.Evidence{Error: "remove the old runtime: " + err.Error()}}, events.EnvironmentSettled{Generation: ss.Environment.Generation})
	}
	if err := s.append(ctx, []journal.Event{events.New(id, plan), events.New(id, events.EnvironmentChanging{Generation: plan.Generation, Owner: owner})}); err != nil {
		return ss, err
	}
	ss, _ = s.store.Session(id)
	outcome := s.runGeneration(ctx, ss)
	return s.settle(ctx, id, outcome, events.EnvironmentSettled{Generation: plan.Generation})
}

// CleanupConfirmation is the body of POST /environment/confirm-runtime-cleanup:
// exactly one of its two forms.
type CleanupConfirmation struct {
	RuntimeID                            *string `json:"runtime_id"`
	Confirmed                            *bool   `json:"confirmed"`
	CreationToken                        *string `json:"creation_token"`
	ConfirmedAllMatchingSandboxesDeleted *bool   `json:"confirmed_all_matching_sandboxes_deleted"`
}

// ConfirmRuntimeCleanup clears the retained remote runtime the operator
// confirms was deleted by hand, and returns the Session. Only the remote
// sandbox provider retains such runtimes.
func (s *Environments) ConfirmRuntimeCleanup(ctx context.Context, id string, c CleanupConfirmation) (projections.Session, error) {
	byID := c.RuntimeID != nil || c.Confirmed != nil
	byToken := c.CreationToken != nil || c.ConfirmedAllMatchingSandboxesDeleted != nil
	switch {
	case byID == byToken:
		return projections.Session{}, fmt.Errorf("%w: send exactly one of {runtime_id, confirmed:true} or {creation_token, confirmed_all_matching_sandboxes_deleted:true}", ErrInvalid)
	case byID && (c.RuntimeID == nil || strings.TrimSpace(*c.RuntimeID) == "" || c.Confirmed == nil || !*c.Confirmed):
		return projections.Session{}, fmt.Errorf("%w: runtime_id must be non-empty and confirmed must be true", ErrInvalid)
	case byToken && (c.CreationToken == nil || strings.TrimSpace(*c.CreationToken) == "" || c.ConfirmedAllMatchingSandboxesDeleted == nil || !*c.ConfirmedAllMatchingSandboxesDeleted):
		return projections.Session{}, fmt.Errorf("%w: creation_token must be non-empty and confirmed_all_matching_sandboxes_deleted must be true", ErrInvalid)
	}
	if _, ok := s.store.Session(id); !ok {
		return projections.Session{}, fmt.Errorf("%w: session %q", ErrNotFound, id)
	}
	if !s.opts.RemoteSandbox {
		return projections.Session{}, fmt.Errorf("%w: the local container runtime retains no remote runtime awaiting cleanup", ErrConflict)
	}
	return s.confirmCleanup(ctx, id, c) // commands/remote.go
}

// Reconstruct runs at start-up, before the daemon serves: it reattaches the
// sandboxes of Ready Sessions, recreates those whose sandbox is gone or whose
// lifecycle a crash interrupted, and removes every sandbox no open Session
// owns. A runtime that cannot be reached leaves Ready Sessions failed with
// evidence rather than pretending.
func (s *Environments) Reconstruct(ctx context.Context) error {
	var attached []sandbox.Sandbox
	var drv sandbox.Driver
	var connErr error
	if s.connect != nil {
		if drv, connErr = s.connect(ctx); connErr == nil {
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
	candidates := s.store.SessionsWhere(func(ss *projections.Session) bool {
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
		if sb != nil && !interrupted && !isDone(sb) {
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
					Evidence: s.remote().evidence(ev, connErr)}),
				events.New(ss.ID, events.EnvironmentSettled{Generation: env.Generation}))
			if len(unreachable) >= reconstructBatch {
				if err := s.append(ctx, unreachable); err != nil {
					return err
				}
				unreachable = unreachable[:0]
			}
			continue
		}
		release, err := s.lockSession(ctx, ss.ID, true)
		if err != nil {
			return err
		}
		if err := s.append(ctx, []journal.Event{events.New(ss.ID, events.EnvironmentChanging{Generation: env.Generation, Owner: events.OwnerReconstruct})}); err != nil {
			release()
			return err
		}
		// The stale sandbox (an interrupted setup may still run in it) is
		// removed by the background owner, bounded, so that a wedged runtime
		// never holds up the daemon's start.
		s.startPrepare(ss.ID, release, s.remote().rescuing(sb, ss)) // commands/remotesweep.go
	}
	if len(unreachable) > 0 {
		if err := s.append(ctx, unreachable); err != nil {
			return err
		}
	}
	go func() {
		for name, sb := range found {
			if s.remote().retainedBy(sb) { // commands/remotesweep.go
				continue
			}
			s.log.Info("removing orphaned sandbox", "sandbox", name)
			removeBounded(sb, s.log)
		}
	}()
	if connErr != nil && s.remote().on() && s.connect != nil {
		go s.remote().sweepWhenBack(ctx)
	}
	return nil
}

// sweepLeftovers ends, in a sandbox the start found running, the tool
// runs (shell commands, hooks, Checks) that the stopped daemon left under
// way (tools.SweepLeftovers): their timeouts were its to enforce. A runtime
// cleanup, as the removal of orphaned sandboxes is: logged, not journaled;
// the turns they belonged to end at start as interrupted.
func (s *Environments) sweepLeftovers(id string, sb sandbox.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	n, err := tools.SweepLeftovers(ctx, sb)
	switch {
	case err != nil:
		s.log.Warn("end the tool runs a stopped daemon left", "session", id, "err", err)
	case n > 0:
		s.log.Info("ended the tool runs a stopped daemon left", "session", id, "processes", n)
	}
}

// interruptedBracket tells whether a restart found env's lifecycle bracket
// open: an owner held its boundary, or a preparation was under way.
func interruptedBracket(env projections.Environment) bool {
	return env.Owner != "" || env.State == events.EnvPreparing
}

// removeBounded tears a sandbox down within removeTimeout.
func removeBounded(sb sandbox.Sandbox, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	if err := sb.Teardown(ctx); err != nil {
		log.Warn("remove sandbox", "sandbox", sandboxName(sb), "err", err)
	}
}

func isDone(sb sandbox.Sandbox) bool {
	select {
	case <-sb.Done():
		return true
	default:
		return false
	}
}

// defaultLogger discards, for Services built without a logger.
var defaultLogger = slog.New(slog.DiscardHandler)

// Sandbox is the live sandbox of a Ready Session: ErrNotFound for a missing
// Session, ErrConflict for any other state.
func (s *Environments) Sandbox(id string) (sandbox.Sandbox, projections.Session, error) {
	return s.sandbox(id)
}
