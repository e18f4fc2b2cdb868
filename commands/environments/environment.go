package environments

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/sandbox"
)

// Lifecycle bounds.
const (
	PrepareTimeout = 2 * time.Minute
	RemoveTimeout  = 30 * time.Second
	// reconstructBatch bounds the events of one start-up append.
	reconstructBatch = 3 * 512
	setupTimeout     = 30 * time.Minute
	TailBytes        = 16 << 10 // output kept as evidence
	fixUnavailable   = "start the container runtime with `make containerd-up`, then rebuild the environment"
)

// environments is the live runtime state the lifecycle owners keep: the
// Ready sandbox of each Session's current generation.
type environments struct {
	mu   sync.Mutex
	live map[string]sandbox.Sandbox
	// watches follow the checkout of each live sandbox (runtime/watch).
	watches map[string]interface{ Close() }
	// files are the remote Sessions' file helpers (commands/environments/sessionfs.go).
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

// ownOpenSession is ownSession without waiting, for an operator's change
// that a closed Session, or one running a turn, refuses. A closed Session is refused before the
// lock: its close may still be tearing the runtime down under the lock, and
// "closed" is the answer the operator needs, not "in progress".
func (s *Environments) ownOpenSession(ctx context.Context, id string) (projections.Session, func(), error) {
	ss, ok := s.Store.Session(id)
	if ok && ss.Closed() {
		return ss, nil, core.ClosedErr(id)
	}
	// An operator's change supersedes a background preparation (after
	// create or reopen) and takes its bracket over.
	release, superseded, err := s.supersede(ctx, id)
	if err != nil {
		return ss, nil, err
	}
	// Read again: supersede may have waited out a settling preparation.
	ss, ok = s.Store.Session(id)
	if !superseded && ok && ss.Environment.Owner != "" {
		return ss, nil, fmt.Errorf("%w: another environment change of session %q is in progress (%s)", core.ErrConflict, id, ss.Environment.Owner)
	}
	if superseded {
		release = s.closeTakenBracket(id, release)
		if ss, ok = s.Store.Session(id); !ok {
			release()
			return ss, nil, fmt.Errorf("%w: session %q", core.ErrNotFound, id)
		}
	} else {
		// No lifecycle owns the boundary: the lock is free, or about to
		// be (a lifecycle releases it just after its settled event), so a
		// short wait tells the two apart.
		lockCtx, cancel := context.WithTimeout(ctx, core.AcceptLockWait)
		ss, release, err = s.OwnSession(lockCtx, id, true)
		cancel()
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("%w: another environment change of session %q is in progress", core.ErrConflict, id)
	}
	if err != nil {
		return ss, nil, err
	}
	if ss.Closed() {
		release()
		return ss, nil, core.ClosedErr(id)
	}
	if err := s.RefuseLiveTurn(id); err != nil {
		release()
		return ss, nil, err
	}
	return ss, release, nil
}

func (s *Sandboxes) LiveSandbox(id string) sandbox.Sandbox {
	s.envs.mu.Lock()
	defer s.envs.mu.Unlock()
	return s.envs.live[id]
}

func (s *Sandboxes) setLive(id string, sb sandbox.Sandbox) {
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
	if sb == nil || s.Opts.Live == nil {
		return
	}
	// The checkout's views follow every writer while the sandbox lives.
	// The tree walk runs outside the lock.
	ss, ok := s.Store.Session(id)
	if !ok {
		return
	}
	// A change goes out as a live notice, like a turn's deltas: on NATS,
	// through the live projection, to every client.
	live := s.Opts.Live
	w, err := s.watchCheckout(sb, ss.WorkingDir, func() {
		if err := live.PublishLive(events.LiveDelta{Session: id, Kind: events.DeltaCheckout}); err != nil {
			s.Log.Warn("publish a checkout change", "session", id, "err", err)
		}
	})
	if err != nil {
		s.Log.Warn("watch the checkout", "session", id, "err", err)
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

// Sandbox returns the Ready readySandbox of a Session for the live-checkout
// routes: ErrNotFound for a missing Session, ErrConflict unless Ready.
func (s *Sandboxes) ReadySandbox(id string) (sandbox.Sandbox, projections.Session, error) {
	sb, ss, err := s.PrimarySandbox(id)
	if err == nil {
		err = s.RefuseOwned(ss)
	}
	if err != nil {
		return nil, ss, err
	}
	return sb, ss, nil
}

// PrimarySandbox is sandbox without the Ways ownership rule: the Ways
// commands themselves reach the primary checkout through it.
func (s *Sandboxes) PrimarySandbox(id string) (sandbox.Sandbox, projections.Session, error) {
	if err := s.Reconciled.WaitFor(core.ReconcileWait); err != nil {
		return nil, projections.Session{}, err
	}
	ss, ok := s.Store.Session(id)
	if !ok {
		return nil, ss, fmt.Errorf("%w: session %q", core.ErrNotFound, id)
	}
	sb := s.LiveSandbox(id)
	if ss.Closed() || ss.Environment.State != events.EnvReady || ss.Environment.Owner != "" || sb == nil || sb.Generation() != ss.Environment.Generation {
		return nil, ss, fmt.Errorf("%w: the environment of session %q is %s, not ready", core.ErrConflict, id, describeState(ss))
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

// closeTakenBracket wraps the release of a lock taken over from a
// superseded preparation: if the taker ends without closing the bracket it
// inherited (it was refused before its own changing event), the bracket is
// settled as failed, so it never stays open.
func (s *Environments) closeTakenBracket(id string, release func()) func() {
	ss, _ := s.Store.Session(id)
	owner, gen := ss.Environment.Owner, ss.Environment.Generation
	return func() {
		if cur, ok := s.Store.Session(id); ok && owner != "" && cur.Environment.Owner == owner && cur.Environment.Generation == gen {
			_, err := s.settle(context.Background(), id, events.EnvironmentFailed{Generation: gen, Evidence: events.Evidence{
				Error: "the preparation was stopped for an operator's change that was then refused", Fix: "rebuild the environment"}},
				events.EnvironmentSettled{Generation: gen})
			if err != nil && !errors.Is(err, core.ErrEnvironmentFailed) {
				s.Log.Error("settle a superseded preparation", "session", id, "err", err)
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
			s.closeTakenBracket(id, func() { <-s.Locks.Lock(id) })()
		}()
		return nil, false, ctx.Err()
	}
	return func() { <-s.Locks.Lock(id) }, true, nil
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
		return projections.Session{}, fmt.Errorf("%w: setup_reviewed must be true: an environment change is a reviewed decision", core.ErrInvalid)
	}
	cmd := ""
	if plan.SetupCommand != nil {
		var err error
		if cmd, err = CheckSetup(*plan.SetupCommand); err != nil {
			return projections.Session{}, err
		}
	}
	if cmd != "" && plan.SetupApproved == nil {
		return projections.Session{}, fmt.Errorf("%w: setup_approved must be stated for a setup command (true runs it, false vetoes it)", core.ErrInvalid)
	}
	approved := plan.SetupApproved != nil && *plan.SetupApproved && cmd != ""
	image, err := s.PlanImage(plan.Image)
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
		return ss, fmt.Errorf("%w: the setup command awaits review; approve or veto it with PUT /environment", core.ErrConflict)
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
	err := s.Append(ctx, []journal.Event{events.New(id, events.EnvironmentChanging{Generation: ss.Environment.Generation, Owner: owner})},
		journal.Expectation{AggregateID: id, Version: ss.Version})
	if err != nil {
		return ss, err
	}
	if err := s.Teardown(ctx, id); err != nil {
		return s.settle(ctx, id, events.EnvironmentFailed{Generation: ss.Environment.Generation,
			Evidence: events.Evidence{Error: "remove the old runtime: " + err.Error()}}, events.EnvironmentSettled{Generation: ss.Environment.Generation})
	}
	if err := s.Append(ctx, []journal.Event{events.New(id, plan), events.New(id, events.EnvironmentChanging{Generation: plan.Generation, Owner: owner})}); err != nil {
		return ss, err
	}
	ss, _ = s.Store.Session(id)
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
		return projections.Session{}, fmt.Errorf("%w: send exactly one of {runtime_id, confirmed:true} or {creation_token, confirmed_all_matching_sandboxes_deleted:true}", core.ErrInvalid)
	case byID && (c.RuntimeID == nil || strings.TrimSpace(*c.RuntimeID) == "" || c.Confirmed == nil || !*c.Confirmed):
		return projections.Session{}, fmt.Errorf("%w: runtime_id must be non-empty and confirmed must be true", core.ErrInvalid)
	case byToken && (c.CreationToken == nil || strings.TrimSpace(*c.CreationToken) == "" || c.ConfirmedAllMatchingSandboxesDeleted == nil || !*c.ConfirmedAllMatchingSandboxesDeleted):
		return projections.Session{}, fmt.Errorf("%w: creation_token must be non-empty and confirmed_all_matching_sandboxes_deleted must be true", core.ErrInvalid)
	}
	if _, ok := s.Store.Session(id); !ok {
		return projections.Session{}, fmt.Errorf("%w: session %q", core.ErrNotFound, id)
	}
	if !s.Opts.RemoteSandbox {
		return projections.Session{}, fmt.Errorf("%w: the local container runtime retains no remote runtime awaiting cleanup", core.ErrConflict)
	}
	return s.confirmCleanup(ctx, id, c) // commands/environments/remote.go
}

// Sandbox is the live sandbox of a Ready Session: ErrNotFound for a missing
// Session, ErrConflict for any other state.
func (s *Environments) Sandbox(id string) (sandbox.Sandbox, projections.Session, error) {
	return s.ReadySandbox(id)
}

// Environments changes, rebuilds and reconstructs Session environments
// and hands out the live sandbox of a Ready one (commands/environments/environment.go).
type Environments struct{ *Sandboxes }
