package projections

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"lathe/journal"
	"lathe/journal/events"
)

// history reads the events of a few aggregates up to a seq for a fold of
// the past (SessionAt). The scan copies each event out of its read
// transaction into a shared slab and hands runs of historyChunk events to
// workers on every core that decode them (envelope and payload, as replay
// does) while the scan goes on, and the fold applies each run once it is
// decoded, while the next ones still are.
type history struct {
	ctx  context.Context
	j    AuditJournal
	seq  uint64
	slab []byte
	todo chan *historyChunk
}

// newHistory starts the decoders of a read up to seq; close stops them.
func newHistory(ctx context.Context, j AuditJournal, seq uint64) *history {
	h := &history{ctx: ctx, j: j, seq: seq, todo: make(chan *historyChunk, 64)}
	for range runtime.GOMAXPROCS(0) {
		go func() {
			for c := range h.todo {
				for i := range c.recs {
					if err := decodeRecord(&c.recs[i]); err != nil {
						c.err = fmt.Errorf("seq %d: %w", c.recs[i].Seq, err)
						break
					}
				}
				close(c.done)
			}
		}()
	}
	return h
}

func (h *history) close() { close(h.todo) }

// historyChunk is a run of one aggregate's events, decoded once done is
// closed.
type historyChunk struct {
	recs []journal.Record
	err  error
	done chan struct{}
}

// historyChunkSize is how many events one decode goroutine takes.
const historyChunkSize = 512

var errPastSeq = errors.New("past the seq")

// read scans one aggregate's events after seq after, up to the seq, and
// returns its chunks, their decoding under way.
func (h *history) read(agg string, after uint64) ([]*historyChunk, error) {
	var run []*historyChunk
	var cur *historyChunk
	flush := func() {
		h.todo <- cur
		run = append(run, cur)
		cur = nil
	}
	err := h.j.ScanAggregate(h.ctx, agg, after, 0, func(n uint64, raw []byte) error {
		if n > h.seq {
			return errPastSeq
		}
		if cap(h.slab)-len(h.slab) < len(raw) {
			h.slab = make([]byte, 0, max(replaySlab, len(raw)))
		}
		start := len(h.slab)
		h.slab = append(h.slab, raw...)
		if cur == nil {
			cur = &historyChunk{recs: make([]journal.Record, 0, historyChunkSize), done: make(chan struct{})}
		}
		cur.recs = append(cur.recs, journal.Record{Envelope: journal.Envelope{Seq: n}, Raw: h.slab[start:len(h.slab):len(h.slab)]})
		if len(cur.recs) == historyChunkSize {
			flush()
		}
		return nil
	})
	if cur != nil {
		flush()
	}
	if errors.Is(err, errPastSeq) {
		err = nil
	}
	return run, err
}

// fold applies the events of the runs read to past in seq order: own's
// chunk by chunk as each is decoded (while the next ones still are), with
// the other runs' events merged in before the events that follow them.
// Right after own's event at index mark (if any), it calls marked.
func (h *history) fold(past *Store, own []*historyChunk, others [][]*historyChunk, mark int, marked func(journal.Record)) error {
	var rest []journal.Record
	for _, run := range others {
		for _, c := range run {
			<-c.done
			if c.err != nil {
				return c.err
			}
			rest = append(rest, c.recs...)
		}
	}
	slices.SortFunc(rest, func(a, b journal.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, c := range own {
		<-c.done
		if c.err != nil {
			return c.err
		}
		batch := c.recs
		if end := c.recs[len(c.recs)-1].Seq; len(rest) > 0 && rest[0].Seq < end {
			batch = make([]journal.Record, 0, len(c.recs)+len(rest))
			for _, r := range c.recs {
				for len(rest) > 0 && rest[0].Seq < r.Seq {
					batch, rest = append(batch, rest[0]), rest[1:]
				}
				batch = append(batch, r)
			}
		}
		if mark >= 0 && mark < len(c.recs) {
			r := c.recs[mark]
			i, _ := slices.BinarySearchFunc(batch, r.Seq, func(b journal.Record, seq uint64) int { return cmp.Compare(b.Seq, seq) })
			if err := past.Apply(batch[:i+1]); err != nil {
				return err
			}
			marked(r)
			batch = batch[i+1:]
		}
		mark -= len(c.recs)
		if err := past.Apply(batch); err != nil {
			return err
		}
	}
	return past.Apply(rest)
}

// firstOf waits for the first event of a run and returns it, if any.
func firstOf(run []*historyChunk) (journal.Record, bool, error) {
	if len(run) == 0 {
		return journal.Record{}, false, nil
	}
	<-run[0].done
	if run[0].err != nil {
		return journal.Record{}, false, run[0].err
	}
	return run[0].recs[0], true, nil
}

// countOf is how many events a run holds.
func countOf(run []*historyChunk) int {
	n := 0
	for _, c := range run {
		n += len(c.recs)
	}
	return n
}

// lastOf is the last event of a run that holds one.
func lastOf(run []*historyChunk) journal.Record {
	recs := run[len(run)-1].recs
	return recs[len(recs)-1]
}

// sessionAt is SessionAt folded from the beginning (im nil) or from an
// image of the Session's past at or before seq; false when the image does
// not match the journal (nothing else is then said).
func (s *AuditModel) sessionAt(ctx context.Context, j AuditJournal, id string, seq, head uint64, im *pastImage) (SessionAt, bool, error) {
	h := newHistory(ctx, j, seq)
	defer h.close()
	var after uint64
	if im != nil {
		after = im.seq - 1 // from the event it was folded through, to check it
	}
	own, err := h.read(id, after)
	if err != nil {
		return SessionAt{}, true, err
	}
	r0, ok, err := firstOf(own)
	if err != nil {
		return SessionAt{}, true, err
	}
	var from uint64
	var workspace string
	base := 0 // the Session's own events before own's first
	switch {
	case im != nil:
		if !ok || r0.Seq != im.seq || r0.ID != im.id {
			return SessionAt{}, false, nil
		}
		from, workspace, base = im.from, im.workspace, im.own-1
	case !ok: // seq is before its first event, or there is no such Session
		first, ok := firstEvent(ctx, j, id)
		if !ok || first.Aggregate != events.Session {
			return SessionAt{}, true, ErrNoHistory
		}
		return SessionAt{}, true, &SeqRangeError{Seq: seq, From: first.Seq, Until: head}
	default:
		created, ok := r0.Payload.(events.SessionCreated)
		if !ok {
			return SessionAt{}, true, ErrNoHistory
		}
		from, workspace = r0.Seq, created.WorkspaceID
	}
	if seq > head {
		return SessionAt{}, true, &SeqRangeError{Seq: seq, From: from, Until: head}
	}
	aggs := append(s.AuditAggregates(id), workspace)
	var others [][]*historyChunk
	for _, agg := range aggs[1:] {
		after := uint64(0)
		if im != nil && slices.Contains(im.aggs, agg) {
			after = im.seq
		}
		run, err := h.read(agg, after)
		if err != nil {
			return SessionAt{}, true, err
		}
		if im != nil && after == 0 {
			if r, ok, err := firstOf(run); err != nil {
				return SessionAt{}, true, err
			} else if ok && r.Seq <= im.seq {
				return SessionAt{}, false, nil // it has events the image did not fold
			}
		}
		others = append(others, run)
	}
	past := New()
	if im != nil && !past.decodeImage(im.image) {
		return SessionAt{}, false, nil
	}
	past.sh.blobs = s.blobReader()
	// The fold takes an image at the last pastEvery-th own event it passes,
	// unless there is one.
	n := base + countOf(own)
	mark, markAt := n/pastEvery*pastEvery, -1
	if mark > base+1 && !s.pasts.has(id, mark) {
		markAt = mark - base - 1 // its index in own
	}
	err = h.fold(past, own, others, markAt, func(r journal.Record) {
		if w, _, err := past.image(1 << 16); err == nil {
			s.pasts.put(id, pastImage{seq: r.Seq, id: r.ID, own: mark, from: from, workspace: workspace, aggs: aggs, image: bytes.Clone(w.b)})
		}
	})
	if err != nil {
		return SessionAt{}, true, err
	}
	ss, ok := past.Session(id)
	if !ok {
		return SessionAt{}, true, &SeqRangeError{Seq: seq, From: from, Until: lastOf(own).Seq, Deleted: true}
	}
	// past is this call's alone: its turns need no copies.
	turns := past.listTurns(id, func(t *Turn) Turn { return *t })
	out := SessionAt{Seq: seq, Events: n, Session: ss, Turns: turns, Attachments: past.Attachments(id, true), Tasks: past.Tasks(id)}
	if a, ok := past.CurrentAttemptSet(id); ok {
		out.AttemptSet = &a
	}
	return out, true, nil
}

// Images of the past: the Session's past right after every pastEvery-th
// of its own events, as the checkpoint encoding (checkpoint.go) of the
// store that folded it, so that SessionAt folds at most pastEvery of its
// own events (and the others' in between) from the newest image at or
// before the seq it is asked, not the whole history. They are a cache,
// derived from the journal, never written anywhere: a fold that passes
// such an event and finds no image of it takes one. An image is used only
// if the journal still holds, at its seq, the event with the envelope ID
// it was folded through, and if it folded every aggregate of the trail
// that has events up to that seq; otherwise it is dropped and the fold
// starts from the beginning. The cache holds at most pastCacheMax bytes:
// the Sessions read least recently lose theirs first.
const (
	pastEvery    = 1000
	pastCacheMax = 64 << 20
)

// pastImage is one image of a Session's past.
type pastImage struct {
	seq       uint64 // the seq of the own event it was folded through
	id        string // that event's envelope ID
	own       int    // how many of the Session's own events it folded
	from      uint64 // the seq of the Session's first event
	workspace string
	aggs      []string // the aggregates it folded
	image     []byte   // never written again: the restored store's strings slice it
}

type pastCache struct {
	mu       sync.Mutex
	sessions map[string]*pastImages
	size     int
	clock    uint64
	// keeping is set by KeepPasts; grown counts each Session's events
	// since its last image was due, due queues the Sessions whose image
	// is, and pending counts those queued or being taken.
	keeping atomic.Bool
	grown   map[string]int
	due     chan string
	pending int
	// wanted are the Sessions want queued.
	wanted map[string]bool
}

// KeepPasts keeps the images of the Sessions' pasts as their histories
// grow, until ctx ends: after every pastEvery events the store applies to
// a Session, a fold in the background takes its image (from the newest
// one before it), so that time travel in a Session that grew while the
// daemon ran starts within about twice pastEvery of its events from any
// seq, its first call included. A Session that did not grow since the
// daemon started gets its images from its first time travel.
func (s *AuditModel) KeepPasts(ctx context.Context, j AuditJournal) {
	c := &s.pasts
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keeping.Load() {
		return
	}
	c.grown, c.due, c.wanted = map[string]int{}, make(chan string, 256), map[string]bool{}
	c.keeping.Store(true)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case id := <-c.due:
				_, _ = s.SessionAt(ctx, j, id, j.Last()) // it takes the image
				c.mu.Lock()
				c.pending--
				c.mu.Unlock()
			}
		}
	}()
}

// want queues, once, a fold of a Session that has no image (KeepPasts):
// its audit trail is read, and the History view that reads it scrubs
// through its past next, so that its first time travel, after a restart
// say, finds the image too.
func (c *pastCache) want(session string) {
	if !c.keeping.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[session] != nil || c.wanted[session] {
		return
	}
	select {
	case c.due <- session:
		c.wanted[session] = true
		c.pending++
	default:
	}
}

// grew counts an event applied to a Session for KeepPasts.
func (c *pastCache) grew(env journal.Envelope) {
	if !c.keeping.Load() || env.Aggregate != events.Session {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := env.AggregateID
	if c.grown[id]++; c.grown[id] < pastEvery {
		return
	}
	select {
	case c.due <- id:
		delete(c.grown, id)
		c.pending++
	default: // the queue is full: it is due again with the next event
	}
}

type pastImages struct {
	list []pastImage // by seq
	used uint64
}

// at returns the newest image of a Session's past at or before seq.
func (c *pastCache) at(session string, seq uint64) (pastImage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.sessions[session]
	if e == nil {
		return pastImage{}, false
	}
	c.clock++
	e.used = c.clock
	i, _ := slices.BinarySearchFunc(e.list, seq+1, func(im pastImage, seq uint64) int { return cmp.Compare(im.seq, seq) })
	if i == 0 {
		return pastImage{}, false
	}
	return e.list[i-1], true
}

// has reports whether there is an image after the Session's own-th event.
func (c *pastCache) has(session string, own int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.sessions[session]
	return e != nil && slices.ContainsFunc(e.list, func(im pastImage) bool { return im.own == own })
}

// put adds an image, then drops the images of the Sessions read least
// recently while the cache holds more than pastCacheMax bytes.
func (c *pastCache) put(session string, im pastImage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == nil {
		c.sessions = map[string]*pastImages{}
	}
	e := c.sessions[session]
	if e == nil {
		e = &pastImages{}
		c.sessions[session] = e
	}
	i, found := slices.BinarySearchFunc(e.list, im.seq, func(im pastImage, seq uint64) int { return cmp.Compare(im.seq, seq) })
	if found {
		return
	}
	e.list = slices.Insert(e.list, i, im)
	c.size += len(im.image)
	c.clock++
	e.used = c.clock
	for c.size > pastCacheMax && len(c.sessions) > 0 {
		var lru string
		for id, e := range c.sessions {
			if lru == "" || e.used < c.sessions[lru].used {
				lru = id
			}
		}
		for _, im := range c.sessions[lru].list {
			c.size -= len(im.image)
		}
		delete(c.sessions, lru)
		delete(c.wanted, lru)
	}
}

// drop removes an image that does not match the journal.
func (c *pastCache) drop(session string, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.sessions[session]; e != nil {
		e.list = slices.DeleteFunc(e.list, func(im pastImage) bool {
			if im.seq == seq {
				c.size -= len(im.image)
				return true
			}
			return false
		})
	}
}
