package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"lathe/commands/attachments"
	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/lattice"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
)

// Turn input bounds.
const (
	MaxTurnInput       = 512 << 10
	maxContextRefs     = 64
	maxContextRefBytes = 64 << 10
)

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

func (req *TurnRequest) validate() error {
	if strings.TrimSpace(req.Input) == "" {
		return fmt.Errorf("%w: input must not be empty", core.ErrInvalid)
	}
	if len(req.Input) > MaxTurnInput || !utf8.ValidString(req.Input) {
		return fmt.Errorf("%w: input must be valid UTF-8 of at most %d bytes", core.ErrInvalid, MaxTurnInput)
	}
	if req.DisplayInput != nil && (len(*req.DisplayInput) > MaxTurnInput || !utf8.ValidString(*req.DisplayInput)) {
		return fmt.Errorf("%w: display_input must be valid UTF-8 of at most %d bytes", core.ErrInvalid, MaxTurnInput)
	}
	if err := core.CheckIdentity("turn_id", req.TurnID); err != nil {
		return err
	}
	if err := core.CheckIdentity("idempotency_key", req.IdempotencyKey); err != nil {
		return err
	}
	if len(req.ContextReferences) > maxContextRefs {
		return fmt.Errorf("%w: at most %d context_references", core.ErrInvalid, maxContextRefs)
	}
	for i, r := range req.ContextReferences {
		if err := core.CheckFreeJSON(fmt.Sprintf("context_references[%d]", i), r); err != nil {
			return err
		}
		var obj map[string]json.RawMessage
		if len(r) > maxContextRefBytes || json.Unmarshal(r, &obj) != nil || obj == nil {
			return fmt.Errorf("%w: context_references[%d] must be a JSON object of at most %d bytes", core.ErrInvalid, i, maxContextRefBytes)
		}
	}
	if len(req.ReferenceIDs) > attachments.MaxConsumeRefs {
		return fmt.Errorf("%w: at most %d reference_ids", core.ErrInvalid, attachments.MaxConsumeRefs)
	}
	seen := map[string]bool{}
	for _, ref := range req.ReferenceIDs {
		if seen[ref] {
			return fmt.Errorf("%w: reference_ids names %q twice", core.ErrInvalid, ref)
		}
		seen[ref] = true
	}
	if m := req.ModelOverride; m != nil && (strings.TrimSpace(*m) == "" || len(*m) > core.MaxModelName || strings.ContainsFunc(*m, core.IsControl)) {
		return fmt.Errorf("%w: model_override must be a model name (or null)", core.ErrInvalid)
	}
	if a := req.TargetAgent; a != nil && strings.TrimSpace(*a) == "" {
		return fmt.Errorf("%w: target_agent must name an Agent (or be null)", core.ErrInvalid)
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
	if s.Opts.Runtime == nil {
		return t, false, fmt.Errorf("%w: no Agent runtime is configured", core.ErrUnavailable)
	}
	if req.TurnID == "" {
		req.TurnID = ulid.Make().String()
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = req.TurnID
	}
	id := req.SessionID
	if _, _, err := s.ReadySandbox(id); err != nil {
		return t, false, err // not Ready: refused at once
	}
	// The lifecycle lock keeps an environment change and an accept apart:
	// a change refuses while a turn is live, an accept waits for a change
	// that holds the lock. Ready means none runs, bar the instant between a
	// lifecycle's last event and its release, so the wait is short.
	lockCtx, cancel := context.WithTimeout(ctx, core.AcceptLockWait)
	ss, release, err := s.OwnSession(lockCtx, id, true)
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w: the environment of session %q is changing; send the turn once it is ready", core.ErrConflict, id)
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
	if _, _, err := s.ReadySandbox(id); err != nil {
		return t, false, err
	}
	accept := events.TurnAccepted{
		TurnID: req.TurnID, IdempotencyKey: req.IdempotencyKey, AgentID: agentID, Input: events.NewText(req.Input),
		DisplayInput: events.TextPtr(req.DisplayInput), ContextReferences: events.NewJSONs(req.ContextReferences), ReferenceIDs: req.ReferenceIDs,
		ModelOverride: req.ModelOverride, TargetAgent: req.TargetAgent, Source: req.Source,
	}
	run, err := s.Turns.Reserve(id, req.TurnID)
	if err != nil {
		return t, false, err
	}
	err = s.Retry(ctx, func() error {
		ss, ok := s.Store.Session(id)
		if !ok {
			return fmt.Errorf("%w: session %q", core.ErrNotFound, id)
		}
		if a, ok := s.Store.ActiveTurn(id); ok {
			return fmt.Errorf("%w: turn %q is running in session %q; stop it or wait for it to end", core.ErrConflict, a.TurnID, id)
		}
		if _, ok := s.Store.Turn(id, req.TurnID); ok {
			return fmt.Errorf("%w: turn_id %q is already used in session %q by another send attempt", core.ErrConflict, req.TurnID, id)
		}
		ps := []events.Payload{accept}
		if len(req.ReferenceIDs) > 0 {
			if err := attachments.CheckConsumable(s.Store, id, req.ReferenceIDs); err != nil {
				return err
			}
			ps = append(ps, events.AttachmentsConsumed{ReferenceIDs: req.ReferenceIDs, TurnID: req.TurnID})
		}
		return s.AppendExpecting(ctx, id, ss.Version, ps...)
	})
	if err != nil {
		s.Turns.Release(id, req.TurnID, run)
		return t, false, err
	}
	t, _ = s.Store.Turn(id, req.TurnID)
	s.Runner.Start(t, run)
	return t, false, nil
}

// findTurn returns the turn a request's identity names: its idempotency key,
// or its turn_id.
func (s *Turns) findTurn(req TurnRequest) (projections.Turn, bool) {
	if req.IdempotencyKey != "" {
		if t, ok := s.Store.TurnByKey(req.SessionID, req.IdempotencyKey); ok {
			return t, true
		}
	}
	if req.TurnID != "" {
		return s.Store.Turn(req.SessionID, req.TurnID)
	}
	return projections.Turn{}, false
}

// turnAgent decides the Agent a turn runs on.
func (s *Turns) turnAgent(ss projections.Session, target *string) (string, error) {
	if ss.Closed() {
		return "", core.ClosedErr(ss.ID)
	}
	id, err := s.TurnAgentID(ss, target)
	if err != nil {
		return "", err
	}
	if _, err := s.Opts.Runtime.Agent(id); err != nil {
		return "", fmt.Errorf("%w: agent %q is not configured", core.ErrNotFound, id)
	}
	return id, nil
}

// TurnAgentID is the Agent a Session's mode and target_agent name: the
// Session's Agent; in a lattice Session the target Worker, or the
// coordinator of a lattice turn.
func (s *Turns) TurnAgentID(ss projections.Session, target *string) (string, error) {
	var id string
	switch ss.Mode.Kind {
	case events.ModeSingleAgent:
		id = ss.Mode.AgentID
		if target != nil {
			return "", fmt.Errorf("%w: target_agent is only for a lattice session; this single-Agent session runs %q", core.ErrInvalid, id)
		}
	case events.ModeLattice:
		var err error
		if id, err = lattice.LatticeAgent(lattice.Team(s.Opts), ss, target); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("%w: session %q has mode %q, which runs no turns", core.ErrInvalid, ss.ID, ss.Mode.Kind)
	}
	return id, nil
}

// Bounds on a turn's change record.

// StopTurn asks a live turn for a cooperative Stop. A stale or finished
// identity is ErrConflict (session-stop-rejected); an unknown Session
// ErrNotFound.
func (s *Turns) StopTurn(sessionID, turnID string) error {
	if _, ok := s.Store.Session(sessionID); !ok {
		return fmt.Errorf("%w: session %q", core.ErrNotFound, sessionID)
	}
	t, ok := s.Store.Turn(sessionID, turnID)
	switch {
	case !ok:
		return fmt.Errorf("%w: session %q has no turn %q", core.ErrConflict, sessionID, turnID)
	case !t.Live():
		return fmt.Errorf("%w: turn %q already ended (%s)", core.ErrConflict, turnID, t.Status)
	}
	run := s.Turns.Running(sessionID, turnID)
	if run == nil {
		return fmt.Errorf("%w: turn %q is not running in this daemon", core.ErrConflict, turnID)
	}
	run.StopOnce.Do(func() { close(run.Stop) })
	return nil
}

// WaitTurn waits until a turn this daemon runs has ended, or ctx ends, and
// returns its record.
func (s *Turns) WaitTurn(ctx context.Context, sessionID, turnID string) (projections.Turn, error) {
	run := s.Turns.Running(sessionID, turnID)
	if run != nil {
		select {
		case <-run.Done:
		case <-ctx.Done():
			return projections.Turn{}, ctx.Err()
		}
	}
	t, ok := s.Store.Turn(sessionID, turnID)
	if !ok {
		return t, fmt.Errorf("%w: turn %q", core.ErrNotFound, turnID)
	}
	return t, nil
}

// ReconcileTurns ends every turn the journal shows live but no runner of
// this process owns: the daemon stopped under it. Each gets exactly one
// terminal turn-failed (interrupted), with the usage its journaled steps
// paid for, marked a subtotal.
func (s *Turns) ReconcileTurns(ctx context.Context) error {
	for _, t := range s.Store.LiveTurns() {
		if s.Turns.Running(t.SessionID, t.TurnID) != nil {
			continue
		}
		totals := t.Usage.Tokens
		totals.TokenUsageKnown = false
		err := s.Append(ctx, []journal.Event{events.New(t.SessionID, events.TurnFailed{TurnID: t.TurnID,
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
	r := s.Turns
	r.Mu.Lock()
	r.Closed = true
	r.Mu.Unlock()
	r.Cancel(core.ErrShutdown)
	done := make(chan struct{})
	go func() {
		r.Wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("turns still ending at shutdown: %w", ctx.Err())
	}
}

// Turns accepts, stops, awaits, reconciles and rewinds Session turns
// (commands/turns/turns.go, commands/turns/transcript.go).
type Turns struct {
	*environments.Sandboxes
	// Runner runs the turns accepted here (commands/turnrunner/turnrun.go).
	Runner turnStarter
}

// turnStarter runs an accepted turn to its one terminal event.
type turnStarter interface {
	Start(t projections.Turn, run *core.TurnRun)
}

// LatticeTeam is the configured team of lattice Sessions, its Workers
// resolved.
func (s *Turns) LatticeTeam() core.LatticeTeam { return lattice.Team(s.Opts) }

// NewTurns returns the turn commands; runner runs what they accept.
func NewTurns(sb *environments.Sandboxes, runner turnStarter) *Turns {
	return &Turns{Sandboxes: sb, Runner: runner}
}
