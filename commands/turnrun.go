package commands

import (
	"context"
	"errors"
	"strings"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/git"
	"lathe/runtime/usage"
)

// TurnRunner runs the Session turns accepted here, each to its one
// terminal event: the Agent tool loop in the Session's sandbox (or a
// lattice turn's plan and Workers), its steps journaled by the observer,
// the checkout's change recorded at its end.
type TurnRunner struct {
	*sandboxes
	// attachments reads the text of the attachments a turn refers to.
	attachments attachmentTexts
	// lattice runs the lattice turns (commands/latticeturn.go).
	lattice *LatticeRunner
}

// start runs an accepted turn in its own goroutine, under the daemon's
// turn context: a /ws client that goes away never cancels it.
func (s *TurnRunner) start(t projections.Turn, run *turnRun) {
	go func() {
		defer s.turns.release(t.SessionID, t.TurnID, run)
		s.run(s.turns.ctx, t, run.stop)
	}()
}

// runTurn executes a turn to its one terminal event.
func (s *TurnRunner) run(ctx context.Context, t projections.Turn, stop <-chan struct{}) {
	ctx = asAgent(ctx, t.AgentID, t.TurnID)
	obs := &turnObserver{s: s.core, t: t, ctx: context.WithoutCancel(ctx), agent: t.AgentID, live: &liveCount{}}
	sb, ss, err := s.readySandbox(t.SessionID)
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
	input, err = turnHooks{s: s.core}.prompt(ctx, t, sb, ss.WorkingDir, prior, input) // commands/hooks.go
	if err != nil {
		s.endTurn(t, agent.TurnResult{Outcome: agent.OutcomeError, Err: err, Usage: usage.Tokens{TokenUsageKnown: true}}, false)
		return
	}
	var res agent.TurnResult
	if isLatticeTurn(ss, t) {
		res = s.lattice.run(ctx, obs, latticeInput{sb: sb, ss: ss, history: History(prior), input: input, stop: stop})
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
	turnHooks{s: s.core}.stop(ctx, t, sb, ss.WorkingDir)
	if snapped && ctx.Err() == nil {
		s.recordChanges(ctx, t, repo, before)
	}
	s.endTurn(t, res, errors.Is(res.Err, errShutdown))
}

// recordChanges journals the files the turn changed: the difference between
// the worktree before it and now. It feeds the Git status's last-turn flags.
func (s *TurnRunner) recordChanges(ctx context.Context, t projections.Turn, repo *git.Repo, before string) {
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
	ev.Ref = (&TurnCode{sandboxes: s.sandboxes}).protectTurn(cctx, t, repo, before, after) // commands/turncode.go
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
func (s *TurnRunner) turnInput(t projections.Turn) string {
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

// endTurn appends a turn's one terminal event. interrupted marks a turn the
// daemon stopped under.
func (s *TurnRunner) endTurn(t projections.Turn, res agent.TurnResult, interrupted bool) {
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

// newTurnRunner returns the runner of the Session turns.
func newTurnRunner(sb *sandboxes, texts attachmentTexts) *TurnRunner {
	return &TurnRunner{sandboxes: sb, attachments: texts, lattice: &LatticeRunner{sandboxes: sb}}
}
