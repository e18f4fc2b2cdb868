package projections

import (
	"fmt"
	"slices"
	"time"

	"lathe/journal"
	"lathe/journal/events"
)

// The Ways read model: each Attempt set, folded from its aggregate's
// events; the Sessions' sets in start order (the last one is the durable
// current set); and the Workspaces an unresolved set owns, which the /ws
// snapshot's attempt_ownerships and the 409 of every primary surface of
// that Workspace come from.

// Set states.
const (
	SetRunning    = "running"    // some lane is not terminal
	SetReady      = "ready"      // every lane is terminal
	SetKeeping    = "keeping"    // Keep began (applying)
	SetKept       = "kept"       // settled by Keep
	SetDiscarding = "discarding" // Discard began
	SetDiscarded  = "discarded"  // settled by Discard
)

// AttemptSet is one Ways set.
type AttemptSet struct {
	ID        string
	Session   string
	Workspace string
	// Worktree: the set owns its worktree Session's checkout only, not
	// the Workspace folder (no entry in owners).
	Worktree bool
	Input    events.Text
	Task     string
	Snapshot string
	Tree     string
	Ref      string
	Attempts []*Attempt
	// Judgment is the last judge's ranking; nil before one.
	Judgment *events.AttemptSetJudged
	// Keep is the Keep under way or done; nil before one began.
	Keep      *events.KeepPhase
	Discarded bool
	Settled   bool
	StartedAt time.Time
	Version   uint64
	// Seq is the seq of the set's last event. Evicted marks a settled set
	// that is no longer its Session's current one and keeps only its
	// identity, state and Seq in memory: a read folds it again
	// (evicted.go).
	Seq     uint64
	Evicted bool
}

// Attempt is one lane of a set: its run identity, its turn (the same record
// a Session turn has) and its end.
type Attempt struct {
	events.AttemptSpec
	State       string
	Turn        *Turn
	Interrupted bool
	After       string
	Changed     []string
	Patch       events.Text
	Verdict     *events.LaneVerified
}

// laneRun marks a live run as a Ways lane's.
type laneRun struct {
	Run, Set, Session string
}

// Resolved reports whether the set no longer owns its Workspace.
func (a *AttemptSet) Resolved() bool { return a.Settled }

// State is the set's state in words (Set* above).
func (a *AttemptSet) State() string {
	switch {
	case a.Settled && a.Discarded:
		return SetDiscarded
	case a.Settled:
		return SetKept
	case a.Discarded:
		return SetDiscarding
	case a.Keep != nil:
		return SetKeeping
	}
	for _, at := range a.Attempts {
		if !AttemptTerminal(at.State) {
			return SetRunning
		}
	}
	return SetReady
}

// AttemptTerminal reports whether an Attempt run state is terminal.
func AttemptTerminal(state string) bool {
	return state == events.AttemptSucceeded || state == events.AttemptFailed || state == events.AttemptCancelled
}

// WaysModel is the read model of the Attempt sets and of the Workspaces
// they own.
type WaysModel struct {
	sh        *shared
	live      *LiveModel  // a lane's live run
	audit     *AuditModel // a set is in its Session's audit trail
	sets      map[string]*AttemptSet
	bySession map[string][]string // session id → its sets' IDs, oldest first
	owners    map[string]string   // workspace id → the unresolved set owning it
	refolded  *refoldCache[*AttemptSet]
}

// refoldSets is how many evicted sets folded again stay cached.
const refoldSets = 16

func newWaysModel(sh *shared, live *LiveModel, audit *AuditModel) *WaysModel {
	return &WaysModel{sh: sh, live: live, audit: audit, sets: map[string]*AttemptSet{}, bySession: map[string][]string{}, owners: map[string]string{},
		refolded: &refoldCache[*AttemptSet]{max: refoldSets}}
}

// index adds a set to the indexes (a new one, or one a checkpoint restored).
func (m *WaysModel) indexSet(a *AttemptSet) {
	m.sets[a.ID] = a
	m.bySession[a.Session] = append(m.bySession[a.Session], a.ID)
	if !a.Settled && !a.Worktree {
		m.owners[a.Workspace] = a.ID
	}
	for _, at := range a.Attempts {
		if !AttemptTerminal(at.State) {
			run := &liveRun{turn: at.Turn, lane: &laneRun{Run: at.Run, Set: a.ID, Session: a.Session}}
			if at.State == events.AttemptRunning {
				run.agent(at.Agent).Status = TurnRunning
			}
			m.live.runs[runKey(a.Session, at.TurnID)] = run
		}
	}
}

// Every event of an Attempt set aggregate, its lanes' turn events included.
func init() {
	fold := func(s *Store, env journal.Envelope, p events.Payload) error { return s.WaysModel.fold(env, p) }
	claimFor("ways", fold,
		events.AttemptSetStarted{}, events.LaneStarted{}, events.LaneOutput{}, events.LaneUsage{}, events.LaneToolStarted{},
		events.LaneToolFinished{}, events.LanePlanned{}, events.LaneHookRan{}, events.LaneEnded{}, events.LaneVerified{}, events.AttemptSetJudged{},
		events.KeepPhase{}, events.AttemptSetDiscarded{}, events.AttemptSetSettled{})
}

// fold applies an event of an Attempt set aggregate.
func (m *WaysModel) fold(env journal.Envelope, p events.Payload) error {
	id, at := env.AggregateID, env.At
	if e, ok := p.(events.AttemptSetStarted); ok {
		if m.sets[id] != nil {
			return fmt.Errorf("attempt set %s started twice", id)
		}
		if owner := m.owners[e.Workspace]; owner != "" && !e.Worktree {
			return fmt.Errorf("attempt set %s started while %s owns workspace %s", id, owner, e.Workspace)
		}
		if ids := m.bySession[e.Session]; len(ids) > 0 {
			m.evict(m.sets[ids[len(ids)-1]]) // the current set no longer
		}
		a := &AttemptSet{ID: id, Session: e.Session, Workspace: e.Workspace, Worktree: e.Worktree, Input: e.Input, Task: e.Task,
			Snapshot: e.Snapshot, Tree: e.Tree, Ref: e.Ref, StartedAt: at, Version: 1, Seq: env.Seq}
		for _, spec := range e.Attempts {
			a.Attempts = append(a.Attempts, &Attempt{AttemptSpec: spec, State: events.AttemptQueued, Changed: []string{},
				Turn: &Turn{TurnID: spec.TurnID, SessionID: e.Session, AgentID: spec.Agent, IdempotencyKey: spec.TurnID, Source: "ways",
					Input: e.Input, ContextReferences: []events.JSON{}, ReferenceIDs: []string{}, Model: spec.Model, Status: TurnAccepted,
					Steps: []Step{}, ToolCalls: []ToolCall{}, Usage: zeroUsage(), ChangedPaths: []string{}, Seq: env.Seq, AcceptedAt: at}})
		}
		m.indexSet(a)
		m.audit.relate(e.Session, id) // in the Session's audit trail
		return nil
	}
	a := m.sets[id]
	if a == nil {
		return fmt.Errorf("%T for unknown attempt set %s", p, id)
	}
	a.Version++
	a.Seq = env.Seq
	if a.Evicted {
		return nil // a late event: the fold again includes it
	}
	lane := func(i int) (*Attempt, error) {
		if i < 0 || i >= len(a.Attempts) {
			return nil, fmt.Errorf("%T for lane %d of attempt set %s of %d lanes", p, i, id, len(a.Attempts))
		}
		return a.Attempts[i], nil
	}
	switch e := p.(type) {
	case events.LaneOf:
		l, err := lane(e.LaneRef().Index)
		if err != nil {
			return err
		}
		if AttemptTerminal(l.State) {
			return fmt.Errorf("%T for ended lane %d of attempt set %s", p, l.Index, id)
		}
		if _, ok := p.(events.LaneStarted); ok {
			l.State = events.AttemptRunning
		}
		_, err = foldProgress(l.Turn, m.live.runs[runKey(a.Session, l.TurnID)], e.TurnPayload(), at)
		return err
	case events.LaneEnded:
		l, err := lane(e.Index)
		if err != nil {
			return err
		}
		if AttemptTerminal(l.State) {
			return fmt.Errorf("lane %d of attempt set %s ended twice", l.Index, id)
		}
		l.State, l.Interrupted, l.After, l.Changed, l.Patch = e.State, e.Interrupted, e.After, nonNil(e.Changed), e.Patch
		t := l.Turn
		t.Output, t.Error, t.Interrupted, t.Budget = e.Output, e.Error, e.Interrupted, e.Budget
		t.ChangedPaths, t.ChangesKnown = nonNil(e.Changed), e.After != ""
		switch e.State {
		case events.AttemptSucceeded:
			t.Status = TurnDone
		case events.AttemptCancelled:
			t.Status = TurnCancelled
		default:
			t.Status = TurnError
		}
		t.Usage.setTokens(e.Totals)
		t.EndedAt = &at
		m.live.endRun(runKey(a.Session, l.TurnID))
	case events.LaneVerified:
		l, err := lane(e.Index)
		if err != nil {
			return err
		}
		v := e
		l.Verdict = &v
	case events.AttemptSetJudged:
		j := e
		a.Judgment = &j
	case events.KeepPhase:
		if a.Keep != nil && a.Keep.Index != e.Index {
			return fmt.Errorf("keep of lane %d in attempt set %s while lane %d is kept", e.Index, id, a.Keep.Index)
		}
		k := e
		a.Keep = &k
	case events.AttemptSetDiscarded:
		a.Discarded = true
	case events.AttemptSetSettled:
		a.Settled = true
		if m.owners[a.Workspace] == id {
			delete(m.owners, a.Workspace)
		}
		if ids := m.bySession[a.Session]; ids[len(ids)-1] != id {
			m.evict(a)
		}
	default:
		return fmt.Errorf("no projection for %T", p)
	}
	return nil
}

// AttemptSet returns a copy of one set (its lanes' turns cloned, their
// content resolved).
func (m *WaysModel) AttemptSet(id string) (AttemptSet, bool) {
	m.sh.mu.RLock()
	a, r, j := m.sets[id], m.sh.blobs, m.sh.journal
	var out AttemptSet
	if a != nil {
		out = a.clone()
	}
	m.sh.mu.RUnlock()
	if a == nil {
		return AttemptSet{}, false
	}
	if out.Evicted {
		out = m.refoldSet(j, out)
	}
	for _, at := range out.Attempts {
		at.Turn.resolve(r)
	}
	return out, true
}

// CurrentAttemptSet returns the latest set a Session started, resolved or
// not: the durable current set its results read.
func (m *WaysModel) CurrentAttemptSet(session string) (AttemptSet, bool) {
	m.sh.mu.RLock()
	ids := m.bySession[session]
	m.sh.mu.RUnlock()
	if len(ids) == 0 {
		return AttemptSet{}, false
	}
	return m.AttemptSet(ids[len(ids)-1])
}

// AttemptSetOf reports whether a set belongs to a Session, and whether it
// is that Session's current one.
func (m *WaysModel) AttemptSetOf(session, id string) (known, current bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	ids := m.bySession[session]
	return slices.Contains(ids, id), len(ids) > 0 && ids[len(ids)-1] == id
}

// WorkspaceOwner returns the unresolved set owning a Workspace, if any.
func (m *WaysModel) WorkspaceOwner(workspace string) (Ownership, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	id := m.owners[workspace]
	if id == "" {
		return Ownership{}, false
	}
	return Ownership{Workspace: workspace, Session: m.sets[id].Session, AttemptSetID: id}, true
}

// UnsettledAttemptSets lists every set not settled yet, oldest first.
func (m *WaysModel) UnsettledAttemptSets() []AttemptSet {
	m.sh.mu.RLock()
	ids := make([]string, 0, len(m.owners))
	for _, id := range m.owners {
		ids = append(ids, id)
	}
	m.sh.mu.RUnlock()
	slices.Sort(ids)
	out := make([]AttemptSet, 0, len(ids))
	for _, id := range ids {
		if a, ok := m.AttemptSet(id); ok {
			out = append(out, a)
		}
	}
	return out
}

// ownershipsLocked lists the Workspace ownerships; the read lock is held.
func (m *WaysModel) ownershipsLocked() []Ownership {
	out := make([]Ownership, 0, len(m.owners))
	for ws, id := range m.owners {
		out = append(out, Ownership{Workspace: ws, Session: m.sets[id].Session, AttemptSetID: id})
	}
	slices.SortFunc(out, func(a, b Ownership) int { return compareIDs(a.AttemptSetID, b.AttemptSetID) })
	return out
}

// laneRunOf is the snapshot entry of a lane's live run.
func laneRunOf(r *liveRun) Run {
	return Run{Workflow: r.lane.Run, Session: r.lane.Session, TurnID: r.turn.TurnID, AttemptSetID: r.lane.Set, Kind: "attempt", Status: r.turn.Status}
}

func (a *AttemptSet) clone() AttemptSet {
	c := *a
	if a.Keep != nil {
		k := *a.Keep
		c.Keep = &k
	}
	if a.Judgment != nil {
		j := *a.Judgment
		j.Ranking = slices.Clone(j.Ranking)
		c.Judgment = &j
	}
	c.Attempts = make([]*Attempt, len(a.Attempts))
	for i, at := range a.Attempts {
		cp := *at
		t := at.Turn.clone()
		cp.Turn = &t
		cp.Changed = slices.Clone(at.Changed)
		if at.Verdict != nil {
			v := *at.Verdict
			cp.Verdict = &v
		}
		c.Attempts[i] = &cp
	}
	return c
}
