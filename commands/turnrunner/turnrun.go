package turnrunner

import (
	"context"
	"errors"
	"strings"

	"lathe/commands/agentrun"
	"lathe/commands/attachments"
	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/latticerunner"
	"lathe/commands/turns"

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
	*environments.Sandboxes
	// attachments reads the text of the attachments a turn refers to.
	attachments core.AttachmentTexts
	// lattice runs the lattice turns (commands/latticerunner/latticeturn.go).
	lattice *latticerunner.LatticeRunner
}

// Start runs an accepted turn in its own goroutine, under the daemon's
// turn context: a /ws client that goes away never cancels it.
func (s *TurnRunner) Start(t projections.Turn, run *core.TurnRun) {
	go func() {
		defer s.Turns.Release(t.SessionID, t.TurnID, run)
		s.run(s.Turns.Ctx, t, run.Stop)
	}()
}

// runTurn executes a turn to its one terminal event.
func (s *TurnRunner) run(ctx context.Context, t projections.Turn, stop <-chan struct{}) {
	ctx = core.AsAgent(ctx, t.AgentID, t.TurnID)
	obs := &agentrun.TurnObserver{Core: s.Core, Turn: t, Ctx: context.WithoutCancel(ctx), Agent: t.AgentID, Live: &agentrun.LiveCount{}}
	sb, ss, err := s.ReadySandbox(t.SessionID)
	if err != nil {
		s.EndTurn(t, agent.TurnResult{Outcome: agent.OutcomeError, Err: err, Usage: usage.Tokens{TokenUsageKnown: true}}, false)
		return
	}
	prior := s.Store.Turns(t.SessionID)
	input := s.turnInput(t)
	repo := git.Open(sb, ss.WorkingDir)
	var before string
	var snapped bool
	if s.GitRoot(ctx, sb, ss) {
		before, snapped = turns.Snapshot(ctx, repo)
	}
	input, err = agentrun.TurnHooks{Core: s.Core}.Prompt(ctx, t, sb, ss.WorkingDir, prior, input) // commands/agentrun/hooks.go
	if err != nil {
		s.EndTurn(t, agent.TurnResult{Outcome: agent.OutcomeError, Err: err, Usage: usage.Tokens{TokenUsageKnown: true}}, false)
		return
	}
	var res agent.TurnResult
	switch {
	case latticerunner.IsLatticeTurn(ss, t):
		res = s.lattice.Run(ctx, obs, latticerunner.LatticeInput{Sb: sb, Ss: ss, History: turns.History(prior), Input: input, Stop: stop})
	case s.Outside != nil && s.Outside.Outside(t.AgentID):
		call := core.ApprovalRequest{Run: t.SessionID, Session: t.SessionID, TurnID: t.TurnID, AgentID: t.AgentID}
		res = s.Outside.Run(ctx, core.OutsideTurn{Run: t.SessionID, SessionID: t.SessionID, TurnID: t.TurnID, AgentID: t.AgentID, Model: t.ModelOverride,
			Sandbox: sb, Dir: ss.WorkingDir, Input: input, Stop: stop,
			Hooks: agentrun.ToolHooks{RunHooks: agentrun.TurnHooks{Core: s.Core}.Run(call, sb, ss.WorkingDir, false)}}, obs)
	default:
		res = s.Opts.Runtime.RunTurn(ctx, agent.TurnRequest{
			AgentID: t.AgentID, Model: t.ModelOverride, History: turns.History(prior), Input: input,
			Tools:    agentrun.NewTurnTools(s.Core, tools.New(sb, ss.WorkingDir), core.ApprovalRequest{Run: t.SessionID, Session: t.SessionID, TurnID: t.TurnID, AgentID: t.AgentID}, stop),
			Stop:     stop,
			MaxSteps: s.Opts.Turns.MaxSteps, StallTimeout: s.Opts.Turns.StallTimeout,
		}, obs)
	}
	if res.Err != nil && ctx.Err() != nil {
		res.Err = context.Cause(ctx)
	}
	agentrun.TurnHooks{Core: s.Core}.Stop(ctx, t, sb, ss.WorkingDir)
	if snapped && ctx.Err() == nil {
		s.recordChanges(ctx, t, repo, before)
	}
	s.EndTurn(t, res, errors.Is(res.Err, core.ErrShutdown))
}

// recordChanges journals the files the turn changed: the difference between
// the worktree before it and now. It feeds the Git status's last-turn flags.
func (s *TurnRunner) recordChanges(ctx context.Context, t projections.Turn, repo *git.Repo, before string) {
	after, ok := turns.Snapshot(ctx, repo)
	if !ok {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, turns.SnapshotTimeout)
	paths, err := repo.ChangedPaths(cctx, before, after)
	cancel()
	if err != nil {
		s.Log.Warn("turn changes", "session", t.SessionID, "turn", t.TurnID, "err", err)
		return
	}
	ev := events.TurnChanges{TurnID: t.TurnID, Before: before, After: after, Paths: paths}
	cctx, cancel = context.WithTimeout(ctx, turns.SnapshotTimeout)
	ev.Ref = (&turns.TurnCode{Sandboxes: s.Sandboxes}).ProtectTurn(cctx, t, repo, before, after) // commands/turns/turncode.go
	cancel()
	if len(paths) > turns.MaxChangedPaths {
		ev.Paths, ev.Truncated = paths[:turns.MaxChangedPaths], true
	}
	if err := s.Append(ctx, []journal.Event{events.New(t.SessionID, ev)}); err != nil {
		s.Log.Warn("turn changes", "session", t.SessionID, "turn", t.TurnID, "err", err)
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
		a, ok := s.Store.Attachment(t.SessionID, ref)
		if !ok {
			continue
		}
		text, ok, err := s.attachments.AttachmentText(t.SessionID, ref)
		attachments.WriteAttachment(&b, a.Name, a.MediaType, a.Size, text, ok, err)
	}
	return b.String()
}

// EndTurn appends a turn's one terminal event. interrupted marks a turn the
// daemon stopped under.
func (s *TurnRunner) EndTurn(t projections.Turn, res agent.TurnResult, interrupted bool) {
	totals := res.Usage
	var p events.Payload
	switch res.Outcome {
	case agent.OutcomeDone:
		p = events.TurnDone{TurnID: t.TurnID, Output: events.NewText(res.Output), Totals: totals}
	case agent.OutcomeCancelled:
		p = events.TurnCancelled{TurnID: t.TurnID, StopReason: events.ClipHookOutput(res.StopReason), Totals: totals}
	default:
		msg := "the turn failed"
		if res.Err != nil {
			msg = res.Err.Error()
		}
		p = events.TurnFailed{TurnID: t.TurnID, Error: msg, Interrupted: interrupted, Budget: res.Budget, Refused: agentrun.RefusedPrompt(res.Err), Totals: totals}
	}
	// The journal may be closing under a shutdown: then the next start's
	// ReconcileTurns writes the interrupted record instead.
	if err := s.Append(core.AsAgent(context.Background(), t.AgentID, t.TurnID), []journal.Event{events.New(t.SessionID, p)}); err != nil {
		s.Log.Warn("end turn", "session", t.SessionID, "turn", t.TurnID, "err", err)
	}
}

// NewTurnRunner returns the runner of the Session turns.
func NewTurnRunner(sb *environments.Sandboxes, texts core.AttachmentTexts) *TurnRunner {
	return &TurnRunner{Sandboxes: sb, attachments: texts, lattice: &latticerunner.LatticeRunner{Sandboxes: sb}}
}
