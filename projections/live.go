package projections

import (
	"context"
	"slices"
	"sync"

	"lathe/journal/events"
)

// The live-run projection's feed: the turn runners' token and reasoning
// deltas, as the daemon's one NATS live subscription receives them. They
// are not journaled; the projection folds them into each live run's Agent
// buffers and numbers them (the live sequence), and hands each to the
// function OnLive registered, which sends its frame. The same feed carries
// the checkouts' change notices (events.DeltaCheckout), handed on as they
// come, not folded, and a Chat turn's steps (events.DeltaChat*), handed on
// for the one connection that issued the turn: every change a client hears
// of travels this one way.

// LiveModel is the live state of the running turns (a Session's, or a
// Ways lane's): each live run's streamed Agent buffers and delivery mark,
// and the live sequence.
type LiveModel struct {
	sh *shared
	// runs: the live turns' streamed state, by runKey; live: the last
	// live-delta sequence number.
	runs map[string]*liveRun
	live uint64
	// liveIn queues the deltas DeliverLive received.
	liveIn liveQueue
	// autos answers whether a delta's run is an Automation run's.
	autos *AutomationModel

	// liveMu guards the runs' delivery marks; liveCond wakes AwaitLive.
	liveMu      sync.Mutex
	liveCond    *sync.Cond
	liveWaiters int
}

func newLiveModel(sh *shared, autos *AutomationModel) *LiveModel {
	m := &LiveModel{sh: sh, runs: map[string]*liveRun{}, autos: autos}
	m.liveCond = sync.NewCond(&m.liveMu)
	return m
}

// liveQueue is the deltas DeliverLive has queued.
type liveQueue struct {
	mu       sync.Mutex
	queue    []events.LiveDelta
	draining bool
	spare    []events.LiveDelta
	send     func(d events.LiveDelta, liveSeq uint64)
}

// OnLive sets the function each folded delta goes to, with its live
// sequence number, in that order. Set it before the first DeliverLive.
func (m *LiveModel) OnLive(send func(d events.LiveDelta, liveSeq uint64)) {
	m.liveIn.mu.Lock()
	m.liveIn.send = send
	m.liveIn.mu.Unlock()
}

// DeliverLive queues one live delta for the live-run projection and its
// frame. The daemon calls it from its one NATS live subscription, in
// publish order. One drainer at a time folds what is queued: when the
// daemon keeps up, each delta is a frame of its own; when a burst piles up,
// a turn's adjacent deltas of one kind merge into one frame, so a burst
// costs fewer frames instead of cutting clients off as lagging. A turn's
// text and order are the same either way.
func (m *LiveModel) DeliverLive(d events.LiveDelta) {
	q := &m.liveIn
	q.mu.Lock()
	q.queue = append(q.queue, d)
	start := !q.draining
	q.draining = true
	q.mu.Unlock()
	if start {
		go m.drainLive()
	}
}

func (m *LiveModel) drainLive() {
	q := &m.liveIn
	for {
		q.mu.Lock()
		batch := q.queue
		if len(batch) == 0 {
			q.draining = false
			q.mu.Unlock()
			return
		}
		q.queue, q.spare = q.spare[:0], nil
		send := q.send
		q.mu.Unlock()
		for _, d := range coalesce(batch) {
			if d.Kind == events.DeltaCheckout || d.ChatDelta() {
				// A notice, or a Chat turn's step for the one connection
				// that issued it: nothing to fold or number.
				if send != nil {
					send(d, 0)
				}
				continue
			}
			m.ApplyLive(d, func(live uint64) {
				if send != nil {
					send(d, live)
				}
			})
		}
		q.mu.Lock()
		q.spare = batch[:0]
		q.mu.Unlock()
	}
}

// coalesce merges, within each turn, adjacent deltas of the same Agent and
// kind, keeping every turn's order. Turns keep their first appearance order.
// Only text merges (and checkout notices, which say the same each time): a
// Chat turn's start, tool steps and end stay one delta each, in order.
func coalesce(batch []events.LiveDelta) []events.LiveDelta {
	if len(batch) < 2 {
		return batch
	}
	out := make([]events.LiveDelta, 0, len(batch))
	last := map[[3]string]int{} // (session, chat, turn) → index of its last delta in out
	for _, d := range batch {
		key := [3]string{d.Session, d.Chat, d.TurnID}
		if i, ok := last[key]; ok && mergeable(d.Kind) && out[i].Agent == d.Agent && out[i].Kind == d.Kind {
			out[i].Delta += d.Delta
			out[i].N = max(out[i].N, d.N)
			continue
		}
		last[key] = len(out)
		out = append(out, d)
	}
	return out
}

// mergeable reports whether adjacent deltas of kind merge into one.
func mergeable(kind string) bool {
	switch kind {
	case events.DeltaToken, events.DeltaReasoning, events.DeltaCheckout, events.DeltaChatToken, events.DeltaChatReasoning:
		return true
	}
	return false
}

// endRun removes a live run that ended and wakes its AwaitLive waiters.
func (m *LiveModel) endRun(key string) {
	if run := m.runs[key]; run != nil {
		delete(m.runs, key)
		m.liveMu.Lock() // lock order: mu, then liveMu
		run.ended = true
		if m.liveWaiters > 0 {
			m.liveCond.Broadcast()
		}
		m.liveMu.Unlock()
	}
}

// ApplyLive folds one streamed delta into its live run and, still in delta
// order, hands the live sequence number it got to deliver (which sends the
// frame); then it marks the delta delivered for AwaitLive. A delta of a run
// that is not live (it ended, or is unknown) is dropped: false.
//
// Deltas come from one NATS subscription, so ApplyLive is called from one
// goroutine at a time and deliver runs in live-seq order.
func (m *LiveModel) ApplyLive(d events.LiveDelta, deliver func(liveSeq uint64)) bool {
	key := runKey(d.Session, d.TurnID)
	m.sh.mu.Lock()
	run := m.runs[key]
	if run == nil {
		// An agent node of an Automation run streams with the run as its
		// Session and the node as its turn: sent, not buffered (a delta
		// may land just after the run's end; the run's record is whole).
		if m.autos.d.Runs[d.Session] != nil || m.autos.d.Ended[d.Session] != nil {
			m.live++
			seq := m.live
			m.sh.mu.Unlock()
			if deliver != nil {
				deliver(seq)
			}
			return true
		}
		m.sh.mu.Unlock()
		return false
	}
	a := run.agent(d.Agent)
	switch d.Kind {
	case events.DeltaReasoning:
		a.Reasoning += d.Delta
	default:
		a.Text += d.Delta
	}
	m.live++
	seq := m.live
	m.sh.mu.Unlock()
	if deliver != nil {
		deliver(seq)
	}
	m.liveMu.Lock()
	if run.delivered < d.N {
		run.delivered = d.N
	}
	if m.liveWaiters > 0 {
		m.liveCond.Broadcast()
	}
	m.liveMu.Unlock()
	return true
}

// AwaitLive blocks until the deltas of a turn up to n are delivered, the run
// ended, or ctx ends. The runner calls it before journaling the next step,
// so that a client sees a step's deltas before the frames of its events.
func (m *LiveModel) AwaitLive(ctx context.Context, session, turn string, n uint64) error {
	if n == 0 {
		return nil
	}
	m.sh.mu.RLock()
	run := m.runs[runKey(session, turn)]
	m.sh.mu.RUnlock()
	if run == nil {
		return nil
	}
	m.liveMu.Lock()
	defer m.liveMu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		m.liveMu.Lock()
		m.liveCond.Broadcast()
		m.liveMu.Unlock()
	})
	defer stop()
	m.liveWaiters++
	defer func() { m.liveWaiters-- }()
	for run.delivered < n && !run.ended {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.liveCond.Wait()
	}
	return nil
}

// LiveTurns lists every live turn of every Session, oldest first.
func (m *LiveModel) LiveTurns() []Turn {
	m.sh.mu.RLock()
	out := make([]Turn, 0, len(m.runs))
	for _, r := range m.runs {
		if r.lane == nil {
			out = append(out, r.turn.clone())
		}
	}
	r := m.sh.blobs
	m.sh.mu.RUnlock()
	slices.SortFunc(out, func(a, b Turn) int { return int(a.Seq) - int(b.Seq) })
	return resolved(r, out)
}

// runsLocked lists the live runs as the snapshot shows them, their tool
// calls' content still referenced; the read lock is held.
func (m *LiveModel) runsLocked() []Run {
	runs := make([]Run, 0, len(m.runs))
	for _, r := range m.runs {
		if r.lane != nil {
			runs = append(runs, laneRunOf(r))
			continue
		}
		run := Run{Workflow: r.turn.SessionID, Session: r.turn.SessionID, TurnID: r.turn.TurnID, Kind: "session",
			Status: r.turn.Status, Agents: make([]RunAgent, len(r.agents)), ToolCalls: slices.Clone(r.turn.ToolCalls),
			DisplayInput: r.turn.Input.String(), Agent: r.turn.AgentID, Model: r.turn.Model, AgentName: r.turn.AgentName, AgentVersion: r.turn.AgentVersion,
			Plan: r.turn.Plan}
		if d := r.turn.DisplayInput; d != nil {
			run.DisplayInput = d.String()
		}
		for i, a := range r.agents {
			run.Agents[i] = *a
		}
		if l := r.turn.Lattice; l != nil {
			run.Coordinator, run.Goal, run.Subtasks = l.Coordinator, l.Goal, slices.Clone(l.Subtasks)
		}
		runs = append(runs, run)
	}
	slices.SortFunc(runs, func(a, b Run) int {
		if c := compareIDs(a.Session, b.Session); c != 0 {
			return c
		}
		return compareIDs(a.Workflow, b.Workflow)
	})
	return runs
}
