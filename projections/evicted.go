package projections

import (
	"container/list"
	"context"
	"errors"
	"sync"

	"lathe/journal"
	"lathe/journal/events"
)

// Ended records leave memory. An ended Automation run keeps only a summary
// (EndedRun: its Automation, state, times, error and the seq of its last
// event), a Chat keeps only its latest messages in memory (Chat.Evicted
// counts the others) beside its search index, and a settled Attempt set
// that is no longer its Session's current one keeps its identity, state
// and seq (AttemptSet.Evicted), without its lanes' turns and patches. The full record is folded
// again on demand from the aggregate's own events in the journal, by the
// same fold, up to the seq the store had applied for it, so a read answers
// exactly what it answered when the record was whole. A small cache keeps
// the records last folded again. Eviction happens only in a store that can
// read its journal (Load, RefoldFrom); the fold decides it from the events
// alone, so a replay and a checkpoint agree on what is held.

// RefoldJournal is what a store folds evicted records again from: the
// journal's aggregate chains.
type RefoldJournal interface {
	ScanAggregate(ctx context.Context, aggregateID string, after uint64, limit int, fn func(seq uint64, raw []byte) error) error
}

// RefoldFrom lets the store evict ended records and fold them again from
// j on demand. Call it before the first event is applied.
func (s *Store) RefoldFrom(j RefoldJournal) {
	s.sh.mu.Lock()
	s.sh.journal = j
	s.sh.mu.Unlock()
}

// evicts tells whether the store evicts ended records; the lock is held.
func (sh *shared) evicts() bool { return sh.journal != nil }

// errNoJournal: a store restored with evicted records and no journal.
var errNoJournal = errors.New("refold: no journal to read evicted records from")

// errRefoldDone stops an aggregate scan past the seq wanted.
var errRefoldDone = errors.New("refold: past the seq wanted")

// refoldEvents calls fold with each event of aggregate id up to seq upTo,
// in order.
func refoldEvents(ctx context.Context, j RefoldJournal, id string, upTo uint64, fold func(journal.Envelope, events.Payload) error) error {
	if j == nil {
		return errNoJournal
	}
	err := j.ScanAggregate(ctx, id, 0, 0, func(seq uint64, raw []byte) error {
		if seq > upTo {
			return errRefoldDone
		}
		env, p, err := events.DecodeStored(raw)
		if err != nil {
			return err
		}
		return fold(env, p)
	})
	if errors.Is(err, errRefoldDone) {
		return nil
	}
	return err
}

// refoldCache keeps the records last folded again, least recently read
// dropped first. Its values are never changed once stored (readers copy).
type refoldCache[V any] struct {
	mu    sync.Mutex
	max   int
	order list.List // of *refoldEntry[V], most recent first
	byKey map[refoldKey]*list.Element
}

// refoldKey names a run as of a seq (a run changed since is a different
// key), or a Chat (at 0).
type refoldKey struct {
	id string
	at uint64
}

type refoldEntry[V any] struct {
	key refoldKey
	v   V
}

func (c *refoldCache[V]) get(k refoldKey) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*refoldEntry[V]).v, true
	}
	var zero V
	return zero, false
}

func (c *refoldCache[V]) put(k refoldKey, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[refoldKey]*list.Element{}
	}
	if e, ok := c.byKey[k]; ok {
		e.Value.(*refoldEntry[V]).v = v
		c.order.MoveToFront(e)
		return
	}
	c.byKey[k] = c.order.PushFront(&refoldEntry[V]{k, v})
	for c.order.Len() > c.max {
		e := c.order.Back()
		delete(c.byKey, e.Value.(*refoldEntry[V]).key)
		c.order.Remove(e)
	}
}

func (c *refoldCache[V]) drop(k refoldKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		delete(c.byKey, k)
		c.order.Remove(e)
	}
}

// Evicted counts the ended runs and the Chat messages out of memory.
func (s *Store) Evicted() (runs, messages int) {
	s.sh.mu.RLock()
	defer s.sh.mu.RUnlock()
	for _, c := range s.ChatModel.chats {
		messages += c.Evicted
	}
	return len(s.AutomationModel.d.Ended), messages
}

// evict drops a settled set's lanes, input and decisions from memory, when
// the store evicts and every lane ended; the write lock is held. The
// events decide it (a next set starts, or a set settles behind the
// current one), so a replay and a checkpoint agree.
func (m *WaysModel) evict(a *AttemptSet) {
	if a == nil || a.Evicted || !a.Settled || !m.sh.evicts() {
		return
	}
	for _, at := range a.Attempts {
		if !AttemptTerminal(at.State) {
			return
		}
	}
	*a = AttemptSet{ID: a.ID, Session: a.Session, Workspace: a.Workspace, Worktree: a.Worktree, Discarded: a.Discarded, Settled: true,
		StartedAt: a.StartedAt, Version: a.Version, Seq: a.Seq, Evicted: true}
}

// refoldSet folds an evicted set again from its events up to its seq, or
// takes it from the cache (a copy, its content not resolved yet); a journal
// that cannot be read gives the stub.
func (m *WaysModel) refoldSet(j RefoldJournal, stub AttemptSet) AttemptSet {
	key := refoldKey{stub.ID, stub.Seq}
	a, ok := m.refolded.get(key)
	if !ok {
		scratch := New() // holds every record: no journal
		err := refoldEvents(context.Background(), j, stub.ID, stub.Seq, scratch.WaysModel.fold)
		if a = scratch.WaysModel.sets[stub.ID]; err != nil || a == nil {
			return stub
		}
		m.refolded.put(key, a)
	}
	return a.clone()
}
