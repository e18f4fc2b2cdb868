package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/git"
	"lathe/runtime/lanefs"
	"lathe/runtime/sandbox"
	"lathe/runtime/usage"
)

// Lanes runs the lanes of the Ways sets: each in its own sandbox on its own
// copy of the checkout (commands/waysfs.go), its turn to its one
// lane-ended, and removes their sandboxes and files when the set goes.
type Lanes struct {
	*sandboxes
	ways *waysRuntime
	// files makes, mounts and trashes the lanes' files
	// (commands/waysfs.go).
	files *laneStore
}

// waysRuntime is the runtime state of the sets this process runs: the
// lanes' live sandboxes and one lock per set, which orders its Keep,
// Discard and Verify.
type waysRuntime struct {
	mu        sync.Mutex
	start     sync.Mutex // one set start decides at a time
	sandboxes map[string]sandbox.Sandbox
	locks     map[string]*sync.Mutex
	// cleanup counts the removals under way in the background: kept
	// sets' lanes, and the trash (commands/waysfs.go).
	cleanup sync.WaitGroup
	// trash orders the trash's removals.
	trash sync.Mutex
	// fs is the state of the lanes' files (commands/waysfs.go).
	fs laneFS
}

func newWaysRuntime() *waysRuntime {
	return &waysRuntime{sandboxes: map[string]sandbox.Sandbox{}, locks: map[string]*sync.Mutex{}, fs: laneFS{bases: map[string]*setBase{}}}
}

func (w *waysRuntime) lock(set string) func() {
	w.mu.Lock()
	l := w.locks[set]
	if l == nil {
		l = &sync.Mutex{}
		w.locks[set] = l
	}
	w.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// startLane runs one lane in the background under the daemon's turn
// context, registered as a turn run so that Discard can stop it and a
// shutdown ends it (interrupted).
func (s *Lanes) startLane(a projections.AttemptSet, l *projections.Attempt) {
	run, err := s.turns.reserve(a.Session, l.TurnID)
	if err != nil {
		s.endLane(a, l, events.LaneEnded{State: events.AttemptFailed, Error: err.Error(), Interrupted: true,
			Totals: usage.Tokens{TokenUsageKnown: true}})
		return
	}
	go func() {
		defer s.turns.release(a.Session, l.TurnID, run)
		s.runLane(s.turns.ctx, a, l, run.stop)
	}()
}

// runLane makes the lane's copy and sandbox and runs its turn to its one
// LaneEnded.
func (s *Lanes) runLane(ctx context.Context, a projections.AttemptSet, l *projections.Attempt, stop <-chan struct{}) {
	fail := func(err error) {
		end := events.LaneEnded{State: events.AttemptFailed, Error: err.Error(), Totals: usage.Tokens{TokenUsageKnown: true}}
		switch {
		case agent.Stopped(stop):
			end.State, end.Error = events.AttemptCancelled, ""
		case ctx.Err() != nil:
			end.Error, end.Interrupted = context.Cause(ctx).Error(), true
		}
		s.endLane(a, l, end)
	}
	ss, ok := s.store.Session(a.Session)
	if !ok {
		fail(fmt.Errorf("session %q is gone", a.Session))
		return
	}
	src, err := s.files.laneSource(ss)
	if err != nil {
		fail(err)
		return
	}
	if err := s.files.laneFiles(ctx, a.ID, src, l); err != nil {
		fail(err)
		return
	}
	sb, err := s.prepareLane(ctx, ss, l)
	if err != nil {
		fail(err)
		return
	}
	if agent.Stopped(stop) {
		fail(errors.New("stopped"))
		return
	}
	obs := &turnObserver{s: s.core, t: projections.Turn{SessionID: a.Session, TurnID: l.TurnID, AgentID: l.Agent},
		ctx: asAgent(context.WithoutCancel(ctx), l.Agent, l.TurnID), agent: l.Agent, live: &liveCount{},
		lane: &laneTurn{Lane: events.Lane{Index: l.Index, Run: l.Run}, set: a.ID}}
	model := l.Model
	prior := s.store.Turns(a.Session)
	call := ApprovalRequest{Run: l.Run, Session: a.Session, TurnID: l.TurnID, AgentID: l.Agent}
	rh := turnHooks{s: s.core}.run(call, sb, ss.WorkingDir, len(prior) == 0) // commands/hooks.go
	input, err := rh.prompt(ctx, a.Input.String())
	if err != nil {
		fail(err)
		return
	}
	res := s.opts.Runtime.RunTurn(ctx, agent.TurnRequest{
		AgentID: l.Agent, Model: &model, History: History(prior), Input: input,
		Tools: newTurnTools(s.core, tools.New(sb, ss.WorkingDir), call, stop),
		Stop:  stop, MaxSteps: s.opts.Turns.MaxSteps, StallTimeout: s.opts.Turns.StallTimeout,
	}, obs)
	rh.stop(ctx)
	if res.Err != nil && ctx.Err() != nil {
		res.Err = context.Cause(ctx)
	}
	end := events.LaneEnded{Output: events.NewText(res.Output), Budget: res.Budget, Totals: res.Usage}
	switch res.Outcome {
	case agent.OutcomeDone:
		end.State = events.AttemptSucceeded
	case agent.OutcomeCancelled:
		end.State = events.AttemptCancelled
	default:
		end.State, end.Error = events.AttemptFailed, "the lane failed"
		if res.Err != nil {
			end.Error = res.Err.Error()
		}
		end.Interrupted = errors.Is(res.Err, errShutdown)
	}
	// A lane Discard stopped has no changes anyone can read.
	if cur, _ := s.store.AttemptSet(a.ID); ctx.Err() == nil && !cur.Discarded {
		if err := s.laneChanges(ctx, a, ss, sb, &end); err != nil && end.State == events.AttemptSucceeded {
			end.State, end.Error = events.AttemptFailed, "record the lane's changes: "+err.Error()
		}
	}
	s.endLane(a, l, end)
}

// laneChanges records what the lane changed against the set's snapshot.
func (s *Lanes) laneChanges(ctx context.Context, a projections.AttemptSet, ss projections.Session, sb sandbox.Sandbox, end *events.LaneEnded) error {
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	repo := git.Open(sb, ss.WorkingDir)
	after, err := repo.Snapshot(ctx)
	if err != nil {
		return err
	}
	changed, err := repo.ChangedPaths(ctx, a.Tree, after)
	if err != nil {
		return err
	}
	patch, err := repo.Patch(ctx, a.Tree, after)
	if err != nil {
		return err
	}
	if len(changed) > maxLaneChanged {
		return fmt.Errorf("the lane changed %d files; at most %d can be kept", len(changed), maxLaneChanged)
	}
	end.After, end.Changed, end.Patch = after, changed, events.NewText(string(patch))
	return nil
}

// endLane appends a lane's one terminal event.
func (s *Lanes) endLane(a projections.AttemptSet, l *projections.Attempt, end events.LaneEnded) {
	end.Lane = events.Lane{Index: l.Index, Run: l.Run}
	if end.Changed == nil {
		end.Changed = []string{}
	}
	if err := s.append(context.Background(), []journal.Event{events.New(a.ID, end)}); err != nil {
		s.log.Warn("end lane", "set", a.ID, "index", l.Index, "err", err)
	}
}

// prepareLane prepares the lane's sandbox on its copy, from the Session's
// reviewed plan, and runs the approved setup command there.
func (s *Lanes) prepareLane(ctx context.Context, ss projections.Session, l *projections.Attempt) (sandbox.Sandbox, error) {
	pctx, cancel := context.WithTimeout(ctx, prepareTimeout)
	defer cancel()
	drv, err := s.connect(pctx)
	if err != nil {
		return nil, err
	}
	env := ss.Environment
	sb, err := drv.Prepare(pctx, sandbox.Spec{SessionID: l.TurnID, Generation: 1, Image: env.Image, WorkingDir: ss.WorkingDir,
		Source: l.Copy, Masked: s.configMasked(ss), Network: s.sandboxOpts.Network, Limits: s.sandboxOpts.Limits})
	if err != nil {
		return nil, fmt.Errorf("prepare the lane's sandbox: %w", err)
	}
	if env.SetupCommand != "" && env.SetupApproved {
		code, tail, err := runSetup(ctx, sb, env.SetupCommand)
		if err != nil || code != 0 {
			removeBounded(sb, s.log)
			if err == nil {
				err = fmt.Errorf("exited with code %d: %s", code, lastLine(tail))
			}
			return nil, fmt.Errorf("the approved setup command failed in the lane: %w", err)
		}
	}
	s.ways.mu.Lock()
	s.ways.sandboxes[l.TurnID] = sb
	s.ways.mu.Unlock()
	return sb, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// laneSandbox is a lane's live sandbox, prepared again on its copy when
// it is gone (a restart removes every lane's).
func (s *Lanes) laneSandbox(ctx context.Context, ss projections.Session, l *projections.Attempt) (sandbox.Sandbox, error) {
	s.ways.mu.Lock()
	sb := s.ways.sandboxes[l.TurnID]
	s.ways.mu.Unlock()
	if sb != nil && !isDone(sb) {
		return sb, nil
	}
	if _, err := os.Lstat(l.Copy); err != nil {
		return nil, fmt.Errorf("%w: the copy of lane %d is gone", ErrConflict, l.Index)
	}
	if err := s.files.mountLane(l); err != nil {
		return nil, err
	}
	return s.prepareLane(ctx, ss, l)
}

// stopLanes asks every lane of the set that runs here to stop and waits
// until each has ended.
func (s *Lanes) stopLanes(a projections.AttemptSet) {
	var runs []*turnRun
	s.turns.mu.Lock()
	for _, l := range a.Attempts {
		if run := s.turns.m[turnKey(a.Session, l.TurnID)]; run != nil {
			runs = append(runs, run)
		}
	}
	s.turns.mu.Unlock()
	for _, run := range runs {
		run.stopOnce.Do(func() { close(run.stop) })
	}
	// A lane still waiting for the set's base copy ends once it stops.
	s.files.cancelBase(a.ID)
	timeout := time.After(laneJoinWait)
	for _, run := range runs {
		select {
		case <-run.done:
		case <-timeout:
			s.log.Warn("a lane did not stop in time", "set", a.ID)
		}
	}
}

// Drain waits, bounded by ctx, for the removals of kept sets' lanes that
// run in the background, for a shutdown; what it cuts short the start-up
// sweeps finish.
func (s *Lanes) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.ways.cleanup.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("Ways lanes still being removed at shutdown: %w", ctx.Err())
	}
}

// sweepCopies, at start, removes the files of every set that no longer
// needs them (settled, or unknown to the journal), the trash a crash left
// and an overlay probe a kill cut short (unmounted first), and mounts
// again the lanes of the sets that still do (a reboot unmounted them).
func (s *Lanes) sweepCopies(unsettled []projections.AttemptSet) {
	entries, err := os.ReadDir(s.opts.WaysDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // the trash and a probe's, emptied below
		}
		if a, ok := s.store.AttemptSet(e.Name()); ok && !a.Settled {
			continue
		}
		if err := s.files.trashSet(e.Name()); err != nil {
			s.log.Warn("remove a settled set's copies", "set", e.Name(), "err", err)
		}
	}
	s.files.emptyTrash()
	if err := lanefs.SweepProbes(s.opts.WaysDir); err != nil {
		s.log.Warn("sweep an interrupted overlay probe", "dir", s.opts.WaysDir, "err", err)
	}
	for _, a := range unsettled {
		if a, ok := s.store.AttemptSet(a.ID); ok && !a.Settled && !a.Discarded {
			for _, l := range a.Attempts {
				if err := s.files.mountLane(l); err != nil {
					s.log.Warn("mount a Ways lane again", "set", a.ID, "index", l.Index, "err", err)
				}
			}
		}
	}
}

// removeLanes removes the lanes' sandboxes, unmounts their files and
// moves the set's files to the trash, which is emptied in the background.
func (s *Lanes) removeLanes(a projections.AttemptSet) error {
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	drv, err := s.connect(ctx)
	if err != nil {
		return fmt.Errorf("%w: remove the lanes' sandboxes: %v", ErrUnavailable, err)
	}
	// Each lane's sandbox goes at once: a removal waits on the container
	// runtime, not on the CPU.
	errs := make([]error, len(a.Attempts))
	var wg sync.WaitGroup
	for i, l := range a.Attempts {
		wg.Go(func() {
			if err := drv.Remove(ctx, l.TurnID, 1); err != nil {
				errs[i] = fmt.Errorf("remove the sandbox of lane %d: %w", l.Index, err)
				return
			}
			s.ways.mu.Lock()
			delete(s.ways.sandboxes, l.TurnID)
			s.ways.mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.files.trashSet(a.ID)
}

const copyTimeout = 10 * time.Minute

const laneJoinWait = time.Minute

// maxLaneChanged bounds the changed paths one lane event lists.
const maxLaneChanged = 4000
