package projections

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"lathe/journal/events"
)

// Turn statuses. A turn is live while accepted or running; the other three
// are terminal, and exactly one terminal event ends every turn.
const (
	TurnAccepted  = "accepted"
	TurnRunning   = "running"
	TurnDone      = "done"
	TurnCancelled = "cancelled"
	TurnError     = "error"
)

// Turn is the canonical durable record of one Session turn.
type Turn struct {
	TurnID            string        `json:"turn_id"`
	SessionID         string        `json:"session_id"`
	AgentID           string        `json:"agent_id"`
	IdempotencyKey    string        `json:"idempotency_key"`
	Source            string        `json:"source"`
	Input             events.Text   `json:"input"`
	DisplayInput      *events.Text  `json:"display_input"`
	ContextReferences []events.JSON `json:"context_references"`
	ReferenceIDs      []string      `json:"reference_ids"`
	ModelOverride     *string       `json:"model_override"`
	TargetAgent       *string       `json:"target_agent"`
	Model             string        `json:"model,omitempty"`
	Status            string        `json:"status"`
	// Output is the final answer of a done turn.
	Output      events.Text `json:"output"`
	Error       string      `json:"error,omitempty"`
	Interrupted bool        `json:"interrupted,omitempty"`
	Budget      string      `json:"budget,omitempty"`
	Steps       []Step      `json:"steps"`
	ToolCalls   []ToolCall  `json:"tool_calls"`
	Usage       Usage       `json:"usage"`
	// ChangedPaths are the files the turn changed in a Git Workspace, known
	// when ChangesKnown (ChangesTruncated: only the first ones are listed).
	ChangedPaths     []string `json:"changed_paths"`
	ChangesKnown     bool     `json:"changes_known"`
	ChangesTruncated bool     `json:"changes_truncated,omitempty"`
	// ChangesBefore and ChangesAfter are the worktree snapshots (git tree
	// IDs) the change record compares; ChangesRef the prefix of the refs
	// that keep them from gc ("" when none could be made).
	ChangesBefore string `json:"changes_before,omitempty"`
	ChangesAfter  string `json:"changes_after,omitempty"`
	ChangesRef    string `json:"changes_ref,omitempty"`
	// Lattice is the plan of a lattice turn and how each subtask went
	// (projections/lattice.go); nil for a single-Agent turn.
	Lattice *Lattice `json:"lattice,omitempty"`
	// Rewound marks a turn a rewind moved behind the conversation head: it
	// stays in the audit trail but is neither listed nor sent to the model.
	Rewound    bool       `json:"rewound,omitempty"`
	Seq        uint64     `json:"seq"` // the accept's journal seq
	AcceptedAt time.Time  `json:"accepted_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
}

// Live reports whether the turn has not ended.
func (t Turn) Live() bool { return t.Status == TurnAccepted || t.Status == TurnRunning }

// Step is one inference of a turn: the assistant message it produced.
type Step struct {
	Step      int               `json:"step"`
	Agent     string            `json:"agent"`
	Text      events.Text       `json:"text"`
	Reasoning events.Text       `json:"reasoning,omitzero"`
	ToolCalls []events.StepCall `json:"tool_calls"`
	Partial   bool              `json:"partial,omitempty"`
}

// ToolCall is one tool call of a turn with its result once finished.
type ToolCall struct {
	Agent      string      `json:"agent"`
	CallID     string      `json:"call_id"`
	Occurrence int         `json:"occurrence"`
	Name       string      `json:"name"`
	Arguments  events.JSON `json:"arguments"`
	Finished   bool        `json:"finished"`
	Result     events.Text `json:"result"`
	IsError    bool        `json:"is_error"`
	DurationMS int64       `json:"duration_ms,omitempty"`
}

// Usage is a turn's (or a Session's) paid work: token counts (a subtotal
// when TokenUsageKnown is false) and the priced cost. CostKnown is false
// when any part had an unknown price; CostUSD is then a subtotal.
type Usage struct {
	events.Tokens
	TotalTokens int     `json:"total_tokens"`
	CostUSD     float64 `json:"cost_usd"`
	CostKnown   bool    `json:"cost_known"`
}

func zeroUsage() Usage { return Usage{Tokens: events.Tokens{TokenUsageKnown: true}, CostKnown: true} }

func (u *Usage) add(e events.TurnUsage) {
	u.Tokens = u.Tokens.Add(e.Tokens)
	u.TotalTokens = u.InputTokens + u.OutputTokens
	if e.CostUSD != nil {
		u.CostUSD += *e.CostUSD
	} else {
		u.CostKnown = false
	}
}

// sessionTurns is one Session's turns in accept order, with its indexes.
type sessionTurns struct {
	Session string
	Turns   []*Turn
	byID    map[string]*Turn
	byKey   map[string]*Turn // idempotency key → turn
	active  *Turn            // the live turn, if any
}

func newSessionTurns(id string) *sessionTurns {
	return &sessionTurns{Session: id, byID: map[string]*Turn{}, byKey: map[string]*Turn{}}
}

func (st *sessionTurns) index(t *Turn) {
	st.byID[t.TurnID] = t
	st.byKey[t.IdempotencyKey] = t
	if t.Live() {
		st.active = t
	}
}

// liveRun is a live turn's streamed state: the Agent buffers the snapshot
// carries and the delivery mark the runner waits on.
type liveRun struct {
	turn   *Turn
	agents []*RunAgent
	// lane is set for a Ways lane's run (ways.go).
	lane *laneRun
	// delivered is the last LiveDelta.N whose frame went out; ended is set
	// when the turn ends. Both are guarded by Store.liveMu.
	delivered uint64
	ended     bool
}

// RunAgent is one Agent's buffer of a live run.
type RunAgent struct {
	Agent     string `json:"agent"`
	Text      string `json:"text"`
	Reasoning string `json:"reasoning"`
	Status    string `json:"status"`
}

func runKey(session, turn string) string { return session + "\x00" + turn }

func (s *Store) turnsOf(session string) *sessionTurns {
	st := s.turns[session]
	if st == nil {
		st = newSessionTurns(session)
		s.turns[session] = st
	}
	return st
}

// foldTurn applies a turn event of Session id.
func (s *Store) foldTurn(id string, at time.Time, seq uint64, p events.Payload) error {
	if _, err := s.session(id); err != nil {
		return err
	}
	st := s.turnsOf(id)
	if e, ok := p.(events.TurnAccepted); ok {
		if st.byID[e.TurnID] != nil {
			return fmt.Errorf("turn %s of session %s accepted twice", e.TurnID, id)
		}
		if st.active != nil {
			return fmt.Errorf("turn %s accepted while %s is live", e.TurnID, st.active.TurnID)
		}
		t := &Turn{
			TurnID: e.TurnID, SessionID: id, AgentID: e.AgentID, IdempotencyKey: e.IdempotencyKey, Source: e.Source,
			Input: e.Input, DisplayInput: e.DisplayInput, ContextReferences: nonNil(e.ContextReferences),
			ReferenceIDs: nonNil(e.ReferenceIDs), ModelOverride: e.ModelOverride, TargetAgent: e.TargetAgent,
			Status: TurnAccepted, Steps: []Step{}, ToolCalls: []ToolCall{}, Usage: zeroUsage(), ChangedPaths: []string{}, Seq: seq, AcceptedAt: at,
		}
		st.Turns = append(st.Turns, t)
		st.index(t)
		s.runs[runKey(id, t.TurnID)] = &liveRun{turn: t}
		return s.updateSession(id, at, func(*Session) {})
	}
	if e, ok := p.(events.SessionRewound); ok {
		for _, tid := range e.Hidden {
			t := st.byID[tid]
			if t == nil || t.Live() {
				return fmt.Errorf("rewind hides unknown or live turn %s", tid)
			}
			t.Rewound = true
		}
		return s.updateSession(id, at, func(*Session) {})
	}
	te, ok := p.(events.TurnEvent)
	if !ok {
		return fmt.Errorf("no turn projection for %T", p)
	}
	tid := te.Turn()
	t := st.byID[tid]
	if t == nil {
		return fmt.Errorf("%T for unknown turn %s of session %s", p, tid, id)
	}
	if !t.Live() {
		return fmt.Errorf("%T for ended turn %s", p, tid)
	}
	run := s.runs[runKey(id, tid)]
	var err error
	ok = true
	switch e := p.(type) {
	case events.LatticePlanned, events.LatticeTask:
		err = s.foldLattice(t, run, e)
	default:
		ok, err = foldProgress(t, run, p, at)
	}
	if ok || err != nil {
		if err != nil {
			return err
		}
		return s.updateSession(id, at, func(*Session) {})
	}
	switch e := p.(type) {
	case events.TurnChanges:
		t.ChangedPaths, t.ChangesKnown, t.ChangesTruncated = nonNil(e.Paths), true, e.Truncated
		t.ChangesBefore, t.ChangesAfter, t.ChangesRef = e.Before, e.After, e.Ref
	case events.TurnDone:
		t.Status, t.Output = TurnDone, e.Output
		s.endTurn(st, t, e.Totals, at)
	case events.TurnCancelled:
		t.Status = TurnCancelled
		s.endTurn(st, t, e.Totals, at)
	case events.TurnFailed:
		t.Status, t.Error, t.Interrupted, t.Budget = TurnError, e.Error, e.Interrupted, e.Budget
		s.endTurn(st, t, e.Totals, at)
	default:
		return fmt.Errorf("no turn projection for %T", p)
	}
	return s.updateSession(id, at, func(*Session) {})
}

// foldProgress applies a running turn's progress event (start, step
// output, usage, tool call) to t and its live run, a Session's turn or a
// Ways lane's alike; false for any other event.
func foldProgress(t *Turn, run *liveRun, p events.Payload, at time.Time) (bool, error) {
	switch e := p.(type) {
	case events.TurnStarted:
		t.Status, t.Model, t.StartedAt = TurnRunning, e.Model, &at
		if run != nil {
			run.agent(e.Agent).Status = TurnRunning
		}
	case events.TurnOutput:
		t.Steps = append(t.Steps, Step{Step: e.Step, Agent: e.Agent, Text: e.Text, Reasoning: e.Reasoning,
			ToolCalls: nonNil(e.ToolCalls), Partial: e.Partial})
	case events.TurnUsage:
		t.Usage.add(e)
	case events.ToolCallStarted:
		t.ToolCalls = append(t.ToolCalls, ToolCall{Agent: e.Agent, CallID: e.CallID, Occurrence: e.Occurrence, Name: e.Name, Arguments: e.Arguments})
	case events.ToolCallFinished:
		c := t.toolCall(e.Agent, e.CallID, e.Occurrence)
		if c == nil {
			return true, fmt.Errorf("tool call %s#%d of turn %s finished without a start", e.CallID, e.Occurrence, t.TurnID)
		}
		c.Finished, c.Result, c.IsError, c.DurationMS = true, e.Result, e.IsError, e.DurationMS
	case events.HookRan: // in the audit trail; a block shows in the call's result
	default:
		return false, nil
	}
	return true, nil
}

// endTurn makes t terminal with the runner's totals: they are authoritative
// for the token counts (the cost stays the sum of the usage events).
func (s *Store) endTurn(st *sessionTurns, t *Turn, totals events.Tokens, at time.Time) {
	t.Usage.Tokens = totals
	t.Usage.TotalTokens = totals.InputTokens + totals.OutputTokens
	t.EndedAt = &at
	t.endLattice()
	if st.active == t {
		st.active = nil
	}
	s.endRun(runKey(t.SessionID, t.TurnID))
}

// endRun removes a live run that ended and wakes its AwaitLive waiters.
func (s *Store) endRun(key string) {
	if run := s.runs[key]; run != nil {
		delete(s.runs, key)
		s.liveMu.Lock() // lock order: mu, then liveMu
		run.ended = true
		if s.liveWaiters > 0 {
			s.liveCond.Broadcast()
		}
		s.liveMu.Unlock()
	}
}

// toolCall finds a call by its Agent, call ID and occurrence: in a lattice
// turn, Workers number their calls each on their own.
func (t *Turn) toolCall(agent, callID string, occurrence int) *ToolCall {
	for i := range t.ToolCalls {
		if c := &t.ToolCalls[i]; c.Agent == agent && c.CallID == callID && c.Occurrence == occurrence {
			return c
		}
	}
	return nil
}

func (r *liveRun) agent(id string) *RunAgent {
	for _, a := range r.agents {
		if a.Agent == id {
			return a
		}
	}
	a := &RunAgent{Agent: id, Status: TurnAccepted}
	r.agents = append(r.agents, a)
	return a
}

func (t *Turn) clone() Turn {
	c := *t
	c.ContextReferences = slices.Clone(t.ContextReferences)
	c.ReferenceIDs = slices.Clone(t.ReferenceIDs)
	c.Steps = slices.Clone(t.Steps)
	c.ToolCalls = slices.Clone(t.ToolCalls)
	c.ChangedPaths = slices.Clone(t.ChangedPaths)
	c.Lattice = t.Lattice.clone()
	return c
}

// ApplyLive folds one streamed delta into its live run and, still in delta
// order, hands the live sequence number it got to deliver (which sends the
// frame); then it marks the delta delivered for AwaitLive. A delta of a run
// that is not live (it ended, or is unknown) is dropped: false.
//
// Deltas come from one NATS subscription, so ApplyLive is called from one
// goroutine at a time and deliver runs in live-seq order.
func (s *Store) ApplyLive(d events.LiveDelta, deliver func(liveSeq uint64)) bool {
	key := runKey(d.Session, d.TurnID)
	s.mu.Lock()
	run := s.runs[key]
	if run == nil {
		// An agent node of an Automation run streams with the run as its
		// Session and the node as its turn: sent, not buffered (a delta
		// may land just after the run's end; the run's record is whole).
		if s.auto.Runs[d.Session] != nil {
			s.live++
			seq := s.live
			s.mu.Unlock()
			if deliver != nil {
				deliver(seq)
			}
			return true
		}
		s.mu.Unlock()
		return false
	}
	a := run.agent(d.Agent)
	switch d.Kind {
	case events.DeltaReasoning:
		a.Reasoning += d.Delta
	default:
		a.Text += d.Delta
	}
	s.live++
	seq := s.live
	s.mu.Unlock()
	if deliver != nil {
		deliver(seq)
	}
	s.liveMu.Lock()
	if run.delivered < d.N {
		run.delivered = d.N
	}
	if s.liveWaiters > 0 {
		s.liveCond.Broadcast()
	}
	s.liveMu.Unlock()
	return true
}

// AwaitLive blocks until the deltas of a turn up to n are delivered, the run
// ended, or ctx ends. The runner calls it before journaling the next step,
// so that a client sees a step's deltas before the frames of its events.
func (s *Store) AwaitLive(ctx context.Context, session, turn string, n uint64) error {
	if n == 0 {
		return nil
	}
	s.mu.RLock()
	run := s.runs[runKey(session, turn)]
	s.mu.RUnlock()
	if run == nil {
		return nil
	}
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		s.liveMu.Lock()
		s.liveCond.Broadcast()
		s.liveMu.Unlock()
	})
	defer stop()
	s.liveWaiters++
	defer func() { s.liveWaiters-- }()
	for run.delivered < n && !run.ended {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.liveCond.Wait()
	}
	return nil
}

// Turns lists a Session's visible turns (not rewound), in accept order,
// with their content resolved (content.go).
func (s *Store) Turns(session string) []Turn { return s.listTurns(session, (*Turn).clone) }

// listTurns is Turns with each turn copied by copyOf.
func (s *Store) listTurns(session string, copyOf func(*Turn) Turn) []Turn {
	s.mu.RLock()
	st, r := s.turnsRead(session), s.blobs
	out := []Turn{}
	if st != nil {
		out = make([]Turn, 0, len(st.Turns))
		for _, t := range st.Turns {
			if !t.Rewound {
				out = append(out, copyOf(t))
			}
		}
	}
	s.mu.RUnlock()
	return resolved(r, out)
}

// Turn returns one turn of a Session, rewound or not.
func (s *Store) Turn(session, turn string) (Turn, bool) {
	return s.oneTurn(func() *Turn {
		if st := s.turnsRead(session); st != nil {
			return st.byID[turn]
		}
		return nil
	})
}

// TurnByKey returns the turn accepted under an idempotency key.
func (s *Store) TurnByKey(session, key string) (Turn, bool) {
	return s.oneTurn(func() *Turn {
		if st := s.turnsRead(session); st != nil {
			return st.byKey[key]
		}
		return nil
	})
}

// ActiveTurn returns a Session's live turn, if any.
func (s *Store) ActiveTurn(session string) (Turn, bool) {
	return s.oneTurn(func() *Turn {
		if st := s.turns[session]; st != nil {
			return st.active
		}
		return nil
	})
}

// oneTurn clones the turn find returns (under the read lock), then
// resolves its content outside the lock.
func (s *Store) oneTurn(find func() *Turn) (Turn, bool) {
	s.mu.RLock()
	t, r := find(), s.blobs
	var out Turn
	if t != nil {
		out = t.clone()
	}
	s.mu.RUnlock()
	if t == nil {
		return Turn{}, false
	}
	out.resolve(r)
	return out, true
}

// LiveTurns lists every live turn of every Session, oldest first.
func (s *Store) LiveTurns() []Turn {
	s.mu.RLock()
	out := make([]Turn, 0, len(s.runs))
	for _, r := range s.runs {
		if r.lane == nil {
			out = append(out, r.turn.clone())
		}
	}
	r := s.blobs
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Turn) int { return int(a.Seq) - int(b.Seq) })
	return resolved(r, out)
}

// TurnHit is one search result.
type TurnHit struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	Field     string `json:"field"` // "input" or "output"
	Snippet   string `json:"snippet"`
	Status    string `json:"status"`
	Seq       uint64 `json:"seq"`
}

// SearchTurns finds q literally, ignoring case, in the visible turns' inputs
// (as the user typed them) and outputs: in one Session, or in all when
// session is "". At most limit hits, newest turns first. Content in the
// blob store is searched whole, read after the lock is released.
func (s *Store) SearchTurns(q, session string, limit int) []TurnHit {
	needle := strings.ToLower(q)
	hits := []TurnHit{}
	var stored []searchable // turns with referenced content, matched unlocked
	s.mu.RLock()
	var lists []*sessionTurns
	if session != "" {
		if st := s.turnsRead(session); st != nil {
			lists = append(lists, st)
		}
	} else {
		for _, st := range s.turns {
			lists = append(lists, st)
		}
		for _, ss := range s.order {
			if ss.parked == nil {
				continue
			}
			if st := s.turnsRead(ss.ID); st != nil {
				lists = append(lists, st)
			}
		}
	}
	for _, st := range lists {
		for _, t := range st.Turns {
			if t.Rewound {
				continue
			}
			input := t.Input
			if t.DisplayInput != nil {
				input = *t.DisplayInput
			}
			c := searchable{hit: TurnHit{SessionID: st.Session, TurnID: t.TurnID, Status: t.Status, Seq: t.Seq},
				fields: [...]searchField{{"input", input}, {"output", t.Output}}}
			if input.Stored() || t.Output.Stored() {
				stored = append(stored, c)
			} else if h, ok := c.match(nil, needle, len(q)); ok {
				hits = append(hits, h)
			}
		}
	}
	r := s.blobs
	s.mu.RUnlock()
	for _, c := range stored {
		if h, ok := c.match(r, needle, len(q)); ok {
			hits = append(hits, h)
		}
	}
	slices.SortFunc(hits, func(a, b TurnHit) int { return int(b.Seq) - int(a.Seq) })
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}

// searchable is one turn's searched fields, in the order they are tried.
type searchable struct {
	hit    TurnHit
	fields [2]searchField
}

type searchField struct {
	name string
	text events.Text
}

// match reports the hit of the first field holding needle (n bytes as
// queried), its references resolved through r.
func (c searchable) match(r events.BlobReader, needle string, n int) (TurnHit, bool) {
	for _, f := range c.fields {
		text := resolveText(r, f.text).String()
		if i := indexFold(text, needle); i >= 0 {
			h := c.hit
			h.Field, h.Snippet = f.name, snippet(text, i, n)
			return h, true
		}
	}
	return TurnHit{}, false
}

// indexFold is strings.Index on the lowered text; needle is lowered. It
// returns a byte offset into text when lowering kept the byte lengths,
// else 0 (the snippet then starts at the beginning).
func indexFold(text, needle string) int {
	lower := strings.ToLower(text)
	i := strings.Index(lower, needle)
	if i < 0 || len(lower) == len(text) {
		return i
	}
	return 0
}

// snippet cuts about 80 bytes of context on each side of a match, on rune
// boundaries.
func snippet(text string, at, n int) string {
	start, end := max(0, at-80), min(len(text), at+n+80)
	for start > 0 && !utf8RuneStart(text[start]) {
		start--
	}
	for end < len(text) && !utf8RuneStart(text[end]) {
		end++
	}
	out := text[start:end]
	if start > 0 {
		out = "…" + out
	}
	if end < len(text) {
		out += "…"
	}
	return out
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
