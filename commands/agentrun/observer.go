package agentrun

import (
	"context"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"

	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
)

// TurnObserver journals a running turn's progress and streams its deltas.
type TurnObserver struct {
	Core *core.Core
	Turn projections.Turn
	Ctx  context.Context
	// Agent is the Agent whose work it records: the turn's, or in a
	// lattice turn the coordinator's or one Worker's.
	Agent string
	// Live numbers the turn's published deltas; a lattice turn's observers
	// share it.
	Live *LiveCount
	// Lane, for a Ways lane's turn, files its events under its set
	// (commands/ways/ways.go).
	Lane *LaneTurn
	// asked is when the current inference started (the model is asked
	// right after Started and after each tool call), first when its first
	// delta came (zero: none yet): the step's time to first token.
	asked, first time.Time
}

// LiveCount numbers a turn's deltas in the order they are published.
type LiveCount struct {
	mu sync.Mutex
	N  uint64
}

func (o *TurnObserver) AppendTurn(ps ...events.Payload) error {
	evs := make([]journal.Event, len(ps))
	for i, p := range ps {
		evs[i] = events.New(o.Turn.SessionID, p)
		if o.Lane != nil {
			evs[i] = o.Lane.event(p)
		}
	}
	return o.Core.Append(o.Ctx, evs)
}

func (o *TurnObserver) Started(model string) error {
	return o.StartedBy(model, "", "")
}

// StartedBy is Started for an outside agent's turn: the turn records the
// name and version the agent reported of itself, clipped, so its History
// says exactly what ran it (commands/acprunner).
func (o *TurnObserver) StartedBy(model, name, version string) error {
	defer o.ask()
	return o.AppendTurn(events.TurnStarted{TurnID: o.Turn.TurnID, Agent: o.Agent, Model: model,
		AgentName: events.ClipReported(name, events.MaxReported), AgentVersion: events.ClipReported(version, events.MaxReported)})
}

// Plan journals an outside agent's plan for the turn, clipped
// (events.ClipPlan): the whole plan, which replaces the one before.
func (o *TurnObserver) Plan(entries []events.PlanEntry) error {
	return o.AppendTurn(events.TurnPlanned{TurnID: o.Turn.TurnID, Agent: o.Agent, Entries: events.ClipPlan(entries)})
}

// MaxLiveDelta bounds one published delta: a provider may hand over
// megabytes at once, and a NATS message has a size limit.
const MaxLiveDelta = 64 << 10

// LiveCut is where to cut text so that its head has at most max bytes,
// at a rune boundary when text is UTF-8.
func LiveCut(text string, max int) int {
	n := len(text)
	if n > max {
		n = max
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		if n == 0 { // not UTF-8: cut anywhere
			n = max
		}
	}
	return n
}

// ask notes that the next inference starts now.
func (o *TurnObserver) ask() { o.asked, o.first = time.Now(), time.Time{} }

func (o *TurnObserver) Delta(kind, text string) {
	if o.first.IsZero() {
		o.first = time.Now()
	}
	if o.Core.Opts.Live == nil {
		return
	}
	// One turn's deltas are numbered and published under one lock, so that
	// their numbers arrive in order even from concurrent Workers.
	o.Live.mu.Lock()
	defer o.Live.mu.Unlock()
	for text != "" {
		n := LiveCut(text, MaxLiveDelta)
		o.Live.N++
		d := events.LiveDelta{Session: o.Turn.SessionID, TurnID: o.Turn.TurnID, Agent: o.Agent, Kind: kind, Delta: text[:n], N: o.Live.N}
		if o.Lane != nil {
			d.Run, d.AttemptSetID = o.Lane.Run, o.Lane.Set
		}
		err := o.Core.Opts.Live.PublishLive(d)
		if err != nil {
			o.Core.Log.Error("publish live delta", "session", o.Turn.SessionID, "turn", o.Turn.TurnID, "err", err)
		}
		text = text[n:]
	}
}

// flush waits until the deltas published so far went out, so that a
// step's events never overtake its deltas on /ws. It is bounded: a lost
// delta costs a client at most a reconnect, never a stuck turn.
func (o *TurnObserver) flush() {
	ctx, cancel := context.WithTimeout(o.Ctx, 5*time.Second)
	defer cancel()
	o.Live.mu.Lock()
	n := o.Live.N
	o.Live.mu.Unlock()
	if err := o.Core.Store.AwaitLive(ctx, o.Turn.SessionID, o.Turn.TurnID, n); err != nil {
		o.Core.Log.Warn("live deltas not delivered in time", "session", o.Turn.SessionID, "turn", o.Turn.TurnID, "published", n)
	}
}

func (o *TurnObserver) Step(st agent.StepOutput) error {
	o.flush()
	calls := make([]events.StepCall, len(st.Calls))
	for i, c := range st.Calls {
		calls[i] = events.StepCall{CallID: c.CallID, Occurrence: c.Occurrence, Name: c.Name, Arguments: events.NewJSON(c.Arguments)}
	}
	usage := events.TurnUsage{TurnID: o.Turn.TurnID, Agent: o.Agent, Step: st.Step, Model: st.Model,
		Tokens: st.Usage}
	if st.Cost.PriceKnown {
		usd := st.Cost.USD
		usage.CostUSD = &usd
	}
	out := events.TurnOutput{TurnID: o.Turn.TurnID, Agent: o.Agent, Step: st.Step, Text: events.NewText(st.Text),
		Reasoning: events.NewText(st.Reasoning), ToolCalls: calls, Partial: st.Partial}
	switch {
	case st.FirstToken > 0:
		out.FirstTokenMS = float64(st.FirstToken.Microseconds()) / 1000
	case !o.first.IsZero() && !o.asked.IsZero():
		out.FirstTokenMS = float64(o.first.Sub(o.asked).Microseconds()) / 1000
	}
	o.ask() // the next inference, if any, starts after this step's tool calls
	return o.AppendTurn(out, usage)
}

func (o *TurnObserver) ToolStarted(c agent.Call) error {
	return o.AppendTurn(events.ToolCallStarted{TurnID: o.Turn.TurnID, Agent: o.Agent, CallID: c.CallID,
		Occurrence: c.Occurrence, Name: c.Name, Arguments: events.NewJSON(ValidArgs(c.Arguments))})
}

func (o *TurnObserver) ToolFinished(c agent.Call, r tools.Result, took time.Duration) error {
	defer o.ask()
	return o.AppendTurn(events.ToolCallFinished{TurnID: o.Turn.TurnID, Agent: o.Agent, CallID: c.CallID,
		Occurrence: c.Occurrence, Name: c.Name, Result: events.NewText(r.Output), IsError: r.IsError, DurationMS: took.Milliseconds()})
}

// ValidArgs keeps a model's arguments as JSON in the journal: malformed
// ones (the tool reports them to the model) are kept as a JSON string.
func ValidArgs(a json.RawMessage) json.RawMessage {
	if json.Valid(a) {
		return a
	}
	b, _ := json.Marshal(string(a))
	return b
}

// LaneTurn files a lane's turn events under its set.
type LaneTurn struct {
	events.Lane
	Set string
}

func (l *LaneTurn) event(p events.Payload) journal.Event {
	if w, ok := events.WrapLane(l.Lane, p); ok {
		return events.New(l.Set, w)
	}
	// The observer journals only progress events; anything else would be
	// a programming error, recorded rather than lost.
	return events.New(l.Set, p)
}
