package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

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

// Ways runs N isolated Attempts at one task of an autonomous single-Agent
// Session and keeps one, or discards them all (spec: Ways (Attempts)).
//
// A set starts by writing the Session's worktree (tracked and untracked
// changes) as a hidden commit through a temporary index, protected by the
// ref refs/lathe/ways/<set>; then attempt-set-started makes the set
// durable and hands it the Workspace: every primary surface of every
// Session there answers 409 (core.sandbox) until the set settles. The
// set's lanes then share one frozen private copy of the checkout, taken
// once when they start (the base: `cp -a` on the host, .git/objects
// hard-linked, since git never changes an object file), and each lane gets
// an overlayfs mount of it whose upper layer takes only that lane's
// writes, so a lane sees neither the Workspace's later writes nor another
// lane's, and its start does not grow with the number of lanes; where
// overlays are refused, each lane gets a whole copy instead (waysfs.go has
// the layout, the remount after a restart and the removal). Each lane has
// its own fresh sandbox from the Session's reviewed plan with its files
// mounted at the Workspace's path (sandbox.Spec.Source) and the approved
// setup command run again, and runs the task as an Agent turn
// there: runtime/agent.RunTurn with the Session's tools, budgets and Stop,
// journaled by the turn observer under the set (events.WrapLane). Its end
// records its worktree tree, the paths it changed and the binary patch
// from the snapshot, which Keep applies to the primary checkout as
// working-tree changes (applying → applied → transcript_recorded, each
// durable, each resumable; Keep reads only the recorded patch, never the
// lane's files), then the lane's turn joins the Session's history and the
// set settles. Discard stops the lanes, waits for them, removes their
// sandboxes, unmounts their overlays and moves the set's files to a trash
// emptied in the background (and at start, after a crash), deletes the ref,
// and settles.
type Ways struct {
	*sandboxes
	// ways is the runtime state of the Ways sets.
	ways *waysRuntime
	// lanes makes, mounts and trashes the lanes' files
	// (commands/waysfs.go).
	lanes *laneStore
}

// Ways bounds.
const (
	maxLanes     = 8
	defaultLanes = 2
	maxTaskLen   = 64 << 10
	copyTimeout  = 10 * time.Minute
	laneJoinWait = time.Minute
	lanePatchCap = git.MaxPatch
	// maxLaneChanged bounds the changed paths one lane event lists.
	maxLaneChanged = 4000
)

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

// laneTurn files a lane's turn events under its set.
type laneTurn struct {
	events.Lane
	set string
}

func (l *laneTurn) event(p events.Payload) journal.Event {
	if w, ok := events.WrapLane(l.Lane, p); ok {
		return events.New(l.set, w)
	}
	// The observer journals only progress events; anything else would be
	// a programming error, recorded rather than lost.
	return events.New(l.set, p)
}

// laneID names a lane's turn and its sandbox: unique per set and index.
func laneID(set string, index int) string { return set + "-" + strconv.Itoa(index) }

// laneRun is a lane's run key: the same for a Session and index in every
// set (clients tell sets apart by attempt_set_id).
func laneRun(session string, index int) string { return session + ":way" + strconv.Itoa(index) }

func waysRef(set string) string { return "refs/lathe/ways/" + set }

// refuseOwned is the 409 of a primary surface of a Session whose Workspace
// an unresolved Ways set owns.
func (s *sandboxes) refuseOwned(ss projections.Session) error {
	// A worktree Session's checkout is its own: a set of another
	// Session's owns the Workspace folder, not it, and a set of its own
	// owns that checkout only.
	if ss.Isolation == events.IsolationWorktree {
		if a, ok := s.store.CurrentAttemptSet(ss.ID); ok && a.Worktree && !a.Resolved() {
			return fmt.Errorf("%w: Ways set %q owns the worktree of session %q until it is kept or discarded", ErrConflict, a.ID, ss.ID)
		}
		return nil
	}
	if o, ok := s.store.WorkspaceOwner(ss.WorkspaceID); ok {
		return fmt.Errorf("%w: Ways set %q of session %q owns workspace %q until it is kept or discarded", ErrConflict, o.AttemptSetID, o.Session, o.Workspace)
	}
	return nil
}

// LaneRequest is one lane of a start: a model within the Agent's provider
// and an Agent, each optional.
type LaneRequest struct {
	Model   *string
	AgentID *string
}

// WaysRequest is POST /api/sessions/{id}/variants.
type WaysRequest struct {
	SessionID string
	Input     string
	Task      *string
	N         *int
	Lanes     []LaneRequest
}

func (req *WaysRequest) validate() (int, error) {
	if strings.TrimSpace(req.Input) == "" {
		return 0, fmt.Errorf("%w: input must not be empty", ErrInvalid)
	}
	if len(req.Input) > maxTurnInput || !utf8.ValidString(req.Input) {
		return 0, fmt.Errorf("%w: input must be valid UTF-8 of at most %d bytes", ErrInvalid, maxTurnInput)
	}
	if req.Task != nil && (len(*req.Task) > maxTaskLen || !utf8.ValidString(*req.Task)) {
		return 0, fmt.Errorf("%w: task must be valid UTF-8 of at most %d bytes", ErrInvalid, maxTaskLen)
	}
	n := defaultLanes
	switch {
	case req.N != nil:
		n = *req.N
	case req.Lanes != nil:
		n = len(req.Lanes)
	}
	if n < 1 || n > maxLanes {
		return 0, fmt.Errorf("%w: n must be an integer from 1 to %d, not %d", ErrInvalid, maxLanes, n)
	}
	if req.Lanes != nil && len(req.Lanes) != n {
		return 0, fmt.Errorf("%w: lanes lists %d lanes for n = %d; give one per Attempt", ErrInvalid, len(req.Lanes), n)
	}
	for i, l := range req.Lanes {
		if m := l.Model; m != nil && (strings.TrimSpace(*m) == "" || len(*m) > maxModelName || strings.ContainsFunc(*m, isControl)) {
			return 0, fmt.Errorf("%w: lanes[%d].model must be a model name (or absent)", ErrInvalid, i)
		}
		if a := l.AgentID; a != nil && strings.TrimSpace(*a) == "" {
			return 0, fmt.Errorf("%w: lanes[%d].agent_id must name an Agent (or be absent)", ErrInvalid, i)
		}
	}
	return n, nil
}

// Start starts a set: durable when it returns, its lanes running in the
// background.
func (s *Ways) Start(ctx context.Context, req WaysRequest) (projections.AttemptSet, error) {
	var none projections.AttemptSet
	n, err := req.validate()
	if err != nil {
		return none, err
	}
	id := req.SessionID
	ss, ok := s.store.Session(id)
	if !ok {
		return none, fmt.Errorf("%w: session %q", ErrNotFound, id)
	}
	if ss.Mode.Kind != events.ModeSingleAgent {
		return none, fmt.Errorf("%w: Ways need an autonomous single-Agent Session; session %q is %s", ErrConflict, id, ss.Mode.Kind)
	}
	if s.opts.RemoteSandbox {
		return none, errWaysRemote
	}
	if s.opts.Runtime == nil || s.opts.WaysDir == "" || s.connect == nil {
		return none, fmt.Errorf("%w: Ways need the Agent runtime, the local container runtime and a data directory", ErrUnavailable)
	}
	if _, _, err := s.sandbox(id); err != nil {
		return none, err
	}
	if err := waysCheckout(ss); err != nil {
		return none, err
	}
	s.ways.start.Lock()
	defer s.ways.start.Unlock()
	lockCtx, cancel := context.WithTimeout(ctx, acceptLockWait)
	ss, release, err := s.ownSession(lockCtx, id, true)
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w: the environment of session %q is changing", ErrConflict, id)
		}
		return none, err
	}
	defer release()
	sb, ss, err := s.sandbox(id)
	if err != nil {
		return none, err
	}
	if t, ok := s.store.ActiveTurn(id); ok {
		return none, fmt.Errorf("%w: turn %q is running in session %q; Ways start once it ends", ErrConflict, t.TurnID, id)
	}
	if cur, ok := s.store.CurrentAttemptSet(id); ok && !cur.Resolved() {
		return none, fmt.Errorf("%w: session %q already owns the unresolved Ways set %q; keep or discard it first", ErrConflict, id, cur.ID)
	}
	setID := ulid.Make().String()
	specs := make([]events.AttemptSpec, n)
	for i := range n {
		agentID, model := ss.Mode.AgentID, (*string)(nil)
		if i < len(req.Lanes) {
			if a := req.Lanes[i].AgentID; a != nil {
				agentID = *a
			}
			model = req.Lanes[i].Model
		}
		if _, err := s.opts.Runtime.Agent(agentID); err != nil {
			return none, fmt.Errorf("%w: lanes[%d]: agent %q is not configured", ErrInvalid, i, agentID)
		}
		m, err := s.opts.Runtime.Model(agentID, model)
		if err != nil {
			return none, fmt.Errorf("%w: lanes[%d]: %v", ErrInvalid, i, err)
		}
		specs[i] = events.AttemptSpec{Index: i, Run: laneRun(id, i), TurnID: laneID(setID, i), Model: m, Agent: agentID,
			Copy: laneCopyPath(s.opts.WaysDir, setID, i)}
	}
	sctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	commit, tree, err := git.Open(sb, ss.WorkingDir).SnapshotCommit(sctx, waysRef(setID))
	cancel()
	if err != nil {
		return none, fmt.Errorf("snapshot the checkout of session %q: %w", id, err)
	}
	started := events.AttemptSetStarted{Session: id, Workspace: ss.WorkspaceID, Worktree: ss.Isolation == events.IsolationWorktree, Input: events.NewText(req.Input),
		Snapshot: commit, Tree: tree, Ref: waysRef(setID), Attempts: specs}
	if req.Task != nil {
		started.Task = *req.Task
	}
	err = s.append(ctx, []journal.Event{events.New(setID, started)}, journal.Expectation{AggregateID: setID, Version: 0})
	if err != nil {
		s.deleteRef(ss.ID, waysRef(setID))
		return none, err
	}
	a, _ := s.store.AttemptSet(setID)
	for _, l := range a.Attempts {
		s.startLane(a, l)
	}
	return a, nil
}

// startLane runs one lane in the background under the daemon's turn
// context, registered as a turn run so that Discard can stop it and a
// shutdown ends it (interrupted).
func (s *Ways) startLane(a projections.AttemptSet, l *projections.Attempt) {
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
func (s *Ways) runLane(ctx context.Context, a projections.AttemptSet, l *projections.Attempt, stop <-chan struct{}) {
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
	if err := s.lanes.laneFiles(ctx, a.ID, ss.WorkingDir, l); err != nil {
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
	rh := turnHooks{s.core}.run(call, sb, ss.WorkingDir, len(prior) == 0) // commands/hooks.go
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
func (s *Ways) laneChanges(ctx context.Context, a projections.AttemptSet, ss projections.Session, sb sandbox.Sandbox, end *events.LaneEnded) error {
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
func (s *Ways) endLane(a projections.AttemptSet, l *projections.Attempt, end events.LaneEnded) {
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
func (s *Ways) prepareLane(ctx context.Context, ss projections.Session, l *projections.Attempt) (sandbox.Sandbox, error) {
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
func (s *Ways) laneSandbox(ctx context.Context, ss projections.Session, l *projections.Attempt) (sandbox.Sandbox, error) {
	s.ways.mu.Lock()
	sb := s.ways.sandboxes[l.TurnID]
	s.ways.mu.Unlock()
	if sb != nil && !isDone(sb) {
		return sb, nil
	}
	if _, err := os.Lstat(l.Copy); err != nil {
		return nil, fmt.Errorf("%w: the copy of lane %d is gone", ErrConflict, l.Index)
	}
	if err := s.lanes.mountLane(l); err != nil {
		return nil, err
	}
	return s.prepareLane(ctx, ss, l)
}

// set finds the set a set-scoped call names: ErrNotFound for an unknown
// Session or set, ErrConflict for a set that is not the Session's current.
func (s *Ways) set(session, setID string) (projections.AttemptSet, error) {
	if _, ok := s.store.Session(session); !ok {
		return projections.AttemptSet{}, fmt.Errorf("%w: session %q", ErrNotFound, session)
	}
	if setID == "" {
		return projections.AttemptSet{}, fmt.Errorf("%w: attempt_set_id is required", ErrInvalid)
	}
	known, current := s.store.AttemptSetOf(session, setID)
	switch {
	case !known:
		return projections.AttemptSet{}, fmt.Errorf("%w: session %q has no Ways set %q", ErrNotFound, session, setID)
	case !current:
		return projections.AttemptSet{}, fmt.Errorf("%w: Ways set %q is stale: session %q started a newer one", ErrConflict, setID, session)
	}
	a, _ := s.store.AttemptSet(setID)
	return a, nil
}

// lockedSet is set under the set's lock, which the caller releases.
func (s *Ways) lockedSet(session, setID string) (projections.AttemptSet, func(), error) {
	if _, err := s.set(session, setID); err != nil {
		return projections.AttemptSet{}, nil, err
	}
	unlock := s.ways.lock(setID)
	a, err := s.set(session, setID)
	if err != nil {
		unlock()
		return a, nil, err
	}
	return a, unlock, nil
}

func attempt(a projections.AttemptSet, index int) (*projections.Attempt, error) {
	if index < 0 || index >= len(a.Attempts) {
		return nil, fmt.Errorf("%w: index %d is out of range: the set has Attempts 0 to %d", ErrInvalid, index, len(a.Attempts)-1)
	}
	return a.Attempts[index], nil
}

// Results is the Session's durable current set, resolved or not.
func (s *Ways) Results(session string) (projections.AttemptSet, error) {
	if _, ok := s.store.Session(session); !ok {
		return projections.AttemptSet{}, fmt.Errorf("%w: session %q", ErrNotFound, session)
	}
	a, ok := s.store.CurrentAttemptSet(session)
	if !ok {
		return a, fmt.Errorf("%w: session %q has no Ways set", ErrNotFound, session)
	}
	return a, nil
}

// AttemptStatus is one Attempt's changed files.
type AttemptStatus struct {
	Index        int      `json:"index"`
	State        string   `json:"state"`
	ChangedFiles []string `json:"changed_files"`
}

// Status lists each Attempt's changed files: recorded at its end, read
// from its sandbox while it runs.
func (s *Ways) Status(ctx context.Context, session, setID string) ([]AttemptStatus, error) {
	a, err := s.set(session, setID)
	if err != nil {
		return nil, err
	}
	ss, _ := s.store.Session(session)
	out := make([]AttemptStatus, len(a.Attempts))
	for i, l := range a.Attempts {
		out[i] = AttemptStatus{Index: l.Index, State: l.State, ChangedFiles: l.Changed}
		if l.State != events.AttemptRunning {
			continue
		}
		s.ways.mu.Lock()
		sb := s.ways.sandboxes[l.TurnID]
		s.ways.mu.Unlock()
		if sb == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
		repo := git.Open(sb, ss.WorkingDir)
		if after, err := repo.Snapshot(cctx); err == nil {
			if changed, err := repo.ChangedPaths(cctx, a.Tree, after); err == nil {
				out[i].ChangedFiles = changed
			}
		}
		cancel()
	}
	return out, nil
}

// FileDiff is one file of one Attempt, before (the set's snapshot) and
// after (the lane's worktree). A nil side is absent.
type FileDiff struct {
	Path   string  `json:"path"`
	Before *string `json:"before"`
	After  *string `json:"after"`
	Binary bool    `json:"binary,omitempty"`
}

// Diff reads one path of one Attempt before and after.
func (s *Ways) Diff(ctx context.Context, session, setID string, index int, p string) (FileDiff, error) {
	a, err := s.set(session, setID)
	if err != nil {
		return FileDiff{}, err
	}
	l, err := attempt(a, index)
	if err != nil {
		return FileDiff{}, err
	}
	rel, err := CleanPath(p)
	if err != nil {
		return FileDiff{}, err
	}
	if rel == "." {
		return FileDiff{}, fmt.Errorf("%w: path must name a file", ErrInvalid)
	}
	if a.Resolved() {
		return FileDiff{}, fmt.Errorf("%w: Ways set %q is settled; its copies are gone", ErrConflict, setID)
	}
	sb, ss, err := s.primarySandbox(session)
	if err != nil {
		return FileDiff{}, err
	}
	out := FileDiff{Path: rel}
	cctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	before, ok, err := git.Open(sb, ss.WorkingDir).Show(cctx, a.Snapshot, rel)
	cancel()
	if err != nil {
		return out, err
	}
	if ok {
		out.Before, out.Binary = text(before)
	}
	if err := s.lanes.mountLane(l); err != nil {
		return out, err
	}
	root, err := os.OpenRoot(l.Copy)
	if err != nil {
		return out, fmt.Errorf("%w: the copy of Attempt %d is gone", ErrConflict, index)
	}
	defer root.Close()
	if fi, err := root.Lstat(rel); err == nil && fi.Mode().IsRegular() {
		if fi.Size() > git.MaxDiffOutput {
			return out, fmt.Errorf("%w: %s is larger than %d bytes", ErrTooLarge, rel, git.MaxDiffOutput)
		}
		b, err := root.ReadFile(rel)
		if err != nil {
			return out, err
		}
		var bin bool
		out.After, bin = text(b)
		out.Binary = out.Binary || bin
	}
	return out, nil
}

// text is content as a string, or nil and true for binary content.
func text(b []byte) (*string, bool) {
	if !utf8.Valid(b) || strings.IndexByte(string(b), 0) >= 0 {
		return nil, true
	}
	s := string(b)
	return &s, false
}

// testPath matches the paths of tests, for a Check's touched_tests.
var testPath = regexp.MustCompile(`(^|/)(tests?|__tests__|spec)/|_test\.[^/]+$|(^|/)test_[^/]+$|\.(test|spec)\.[^/]+$`)

// Verify runs a Check in every lane that succeeded, once every lane is
// terminal, and records each result (lane-verified).
func (s *Ways) Verify(ctx context.Context, session, setID string, check *string) (projections.AttemptSet, error) {
	a, unlock, err := s.lockedSet(session, setID)
	if err != nil {
		return a, err
	}
	defer unlock()
	switch a.State() {
	case projections.SetRunning:
		return a, fmt.Errorf("%w: Verify runs once every Attempt is terminal", ErrConflict)
	case projections.SetReady:
	default:
		return a, fmt.Errorf("%w: Ways set %q is %s", ErrConflict, setID, a.State())
	}
	ss, _ := s.store.Session(session)
	cmd := ""
	switch {
	case check != nil && strings.TrimSpace(*check) != "":
		cmd = *check
	case ss.CheckCommand != nil:
		cmd = *ss.CheckCommand
	default:
		return a, fmt.Errorf("%w: session %q has no Check; set one or send check", ErrConflict, session)
	}
	if len(cmd) > maxTaskLen || !utf8.ValidString(cmd) {
		return a, fmt.Errorf("%w: check must be valid UTF-8 of at most %d bytes", ErrInvalid, maxTaskLen)
	}
	for _, l := range a.Attempts {
		if l.State != events.AttemptSucceeded {
			continue
		}
		ev := events.LaneVerified{Lane: events.Lane{Index: l.Index, Run: l.Run}, Check: cmd, Changed: l.Changed, TouchedTests: []string{}}
		for _, p := range l.Changed {
			if testPath.MatchString(p) {
				ev.TouchedTests = append(ev.TouchedTests, p)
			}
		}
		sb, err := s.laneSandbox(context.WithoutCancel(ctx), ss, l)
		if err != nil {
			ev.ExitCode, ev.OutputTail = -1, "the lane's sandbox could not be prepared: "+err.Error()
		} else {
			tail := NewTail(tailBytes)
			code, timedOut, err := tools.Run(context.WithoutCancel(ctx), sb, sandbox.ExecSpec{Args: []string{"bash", "-lc", cmd}, Dir: ss.WorkingDir, Stdout: tail, Stderr: tail}, DefaultCheckTimeout)
			ev.ExitCode, ev.OutputTail = code, tail.String()
			switch {
			case err != nil:
				ev.ExitCode, ev.OutputTail = -1, ev.OutputTail+"\n[the check did not complete: "+err.Error()+"]"
			case timedOut:
				ev.ExitCode = -1
			}
		}
		ev.Passed = ev.ExitCode == 0
		if err := s.append(context.WithoutCancel(ctx), []journal.Event{events.New(setID, ev)}); err != nil {
			return a, err
		}
	}
	a, _ = s.store.AttemptSet(setID)
	return a, nil
}

// Keepable reports why an Attempt cannot be kept, or "" when it can.
// checked says whether the Session has a Check (then it must have passed).
func Keepable(l *projections.Attempt, checked bool) string {
	switch {
	case l.State != events.AttemptSucceeded:
		return fmt.Sprintf("Attempt %d is %s, not succeeded", l.Index, l.State)
	case len(l.Changed) == 0:
		return fmt.Sprintf("Attempt %d changed no file", l.Index)
	case checked && l.Verdict == nil:
		return fmt.Sprintf("Attempt %d is not verified; run Verify first", l.Index)
	case l.Verdict != nil && !l.Verdict.Passed:
		return fmt.Sprintf("Attempt %d failed its Check (exit %d)", l.Index, l.Verdict.ExitCode)
	}
	return ""
}

// Keep applies one Attempt's change to the primary checkout as working-tree
// changes (no commit), records its turn as the Session's turn of the task,
// removes the rest and settles the set. Each phase is durable; a retry with
// the same index resumes from the last one, another index is refused once
// applying began.
func (s *Ways) Keep(ctx context.Context, session, setID string, index int) (projections.AttemptSet, error) {
	a, unlock, err := s.lockedSet(session, setID)
	if err != nil {
		return a, err
	}
	defer unlock()
	l, err := attempt(a, index)
	if err != nil {
		return a, err
	}
	var cur string // the checkout's tree, once Keep took it
	switch {
	case a.Discarded:
		return a, fmt.Errorf("%w: Ways set %q is discarded", ErrConflict, setID)
	case a.Keep != nil && a.Keep.Index != index:
		return a, fmt.Errorf("%w: Keep of Attempt %d already began (%s); retry it with that index", ErrConflict, a.Keep.Index, a.Keep.Phase)
	case a.Settled:
		return a, nil
	case a.Keep == nil:
		if st := a.State(); st != projections.SetReady {
			return a, fmt.Errorf("%w: Ways set %q is %s; Keep needs every Attempt terminal", ErrConflict, setID, st)
		}
		ss, _ := s.store.Session(session)
		if why := Keepable(l, ss.CheckCommand != nil); why != "" {
			return a, fmt.Errorf("%w: %s", ErrConflict, why)
		}
		if cur, err = s.checkoutKept(ctx, a, l); err != nil {
			return a, err
		}
		if err := s.phase(ctx, a, events.KeepPhase{Index: index, Phase: events.KeepApplying}); err != nil {
			return a, err
		}
	}
	for {
		a, _ = s.store.AttemptSet(setID)
		if a.Settled {
			return a, nil
		}
		switch a.Keep.Phase {
		case events.KeepApplying:
			if err := s.apply(ctx, a, a.Attempts[index], cur); err != nil {
				return a, err
			}
			err = s.phase(ctx, a, events.KeepPhase{Index: index, Phase: events.KeepApplied})
		case events.KeepApplied:
			err = s.recordTranscript(ctx, a, a.Attempts[index])
		case events.KeepTranscriptRecorded:
			err = s.settleSet(ctx, a)
		}
		if err != nil {
			return a, err
		}
	}
}

// checkoutKept refuses a Keep whose Attempt changed files that the primary
// checkout changed too since the set's snapshot (by a writer outside
// Lathe: every primary surface is suspended meanwhile), since applying
// would first put them back to the snapshot and lose those edits. Edits to
// other files stay as they are. It returns the checkout's tree, which
// apply then need not take again.
func (s *Ways) checkoutKept(ctx context.Context, a projections.AttemptSet, l *projections.Attempt) (string, error) {
	sb, ss, err := s.primarySandbox(a.Session)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	repo := git.Open(sb, ss.WorkingDir)
	cur, err := repo.Snapshot(ctx)
	if err != nil || cur == a.Tree {
		return cur, err
	}
	changed, err := repo.ChangedPaths(ctx, a.Tree, cur)
	if err != nil {
		return "", err
	}
	lane := make(map[string]bool, len(l.Changed))
	for _, p := range l.Changed {
		lane[p] = true
	}
	var both []string
	for _, p := range changed {
		if lane[p] {
			both = append(both, p)
		}
	}
	if len(both) == 0 {
		return cur, nil
	}
	shown := both[:min(len(both), 10)]
	return "", fmt.Errorf("%w: the checkout changed %d of the files Attempt %d changed since the set started (%s); keeping it would overwrite them: undo those edits outside Lathe, or discard the set",
		ErrConflict, len(both), l.Index, strings.Join(shown, ", "))
}

func (s *Ways) phase(ctx context.Context, a projections.AttemptSet, p events.KeepPhase) error {
	return s.append(context.WithoutCancel(ctx), []journal.Event{events.New(a.ID, p)}, journal.Expectation{AggregateID: a.ID, Version: a.Version})
}

// apply makes the primary worktree the lane's: nothing to do when it is
// already; else the paths the lane changed go back to the snapshot (undoing
// an apply a crash cut short) and its patch applies. cur is the worktree's
// tree when the caller just took it, else "".
func (s *Ways) apply(ctx context.Context, a projections.AttemptSet, l *projections.Attempt, cur string) error {
	sb, ss, err := s.primarySandbox(a.Session)
	if err != nil {
		return err
	}
	var r events.BlobReader
	if s.opts.Blobs != nil {
		r = s.opts.Blobs
	}
	patch, err := l.Patch.Resolve(r)
	if err != nil {
		return fmt.Errorf("read the patch of Attempt %d: %w", l.Index, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snapshotTimeout)
	defer cancel()
	repo := git.Open(sb, ss.WorkingDir)
	if cur == "" {
		if cur, err = repo.Snapshot(ctx); err != nil {
			return err
		}
	}
	if cur == l.After {
		return nil
	}
	if cur != a.Tree {
		if err := repo.RestorePaths(ctx, a.Snapshot, l.Changed); err != nil {
			return fmt.Errorf("undo a partial apply: %w", err)
		}
	}
	if err := repo.ApplyPatch(ctx, []byte(patch.String())); err != nil {
		return fmt.Errorf("%w: apply Attempt %d to the checkout: %v", ErrConflict, l.Index, err)
	}
	return nil
}

// recordTranscript makes the kept lane's turn the Session's turn of the
// task: the same turn events a Session turn journals, committed with the
// transcript_recorded phase in one append.
func (s *Ways) recordTranscript(ctx context.Context, a projections.AttemptSet, l *projections.Attempt) error {
	t := l.Turn
	id := a.Session
	model := l.Model
	evs := []journal.Event{
		events.New(id, events.TurnAccepted{TurnID: t.TurnID, IdempotencyKey: t.TurnID, AgentID: l.Agent, Input: a.Input, ModelOverride: &model, Source: "ways"}),
		events.New(id, events.TurnStarted{TurnID: t.TurnID, Agent: l.Agent, Model: l.Model}),
	}
	for _, st := range t.Steps {
		evs = append(evs, events.New(id, events.TurnOutput{TurnID: t.TurnID, Agent: st.Agent, Step: st.Step, Text: st.Text, Reasoning: st.Reasoning, ToolCalls: st.ToolCalls, Partial: st.Partial}))
	}
	for _, c := range t.ToolCalls {
		evs = append(evs, events.New(id, events.ToolCallStarted{TurnID: t.TurnID, Agent: c.Agent, CallID: c.CallID, Occurrence: c.Occurrence, Name: c.Name, Arguments: c.Arguments}))
		if c.Finished {
			evs = append(evs, events.New(id, events.ToolCallFinished{TurnID: t.TurnID, Agent: c.Agent, CallID: c.CallID, Occurrence: c.Occurrence, Name: c.Name, Result: c.Result, IsError: c.IsError, DurationMS: c.DurationMS}))
		}
	}
	usage := events.TurnUsage{TurnID: t.TurnID, Agent: l.Agent, Step: len(t.Steps), Model: l.Model, Tokens: t.Usage.Tokens}
	usage.CostUSD = t.Usage.PricedUSD()
	changes := events.TurnChanges{TurnID: t.TurnID, Before: a.Tree, After: l.After, Paths: l.Changed}
	if len(changes.Paths) > maxChangedPaths {
		changes.Paths, changes.Truncated = changes.Paths[:maxChangedPaths], true
	}
	evs = append(evs, events.New(id, usage), events.New(id, changes),
		events.New(id, events.TurnDone{TurnID: t.TurnID, Output: t.Output, Totals: t.Usage.Tokens}),
		events.New(a.ID, events.KeepPhase{Index: l.Index, Phase: events.KeepTranscriptRecorded}))
	return s.append(context.WithoutCancel(ctx), evs, journal.Expectation{AggregateID: a.ID, Version: a.Version})
}

// Discard stops the set's lanes, waits for them, removes their sandboxes,
// copies and the snapshot ref, and settles the set. It is refused once
// Keep began applying.
func (s *Ways) Discard(ctx context.Context, session, setID string) (projections.AttemptSet, error) {
	a, unlock, err := s.lockedSet(session, setID)
	if err != nil {
		return a, err
	}
	defer unlock()
	switch {
	case a.Keep != nil:
		return a, fmt.Errorf("%w: Keep of Attempt %d began (%s); Discard is refused after apply begins", ErrConflict, a.Keep.Index, a.Keep.Phase)
	case a.Settled:
		return a, nil
	case !a.Discarded:
		if err := s.append(context.WithoutCancel(ctx), []journal.Event{events.New(setID, events.AttemptSetDiscarded{})},
			journal.Expectation{AggregateID: setID, Version: a.Version}); err != nil {
			return a, err
		}
	}
	s.stopLanes(a)
	a, _ = s.store.AttemptSet(setID)
	if err := s.settleSet(ctx, a); err != nil {
		return a, err
	}
	a, _ = s.store.AttemptSet(setID)
	return a, nil
}

// stopLanes asks every lane of the set that runs here to stop and waits
// until each has ended.
func (s *Ways) stopLanes(a projections.AttemptSet) {
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
	s.lanes.cancelBase(a.ID)
	timeout := time.After(laneJoinWait)
	for _, run := range runs {
		select {
		case <-run.done:
		case <-timeout:
			s.log.Warn("a lane did not stop in time", "set", a.ID)
		}
	}
}

// settleSet removes the snapshot ref and appends the settlement that
// releases the Workspace. Discard removes the lanes' sandboxes and moves
// their files to the trash before it settles (no container, mount or file
// of the set is left in place when it answers); Keep, whose change
// is already in the checkout, settles first and removes them after, off
// the user's path (a crash in between leaves them to the start-up sweeps:
// Reconstruct's of orphaned sandboxes, ReconcileLanes' of copies).
func (s *Ways) settleSet(ctx context.Context, a projections.AttemptSet) error {
	discard := a.Keep == nil
	if discard {
		if err := s.removeLanes(a); err != nil {
			return err
		}
	}
	s.deleteRef(a.Session, a.Ref)
	err := s.append(context.WithoutCancel(ctx), []journal.Event{events.New(a.ID, events.AttemptSetSettled{Workspace: a.Workspace})},
		journal.Expectation{AggregateID: a.ID, Version: a.Version})
	if err != nil {
		return err
	}
	s.ways.mu.Lock()
	delete(s.ways.locks, a.ID)
	s.ways.mu.Unlock()
	if !discard {
		s.ways.cleanup.Add(1)
		go func() {
			defer s.ways.cleanup.Done()
			if err := s.removeLanes(a); err != nil {
				s.log.Warn("remove a kept set's lanes", "set", a.ID, "err", err)
			}
		}()
	}
	return nil
}

// Drain waits, bounded by ctx, for the removals of kept sets' lanes that
// run in the background, for a shutdown; what it cuts short the start-up
// sweeps finish.
func (s *Ways) Drain(ctx context.Context) error {
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
func (s *Ways) sweepCopies(unsettled []projections.AttemptSet) {
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
		if err := s.lanes.trashSet(e.Name()); err != nil {
			s.log.Warn("remove a settled set's copies", "set", e.Name(), "err", err)
		}
	}
	s.lanes.emptyTrash()
	if err := lanefs.SweepProbes(s.opts.WaysDir); err != nil {
		s.log.Warn("sweep an interrupted overlay probe", "dir", s.opts.WaysDir, "err", err)
	}
	for _, a := range unsettled {
		if a, ok := s.store.AttemptSet(a.ID); ok && !a.Settled && !a.Discarded {
			for _, l := range a.Attempts {
				if err := s.lanes.mountLane(l); err != nil {
					s.log.Warn("mount a Ways lane again", "set", a.ID, "index", l.Index, "err", err)
				}
			}
		}
	}
}

// removeLanes removes the lanes' sandboxes, unmounts their files and
// moves the set's files to the trash, which is emptied in the background.
func (s *Ways) removeLanes(a projections.AttemptSet) error {
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
	return s.lanes.trashSet(a.ID)
}

// deleteRef removes the snapshot's ref from the primary checkout, when its
// sandbox is Ready (else it stays, harmless, until a later Keep or
// Discard of the Session runs).
func (s *Ways) deleteRef(session, ref string) {
	sb, ss, err := s.primarySandbox(session)
	if err != nil {
		s.log.Warn("the Ways snapshot ref stays: the primary checkout is not ready", "session", session, "ref", ref, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	if err := git.Open(sb, ss.WorkingDir).DeleteRef(ctx, ref); err != nil {
		s.log.Warn("delete the Ways snapshot ref", "session", session, "ref", ref, "err", err)
	}
}

// ReconcileLanes ends, at start, every lane the journal shows live but no
// runner of this process owns: the daemon stopped under it. Each gets
// exactly one failed (interrupted) end with the usage its journaled steps
// paid for, a subtotal. Sets whose Discard or Keep was past its last
// decision finish settling in the background once the environments are
// reconstructed.
func (s *Ways) ReconcileLanes(ctx context.Context) error {
	sets := s.store.UnsettledAttemptSets()
	for _, a := range sets {
		for _, l := range a.Attempts {
			if projections.AttemptTerminal(l.State) {
				continue
			}
			if s.turns.running(a.Session, l.TurnID) != nil {
				continue
			}
			totals := l.Turn.Usage.Tokens
			totals.TokenUsageKnown = false
			err := s.append(ctx, []journal.Event{events.New(a.ID, events.LaneEnded{Lane: events.Lane{Index: l.Index, Run: l.Run},
				State: events.AttemptFailed, Error: "interrupted: the daemon stopped during this lane", Interrupted: true, Totals: totals, Changed: []string{}})})
			if err != nil {
				return fmt.Errorf("end interrupted lane %d of Ways set %s: %w", l.Index, a.ID, err)
			}
		}
	}
	go func() {
		if err := s.reconciled.wait(context.Background()); err != nil {
			return
		}
		s.sweepCopies(sets)
		for _, a := range sets {
			// Read under the set's lock: a Discard asked meanwhile may
			// have settled it.
			unlock := s.ways.lock(a.ID)
			if a, ok := s.store.AttemptSet(a.ID); ok && !a.Settled && (a.Discarded || (a.Keep != nil && a.Keep.Phase == events.KeepTranscriptRecorded)) {
				if err := s.settleSet(context.Background(), a); err != nil {
					s.log.Warn("settle a Ways set after a restart", "set", a.ID, "err", err)
				}
			}
			unlock()
		}
	}()
	return nil
}

// AttemptUsage is an Attempt's usage as Results report it. USDKnown is true
// only when every price is known and every count complete (CONTRACT.md).
type AttemptUsage struct {
	usage.View
	USD      *float64 `json:"usd"`
	USDKnown bool     `json:"usd_known"`
}

// NoAttemptUsage is the usage of no work, complete and priced: the start of
// a sum.
func NoAttemptUsage() AttemptUsage {
	return AttemptUsage{View: usage.Tokens{TokenUsageKnown: true}.View(), USDKnown: true}
}

// Add sums o into u: each part known only when both are.
func (u AttemptUsage) Add(o AttemptUsage) AttemptUsage {
	sum := AttemptUsage{View: u.Tokens.Add(o.Tokens).View(), USDKnown: u.USDKnown && o.USDKnown}
	if u.USD != nil || o.USD != nil {
		usd := 0.0
		for _, p := range []*float64{u.USD, o.USD} {
			if p != nil {
				usd += *p
			}
		}
		sum.USD = &usd
	}
	return sum
}

// UsageOf is an Attempt's usage: an unknown price stays unknown (nil USD
// when nothing was priced; USDKnown false when any part was not).
func UsageOf(l *projections.Attempt) AttemptUsage {
	u := l.Turn.Usage
	return AttemptUsage{View: u.View, USD: u.PricedUSD(), USDKnown: u.CostKnown}
}
