package projections

import "lathe/journal"

// Notice is one entry of the in-memory recent typed-event log.
// It is a typed event (kind "event", projections/typed.go), or the notice
// of a committed journal event (kind "journal", with its aggregate).
type Notice struct {
	TypedEvent
	Aggregate   string `json:"aggregate,omitempty"`
	AggregateID string `json:"aggregate_id,omitempty"`
}

// recentSize bounds the recent typed-event log.
const recentSize = 256

// RecentModel is the recent log: the last recentSize notices of journal
// events and typed events.
type RecentModel struct {
	sh     *shared
	recent []Notice // ring, recentSize
	next   int
}

func (m *RecentModel) note(env journal.Envelope) {
	m.remember(Notice{TypedEvent: TypedEvent{Kind: "journal", Type: env.Type, Seq: env.Seq, At: env.At},
		Aggregate: env.Aggregate, AggregateID: env.AggregateID})
}

func (m *RecentModel) noteTyped(te TypedEvent) { m.remember(Notice{TypedEvent: te}) }

func (m *RecentModel) remember(n Notice) {
	if len(m.recent) < recentSize {
		m.recent = append(m.recent, n)
		return
	}
	m.recent[m.next] = n
	m.next = (m.next + 1) % recentSize
}

// inOrder is the log oldest first; the lock is held.
func (m *RecentModel) inOrder() []Notice {
	out := make([]Notice, 0, len(m.recent))
	out = append(out, m.recent[m.next:]...)
	return append(out, m.recent[:m.next]...)
}

// Recent returns the recent typed-event log, oldest first.
func (m *RecentModel) Recent() []Notice {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	return m.inOrder()
}
