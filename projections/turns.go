package projections

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/usage"
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
	// AgentName and AgentVersion are what an outside agent reported of
	// itself when it ran the turn (turn-started); empty for the built-in
	// loop.
	AgentName    string `json:"agent_name,omitempty"`
	AgentVersion string `json:"agent_version,omitempty"`
	Status       string `json:"status"`
	// Output is the final answer of a done turn.
	Output      events.Text `json:"output"`
	Error       string      `json:"error,omitempty"`
	Interrupted bool        `json:"interrupted,omitempty"`
	Budget      string      `json:"budget,omitempty"`
	// StopReason says why a hook ended a cancelled turn (continue: false).
	StopReason string     `json:"stop_reason,omitempty"`
	Steps      []Step     `json:"steps"`
	ToolCalls  []ToolCall `json:"tool_calls"`
	Usage      Usage      `json:"usage"`
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
	// Plan is an outside agent's latest plan for the turn (turn-planned);
	// nil when it stated none.
	Plan []events.PlanEntry `json:"plan,omitempty"`
	// Rewound marks a turn a rewind moved behind the conversation head: it
	// stays in the audit trail but is neither listed nor sent to the model.
	Rewound bool `json:"rewound,omitempty"`
	// Refused marks a failed turn whose prompt a UserPromptSubmit hook
	// blocked: kept here and in the audit trail, never sent to a model.
	Refused    bool       `json:"refused,omitempty"`
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
// when TokenUsageKnown is false) and the priced cost. CostKnown is true only
// when every part had a known price and every count is complete
// (CONTRACT.md); otherwise CostUSD is a lower bound.
type Usage struct {
	usage.View
	CostUSD   float64 `json:"cost_usd"`
	CostKnown bool    `json:"cost_known"`
}

func zeroUsage() Usage {
	return Usage{View: usage.Tokens{TokenUsageKnown: true}.View(), CostKnown: true}
}

// setTokens sets the counts; incomplete counts make the cost a lower bound.
func (u *Usage) setTokens(t usage.Tokens) {
	u.View = t.View()
	u.CostKnown = u.CostKnown && t.TokenUsageKnown
}

// PricedUSD is the cost when anything was priced (a lower bound when
// CostKnown is false), nil when nothing was.
func (u Usage) PricedUSD() *float64 {
	if !u.CostKnown && u.CostUSD == 0 {
		return nil
	}
	usd := u.CostUSD
	return &usd
}

func (u *Usage) add(e events.TurnUsage) {
	u.setTokens(u.Tokens.Add(e.Tokens))
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
	// when the turn ends. Both are guarded by LiveModel.liveMu.
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

// TurnModel is the read model of the Sessions' turns.
type TurnModel struct {
	sh       *shared
	sessions *SessionModel // for the parked parts (checkpoint.go)
	live     *LiveModel
	turns    map[string]*sessionTurns // session id → its turns
}

func (m *TurnModel) turnsOf(session string) *sessionTurns {
	st := m.turns[session]
	if st == nil {
		st = newSessionTurns(session)
		m.turns[session] = st
	}
	return st
}

// A Session turn's events and the rewinds that hide turns, each a change of
// its Session. A Ways lane's turn events are its Attempt set's (ways.go).
func init() {
	fold := func(s *Store, env journal.Envelope, p events.Payload) error { return s.part(env, p, s.TurnModel.fold) }
	claimFor("turns", fold,
		events.TurnStarted{}, events.TurnOutput{}, events.TurnUsage{}, events.ToolCallStarted{}, events.ToolCallFinished{},
		events.HookRan{}, events.LatticePlanned{}, events.LatticeTask{}, events.TurnChanges{}, events.TurnPlanned{},
		events.TurnDone{}, events.TurnCancelled{}, events.TurnFailed{}, events.SessionRewound{})
	// An accepted turn's context may cite shared files, which it retains.
	claimFor("turns", func(s *Store, env journal.Envelope, p events.Payload) error {
		s.ChatModel.noteCitations(p.(events.TurnAccepted))
		return fold(s, env, p)
	}, events.TurnAccepted{})
}

// fold applies a turn event of a Session (Store.part checked the Session).
func (m *TurnModel) fold(env journal.Envelope, p events.Payload) error {
	id, at, seq := env.AggregateID, env.At, env.Seq
	st := m.turnsOf(id)
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
		m.live.runs[runKey(id, t.TurnID)] = &liveRun{turn: t}
		return nil
	}
	if e, ok := p.(events.SessionRewound); ok {
		for _, tid := range e.Hidden {
			t := st.byID[tid]
			if t == nil || t.Live() {
				return fmt.Errorf("rewind hides unknown or live turn %s", tid)
			}
			t.Rewound = true
		}
		return nil
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
	run := m.live.runs[runKey(id, tid)]
	switch e := p.(type) {
	case events.LatticePlanned, events.LatticeTask:
		return foldLattice(t, run, e)
	case events.TurnChanges:
		t.ChangedPaths, t.ChangesKnown, t.ChangesTruncated = nonNil(e.Paths), true, e.Truncated
		t.ChangesBefore, t.ChangesAfter, t.ChangesRef = e.Before, e.After, e.Ref
	case events.TurnDone:
		t.Status, t.Output = TurnDone, e.Output
		m.endTurn(st, t, e.Totals, at)
	case events.TurnCancelled:
		t.Status, t.StopReason = TurnCancelled, e.StopReason
		m.endTurn(st, t, e.Totals, at)
	case events.TurnFailed:
		t.Status, t.Error, t.Interrupted, t.Budget, t.Refused = TurnError, e.Error, e.Interrupted, e.Budget, e.Refused
		m.endTurn(st, t, e.Totals, at)
	default:
		if ok, err := foldProgress(t, run, p, at); !ok && err == nil {
			return fmt.Errorf("no turn projection for %T", p)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// drop forgets a deleted Session's turns; a live one contradicts the
// deletion.
func (m *TurnModel) drop(id string) error {
	if st := m.turns[id]; st != nil && st.active != nil {
		return fmt.Errorf("session %s deleted during live turn %s", id, st.active.TurnID)
	}
	delete(m.turns, id)
	return nil
}

// turnsRead is a Session's turns for a reader (the read lock is held): the
// read model's, or a decoded copy of what is still parked.
func (m *TurnModel) turnsRead(id string) *sessionTurns {
	if p := m.sessions.parkedOf(id); p != nil {
		_, _, turns, _ := parked{turns: p.turns}.decode(id)
		return turns
	}
	return m.turns[id]
}

// foldProgress applies a running turn's progress event (start, step
// output, usage, tool call) to t and its live run, a Session's turn or a
// Ways lane's alike; false for any other event.
func foldProgress(t *Turn, run *liveRun, p events.Payload, at time.Time) (bool, error) {
	switch e := p.(type) {
	case events.TurnStarted:
		t.Status, t.Model, t.StartedAt = TurnRunning, e.Model, &at
		t.AgentName, t.AgentVersion = e.AgentName, e.AgentVersion
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
	case events.TurnPlanned:
		// Each plan is the whole plan: the latest one wins.
		t.Plan = events.ClipPlan(e.Entries)
	case events.HookRan: // in the audit trail; a block shows in the call's result
	default:
		return false, nil
	}
	return true, nil
}

// endTurn makes t terminal with the runner's totals: they are authoritative
// for the token counts (the cost stays the sum of the usage events).
func (m *TurnModel) endTurn(st *sessionTurns, t *Turn, totals usage.Tokens, at time.Time) {
	t.Usage.setTokens(totals)
	t.EndedAt = &at
	t.endLattice()
	if st.active == t {
		st.active = nil
	}
	m.live.endRun(runKey(t.SessionID, t.TurnID))
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
	c.Plan = slices.Clone(t.Plan)
	return c
}

// Turns lists a Session's visible turns (not rewound), in accept order,
// with their content resolved (content.go).
func (m *TurnModel) Turns(session string) []Turn { return m.listTurns(session, (*Turn).clone) }

// listTurns is Turns with each turn copied by copyOf.
func (m *TurnModel) listTurns(session string, copyOf func(*Turn) Turn) []Turn {
	m.sh.mu.RLock()
	st, r := m.turnsRead(session), m.sh.blobs
	out := []Turn{}
	if st != nil {
		out = make([]Turn, 0, len(st.Turns))
		for _, t := range st.Turns {
			if !t.Rewound {
				out = append(out, copyOf(t))
			}
		}
	}
	m.sh.mu.RUnlock()
	return resolved(r, out)
}

// Turn returns one turn of a Session, rewound or not.
func (m *TurnModel) Turn(session, turn string) (Turn, bool) {
	return m.oneTurn(func() *Turn {
		if st := m.turnsRead(session); st != nil {
			return st.byID[turn]
		}
		return nil
	})
}

// TurnByKey returns the turn accepted under an idempotency key.
func (m *TurnModel) TurnByKey(session, key string) (Turn, bool) {
	return m.oneTurn(func() *Turn {
		if st := m.turnsRead(session); st != nil {
			return st.byKey[key]
		}
		return nil
	})
}

// ActiveTurn returns a Session's live turn, if any.
func (m *TurnModel) ActiveTurn(session string) (Turn, bool) {
	return m.oneTurn(func() *Turn {
		if st := m.turns[session]; st != nil {
			return st.active
		}
		return nil
	})
}

// oneTurn clones the turn find returns (under the read lock), then
// resolves its content outside the lock.
func (m *TurnModel) oneTurn(find func() *Turn) (Turn, bool) {
	m.sh.mu.RLock()
	t, r := find(), m.sh.blobs
	var out Turn
	if t != nil {
		out = t.clone()
	}
	m.sh.mu.RUnlock()
	if t == nil {
		return Turn{}, false
	}
	out.resolve(r)
	return out, true
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
func (m *TurnModel) SearchTurns(q, session string, limit int) []TurnHit {
	needle := strings.ToLower(q)
	hits := []TurnHit{}
	var stored []searchable // turns with referenced content, matched unlocked
	m.sh.mu.RLock()
	var lists []*sessionTurns
	if session != "" {
		if st := m.turnsRead(session); st != nil {
			lists = append(lists, st)
		}
	} else {
		for _, st := range m.turns {
			lists = append(lists, st)
		}
		for _, ss := range m.sessions.order {
			if ss.parked == nil {
				continue
			}
			if st := m.turnsRead(ss.ID); st != nil {
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
	r := m.sh.blobs
	m.sh.mu.RUnlock()
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
