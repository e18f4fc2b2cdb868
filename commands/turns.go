package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	"lathe/runtime/sandbox"
	"lathe/runtime/usage"
)

// Turn input bounds.
const (
	maxTurnInput       = 512 << 10
	maxContextRefs     = 64
	maxContextRefBytes = 64 << 10
	maxModelName       = 200
	// acceptLockWait bounds an accept's wait for the lifecycle lock.
	acceptLockWait = 5 * time.Second
)

// LivePublisher carries a turn's streamed deltas to the live-run projection
// (the daemon publishes them on their NATS live subject).
type LivePublisher interface {
	PublishLive(d events.LiveDelta) error
}

// TurnRequest is a `session` /ws command or a POST execute.
type TurnRequest struct {
	SessionID         string
	TurnID            string
	IdempotencyKey    string
	Input             string
	DisplayInput      *string
	ContextReferences []json.RawMessage
	ReferenceIDs      []string
	ModelOverride     *string
	TargetAgent       *string
	Source            string
}

// TurnRunner settings: the daemon's turn loop bounds.
type TurnOptions struct {
	MaxSteps     int
	StallTimeout time.Duration
}

// turnRuns tracks the turns this process runs: Stop and the execute route's
// wait find them here. A live turn in the projection without an entry here
// was left by an earlier process (ReconcileTurns ends it).
type turnRuns struct {
	mu     sync.Mutex
	m      map[string]*turnRun
	closed bool
	wg     sync.WaitGroup
	// ctx is the parent of every turn: cancelled (with a cause) at shutdown.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

type turnRun struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func newTurnRuns() *turnRuns {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &turnRuns{m: map[string]*turnRun{}, ctx: ctx, cancel: cancel}
}

// running is the run this daemon holds for a turn, or nil.
func (r *turnRuns) running(session, turn string) *turnRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[turnKey(session, turn)]
}

func turnKey(session, turn string) string { return session + "\x00" + turn }

// errShutdown is the cause that ends the turns running at shutdown.
var errShutdown = errors.New("interrupted: the daemon is shutting down")

func checkIdentity(field, v string) error {
	if v == "" {
		return nil
	}
	if len(v) > maxTurnIDLen || !utf8.ValidString(v) || strings.TrimSpace(v) != v || strings.ContainsFunc(v, isControl) {
		return fmt.Errorf("%w: %s must be 1-%d bytes of printable UTF-8 without surrounding spaces", ErrInvalid, field, maxTurnIDLen)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func (req *TurnRequest) validate() error {
	if strings.TrimSpace(req.Input) == "" {
		return fmt.Errorf("%w: input must not be empty", ErrInvalid)
	}
	if len(req.Input) > maxTurnInput || !utf8.ValidString(req.Input) {
		return fmt.Errorf("%w: input must be valid UTF-8 of at most %d bytes", ErrInvalid, maxTurnInput)
	}
	if req.DisplayInput != nil && (len(*req.DisplayInput) > maxTurnInput || !utf8.ValidString(*req.DisplayInput)) {
		return fmt.Errorf("%w: display_input must be valid UTF-8 of at most %d bytes", ErrInvalid, maxTurnInput)
	}
	if err := checkIdentity("turn_id", req.TurnID); err != nil {
		return err
	}
	if err := checkIdentity("idempotency_key", req.IdempotencyKey); err != nil {
		return err
	}
	if len(req.ContextReferences) > maxContextRefs {
		return fmt.Errorf("%w: at most %d context_references", ErrInvalid, maxContextRefs)
	}
	for i, r := range req.ContextReferences {
		if err := checkFreeJSON(fmt.Sprintf("context_references[%d]", i), r); err != nil {
			return err
		}
		var obj map[string]json.RawMessage
		if len(r) > maxContextRefBytes || json.Unmarshal(r, &obj) != nil || obj == nil {
			return fmt.Errorf("%w: context_references[%d] must be a JSON object of at most %d bytes", ErrInvalid, i, maxContextRefBytes)
		}
	}
	if len(req.ReferenceIDs) > maxConsumeRefs {
		return fmt.Errorf("%w: at most %d reference_ids", ErrInvalid, maxConsumeRefs)
	}
	seen := map[string]bool{}
	for _, ref := range req.ReferenceIDs {
		if seen[ref] {
			return fmt.Errorf("%w: reference_ids names %q twice", ErrInvalid, ref)
		}
		seen[ref] = true
	}
	if m := req.ModelOverride; m != nil && (strings.TrimSpace(*m) == "" || len(*m) > maxModelName || strings.ContainsFunc(*m, isControl)) {
		return fmt.Errorf("%w: model_override must be a model name (or null)", ErrInvalid)
	}
	if a := req.TargetAgent; a != nil && strings.TrimSpace(*a) == "" {
		return fmt.Errorf("%w: target_agent must name an Agent (or be null)", ErrInvalid)
	}
	return nil
}

// SubmitTurn accepts a turn durably and starts it, or finds the turn its
// identity already names: reattached is then true and nothing new runs.
// The accept is committed (and its frames sent) when SubmitTurn returns.
func (s *Turns) SubmitTurn(ctx context.Context, req TurnRequest) (t projections.Turn, reattached bool, err error) {
	if err := req.validate(); err != nil {
		return t, false, err
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = req.TurnID
	}
	if t, ok := s.findTurn(req); ok {
		return t, true, nil
	}
	if s.opts.Runtime == nil {
		return t, false, fmt.Errorf("%w: no Agent runtime is configured", ErrUnavailable)
	}
	if req.TurnID == "" {
		req.TurnID = ulid.Make().String()
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = req.TurnID
	}
	id := req.SessionID
	if _, _, err := s.sandbox(id); err != nil {
		return t, false, err // not Ready: refused at once
	}
	// The lifecycle lock keeps an environment change and an accept apart:
	// a change refuses while a turn is live, an accept waits for a change
	// that holds the lock. Ready means none runs, bar the instant between a
	// lifecycle's last event and its release, so the wait is short.
	lockCtx, cancel := context.WithTimeout(ctx, acceptLockWait)
	ss, release, err := s.ownSession(lockCtx, id, true)
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w: the environment of session %q is changing; send the turn once it is ready", ErrConflict, id)
		}
		return t, false, err
	}
	defer release()
	if t, ok := s.findTurn(req); ok { // accepted while we waited for the lock
		return t, true, nil
	}
	agentID, err := s.turnAgent(ss, req.TargetAgent)
	if err != nil {
		return t, false, err
	}
	if _, _, err := s.sandbox(id); err != nil {
		return t, false, err
	}
	accept := events.TurnAccepted{
		TurnID: req.TurnID, IdempotencyKey: req.IdempotencyKey, AgentID: agentID, Input: events.NewText(req.Input),
		DisplayInput: events.TextPtr(req.DisplayInput), ContextReferences: events.NewJSONs(req.ContextReferences), ReferenceIDs: req.ReferenceIDs,
		ModelOverride: req.ModelOverride, TargetAgent: req.TargetAgent, Source: req.Source,
	}
	run, err := s.turns.reserve(id, req.TurnID)
	if err != nil {
		return t, false, err
	}
	err = s.retry(ctx, func() error {
		ss, ok := s.store.Session(id)
		if !ok {
			return fmt.Errorf("%w: session %q", ErrNotFound, id)
		}
		if a, ok := s.store.ActiveTurn(id); ok {
			return fmt.Errorf("%w: turn %q is running in session %q; stop it or wait for it to end", ErrConflict, a.TurnID, id)
		}
		if _, ok := s.store.Turn(id, req.TurnID); ok {
			return fmt.Errorf("%w: turn_id %q is already used in session %q by another send attempt", ErrConflict, req.TurnID, id)
		}
		ps := []events.Payload{accept}
		if len(req.ReferenceIDs) > 0 {
			if err := s.checkConsumable(id, req.ReferenceIDs); err != nil {
				return err
			}
			ps = append(ps, events.AttachmentsConsumed{ReferenceIDs: req.ReferenceIDs, TurnID: req.TurnID})
		}
		return s.appendExpecting(ctx, id, ss.Version, ps...)
	})
	if err != nil {
		s.turns.release(id, req.TurnID, run)
		return t, false, err
	}
	t, _ = s.store.Turn(id, req.TurnID)
	s.startTurn(t, run)
	return t, false, nil
}

// findTurn returns the turn a request's identity names: its idempotency key,
// or its turn_id.
func (s *Turns) findTurn(req TurnRequest) (projections.Turn, bool) {
	if req.IdempotencyKey != "" {
		if t, ok := s.store.TurnByKey(req.SessionID, req.IdempotencyKey); ok {
			return t, true
		}
	}
	if req.TurnID != "" {
		return s.store.Turn(req.SessionID, req.TurnID)
	}
	return projections.Turn{}, false
}

// turnAgent decides the Agent a turn runs on.
func (s *Turns) turnAgent(ss projections.Session, target *string) (string, error) {
	if ss.Closed() {
		return "", closedErr(ss.ID)
	}
	id, err := s.turnAgentID(ss, target)
	if err != nil {
		return "", err
	}
	if _, err := s.opts.Runtime.Agent(id); err != nil {
		return "", fmt.Errorf("%w: agent %q is not configured", ErrNotFound, id)
	}
	return id, nil
}

// turnAgentID is the Agent a Session's mode and target_agent name: the
// Session's Agent; in a lattice Session the target Worker, or the
// coordinator of a lattice turn.
func (s *Turns) turnAgentID(ss projections.Session, target *string) (string, error) {
	var id string
	switch ss.Mode.Kind {
	case events.ModeSingleAgent:
		id = ss.Mode.AgentID
		if target != nil {
			return "", fmt.Errorf("%w: target_agent is only for a lattice session; this single-Agent session runs %q", ErrInvalid, id)
		}
	case events.ModeLattice:
		var err error
		if id, err = s.latticeAgent(ss, target); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("%w: session %q has mode %q, which runs no turns", ErrInvalid, ss.ID, ss.Mode.Kind)
	}
	return id, nil
}

// reserve registers a turn's run before its accept is appended, so that
// a Stop sent the moment session-accepted arrives finds it. A daemon that
// is shutting down accepts no turn.
func (r *turnRuns) reserve(session, turn string) (*turnRun, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("%w: the daemon is shutting down", ErrUnavailable)
	}
	run := &turnRun{stop: make(chan struct{}), done: make(chan struct{})}
	r.m[turnKey(session, turn)] = run
	r.wg.Add(1)
	return run, nil
}

// release ends a reservation or a run.
func (r *turnRuns) release(session, turn string, run *turnRun) {
	r.mu.Lock()
	if r.m[turnKey(session, turn)] == run {
		delete(r.m, turnKey(session, turn))
	}
	r.mu.Unlock()
	close(run.done)
	r.wg.Done()
}

// startTurn runs an accepted turn in its own goroutine, under the daemon's
// turn context: a /ws client that goes away never cancels it.
func (s *Turns) startTurn(t projections.Turn, run *turnRun) {
	go func() {
		defer s.turns.release(t.SessionID, t.TurnID, run)
		s.runTurn(s.turns.ctx, t, run.stop)
	}()
}

// runTurn executes a turn to its one terminal event.
func (s *Turns) runTurn(ctx context.Context, t projections.Turn, stop <-chan struct{}) {
	ctx = asAgent(ctx, t.AgentID, t.TurnID)
	obs := &turnObserver{s: s.core, t: t, ctx: context.WithoutCancel(ctx), agent: t.AgentID, live: &liveCount{}}
	sb, ss, err := s.sandbox(t.SessionID)
	if err != nil {
		s.endTurn(t, agent.TurnResult{Outcome: agent.OutcomeError, Err: err, Usage: usage.Tokens{TokenUsageKnown: true}}, false)
		return
	}
	prior := s.store.Turns(t.SessionID)
	input := s.turnInput(t)
	repo := git.Open(sb, ss.WorkingDir)
	var before string
	var snapped bool
	if s.gitRoot(ctx, sb, ss) {
		before, snapped = snapshot(ctx, repo)
	}
	input, err = turnHooks{s.core}.prompt(ctx, t, sb, ss.WorkingDir, prior, input) // commands/hooks.go
	if err != nil {
		s.endTurn(t, agent.TurnResult{Outcome: agent.OutcomeError, Err: err, Usage: usage.Tokens{TokenUsageKnown: true}}, false)
		return
	}
	var res agent.TurnResult
	if isLatticeTurn(ss, t) {
		res = s.runLattice(ctx, obs, latticeInput{sb: sb, ss: ss, history: History(prior), input: input, stop: stop})
	} else {
		res = s.opts.Runtime.RunTurn(ctx, agent.TurnRequest{
			AgentID: t.AgentID, Model: t.ModelOverride, History: History(prior), Input: input,
			Tools:    newTurnTools(s.core, tools.New(sb, ss.WorkingDir), ApprovalRequest{Run: t.SessionID, Session: t.SessionID, TurnID: t.TurnID, AgentID: t.AgentID}, stop),
			Stop:     stop,
			MaxSteps: s.opts.Turns.MaxSteps, StallTimeout: s.opts.Turns.StallTimeout,
		}, obs)
	}
	if res.Err != nil && ctx.Err() != nil {
		res.Err = context.Cause(ctx)
	}
	turnHooks{s.core}.stop(ctx, t, sb, ss.WorkingDir)
	if snapped && ctx.Err() == nil {
		s.recordChanges(ctx, t, repo, before)
	}
	s.endTurn(t, res, errors.Is(res.Err, errShutdown))
}

// Bounds on a turn's change record.
const (
	snapshotTimeout = time.Minute
	maxChangedPaths = 2000
)

// gitRoot reports whether the Session's checkout is the root of a Git
// repository: on the host side of its bind mount, or under the remote
// provider in the clone itself (remote.go), never the host Workspace. A
// snapshot is a process in the sandbox, too dear to spend twice per turn
// where it can only fail. (Git in a Session never looks above the root
// for a repository.)
func (s *sandboxes) gitRoot(ctx context.Context, sb sandbox.Sandbox, ss projections.Session) bool {
	if s.remote().on() {
		return s.remote().gitRoot(ctx, sb, ss)
	}
	_, err := os.Lstat(filepath.Join(ss.WorkingDir, ".git"))
	return err == nil
}

// snapshot records the worktree of a Git Workspace; ok is false when the
// Workspace is not a repository (or git failed): the turn then has no
// change record.
func snapshot(ctx context.Context, repo *git.Repo) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	tree, err := repo.Snapshot(ctx)
	return tree, err == nil
}

// recordChanges journals the files the turn changed: the difference between
// the worktree before it and now. It feeds the Git status's last-turn flags.
func (s *Turns) recordChanges(ctx context.Context, t projections.Turn, repo *git.Repo, before string) {
	after, ok := snapshot(ctx, repo)
	if !ok {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	paths, err := repo.ChangedPaths(cctx, before, after)
	cancel()
	if err != nil {
		s.log.Warn("turn changes", "session", t.SessionID, "turn", t.TurnID, "err", err)
		return
	}
	ev := events.TurnChanges{TurnID: t.TurnID, Before: before, After: after, Paths: paths}
	cctx, cancel = context.WithTimeout(ctx, snapshotTimeout)
	ev.Ref = s.protectTurn(cctx, t, repo, before, after) // commands/turncode.go
	cancel()
	if len(paths) > maxChangedPaths {
		ev.Paths, ev.Truncated = paths[:maxChangedPaths], true
	}
	if err := s.append(ctx, []journal.Event{events.New(t.SessionID, ev)}); err != nil {
		s.log.Warn("turn changes", "session", t.SessionID, "turn", t.TurnID, "err", err)
	}
}

// turnInput is the user message: the input, then the text of each attached
// document (bounded at upload), or a note for one without text.
func (s *Turns) turnInput(t projections.Turn) string {
	if len(t.ReferenceIDs) == 0 {
		return t.Input.String()
	}
	var b strings.Builder
	b.WriteString(t.Input.String())
	for _, ref := range t.ReferenceIDs {
		a, ok := s.store.Attachment(t.SessionID, ref)
		if !ok {
			continue
		}
		text, ok, err := s.attachments.AttachmentText(t.SessionID, ref)
		writeAttachment(&b, a.Name, a.MediaType, a.Size, text, ok, err)
	}
	return b.String()
}

// writeAttachment adds one attached document to a user message: its text,
// or a note for one without text (ok false) or whose text is unreadable.
func writeAttachment(b *strings.Builder, name, mediaType string, size int64, text string, ok bool, err error) {
	switch {
	case err != nil:
		fmt.Fprintf(b, "\n\n[Attachment %q (%s, %d bytes): its text could not be read: %v]", name, mediaType, size, err)
	case !ok:
		fmt.Fprintf(b, "\n\n[Attachment %q (%s, %d bytes): no text could be extracted]", name, mediaType, size)
	default:
		fmt.Fprintf(b, "\n\n[Attachment %q (%s)]\n%s\n[End of attachment %q]", name, mediaType, text, name)
	}
}

// endTurn appends a turn's one terminal event. interrupted marks a turn the
// daemon stopped under.
func (s *Turns) endTurn(t projections.Turn, res agent.TurnResult, interrupted bool) {
	totals := res.Usage
	var p events.Payload
	switch res.Outcome {
	case agent.OutcomeDone:
		p = events.TurnDone{TurnID: t.TurnID, Output: events.NewText(res.Output), Totals: totals}
	case agent.OutcomeCancelled:
		p = events.TurnCancelled{TurnID: t.TurnID, Totals: totals}
	default:
		msg := "the turn failed"
		if res.Err != nil {
			msg = res.Err.Error()
		}
		p = events.TurnFailed{TurnID: t.TurnID, Error: msg, Interrupted: interrupted, Budget: res.Budget, Refused: refusedPrompt(res.Err), Totals: totals}
	}
	// The journal may be closing under a shutdown: then the next start's
	// ReconcileTurns writes the interrupted record instead.
	if err := s.append(asAgent(context.Background(), t.AgentID, t.TurnID), []journal.Event{events.New(t.SessionID, p)}); err != nil {
		s.log.Warn("end turn", "session", t.SessionID, "turn", t.TurnID, "err", err)
	}
}

// turnObserver journals a running turn's progress and streams its deltas.
type turnObserver struct {
	s   *core
	t   projections.Turn
	ctx context.Context
	// agent is the Agent whose work it records: the turn's, or in a
	// lattice turn the coordinator's or one Worker's.
	agent string
	// live numbers the turn's published deltas; a lattice turn's observers
	// share it.
	live *liveCount
	// lane, for a Ways lane's turn, files its events under its set
	// (commands/ways.go).
	lane *laneTurn
	// asked is when the current inference started (the model is asked
	// right after Started and after each tool call), first when its first
	// delta came (zero: none yet): the step's time to first token.
	asked, first time.Time
}

// liveCount numbers a turn's deltas in the order they are published.
type liveCount struct {
	mu sync.Mutex
	n  uint64
}

func (o *turnObserver) appendTurn(ps ...events.Payload) error {
	evs := make([]journal.Event, len(ps))
	for i, p := range ps {
		evs[i] = events.New(o.t.SessionID, p)
		if o.lane != nil {
			evs[i] = o.lane.event(p)
		}
	}
	return o.s.append(o.ctx, evs)
}

func (o *turnObserver) Started(model string) error {
	defer o.ask()
	return o.appendTurn(events.TurnStarted{TurnID: o.t.TurnID, Agent: o.agent, Model: model})
}

// maxLiveDelta bounds one published delta: a provider may hand over
// megabytes at once, and a NATS message has a size limit.
const maxLiveDelta = 64 << 10

// ask notes that the next inference starts now.
func (o *turnObserver) ask() { o.asked, o.first = time.Now(), time.Time{} }

func (o *turnObserver) Delta(kind, text string) {
	if o.first.IsZero() {
		o.first = time.Now()
	}
	if o.s.opts.Live == nil {
		return
	}
	// One turn's deltas are numbered and published under one lock, so that
	// their numbers arrive in order even from concurrent Workers.
	o.live.mu.Lock()
	defer o.live.mu.Unlock()
	for text != "" {
		n := len(text)
		if n > maxLiveDelta {
			n = maxLiveDelta
			for n > 0 && !utf8.RuneStart(text[n]) {
				n--
			}
			if n == 0 { // not UTF-8: cut anywhere
				n = maxLiveDelta
			}
		}
		o.live.n++
		d := events.LiveDelta{Session: o.t.SessionID, TurnID: o.t.TurnID, Agent: o.agent, Kind: kind, Delta: text[:n], N: o.live.n}
		if o.lane != nil {
			d.Run, d.AttemptSetID = o.lane.Run, o.lane.set
		}
		err := o.s.opts.Live.PublishLive(d)
		if err != nil {
			o.s.log.Error("publish live delta", "session", o.t.SessionID, "turn", o.t.TurnID, "err", err)
		}
		text = text[n:]
	}
}

// flush waits until the deltas published so far went out, so that a
// step's events never overtake its deltas on /ws. It is bounded: a lost
// delta costs a client at most a reconnect, never a stuck turn.
func (o *turnObserver) flush() {
	ctx, cancel := context.WithTimeout(o.ctx, 5*time.Second)
	defer cancel()
	o.live.mu.Lock()
	n := o.live.n
	o.live.mu.Unlock()
	if err := o.s.store.AwaitLive(ctx, o.t.SessionID, o.t.TurnID, n); err != nil {
		o.s.log.Warn("live deltas not delivered in time", "session", o.t.SessionID, "turn", o.t.TurnID, "published", n)
	}
}

func (o *turnObserver) Step(st agent.StepOutput) error {
	o.flush()
	calls := make([]events.StepCall, len(st.Calls))
	for i, c := range st.Calls {
		calls[i] = events.StepCall{CallID: c.CallID, Occurrence: c.Occurrence, Name: c.Name, Arguments: events.NewJSON(c.Arguments)}
	}
	usage := events.TurnUsage{TurnID: o.t.TurnID, Agent: o.agent, Step: st.Step, Model: st.Model,
		Tokens: st.Usage}
	if st.Cost.PriceKnown {
		usd := st.Cost.USD
		usage.CostUSD = &usd
	}
	out := events.TurnOutput{TurnID: o.t.TurnID, Agent: o.agent, Step: st.Step, Text: events.NewText(st.Text),
		Reasoning: events.NewText(st.Reasoning), ToolCalls: calls, Partial: st.Partial}
	if !o.first.IsZero() && !o.asked.IsZero() {
		out.FirstTokenMS = float64(o.first.Sub(o.asked).Microseconds()) / 1000
	}
	o.ask() // the next inference, if any, starts after this step's tool calls
	return o.appendTurn(out, usage)
}

func (o *turnObserver) ToolStarted(c agent.Call) error {
	return o.appendTurn(events.ToolCallStarted{TurnID: o.t.TurnID, Agent: o.agent, CallID: c.CallID,
		Occurrence: c.Occurrence, Name: c.Name, Arguments: events.NewJSON(validArgs(c.Arguments))})
}

func (o *turnObserver) ToolFinished(c agent.Call, r tools.Result, took time.Duration) error {
	defer o.ask()
	return o.appendTurn(events.ToolCallFinished{TurnID: o.t.TurnID, Agent: o.agent, CallID: c.CallID,
		Occurrence: c.Occurrence, Name: c.Name, Result: events.NewText(r.Output), IsError: r.IsError, DurationMS: took.Milliseconds()})
}

// validArgs keeps a model's arguments as JSON in the journal: malformed
// ones (the tool reports them to the model) are kept as a JSON string.
func validArgs(a json.RawMessage) json.RawMessage {
	if json.Valid(a) {
		return a
	}
	b, _ := json.Marshal(string(a))
	return b
}

// StopTurn asks a live turn for a cooperative Stop. A stale or finished
// identity is ErrConflict (session-stop-rejected); an unknown Session
// ErrNotFound.
func (s *Turns) StopTurn(sessionID, turnID string) error {
	if _, ok := s.store.Session(sessionID); !ok {
		return fmt.Errorf("%w: session %q", ErrNotFound, sessionID)
	}
	t, ok := s.store.Turn(sessionID, turnID)
	switch {
	case !ok:
		return fmt.Errorf("%w: session %q has no turn %q", ErrConflict, sessionID, turnID)
	case !t.Live():
		return fmt.Errorf("%w: turn %q already ended (%s)", ErrConflict, turnID, t.Status)
	}
	run := s.turns.running(sessionID, turnID)
	if run == nil {
		return fmt.Errorf("%w: turn %q is not running in this daemon", ErrConflict, turnID)
	}
	run.stopOnce.Do(func() { close(run.stop) })
	return nil
}

// WaitTurn waits until a turn this daemon runs has ended, or ctx ends, and
// returns its record.
func (s *Turns) WaitTurn(ctx context.Context, sessionID, turnID string) (projections.Turn, error) {
	run := s.turns.running(sessionID, turnID)
	if run != nil {
		select {
		case <-run.done:
		case <-ctx.Done():
			return projections.Turn{}, ctx.Err()
		}
	}
	t, ok := s.store.Turn(sessionID, turnID)
	if !ok {
		return t, fmt.Errorf("%w: turn %q", ErrNotFound, turnID)
	}
	return t, nil
}

// ReconcileTurns ends every turn the journal shows live but no runner of
// this process owns: the daemon stopped under it. Each gets exactly one
// terminal turn-failed (interrupted), with the usage its journaled steps
// paid for, marked a subtotal.
func (s *Turns) ReconcileTurns(ctx context.Context) error {
	for _, t := range s.store.LiveTurns() {
		if s.turns.running(t.SessionID, t.TurnID) != nil {
			continue
		}
		totals := t.Usage.Tokens
		totals.TokenUsageKnown = false
		err := s.append(ctx, []journal.Event{events.New(t.SessionID, events.TurnFailed{TurnID: t.TurnID,
			Error: "interrupted: the daemon stopped during this turn", Interrupted: true, Totals: totals})})
		if err != nil {
			return fmt.Errorf("end interrupted turn %s of session %s: %w", t.TurnID, t.SessionID, err)
		}
	}
	return nil
}

// StopTurns ends the turns this daemon runs, for a shutdown: each is
// cancelled and journals its interrupted terminal event. It waits for them,
// bounded by ctx. No turn starts afterwards.
func (s *Turns) StopTurns(ctx context.Context) error {
	r := s.turns
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel(errShutdown)
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("turns still ending at shutdown: %w", ctx.Err())
	}
}

// refuseLiveTurn is the 409 of an environment or lifecycle change while a
// turn runs in the Session.
func (s *sandboxes) refuseLiveTurn(id string) error {
	if t, ok := s.store.ActiveTurn(id); ok {
		return fmt.Errorf("%w: turn %q is running in session %q; stop it first", ErrConflict, t.TurnID, id)
	}
	if ss, ok := s.store.Session(id); ok {
		return s.refuseOwned(ss)
	}
	return nil
}
