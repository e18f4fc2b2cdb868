package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
// Right after a commit, the writers it acknowledged are still waking up to
// append again, so the queue is briefly short. When the batch is smaller
// than the previous one, the committer lingers (at most lingerMax) for the
// rest, rather than paying two fsyncs for a fraction of the load.
func (j *Journal) commitLoop() {
	defer close(j.done)
	defer close(j.feed)
	batch := make([]*request, 0, 256)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	prev := 0
	for {
		first, ok := <-j.requests
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		n := len(first.events)
		lingering := false
	fill:
		for n < j.opts.MaxBatch {
			select {
			case r, ok := <-j.requests:
				if !ok {
					break fill
				}
				batch = append(batch, r)
				n += len(r.events)
				continue
			default:
			}
			if n >= prev || lingering {
				if !lingering {
					break fill
				}
				// Lingering: wait for more until the timer fires.
				select {
				case r, ok := <-j.requests:
					if !ok {
						break fill
					}
					batch = append(batch, r)
					n += len(r.events)
					if n >= prev {
						break fill
					}
				case <-linger.C:
					lingering = false
					break fill
				}
				continue
			}
			lingering = true
			linger.Reset(lingerMax)
		}
		if lingering && !linger.Stop() {
			<-linger.C
		}
		prev = n
		j.commit(batch)
	}
}

// lingerMax bounds how long a short batch waits for more appends.
const lingerMax = 200 * time.Microsecond

func (j *Journal) commit(batch []*request) {
	last := j.last.Load()
	_, head := j.Head()
	err := j.db.Update(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		events.FillPercent = 1 // keys only ever grow
		chain := tx.Bucket(bucketChain)
		chain.FillPercent = 1
		var links []byte
		aggs := aggregateCache{b: tx.Bucket(bucketAggregates), m: map[string]cachedAggregate{}}
		aggs.b.FillPercent = 0.9 // ULID IDs mostly grow too
		seq := last
		for _, r := range batch {
			if err := checkExpectations(&aggs, r.expect); err != nil {
				r.err = err
				continue
			}
			if err := checkAggregateNames(&aggs, r.events); err != nil {
				r.err = err
				continue
			}
			r.records = make([]Record, len(r.events))
			for i, p := range r.events {
				seq++
				a, _ := aggs.get(p.env.AggregateID)
				rec, stored := p.seal(seq, a.head)
				head = head.next(rec.Raw)
				rec.Hash = head.String()
				rec.Raw = sealed(rec.Raw, head)
				r.records[i] = rec
				if err := events.Put(seqKey(seq), stored); err != nil {
					return err
				}
				links = append(links, head[:]...)
				aggs.set(p.env.AggregateID, aggregate{version: a.version + 1, head: seq, name: p.env.Aggregate})
			}
		}
		if len(links) > 0 {
			// One chain entry for the whole commit (chain.go).
			if err := chain.Put(seqKey(last+1), links); err != nil {
				return err
			}
		}
		last = seq
		return aggs.flush()
	})
	var committed []Record
	for _, r := range batch {
		switch {
		case err != nil:
			r.records, r.err = nil, fmt.Errorf("journal: commit: %w", err)
		case r.err == nil:
			committed = append(committed, r.records...)
		}
	}
	if err == nil {
		j.headMu.Lock()
		j.headSeq, j.head = last, head
		j.headMu.Unlock()
		j.last.Store(last)
		if len(committed) > 0 {
			j.feed <- committed
		}
	}
	for _, r := range batch {
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
// each changed one once, when the commit's events are all placed.
type aggregateCache struct {
	b *bolt.Bucket
	m map[string]cachedAggregate
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
	c.m[id] = cachedAggregate{a: a, exists: true, dirty: true}
}

func (c *aggregateCache) flush() error {
	for id, e := range c.m {
		if e.dirty {
			if err := c.b.Put([]byte(id), e.a.encode()); err != nil {
				return err
			}
		}
	}
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
