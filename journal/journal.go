package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// The file holds two buckets. Each event's value starts with the seq of the
// aggregate's previous event, so one aggregate's history is a chain that is
// read without scanning the log; the aggregate record names the chain's head.
// A commit therefore touches the tail of the event log and one small record
// per aggregate, never a separate index page per event.
var (
	bucketEvents     = []byte("events")     // seq (8 bytes BE) → prev seq of the aggregate (8 bytes BE) + envelope JSON
	bucketAggregates = []byte("aggregates") // aggregate_id → aggregate record
)

// aggregate is the stored record of one aggregate: how many events it has,
// the seq of the newest, and the aggregate name its ID is filed under.
type aggregate struct {
	version uint64
	head    uint64
	name    string
}

func (a aggregate) encode() []byte {
	v := make([]byte, 16+len(a.name))
	binary.BigEndian.PutUint64(v, a.version)
	binary.BigEndian.PutUint64(v[8:], a.head)
	copy(v[16:], a.name)
	return v
}

func decodeAggregate(v []byte) (aggregate, bool) {
	if len(v) < 16 {
		return aggregate{}, false
	}
	return aggregate{version: binary.BigEndian.Uint64(v), head: binary.BigEndian.Uint64(v[8:]), name: string(v[16:])}, true
}

func getAggregate(aggs *bolt.Bucket, id string) (aggregate, bool) {
	return decodeAggregate(aggs.Get([]byte(id)))
}

// Options tune a journal. The zero value is right for the daemon.
type Options struct {
	// LockTimeout bounds the wait for the file lock; another daemon holding it
	// makes Open fail with ErrLocked. Zero means one second.
	LockTimeout time.Duration
	// MaxBatch caps the events one group commit writes. Zero means 4096.
	MaxBatch int
	// ReadOnly opens the journal for audit while no daemon holds it.
	ReadOnly bool
	// Now supplies event timestamps; nil means time.Now.
	Now func() time.Time
}

// Journal is an open event log. Its methods are safe for concurrent use.
type Journal struct {
	db       *bolt.DB
	opts     Options
	requests chan *request
	last     atomic.Uint64 // last committed seq

	mu      sync.RWMutex // guards closing against new requests
	closing bool
	done    chan struct{} // closed when the committer has exited

	// head is the hash chain's newest link (chain.go); the committer moves
	// it after each commit.
	headMu  sync.Mutex
	headSeq uint64
	head    Link

	feed   chan []Record // commit order → delivery goroutine
	onFeed atomic.Pointer[func([]Record)]
	fed    chan struct{} // closed when the delivery goroutine has exited
}

// request is one Append waiting for the committer.
type request struct {
	events  []pending
	expect  []Expectation
	records []Record
	err     error
	done    chan struct{}
}

// Expectation is an optimistic-concurrency condition: the aggregate must have
// exactly Version events before this append (0 means it must not exist yet).
type Expectation struct {
	AggregateID string
	Version     uint64
}

// Open opens or creates the journal at path. A second process on the same
// file fails within Options.LockTimeout with ErrLocked.
func Open(path string, opts Options) (*Journal, error) {
	if opts.LockTimeout == 0 {
		opts.LockTimeout = time.Second
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = 4096
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         opts.LockTimeout,
		ReadOnly:        opts.ReadOnly,
		InitialMmapSize: 1 << 30,
		FreelistType:    bolt.FreelistMapType,
		// The freelist is written with each commit (one more page in the
		// same fsync), not rebuilt on open: the rebuild walks and checks
		// every page, about 250 ms for a 1M-event journal, and grows with
		// the history; reading the synced freelist takes well under 1 ms.
		NoFreelistSync: false,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s is held by another lathe process (a daemon already runs on this data dir)", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	j := &Journal{
		db:       db,
		opts:     opts,
		requests: make(chan *request, 1024),
		done:     make(chan struct{}),
		feed:     make(chan []Record, 64),
		fed:      make(chan struct{}),
	}
	if !opts.ReadOnly {
		err = db.Update(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{bucketEvents, bucketAggregates} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("journal: init %s: %w", path, err)
		}
	}
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents)
		if b == nil {
			return nil
		}
		if k, _ := b.Cursor().Last(); k != nil {
			j.last.Store(binary.BigEndian.Uint64(k))
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("journal: read %s: %w", path, err)
	}
	if opts.ReadOnly {
		j.loadHead()
		close(j.done)
		close(j.fed)
		j.closing = true
		return j, nil
	}
	if err := j.backfill(); err != nil {
		db.Close()
		return nil, err
	}
	go j.commitLoop()
	go j.deliverLoop()
	return j, nil
}

// OnCommit sets the function that receives every committed batch, in
// sequence order, from one goroutine, after the batch is durable. It must be
// set before the first Append whose records it must see. A slow fn applies
// backpressure to appends; it never loses a batch.
func (j *Journal) OnCommit(fn func([]Record)) { j.onFeed.Store(&fn) }

// Last returns the sequence number of the last committed event (0 if none).
func (j *Journal) Last() uint64 { return j.last.Load() }

// Append durably appends events as one atomic unit and returns them with
// their sequence numbers once their commit is on disk. Concurrent appends
// share commits. Each expectation must hold at commit time, or the append
// fails with ErrVersionConflict and writes nothing.
func (j *Journal) Append(ctx context.Context, events []Event, expect ...Expectation) ([]Record, error) {
	if len(events) == 0 {
		return nil, fmt.Errorf("%w: nothing to append", ErrInvalidEvent)
	}
	if len(events) > j.opts.MaxBatch {
		return nil, fmt.Errorf("%w: %d events exceed the batch limit %d", ErrInvalidEvent, len(events), j.opts.MaxBatch)
	}
	at, actor := j.opts.Now(), ActorFrom(ctx)
	req := &request{events: make([]pending, len(events)), expect: expect, done: make(chan struct{})}
	for i, ev := range events {
		p, err := encode(ev, at, actor)
		if err != nil {
			return nil, err
		}
		req.events[i] = p
	}
	j.mu.RLock()
	if j.closing {
		j.mu.RUnlock()
		return nil, ErrClosed
	}
	select {
	case j.requests <- req:
		j.mu.RUnlock()
	case <-ctx.Done():
		j.mu.RUnlock()
		return nil, ctx.Err()
	}
	// Once queued, the request is committed or failed as a whole; waiting for
	// the outcome is not abandoned on ctx so that a caller never mistakes a
	// durable append for a failed one.
	<-req.done
	return req.records, req.err
}

// commitLoop is the group committer: it takes every queued request up to
// MaxBatch events and writes them in one bbolt transaction.
//
// The transaction opens with the first request, and each request is placed
// (checked, sealed, hashed and put) as it arrives, so that this work
// overlaps the arrival of the rest of the batch instead of adding to the
// commit's fsyncs.
//
// Right after a commit, the writers it acknowledged are still waking up to
// append again. The committer expects them back: its target is the last
// batch plus the requests that queued during its commit, and it lingers (at
// most lingerMax) while the batch is short of that target, rather than pay
// two fsyncs for a fraction of the load. A lone writer's target is its own
// request, so it never waits.
func (j *Journal) commitLoop() {
	defer close(j.done)
	defer close(j.feed)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	target := 0
	var b *batch
	for {
		first, ok := <-j.requests
		if !ok {
			return
		}
		b = j.begin(b)
		b.add(first)
		lingering, open := false, true
	fill:
		for b.n < j.opts.MaxBatch {
			select {
			case r, ok := <-j.requests:
				if !ok {
					open = false
					break fill
				}
				b.add(r)
				continue
			default:
			}
			if b.n >= target {
				break fill
			}
			if !lingering {
				lingering = true
				linger.Reset(lingerMax)
			}
			select {
			case r, ok := <-j.requests:
				if !ok {
					open = false
					break fill
				}
				b.add(r)
			case <-linger.C:
				lingering = false
				break fill
			}
		}
		if lingering && !linger.Stop() {
			<-linger.C
		}
		j.finish(b)
		target = b.n + len(j.requests)
		if !open {
			return
		}
	}
}

// lingerMax bounds how long a short batch waits for more appends.
const lingerMax = 200 * time.Microsecond

// batch is one group commit in the making: a write transaction that places
// each request as it is taken.
type batch struct {
	reqs   []*request
	n      int // events taken
	tx     *bolt.Tx
	events *bolt.Bucket
	aggs   aggregateCache
	first  uint64 // the seq before the batch
	seq    uint64 // the last seq placed
	head   Link   // the chain's link at seq
	links  []byte // the links of the batch's events, in seq order
	err    error  // a write failed: the batch fails as a whole
}

// begin opens the next batch, reusing the buffers of the last one.
func (j *Journal) begin(b *batch) *batch {
	if b == nil {
		b = &batch{reqs: make([]*request, 0, 256)}
	}
	_, head := j.Head()
	last := j.last.Load()
	clear(b.reqs)
	*b = batch{reqs: b.reqs[:0], links: b.links[:0], first: last, seq: last, head: head}
	b.tx, b.err = j.db.Begin(true)
	if b.err != nil {
		return b
	}
	b.events = b.tx.Bucket(bucketEvents)
	b.events.FillPercent = 1 // keys only ever grow
	b.aggs = aggregateCache{b: b.tx.Bucket(bucketAggregates), m: map[string]cachedAggregate{}}
	b.aggs.b.FillPercent = 0.9 // ULID IDs mostly grow too
	return b
}

// add places r's events in the batch, or fails r alone when its
// expectations or aggregate names do not hold.
func (b *batch) add(r *request) {
	b.reqs = append(b.reqs, r)
	b.n += len(r.events)
	if b.err != nil {
		return
	}
	if err := checkExpectations(&b.aggs, r.expect); err != nil {
		r.err = err
		return
	}
	if err := checkAggregateNames(&b.aggs, r.events); err != nil {
		r.err = err
		return
	}
	r.records = make([]Record, len(r.events))
	for i, p := range r.events {
		b.seq++
		a, _ := b.aggs.get(p.env.AggregateID)
		rec, stored := p.seal(b.seq, a.head)
		b.head = b.head.next(rec.Raw)
		rec.Hash = b.head.String()
		rec.Raw = sealed(rec.Raw, b.head)
		r.records[i] = rec
		if err := b.events.Put(seqKey(b.seq), stored); err != nil {
			b.err = err
			return
		}
		b.links = append(b.links, b.head[:]...)
		b.aggs.set(p.env.AggregateID, aggregate{version: a.version + 1, head: b.seq, name: p.env.Aggregate})
	}
	b.err = b.aggs.flush()
}

// commit writes the batch's chain record and commits its transaction; on
// any error nothing of the batch is written.
func (b *batch) commit() error {
	if b.err != nil {
		if b.tx != nil {
			_ = b.tx.Rollback()
		}
		return b.err
	}
	if len(b.links) > 0 {
		// One chain entry for the whole commit (chain.go).
		if err := b.tx.Bucket(bucketChain).Put(seqKey(b.first+1), b.links); err != nil {
			_ = b.tx.Rollback()
			return err
		}
	}
	return b.tx.Commit()
}

// finish commits the batch and answers its requests; the committed records
// go to the delivery goroutine first, in seq order.
func (j *Journal) finish(b *batch) {
	err := b.commit()
	var committed []Record
	for _, r := range b.reqs {
		switch {
		case err != nil:
			r.records, r.err = nil, fmt.Errorf("journal: commit: %w", err)
		case r.err == nil:
			committed = append(committed, r.records...)
		}
	}
	if err == nil {
		j.headMu.Lock()
		j.headSeq, j.head = b.seq, b.head
		j.headMu.Unlock()
		j.last.Store(b.seq)
		if len(committed) > 0 {
			j.feed <- committed
		}
	}
	for _, r := range b.reqs {
		close(r.done)
	}
}

func (j *Journal) deliverLoop() {
	defer close(j.fed)
	for batch := range j.feed {
		if fn := j.onFeed.Load(); fn != nil {
			(*fn)(batch)
		}
	}
}

// aggregateCache reads each aggregate record of a commit once and writes
// each changed one once per request, when the request's events are placed.
type aggregateCache struct {
	b     *bolt.Bucket
	m     map[string]cachedAggregate
	dirty []string // changed since the last flush
}

type cachedAggregate struct {
	a      aggregate
	exists bool
	dirty  bool
}

func (c *aggregateCache) get(id string) (aggregate, bool) {
	if e, ok := c.m[id]; ok {
		return e.a, e.exists
	}
	a, ok := getAggregate(c.b, id)
	c.m[id] = cachedAggregate{a: a, exists: ok}
	return a, ok
}

func (c *aggregateCache) set(id string, a aggregate) {
	if !c.m[id].dirty {
		c.dirty = append(c.dirty, id)
	}
	c.m[id] = cachedAggregate{a: a, exists: true, dirty: true}
}

func (c *aggregateCache) flush() error {
	for _, id := range c.dirty {
		e := c.m[id]
		if err := c.b.Put([]byte(id), e.a.encode()); err != nil {
			return err
		}
		e.dirty = false
		c.m[id] = e
	}
	c.dirty = c.dirty[:0]
	return nil
}

func checkExpectations(aggs *aggregateCache, expect []Expectation) error {
	for _, e := range expect {
		a, _ := aggs.get(e.AggregateID)
		if a.version != e.Version {
			return fmt.Errorf("%w: %s is at version %d, expected %d", ErrVersionConflict, e.AggregateID, a.version, e.Version)
		}
	}
	return nil
}

// checkAggregateNames refuses to file an ID under a second aggregate name.
func checkAggregateNames(aggs *aggregateCache, events []pending) error {
	for _, p := range events {
		if a, ok := aggs.get(p.env.AggregateID); ok && a.name != p.env.Aggregate {
			return fmt.Errorf("%w: %s belongs to aggregate %q, not %q", ErrInvalidEvent, p.env.AggregateID, a.name, p.env.Aggregate)
		}
	}
	return nil
}

// Version returns the number of events appended for an aggregate.
func (j *Journal) Version(aggregateID string) (uint64, error) {
	var a aggregate
	err := j.db.View(func(tx *bolt.Tx) error {
		a, _ = getAggregate(tx.Bucket(bucketAggregates), aggregateID)
		return nil
	})
	return a.version, err
}

// Scan calls fn for every event with after < seq, in order, until fn returns
// an error or limit events were read (limit <= 0: no limit). raw is the
// envelope as stored (without its hash) and only valid during the call;
// copy it to keep it.
func (j *Journal) Scan(ctx context.Context, after uint64, limit int, fn func(seq uint64, raw []byte) error) error {
	return j.scan(ctx, after, limit, false, fn)
}

// ScanSealed is Scan with each envelope as published: with its "hash".
func (j *Journal) ScanSealed(ctx context.Context, after uint64, limit int, fn func(seq uint64, raw []byte) error) error {
	return j.scan(ctx, after, limit, true, fn)
}

func (j *Journal) scan(ctx context.Context, after uint64, limit int, seal bool, fn func(seq uint64, raw []byte) error) error {
	if after == math.MaxUint64 { // nothing is after it; after+1 would wrap to the start
		return nil
	}
	return j.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		sealer, err := newSealer(tx, seal)
		if err != nil {
			return err
		}
		n := 0
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			if limit > 0 && n >= limit {
				return nil
			}
			if n%1024 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			if len(v) < 8 {
				return fmt.Errorf("%w: event %d is %d bytes", ErrCorrupt, binary.BigEndian.Uint64(k), len(v))
			}
			raw, err := sealer.seal(k, v[8:])
			if err != nil {
				return err
			}
			if err := fn(binary.BigEndian.Uint64(k), raw); err != nil {
				return err
			}
			n++
		}
		return nil
	})
}

// ScanAggregate calls fn for the events of one aggregate with after < seq,
// in order, following the aggregate's chain rather than scanning the log.
// raw is as Scan's.
func (j *Journal) ScanAggregate(ctx context.Context, aggregateID string, after uint64, limit int, fn func(seq uint64, raw []byte) error) error {
	return j.scanAggregate(ctx, aggregateID, after, limit, false, fn)
}

// ScanAggregateSealed is ScanAggregate with each envelope as published.
func (j *Journal) ScanAggregateSealed(ctx context.Context, aggregateID string, after uint64, limit int, fn func(seq uint64, raw []byte) error) error {
	return j.scanAggregate(ctx, aggregateID, after, limit, true, fn)
}

func (j *Journal) scanAggregate(ctx context.Context, aggregateID string, after uint64, limit int, seal bool, fn func(seq uint64, raw []byte) error) error {
	return j.db.View(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		sealer, err := newSealer(tx, seal)
		if err != nil {
			return err
		}
		a, _ := getAggregate(tx.Bucket(bucketAggregates), aggregateID)
		// The chain runs newest to oldest; the values it reads stay valid
		// for the transaction, so the walk forward reads nothing again.
		type link struct {
			seq uint64
			v   []byte
		}
		var chain []link
		if a.version > 0 {
			chain = make([]link, 0, a.version)
		}
		for seq := a.head; seq > after; {
			v := events.Get(seqKey(seq))
			if len(v) < 8 {
				return fmt.Errorf("%w: %s chains to missing event %d", ErrCorrupt, aggregateID, seq)
			}
			chain = append(chain, link{seq, v})
			prev := binary.BigEndian.Uint64(v)
			if prev >= seq {
				return fmt.Errorf("%w: %s chains from %d back to %d", ErrCorrupt, aggregateID, seq, prev)
			}
			seq = prev
		}
		for i := len(chain) - 1; i >= 0; i-- {
			if n := len(chain) - 1 - i; limit > 0 && n >= limit {
				return nil
			} else if n%1024 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			raw, err := sealer.seal(seqKey(chain[i].seq), chain[i].v[8:])
			if err != nil {
				return err
			}
			if err := fn(chain[i].seq, raw); err != nil {
				return err
			}
		}
		return nil
	})
}

// sealer adds each scanned event's link, when asked to.
type sealer struct{ chain *chainReader }

func newSealer(tx *bolt.Tx, seal bool) (sealer, error) {
	if !seal {
		return sealer{}, nil
	}
	chain := tx.Bucket(bucketChain)
	if chain == nil {
		return sealer{}, fmt.Errorf("%w: the journal has no hash chain yet (a daemon computes it at start)", ErrCorrupt)
	}
	return sealer{chain: newChainReader(chain)}, nil
}

func (s sealer) seal(k, raw []byte) ([]byte, error) {
	if s.chain == nil {
		return raw, nil
	}
	seq := binary.BigEndian.Uint64(k)
	l, ok := s.chain.link(seq)
	if !ok {
		return nil, fmt.Errorf("%w: no chain link for seq %d", ErrCorrupt, seq)
	}
	return sealed(raw, l), nil
}

// Close stops accepting appends, commits everything already queued, waits
// for the commit feed to drain and closes the file.
func (j *Journal) Close() error {
	j.mu.Lock()
	if !j.closing {
		j.closing = true
		close(j.requests)
	}
	j.mu.Unlock()
	<-j.done
	<-j.fed
	return j.db.Close()
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}
