package projections

import (
	"sync"

	"lathe/journal/events"
)

// The live-run projection's feed: the turn runners' token and reasoning
// deltas, as the daemon's one NATS live subscription receives them. They
// are not journaled; the projection folds them into each live run's Agent
// buffers and numbers them (the live sequence), and hands each to the
// function OnLive registered, which sends its frame.

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
func (s *Store) OnLive(send func(d events.LiveDelta, liveSeq uint64)) {
	s.liveIn.mu.Lock()
	s.liveIn.send = send
	s.liveIn.mu.Unlock()
}

// DeliverLive queues one live delta for the live-run projection and its
// frame. The daemon calls it from its one NATS live subscription, in
// publish order. One drainer at a time folds what is queued: when the
// daemon keeps up, each delta is a frame of its own; when a burst piles up,
// a turn's adjacent deltas of one kind merge into one frame, so a burst
// costs fewer frames instead of cutting clients off as lagging. A turn's
// text and order are the same either way.
func (s *Store) DeliverLive(d events.LiveDelta) {
	q := &s.liveIn
	q.mu.Lock()
	q.queue = append(q.queue, d)
	start := !q.draining
	q.draining = true
	q.mu.Unlock()
	if start {
		go s.drainLive()
	}
}

func (s *Store) drainLive() {
	q := &s.liveIn
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
			s.ApplyLive(d, func(live uint64) {
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
func coalesce(batch []events.LiveDelta) []events.LiveDelta {
	if len(batch) < 2 {
		return batch
	}
	out := make([]events.LiveDelta, 0, len(batch))
	last := map[[2]string]int{} // (session, turn) → index of its last delta in out
	for _, d := range batch {
		key := [2]string{d.Session, d.TurnID}
		if i, ok := last[key]; ok && out[i].Agent == d.Agent && out[i].Kind == d.Kind {
			out[i].Delta += d.Delta
			out[i].N = max(out[i].N, d.N)
			continue
		}
		last[key] = len(out)
		out = append(out, d)
	}
	return out
}
