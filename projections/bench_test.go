package projections_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/journal/journaltest"
	"lathe/projections"
)

// The performance targets these benchmarks measure:
//
//	BenchmarkReplay1M               rebuild every projection from 1,000,000 events: <= 3 s
//	BenchmarkRestartWithCheckpoint  checkpoint, then 1,000 newer events: <= 100 ms
//	BenchmarkSnapshot10k            /ws snapshot (Store.Snapshot + json.Marshal) with 10,000 Sessions: <= 20 ms
//
// Run them with -benchtime=3x: one iteration of the first two is seconds of
// work. The 1M-event journal (300 MB) is generated on first use, in 10 to 30
// seconds, and cached under $TMPDIR/lathe-bench, keyed by size and generator
// version. A replay reads it through the page cache: the first run after the
// cache was dropped measures a cold start, which is disk-bound.
const (
	benchEvents = 1_000_000
	tailEvents  = 1_000
	// genVersion changes whenever genStream's output changes shape, so that
	// a journal cached by an older generator is not reused.
	genVersion = 2
	// genBatch is how many events one generator Append carries.
	genBatch = 1_000
)

// genStream produces an always-valid, realistic stream of Workspace and
// Session events, in the shapes and orders commands appends them: about one
// Workspace per 100 Sessions; of the operations on Sessions, 14% create one
// (most prepare a sandbox at once, 30% wait for a setup approval), 30%
// rename, 18% run a task, 24% close or reopen (tearing down or preparing the
// runtime), 8% rebuild the environment, 5% delete, 1% rename a Workspace.
// An operation is one to five events. Over 1M events that leaves about 700
// Workspaces and 45,000 live Sessions (28,000 open, 17,000 of them Ready)
// with 21,000 tasks.
type genStream struct {
	rng        *rand.Rand
	prefix     string // keeps Workspace paths of independent streams apart
	workspaces []genWorkspace
	sessions   []genSession // live ones
	created    int
	queue      []journal.Event // decided, not yet handed out
}

type genWorkspace struct{ id, path string }

type genSession struct {
	id     string
	closed bool
	state  string // events.EnvReady, EnvFailed, EnvUnprepared or EnvAwaitingApproval
	gen    uint64
}

func newGenStream(seed uint64, prefix string) *genStream {
	return &genStream{rng: rand.New(rand.NewPCG(seed, 0x1a7e)), prefix: prefix}
}

// next returns the next n events.
func (g *genStream) next(n int) []journal.Event {
	for len(g.queue) < n {
		g.queue = append(g.queue, g.op()...)
	}
	evs := make([]journal.Event, n)
	copy(evs, g.queue)
	g.queue = append(g.queue[:0], g.queue[n:]...)
	return evs
}

// op decides one operation and returns its events.
func (g *genStream) op() []journal.Event {
	if len(g.workspaces) == 0 || g.created >= 100*len(g.workspaces) {
		w := genWorkspace{id: ulid.Make().String(), path: fmt.Sprintf("/home/dev/src/%s/project-%05d", g.prefix, len(g.workspaces))}
		g.workspaces = append(g.workspaces, w)
		return []journal.Event{events.New(w.id, events.WorkspaceRegistered{Path: w.path, Name: filepath.Base(w.path)})}
	}
	r := g.rng.IntN(100)
	if r < 14 || len(g.sessions) == 0 {
		return g.createSession()
	}
	i := g.rng.IntN(len(g.sessions))
	s := &g.sessions[i]
	on := func(ps ...events.Payload) []journal.Event {
		evs := make([]journal.Event, len(ps))
		for k, p := range ps {
			evs[k] = events.New(s.id, p)
		}
		return evs
	}
	rename := on(events.SessionRenamed{Name: fmt.Sprintf("Investigate the failing build on branch feature-%d", g.rng.IntN(10000))})
	switch {
	case r < 44:
		return rename
	case r < 62:
		if s.state != events.EnvReady || s.closed {
			return rename
		}
		task := ulid.Make().String()
		return on(
			events.TaskStarted{TaskID: task, Command: "go test ./...", Generation: s.gen},
			events.TaskExited{TaskID: task, ExitCode: g.rng.IntN(2), OutputTail: "ok  \tlathe/projections\t2.104s\n", DurationMS: int64(g.rng.IntN(60000))},
		)
	case r < 86:
		s.closed = !s.closed
		if s.closed {
			if s.state != events.EnvReady {
				return on(events.SessionClosed{})
			}
			s.state = events.EnvUnprepared
			return on(events.EnvironmentChanging{Generation: s.gen, Owner: events.OwnerClose},
				events.EnvironmentStopped{Generation: s.gen}, events.EnvironmentSettled{Generation: s.gen}, events.SessionClosed{})
		}
		if s.state != events.EnvUnprepared {
			return on(events.SessionReopened{})
		}
		return append(on(events.SessionReopened{}, events.EnvironmentChanging{Generation: s.gen, Owner: events.OwnerPrepare}), g.prepared(s)...)
	case r < 94:
		if s.closed || s.state == events.EnvAwaitingApproval {
			return rename
		}
		old := s.gen
		s.gen++
		return append(on(events.EnvironmentChanging{Generation: old, Owner: events.OwnerRebuild},
			events.EnvironmentPlanned{Generation: s.gen, Image: "docker.io/library/golang:1.26"},
			events.EnvironmentChanging{Generation: s.gen, Owner: events.OwnerRebuild}), g.prepared(s)...)
	case r < 99:
		evs := on(events.SessionDeleted{})
		if s.state == events.EnvReady {
			evs = on(events.EnvironmentChanging{Generation: s.gen, Owner: events.OwnerDelete},
				events.EnvironmentStopped{Generation: s.gen}, events.EnvironmentSettled{Generation: s.gen}, events.SessionDeleted{})
		}
		g.sessions[i] = g.sessions[len(g.sessions)-1]
		g.sessions = g.sessions[:len(g.sessions)-1]
		return evs
	default:
		w := g.workspaces[g.rng.IntN(len(g.workspaces))]
		return []journal.Event{events.New(w.id, events.WorkspaceRenamed{Name: fmt.Sprintf("%s (%d)", filepath.Base(w.path), g.rng.IntN(100))})}
	}
}

// prepared is the outcome of preparing s's generation, and the settlement.
func (g *genStream) prepared(s *genSession) []journal.Event {
	outcome := events.Payload(events.EnvironmentReady{Generation: s.gen, Sandbox: fmt.Sprintf("%s/g%d", s.id, s.gen)})
	s.state = events.EnvReady
	if g.rng.IntN(10) == 0 {
		outcome = events.EnvironmentFailed{Generation: s.gen, Evidence: events.Evidence{
			Error: "pull docker.io/library/buildpack-deps:bookworm-scm: connection refused", Fix: "start containerd, then rebuild"}}
		s.state = events.EnvFailed
	}
	return []journal.Event{events.New(s.id, outcome), events.New(s.id, events.EnvironmentSettled{Generation: s.gen})}
}

func (g *genStream) createSession() []journal.Event {
	w := g.workspaces[g.rng.IntN(len(g.workspaces))]
	g.created++
	ev := events.SessionCreated{
		WorkspaceID:   w.id,
		Name:          fmt.Sprintf("Fix the flaky integration test %d", g.created),
		WorkingDir:    w.path,
		Mode:          events.Mode{Kind: events.ModeLattice},
		EnabledSkills: []string{},
		ExposedPorts:  []int{},
		Environment: events.Environment{
			State: events.EnvUnprepared, Generation: 1, Image: "docker.io/library/buildpack-deps:bookworm-scm",
		},
	}
	switch g.rng.IntN(4) {
	case 0:
		ev.Mode = events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}
		ev.EnabledSkills = []string{"git", "go-test"}
	case 1:
		ev.ExposedPorts = []int{3000, 5173}
	case 2:
		ev.EnabledSkills, ev.ExposedPorts = nil, nil // as an older client might have sent
	}
	s := genSession{id: ulid.Make().String(), gen: 1, state: events.EnvUnprepared}
	if g.rng.IntN(10) < 3 {
		ev.Environment.SetupCommand, ev.Environment.SetupSource = "npm ci", events.SourceUser
		ev.Environment.State, s.state = events.EnvAwaitingApproval, events.EnvAwaitingApproval
	}
	evs := []journal.Event{events.New(s.id, ev)}
	if s.state == events.EnvUnprepared {
		evs = append(evs, events.New(s.id, events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare}))
		evs = append(evs, g.prepared(&s)...)
	}
	g.sessions = append(g.sessions, s)
	return evs
}

// cachedJournal returns the path of a journal of n generated events under
// os.TempDir, generating it on first use. Open it read-only: it is shared by
// every run.
func cachedJournal(tb testing.TB, n int) string {
	tb.Helper()
	dir := filepath.Join(os.TempDir(), "lathe-bench")
	path := filepath.Join(dir, fmt.Sprintf("journal-%d-g%d.db", n, genVersion))
	if j, err := journal.Open(path, journal.Options{ReadOnly: true}); err == nil {
		last := j.Last()
		j.Close()
		if last == uint64(n) {
			return path
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	defer os.Remove(tmp)
	at := time.Date(2025, 1, 6, 9, 0, 0, 0, time.UTC)
	j, err := journal.Open(tmp, journal.Options{Now: func() time.Time {
		at = at.Add(time.Minute) // one Append per minute of simulated use
		return at
	}})
	if err != nil {
		tb.Fatal(err)
	}
	t0 := time.Now()
	g := newGenStream(1, "bench")
	for left := n; left > 0; left -= genBatch {
		if _, err := j.Append(context.Background(), g.next(min(left, genBatch))); err != nil {
			j.Close()
			tb.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("generated %d events in %s into %s (%d workspaces, %d live sessions)",
		n, time.Since(t0).Round(time.Millisecond), path, len(g.workspaces), len(g.sessions))
	return path
}

func openReadOnly(tb testing.TB, path string) *journal.Journal {
	tb.Helper()
	j, err := journal.Open(path, journal.Options{ReadOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { j.Close() })
	return j
}

// BenchmarkReplay1M rebuilds every projection from a 1M-event journal, as a
// start without a usable checkpoint does. Target: <= 3 s.
func BenchmarkReplay1M(b *testing.B) {
	j := openReadOnly(b, cachedJournal(b, benchEvents))
	var s *projections.Store
	replayed := 0
	cpu0 := cpuTime()
	for b.Loop() {
		var n int
		var err error
		if s, n, err = projections.Load(b.Context(), j, ""); err != nil {
			b.Fatal(err)
		}
		if n != benchEvents {
			b.Fatalf("replayed %d events, want %d", n, benchEvents)
		}
		replayed += n
	}
	b.ReportMetric(float64(replayed)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/replay")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/replay")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MB")
	b.Logf("store: %d workspaces, %d sessions", len(s.Workspaces()), len(s.Sessions("")))
}

// BenchmarkRestartWithCheckpoint loads a checkpoint and replays the 1,000
// events committed after it. The checkpoint is taken at seq 999,000 of the
// cached 1M-event journal, which is the same work as a checkpoint at 1M plus
// 1,000 new events, without writing to the shared cache. Target: <= 100 ms.
func BenchmarkRestartWithCheckpoint(b *testing.B) {
	j := openReadOnly(b, cachedJournal(b, benchEvents))
	at := j.Last() - tailEvents
	base := projections.New()
	applyUpTo(b, base, j, at)
	cp := filepath.Join(b.TempDir(), "projections.checkpoint")
	if _, err := base.WriteCheckpoint(cp); err != nil {
		b.Fatal(err)
	}
	info, err := os.Stat(cp)
	if err != nil {
		b.Fatal(err)
	}
	sessions := len(base.Sessions(""))
	base = nil // a restarting daemon holds no other store
	runtime.GC()
	cpu0 := cpuTime()
	for b.Loop() {
		s, n, err := projections.Load(b.Context(), j, cp)
		if err != nil {
			b.Fatal(err)
		}
		if n != tailEvents || s.Seq() != j.Last() {
			b.Fatalf("restart replayed %d events to seq %d; want %d to seq %d (checkpoint not used?)", n, s.Seq(), tailEvents, j.Last())
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/restart")
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/restart")
	b.ReportMetric(float64(info.Size())/(1<<20), "checkpoint-MB")
	b.ReportMetric(float64(sessions), "sessions")
}

// cpuTime is the CPU time this process has used. On a shared machine it
// varies less than wall time with what else runs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// applyUpTo applies the journal's first upTo events to s.
func applyUpTo(tb testing.TB, s *projections.Store, j *journal.Journal, upTo uint64) {
	tb.Helper()
	recs := make([]journal.Record, 0, 4096)
	flush := func() error {
		err := s.Apply(recs)
		recs = recs[:0]
		return err
	}
	err := j.Scan(context.Background(), 0, int(upTo), func(seq uint64, raw []byte) error {
		env, err := journal.DecodeEnvelope(raw) // Data is copied by Unmarshal
		if err != nil {
			return err
		}
		if recs = append(recs, journal.Record{Envelope: env}); len(recs) == cap(recs) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		tb.Fatal(err)
	}
	if s.Seq() != upTo {
		tb.Fatalf("applied up to seq %d, want %d", s.Seq(), upTo)
	}
}

// BenchmarkSnapshot10k builds the /ws snapshot frame the way the hub does
// (Store.Snapshot, then json.Marshal) from a store holding 10,000 Sessions,
// one in ten of them in the middle of an environment transition. Target:
// <= 20 ms.
func BenchmarkSnapshot10k(b *testing.B) {
	const sessions, inFlightEvery = 10_000, 10
	s := projections.New()
	g := newGenStream(2, "snap")
	var recs []journal.Record
	at := time.Date(2025, 1, 6, 9, 0, 0, 0, time.UTC)
	add := func(evs ...journal.Event) {
		for _, ev := range evs {
			seq := uint64(len(recs) + 1)
			recs = append(recs, journal.Record{
				Envelope: journal.Envelope{Seq: seq, ID: ulid.Make().String(), Type: ev.Type, Aggregate: ev.Aggregate, AggregateID: ev.AggregateID, At: at.Add(time.Duration(seq) * time.Second)},
				Payload:  ev.Data,
			})
		}
	}
	for len(g.sessions) < sessions {
		add(g.op()...)
	}
	add(g.queue...)
	for i := 0; i < len(g.sessions); i += inFlightEvery {
		ss := g.sessions[i]
		add(events.New(ss.id, events.EnvironmentChanging{Generation: ss.gen, Owner: events.OwnerRebuild}))
	}
	if err := s.Apply(recs); err != nil {
		b.Fatal(err)
	}
	if n := len(s.Sessions("")); n != sessions {
		b.Fatalf("store holds %d sessions, want %d", n, sessions)
	}
	if n := len(s.Snapshot().EnvironmentTransitions); n != sessions/inFlightEvery {
		b.Fatalf("snapshot holds %d transitions, want %d", n, sessions/inFlightEvery)
	}
	size := 0
	for b.Loop() {
		data, err := json.Marshal(s.Snapshot())
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
	}
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/snapshot")
	b.ReportMetric(float64(size), "frame-bytes")
}

// TestReplayEqualsLiveConcurrentMix checks that the read models a restart rebuilds from
// disk, from scratch and from a checkpoint, equal the ones the live commit
// feed built. Several writers append concurrently so that group commits mix
// their batches.
func TestReplayEqualsLiveConcurrentMix(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	j := journaltest.Open(t)
	live := projections.New()
	var applyErr atomic.Pointer[error]
	j.OnCommit(func(recs []journal.Record) {
		if err := live.Apply(recs); err != nil {
			applyErr.CompareAndSwap(nil, &err)
		}
	})

	const writers, perPhase = 4, 700
	streams := make([]*genStream, writers)
	for w := range streams {
		streams[w] = newGenStream(uint64(10+w), fmt.Sprintf("w%d", w))
	}
	phase := func() {
		t.Helper()
		var wg sync.WaitGroup
		for w, g := range streams {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for left := perPhase; left > 0; {
					n := min(left, 1+rng.IntN(20))
					if _, err := j.Append(ctx, g.next(n)); err != nil {
						t.Error(err)
						return
					}
					left -= n
				}
			})
		}
		wg.Wait()
		if err := live.Await(ctx, j.Last()); err != nil {
			if p := applyErr.Load(); p != nil {
				err = *p
			}
			t.Fatalf("live projection did not reach seq %d: %v", j.Last(), err)
		}
	}

	phase()
	cp := filepath.Join(t.TempDir(), "projections.checkpoint")
	cpSeq, err := live.WriteCheckpoint(cp)
	if err != nil {
		t.Fatal(err)
	}
	phase()
	if p := applyErr.Load(); p != nil {
		t.Fatal(*p)
	}
	if got, want := j.Last(), uint64(2*writers*perPhase); got != want {
		t.Fatalf("journal holds %d events, want %d", got, want)
	}

	replayed, n, err := projections.Load(ctx, j, "")
	if err != nil {
		t.Fatal(err)
	}
	if n != int(j.Last()) {
		t.Errorf("replay from scratch applied %d events, want %d", n, j.Last())
	}
	assertSameStore(t, "replay from scratch", live, replayed)

	restored, n, err := projections.Load(ctx, j, cp)
	if err != nil {
		t.Fatal(err)
	}
	if want := int(j.Last() - cpSeq); n != want {
		t.Errorf("replay after checkpoint at %d applied %d events, want %d", cpSeq, n, want)
	}
	assertSameStore(t, "checkpoint + replay", live, restored)
}

func assertSameStore(t *testing.T, what string, want, got *projections.Store) {
	t.Helper()
	if want.Seq() != got.Seq() {
		t.Errorf("%s: seq %d, live %d", what, got.Seq(), want.Seq())
	}
	if w, g := want.Workspaces(), got.Workspaces(); !reflect.DeepEqual(w, g) {
		t.Errorf("%s: workspaces differ from live:\n got %+v\nwant %+v", what, g, w)
	}
	ws, gs := want.Sessions(""), got.Sessions("")
	if len(ws) != len(gs) {
		t.Errorf("%s: %d sessions, live %d", what, len(gs), len(ws))
	} else {
		for i := range ws {
			if !reflect.DeepEqual(ws[i], gs[i]) {
				t.Errorf("%s: session %d differs from live:\n got %+v\nwant %+v", what, i, gs[i], ws[i])
				break
			}
		}
	}
	if len(ws) == 0 {
		t.Errorf("%s: no sessions; the generator produced nothing to compare", what)
	}
	tasks, differ := 0, false
	for _, ss := range ws {
		w, g := want.Tasks(ss.ID), got.Tasks(ss.ID)
		if !differ && !reflect.DeepEqual(w, g) {
			t.Errorf("%s: tasks of session %s differ from live:\n got %+v\nwant %+v", what, ss.ID, g, w)
			differ = true
		}
		tasks += len(w)
	}
	if tasks == 0 {
		t.Errorf("%s: no tasks; the generator produced nothing to compare", what)
	}
	if w, g := want.Snapshot(), got.Snapshot(); !reflect.DeepEqual(w, g) {
		t.Errorf("%s: /ws snapshot differs from live:\n got %+v\nwant %+v", what, g, w)
	}
	if w, g := want.Recent(), got.Recent(); !reflect.DeepEqual(w, g) {
		t.Errorf("%s: recent events differ from live:\n got %+v\nwant %+v", what, g, w)
	}
}
