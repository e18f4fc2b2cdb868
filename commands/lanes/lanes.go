package lanes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"lathe/commands/agentrun"
	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/turns"

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
// copy of the checkout (commands/lanes/waysfs.go), its turn to its one
// lane-ended, and removes their sandboxes and files when the set goes.
type Lanes struct {
	*environments.Sandboxes
	Ways *WaysRuntime
	// Files makes, mounts and trashes the lanes' files
	// (commands/lanes/waysfs.go).
	Files *LaneStore
}

// WaysRuntime is the runtime state of the sets this process runs: the
// lanes' live sandboxes and one lock per set, which orders its Keep,
// Discard and Verify.
type WaysRuntime struct {
	Mu        sync.Mutex
	Start     sync.Mutex // one set start decides at a time
	Sandboxes map[string]sandbox.Sandbox
	Locks     map[string]*sync.Mutex
	// Cleanup counts the removals under way in the background: kept
	// sets' lanes, and the trash (commands/lanes/waysfs.go).
	Cleanup sync.WaitGroup
	// trash orders the trash's removals.
	trash sync.Mutex
	// fs is the state of the lanes' files (commands/lanes/waysfs.go).
	fs laneFS
}

func NewWaysRuntime() *WaysRuntime {
	return &WaysRuntime{Sandboxes: map[string]sandbox.Sandbox{}, Locks: map[string]*sync.Mutex{}, fs: laneFS{bases: map[string]*setBase{}}}
}

func (w *WaysRuntime) Lock(set string) func() {
	w.Mu.Lock()
	l := w.Locks[set]
	if l == nil {
		l = &sync.Mutex{}
		w.Locks[set] = l
	}
	w.Mu.Unlock()
	l.Lock()
	return l.Unlock
}

// StartLane runs one lane in the background under the daemon's turn
// context, registered as a turn run so that Discard can stop it and a
// shutdown ends it (interrupted).
func (s *Lanes) StartLane(a projections.AttemptSet, l *projections.Attempt) {
	run, err := s.Turns.Reserve(a.Session, l.TurnID)
	if err != nil {
		s.endLane(a, l, events.LaneEnded{State: events.AttemptFailed, Error: err.Error(), Interrupted: true,
			Totals: usage.Tokens{TokenUsageKnown: true}})
		return
	}
	go func() {
		defer s.Turns.Release(a.Session, l.TurnID, run)
		s.runLane(s.Turns.Ctx, a, l, run.Stop)
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
	ss, ok := s.Store.Session(a.Session)
	if !ok {
		fail(fmt.Errorf("session %q is gone", a.Session))
		return
	}
	src, err := s.Files.laneSource(ss)
	if err != nil {
		fail(err)
		return
	}
	if err := s.Files.laneFiles(ctx, a.ID, src, l); err != nil {
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
	obs := &agentrun.TurnObserver{Core: s.Core, Turn: projections.Turn{SessionID: a.Session, TurnID: l.TurnID, AgentID: l.Agent},
		Ctx: core.AsAgent(context.WithoutCancel(ctx), l.Agent, l.TurnID), Agent: l.Agent, Live: &agentrun.LiveCount{},
		Lane: &agentrun.LaneTurn{Lane: events.Lane{Index: l.Index, Run: l.Run}, Set: a.ID}}
	model := l.Model
	prior := s.Store.Turns(a.Session)
	call := core.ApprovalRequest{Run: l.Run, Session: a.Session, TurnID: l.TurnID, AgentID: l.Agent}
	rh := agentrun.TurnHooks{Core: s.Core}.Run(call, sb, ss.WorkingDir, len(prior) == 0) // commands/agentrun/hooks.go
	input, err := rh.Prompt(ctx, a.Input.String())
	if err != nil {
		fail(err)
		return
	}
	var res agent.TurnResult
	if s.Outside != nil && s.Outside.Outside(l.Agent) {
		// An outside agent races in its lane's own sandbox, its process
		// ended with the lane's run.
		res = s.Outside.Run(ctx, core.OutsideTurn{Run: l.Run, SessionID: a.Session, TurnID: l.TurnID, AgentID: l.Agent, Model: &model,
			Sandbox: sb, Dir: ss.WorkingDir, Input: input, Stop: stop, Hooks: agentrun.ToolHooks{RunHooks: rh}}, obs)
		s.Outside.End(l.Run)
	} else {
		res = s.Opts.Runtime.RunTurn(ctx, agent.TurnRequest{
			AgentID: l.Agent, Model: &model, History: turns.History(prior), Input: input,
			Tools: agentrun.NewTurnTools(s.Core, tools.New(sb, ss.WorkingDir), call, stop),
			Stop:  stop, MaxSteps: s.Opts.Turns.MaxSteps, StallTimeout: s.Opts.Turns.StallTimeout,
		}, obs)
	}
	rh.Stop(ctx)
	if res.Err != nil && ctx.Err() != nil {
		res.Err = context.Cause(ctx)
	}
	end := events.LaneEnded{Output: events.NewText(res.Output), Budget: res.Budget, Totals: res.Usage}
	switch res.Outcome {
	case agent.OutcomeDone:
		end.State = events.AttemptSucceeded
	case agent.OutcomeCancelled:
		end.State, end.Error = events.AttemptCancelled, events.ClipHookOutput(res.StopReason) // a hook's, if one ended it
	default:
		end.State, end.Error = events.AttemptFailed, "the lane failed"
		if res.Err != nil {
			end.Error = res.Err.Error()
		}
		end.Interrupted = errors.Is(res.Err, core.ErrShutdown)
	}
	// A lane Discard stopped has no changes anyone can read.
	if cur, _ := s.Store.AttemptSet(a.ID); ctx.Err() == nil && !cur.Discarded {
		if err := s.laneChanges(ctx, a, ss, sb, &end); err != nil && end.State == events.AttemptSucceeded {
			end.State, end.Error = events.AttemptFailed, "record the lane's changes: "+err.Error()
		}
	}
	s.endLane(a, l, end)
}

// laneChanges records what the lane changed against the set's snapshot.
func (s *Lanes) laneChanges(ctx context.Context, a projections.AttemptSet, ss projections.Session, sb sandbox.Sandbox, end *events.LaneEnded) error {
	ctx, cancel := context.WithTimeout(ctx, turns.SnapshotTimeout)
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
	if err := s.Append(context.Background(), []journal.Event{events.New(a.ID, end)}); err != nil {
		s.Log.Warn("end lane", "set", a.ID, "index", l.Index, "err", err)
	}
}

// prepareLane prepares the lane's sandbox on its copy, from the Session's
// reviewed plan, and runs the approved setup command there.
func (s *Lanes) prepareLane(ctx context.Context, ss projections.Session, l *projections.Attempt) (sandbox.Sandbox, error) {
	pctx, cancel := context.WithTimeout(ctx, environments.PrepareTimeout)
	defer cancel()
	drv, err := s.Connect(pctx)
	if err != nil {
		return nil, err
	}
	env := ss.Environment
	spec := sandbox.Spec{SessionID: l.TurnID, Generation: 1, Image: env.Image, WorkingDir: ss.WorkingDir,
		Source: l.Copy, Masked: s.ConfigMasked(ss), Network: s.SandboxOpts.Network, Limits: s.SandboxOpts.Limits}
	if s.Opts.Outside != nil {
		if spec.Tools, err = s.Opts.Outside.Tools(pctx, l.Agent); err != nil {
			return nil, err
		}
	}
	sb, err := drv.Prepare(pctx, spec)
	if err != nil {
		return nil, fmt.Errorf("prepare the lane's sandbox: %w", err)
	}
	if env.SetupCommand != "" && env.SetupApproved {
		code, tail, err := environments.RunSetup(ctx, sb, env.SetupCommand)
		if err != nil || code != 0 {
			environments.RemoveBounded(sb, s.Log)
			if err == nil {
				err = fmt.Errorf("exited with code %d: %s", code, lastLine(tail))
			}
			return nil, fmt.Errorf("the approved setup command failed in the lane: %w", err)
		}
	}
	s.Ways.Mu.Lock()
	s.Ways.Sandboxes[l.TurnID] = sb
	s.Ways.Mu.Unlock()
	return sb, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// LaneSandbox is a lane's live sandbox, prepared again on its copy when
// it is gone (a restart removes every lane's).
func (s *Lanes) LaneSandbox(ctx context.Context, ss projections.Session, l *projections.Attempt) (sandbox.Sandbox, error) {
	s.Ways.Mu.Lock()
	sb := s.Ways.Sandboxes[l.TurnID]
	s.Ways.Mu.Unlock()
	if sb != nil && !environments.IsDone(sb) {
		return sb, nil
	}
	if _, err := os.Lstat(l.Copy); err != nil {
		return nil, fmt.Errorf("%w: the copy of lane %d is gone", core.ErrConflict, l.Index)
	}
	if err := s.Files.MountLane(l); err != nil {
		return nil, err
	}
	return s.prepareLane(ctx, ss, l)
}

// StopLanes asks every lane of the set that runs here to stop and waits
// until each has ended.
func (s *Lanes) StopLanes(a projections.AttemptSet) {
	var runs []*core.TurnRun
	s.Turns.Mu.Lock()
	for _, l := range a.Attempts {
		if run := s.Turns.M[core.TurnKey(a.Session, l.TurnID)]; run != nil {
			runs = append(runs, run)
		}
	}
	s.Turns.Mu.Unlock()
	for _, run := range runs {
		run.StopOnce.Do(func() { close(run.Stop) })
	}
	// A lane still waiting for the set's base copy ends once it stops.
	s.Files.cancelBase(a.ID)
	timeout := time.After(laneJoinWait)
	for _, run := range runs {
		select {
		case <-run.Done:
		case <-timeout:
			s.Log.Warn("a lane did not stop in time", "set", a.ID)
		}
	}
}

// Drain waits, bounded by ctx, for the removals of kept sets' lanes that
// run in the background, for a shutdown; what it cuts short the start-up
// sweeps finish.
func (s *Lanes) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.Ways.Cleanup.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("Ways lanes still being removed at shutdown: %w", ctx.Err())
	}
}

// SweepCopies, at start, removes the files of every set that no longer
// needs them (settled, or unknown to the journal), the trash a crash left
// and an overlay probe a kill cut short (unmounted first), and mounts
// again the lanes of the sets that still do (a reboot unmounted them).
func (s *Lanes) SweepCopies(unsettled []projections.AttemptSet) {
	entries, err := os.ReadDir(s.Opts.WaysDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // the trash and a probe's, emptied below
		}
		if a, ok := s.Store.AttemptSet(e.Name()); ok && !a.Settled {
			continue
		}
		if err := s.Files.trashSet(e.Name()); err != nil {
			s.Log.Warn("remove a settled set's copies", "set", e.Name(), "err", err)
		}
	}
	s.Files.emptyTrash()
	if err := lanefs.SweepProbes(s.Opts.WaysDir); err != nil {
		s.Log.Warn("sweep an interrupted overlay probe", "dir", s.Opts.WaysDir, "err", err)
	}
	for _, a := range unsettled {
		if a, ok := s.Store.AttemptSet(a.ID); ok && !a.Settled && !a.Discarded {
			for _, l := range a.Attempts {
				if err := s.Files.MountLane(l); err != nil {
					s.Log.Warn("mount a Ways lane again", "set", a.ID, "index", l.Index, "err", err)
				}
			}
		}
	}
}

// RemoveLanes removes the lanes' sandboxes, unmounts their files and
// moves the set's files to the trash, which is emptied in the background.
func (s *Lanes) RemoveLanes(a projections.AttemptSet) error {
	ctx, cancel := context.WithTimeout(context.Background(), environments.RemoveTimeout)
	defer cancel()
	drv, err := s.Connect(ctx)
	if err != nil {
		return fmt.Errorf("%w: remove the lanes' sandboxes: %v", core.ErrUnavailable, err)
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
			s.Ways.Mu.Lock()
			delete(s.Ways.Sandboxes, l.TurnID)
			s.Ways.Mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.Files.trashSet(a.ID)
}

const copyTimeout = 10 * time.Minute

const laneJoinWait = time.Minute

// maxLaneChanged bounds the changed paths one lane event lists.
const maxLaneChanged = 4000
