package ways

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/lanes"
	"lathe/commands/scm"
	"lathe/commands/turns"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent/tools"
	"lathe/runtime/git"
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
	*environments.Sandboxes
	// ways is the runtime state of the Ways sets.
	ways *lanes.WaysRuntime
	// lanes runs the lanes (commands/lanes/lanes.go).
	lanes *lanes.Lanes
}

// Ways bounds.
const (
	MaxLanes     = 8
	DefaultLanes = 2
	maxTaskLen   = 64 << 10
	lanePatchCap = git.MaxPatch
)

// LaneID names a lane's turn and its sandbox: unique per set and index.
func LaneID(set string, index int) string { return set + "-" + strconv.Itoa(index) }

// LaneRun is a lane's run key: the same for a Session and index in every
// set (clients tell sets apart by attempt_set_id).
func LaneRun(session string, index int) string { return session + ":way" + strconv.Itoa(index) }

func WaysRef(set string) string { return "refs/lathe/ways/" + set }

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

func (req *WaysRequest) Validate() (int, error) {
	if strings.TrimSpace(req.Input) == "" {
		return 0, fmt.Errorf("%w: input must not be empty", core.ErrInvalid)
	}
	if len(req.Input) > turns.MaxTurnInput || !utf8.ValidString(req.Input) {
		return 0, fmt.Errorf("%w: input must be valid UTF-8 of at most %d bytes", core.ErrInvalid, turns.MaxTurnInput)
	}
	if req.Task != nil && (len(*req.Task) > maxTaskLen || !utf8.ValidString(*req.Task)) {
		return 0, fmt.Errorf("%w: task must be valid UTF-8 of at most %d bytes", core.ErrInvalid, maxTaskLen)
	}
	n := DefaultLanes
	switch {
	case req.N != nil:
		n = *req.N
	case req.Lanes != nil:
		n = len(req.Lanes)
	}
	if n < 1 || n > MaxLanes {
		return 0, fmt.Errorf("%w: n must be an integer from 1 to %d, not %d", core.ErrInvalid, MaxLanes, n)
	}
	if req.Lanes != nil && len(req.Lanes) != n {
		return 0, fmt.Errorf("%w: lanes lists %d lanes for n = %d; give one per Attempt", core.ErrInvalid, len(req.Lanes), n)
	}
	for i, l := range req.Lanes {
		if m := l.Model; m != nil && (strings.TrimSpace(*m) == "" || len(*m) > core.MaxModelName || strings.ContainsFunc(*m, core.IsControl)) {
			return 0, fmt.Errorf("%w: lanes[%d].model must be a model name (or absent)", core.ErrInvalid, i)
		}
		if a := l.AgentID; a != nil && strings.TrimSpace(*a) == "" {
			return 0, fmt.Errorf("%w: lanes[%d].agent_id must name an Agent (or be absent)", core.ErrInvalid, i)
		}
	}
	return n, nil
}

// Start starts a set: durable when it returns, its lanes running in the
// background.
func (s *Ways) Start(ctx context.Context, req WaysRequest) (projections.AttemptSet, error) {
	var none projections.AttemptSet
	n, err := req.Validate()
	if err != nil {
		return none, err
	}
	id := req.SessionID
	ss, ok := s.Store.Session(id)
	if !ok {
		return none, fmt.Errorf("%w: session %q", core.ErrNotFound, id)
	}
	if ss.Mode.Kind != events.ModeSingleAgent {
		return none, fmt.Errorf("%w: Ways need an autonomous single-Agent Session; session %q is %s", core.ErrConflict, id, ss.Mode.Kind)
	}
	if s.Opts.RemoteSandbox {
		return none, environments.ErrWaysRemote
	}
	if s.Opts.Runtime == nil || s.Opts.WaysDir == "" || s.Connect == nil {
		return none, fmt.Errorf("%w: Ways need the Agent runtime, the local container runtime and a data directory", core.ErrUnavailable)
	}
	if _, _, err := s.ReadySandbox(id); err != nil {
		return none, err
	}
	if err := lanes.WaysCheckout(ss); err != nil {
		return none, err
	}
	s.ways.Start.Lock()
	defer s.ways.Start.Unlock()
	lockCtx, cancel := context.WithTimeout(ctx, core.AcceptLockWait)
	ss, release, err := s.OwnSession(lockCtx, id, true)
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w: the environment of session %q is changing", core.ErrConflict, id)
		}
		return none, err
	}
	defer release()
	sb, ss, err := s.ReadySandbox(id)
	if err != nil {
		return none, err
	}
	if t, ok := s.Store.ActiveTurn(id); ok {
		return none, fmt.Errorf("%w: turn %q is running in session %q; Ways start once it ends", core.ErrConflict, t.TurnID, id)
	}
	if cur, ok := s.Store.CurrentAttemptSet(id); ok && !cur.Resolved() {
		return none, fmt.Errorf("%w: session %q already owns the unresolved Ways set %q; keep or discard it first", core.ErrConflict, id, cur.ID)
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
		if _, err := s.Opts.Runtime.Agent(agentID); err != nil {
			return none, fmt.Errorf("%w: lanes[%d]: agent %q is not configured", core.ErrInvalid, i, agentID)
		}
		m, err := s.Opts.Runtime.Model(agentID, model)
		if err != nil {
			return none, fmt.Errorf("%w: lanes[%d]: %v", core.ErrInvalid, i, err)
		}
		specs[i] = events.AttemptSpec{Index: i, Run: LaneRun(id, i), TurnID: LaneID(setID, i), Model: m, Agent: agentID,
			Copy: lanes.LaneCopyPath(s.Opts.WaysDir, setID, i)}
	}
	sctx, cancel := context.WithTimeout(ctx, turns.SnapshotTimeout)
	commit, tree, err := git.Open(sb, ss.WorkingDir).SnapshotCommit(sctx, WaysRef(setID))
	cancel()
	if err != nil {
		return none, fmt.Errorf("snapshot the checkout of session %q: %w", id, err)
	}
	started := events.AttemptSetStarted{Session: id, Workspace: ss.WorkspaceID, Worktree: ss.Isolation == events.IsolationWorktree, Input: events.NewText(req.Input),
		Snapshot: commit, Tree: tree, Ref: WaysRef(setID), Attempts: specs}
	if req.Task != nil {
		started.Task = *req.Task
	}
	err = s.Append(ctx, []journal.Event{events.New(setID, started)}, journal.Expectation{AggregateID: setID, Version: 0})
	if err != nil {
		s.deleteRef(ss.ID, WaysRef(setID))
		return none, err
	}
	a, _ := s.Store.AttemptSet(setID)
	for _, l := range a.Attempts {
		s.lanes.StartLane(a, l)
	}
	return a, nil
}

// set finds the set a set-scoped call names: ErrNotFound for an unknown
// Session or set, ErrConflict for a set that is not the Session's current.
func (s *Ways) set(session, setID string) (projections.AttemptSet, error) {
	if _, ok := s.Store.Session(session); !ok {
		return projections.AttemptSet{}, fmt.Errorf("%w: session %q", core.ErrNotFound, session)
	}
	if setID == "" {
		return projections.AttemptSet{}, fmt.Errorf("%w: attempt_set_id is required", core.ErrInvalid)
	}
	known, current := s.Store.AttemptSetOf(session, setID)
	switch {
	case !known:
		return projections.AttemptSet{}, fmt.Errorf("%w: session %q has no Ways set %q", core.ErrNotFound, session, setID)
	case !current:
		return projections.AttemptSet{}, fmt.Errorf("%w: Ways set %q is stale: session %q started a newer one", core.ErrConflict, setID, session)
	}
	a, _ := s.Store.AttemptSet(setID)
	return a, nil
}

// lockedSet is set under the set's lock, which the caller releases.
func (s *Ways) lockedSet(session, setID string) (projections.AttemptSet, func(), error) {
	if _, err := s.set(session, setID); err != nil {
		return projections.AttemptSet{}, nil, err
	}
	unlock := s.ways.Lock(setID)
	a, err := s.set(session, setID)
	if err != nil {
		unlock()
		return a, nil, err
	}
	return a, unlock, nil
}

func attempt(a projections.AttemptSet, index int) (*projections.Attempt, error) {
	if index < 0 || index >= len(a.Attempts) {
		return nil, fmt.Errorf("%w: index %d is out of range: the set has Attempts 0 to %d", core.ErrInvalid, index, len(a.Attempts)-1)
	}
	return a.Attempts[index], nil
}

// Results is the Session's durable current set, resolved or not.
func (s *Ways) Results(session string) (projections.AttemptSet, error) {
	if _, ok := s.Store.Session(session); !ok {
		return projections.AttemptSet{}, fmt.Errorf("%w: session %q", core.ErrNotFound, session)
	}
	a, ok := s.Store.CurrentAttemptSet(session)
	if !ok {
		return a, fmt.Errorf("%w: session %q has no Ways set", core.ErrNotFound, session)
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
	ss, _ := s.Store.Session(session)
	out := make([]AttemptStatus, len(a.Attempts))
	for i, l := range a.Attempts {
		out[i] = AttemptStatus{Index: l.Index, State: l.State, ChangedFiles: l.Changed}
		if l.State != events.AttemptRunning {
			continue
		}
		s.ways.Mu.Lock()
		sb := s.ways.Sandboxes[l.TurnID]
		s.ways.Mu.Unlock()
		if sb == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, turns.SnapshotTimeout)
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
	rel, err := core.CleanPath(p)
	if err != nil {
		return FileDiff{}, err
	}
	if rel == "." {
		return FileDiff{}, fmt.Errorf("%w: path must name a file", core.ErrInvalid)
	}
	if a.Resolved() {
		return FileDiff{}, fmt.Errorf("%w: Ways set %q is settled; its copies are gone", core.ErrConflict, setID)
	}
	sb, ss, err := s.PrimarySandbox(session)
	if err != nil {
		return FileDiff{}, err
	}
	out := FileDiff{Path: rel}
	cctx, cancel := context.WithTimeout(ctx, turns.SnapshotTimeout)
	before, ok, err := git.Open(sb, ss.WorkingDir).Show(cctx, a.Snapshot, rel)
	cancel()
	if err != nil {
		return out, err
	}
	if ok {
		out.Before, out.Binary = text(before)
	}
	if err := s.lanes.Files.MountLane(l); err != nil {
		return out, err
	}
	root, err := os.OpenRoot(l.Copy)
	if err != nil {
		return out, fmt.Errorf("%w: the copy of Attempt %d is gone", core.ErrConflict, index)
	}
	defer root.Close()
	if fi, err := root.Lstat(rel); err == nil && fi.Mode().IsRegular() {
		if fi.Size() > git.MaxDiffOutput {
			return out, fmt.Errorf("%w: %s is larger than %d bytes", core.ErrTooLarge, rel, git.MaxDiffOutput)
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
		return a, fmt.Errorf("%w: Verify runs once every Attempt is terminal", core.ErrConflict)
	case projections.SetReady:
	default:
		return a, fmt.Errorf("%w: Ways set %q is %s", core.ErrConflict, setID, a.State())
	}
	ss, _ := s.Store.Session(session)
	cmd := ""
	switch {
	case check != nil && strings.TrimSpace(*check) != "":
		cmd = *check
	case ss.CheckCommand != nil:
		cmd = *ss.CheckCommand
	default:
		return a, fmt.Errorf("%w: session %q has no Check; set one or send check", core.ErrConflict, session)
	}
	if len(cmd) > maxTaskLen || !utf8.ValidString(cmd) {
		return a, fmt.Errorf("%w: check must be valid UTF-8 of at most %d bytes", core.ErrInvalid, maxTaskLen)
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
		sb, err := s.lanes.LaneSandbox(context.WithoutCancel(ctx), ss, l)
		if err != nil {
			ev.ExitCode, ev.OutputTail = -1, "the lane's sandbox could not be prepared: "+err.Error()
		} else {
			tail := core.NewTail(environments.TailBytes)
			code, timedOut, err := tools.Run(context.WithoutCancel(ctx), sb, sandbox.ExecSpec{Args: []string{"bash", "-lc", cmd}, Dir: ss.WorkingDir, Stdout: tail, Stderr: tail}, scm.DefaultCheckTimeout)
			ev.ExitCode, ev.OutputTail = code, tail.String()
			switch {
			case err != nil:
				ev.ExitCode, ev.OutputTail = -1, ev.OutputTail+"\n[the check did not complete: "+err.Error()+"]"
			case timedOut:
				ev.ExitCode = -1
			}
		}
		ev.Passed = ev.ExitCode == 0
		if err := s.Append(context.WithoutCancel(ctx), []journal.Event{events.New(setID, ev)}); err != nil {
			return a, err
		}
	}
	a, _ = s.Store.AttemptSet(setID)
	return a, nil
}

// ReconcileLanes ends, at start, every lane the journal shows live but no
// runner of this process owns: the daemon stopped under it. Each gets
// exactly one failed (interrupted) end with the usage its journaled steps
// paid for, a subtotal. Sets whose Discard or Keep was past its last
// decision finish settling in the background once the environments are
// reconstructed.
func (s *Ways) ReconcileLanes(ctx context.Context) error {
	sets := s.Store.UnsettledAttemptSets()
	for _, a := range sets {
		for _, l := range a.Attempts {
			if projections.AttemptTerminal(l.State) {
				continue
			}
			if s.Turns.Running(a.Session, l.TurnID) != nil {
				continue
			}
			totals := l.Turn.Usage.Tokens
			totals.TokenUsageKnown = false
			err := s.Append(ctx, []journal.Event{events.New(a.ID, events.LaneEnded{Lane: events.Lane{Index: l.Index, Run: l.Run},
				State: events.AttemptFailed, Error: "interrupted: the daemon stopped during this lane", Interrupted: true, Totals: totals, Changed: []string{}})})
			if err != nil {
				return fmt.Errorf("end interrupted lane %d of Ways set %s: %w", l.Index, a.ID, err)
			}
		}
	}
	go func() {
		if err := s.Reconciled.Wait(context.Background()); err != nil {
			return
		}
		s.lanes.SweepCopies(sets)
		for _, a := range sets {
			// Read under the set's lock: a Discard asked meanwhile may
			// have settled it.
			unlock := s.ways.Lock(a.ID)
			if a, ok := s.Store.AttemptSet(a.ID); ok && !a.Settled && (a.Discarded || (a.Keep != nil && a.Keep.Phase == events.KeepTranscriptRecorded)) {
				if err := s.settleSet(context.Background(), a); err != nil {
					s.Log.Warn("settle a Ways set after a restart", "set", a.ID, "err", err)
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

// Drain waits, bounded by ctx, for the lanes' removals under way, for a
// shutdown (Lanes.Drain).
func (s *Ways) Drain(ctx context.Context) error { return s.lanes.Drain(ctx) }

// NewWays returns the Ways commands and their lanes.
func NewWays(sb *environments.Sandboxes) *Ways {
	w := lanes.NewWaysRuntime()
	return &Ways{Sandboxes: sb, ways: w, lanes: &lanes.Lanes{Sandboxes: sb, Ways: w, Files: &lanes.LaneStore{Core: sb.Core, Ways: w}}}
}
