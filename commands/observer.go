package commands

import (
	"context"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
)

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

// liveCut is where to cut text so that its head has at most max bytes,
// at a rune boundary when text is UTF-8.
func liveCut(text string, max int) int {
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
		n := liveCut(text, maxLiveDelta)
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

// laneTurn files a lane's turn events under its set.
type laneTurn struct {
	events.Lane
	set string
}

func (l *laneTurn) event(p events.Payload) journal.Event {
	if w, ok := events.WrapLane(l.Lane, p); ok {
		return events.New(l.set, w)
	}
	// The observer journals only progress events; anything else would be
	// a programming error, recorded rather than lost.
	return events.New(l.set, p)
}
