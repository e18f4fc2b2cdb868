package ways

// Keep and Discard: the durable Keep phases that bring one Attempt home, and the end of a set.

import (
	"context"
	"fmt"
	"strings"

	"lathe/commands/core"
	"lathe/commands/turns"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git"
)

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
		return a, fmt.Errorf("%w: Ways set %q is discarded", core.ErrConflict, setID)
	case a.Keep != nil && a.Keep.Index != index:
		return a, fmt.Errorf("%w: Keep of Attempt %d already began (%s); retry it with that index", core.ErrConflict, a.Keep.Index, a.Keep.Phase)
	case a.Settled:
		return a, nil
	case a.Keep == nil:
		if st := a.State(); st != projections.SetReady {
			return a, fmt.Errorf("%w: Ways set %q is %s; Keep needs every Attempt terminal", core.ErrConflict, setID, st)
		}
		ss, _ := s.Store.Session(session)
		if why := Keepable(l, ss.CheckCommand != nil); why != "" {
			return a, fmt.Errorf("%w: %s", core.ErrConflict, why)
		}
		if cur, err = s.checkoutKept(ctx, a, l); err != nil {
			return a, err
		}
		if err := s.phase(ctx, a, events.KeepPhase{Index: index, Phase: events.KeepApplying}); err != nil {
			return a, err
		}
	}
	for {
		a, _ = s.Store.AttemptSet(setID)
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
	sb, ss, err := s.PrimarySandbox(a.Session)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, turns.SnapshotTimeout)
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
		core.ErrConflict, len(both), l.Index, strings.Join(shown, ", "))
}

func (s *Ways) phase(ctx context.Context, a projections.AttemptSet, p events.KeepPhase) error {
	return s.Append(context.WithoutCancel(ctx), []journal.Event{events.New(a.ID, p)}, journal.Expectation{AggregateID: a.ID, Version: a.Version})
}

// apply makes the primary worktree the lane's: nothing to do when it is
// already; else the paths the lane changed go back to the snapshot (undoing
// an apply a crash cut short) and its patch applies. cur is the worktree's
// tree when the caller just took it, else "".
func (s *Ways) apply(ctx context.Context, a projections.AttemptSet, l *projections.Attempt, cur string) error {
	sb, ss, err := s.PrimarySandbox(a.Session)
	if err != nil {
		return err
	}
	var r events.BlobReader
	if s.Opts.Blobs != nil {
		r = s.Opts.Blobs
	}
	patch, err := l.Patch.Resolve(r)
	if err != nil {
		return fmt.Errorf("read the patch of Attempt %d: %w", l.Index, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), turns.SnapshotTimeout)
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
		return fmt.Errorf("%w: apply Attempt %d to the checkout: %v", core.ErrConflict, l.Index, err)
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
	if len(changes.Paths) > turns.MaxChangedPaths {
		changes.Paths, changes.Truncated = changes.Paths[:turns.MaxChangedPaths], true
	}
	evs = append(evs, events.New(id, usage), events.New(id, changes),
		events.New(id, events.TurnDone{TurnID: t.TurnID, Output: t.Output, Totals: t.Usage.Tokens}),
		events.New(a.ID, events.KeepPhase{Index: l.Index, Phase: events.KeepTranscriptRecorded}))
	return s.Append(context.WithoutCancel(ctx), evs, journal.Expectation{AggregateID: a.ID, Version: a.Version})
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
		return a, fmt.Errorf("%w: Keep of Attempt %d began (%s); Discard is refused after apply begins", core.ErrConflict, a.Keep.Index, a.Keep.Phase)
	case a.Settled:
		return a, nil
	case !a.Discarded:
		if err := s.Append(context.WithoutCancel(ctx), []journal.Event{events.New(setID, events.AttemptSetDiscarded{})},
			journal.Expectation{AggregateID: setID, Version: a.Version}); err != nil {
			return a, err
		}
	}
	s.lanes.StopLanes(a)
	a, _ = s.Store.AttemptSet(setID)
	if err := s.settleSet(ctx, a); err != nil {
		return a, err
	}
	a, _ = s.Store.AttemptSet(setID)
	return a, nil
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
		if err := s.lanes.RemoveLanes(a); err != nil {
			return err
		}
	}
	s.deleteRef(a.Session, a.Ref)
	err := s.Append(context.WithoutCancel(ctx), []journal.Event{events.New(a.ID, events.AttemptSetSettled{Workspace: a.Workspace})},
		journal.Expectation{AggregateID: a.ID, Version: a.Version})
	if err != nil {
		return err
	}
	s.ways.Mu.Lock()
	delete(s.ways.Locks, a.ID)
	s.ways.Mu.Unlock()
	if !discard {
		s.ways.Cleanup.Add(1)
		go func() {
			defer s.ways.Cleanup.Done()
			if err := s.lanes.RemoveLanes(a); err != nil {
				s.Log.Warn("remove a kept set's lanes", "set", a.ID, "err", err)
			}
		}()
	}
	return nil
}

// deleteRef removes the snapshot's ref from the primary checkout, when its
// sandbox is Ready (else it stays, harmless, until a later Keep or
// Discard of the Session runs).
func (s *Ways) deleteRef(session, ref string) {
	sb, ss, err := s.PrimarySandbox(session)
	if err != nil {
		s.Log.Warn("the Ways snapshot ref stays: the primary checkout is not ready", "session", session, "ref", ref, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), turns.SnapshotTimeout)
	defer cancel()
	if err := git.Open(sb, ss.WorkingDir).DeleteRef(ctx, ref); err != nil {
		s.Log.Warn("delete the Ways snapshot ref", "session", session, "ref", ref, "err", err)
	}
}
