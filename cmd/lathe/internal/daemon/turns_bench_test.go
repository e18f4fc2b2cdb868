package daemon

// Session turn benchmarks through the whole daemon, real sandboxes and the
// real OpenAI client against the scripted model server: how long a streamed
// chunk takes from the provider's socket to a /ws client, what 50 turns
// streaming at once cost, and how fast a turn is accepted meanwhile.
//
// Every token chunk is stamped by the model server with its send time
// (fakellm.Stamped) and carries its index in the turn ("17;<stamp>"), so a
// client can time each token frame and check that every turn's frames arrive
// complete and in order.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/cmd/lathe/internal/config"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// turnBenchNamespace is the turn benchmarks' own containerd namespace.
const turnBenchNamespace = "lathe-test-turnbench"

// The benchmark Agents: "coder" (the default mode's) streams long answers
// on model m-stream, "quick" answers one chunk on m-quick, so that each
// kind of Session takes only its own kind of scripted turn.
const (
	benchStreamModel = "m-stream"
	benchQuickModel  = "m-quick"
	benchQuickMode   = `"mode":{"kind":"single_agent","agent_id":"quick"}`
)

// benchLLM is a model server whose script each benchmark iteration
// replaces: the daemon's provider URL stays, the script does not.
type benchLLM struct {
	cur atomic.Pointer[fakellm.Server]
	srv *httptest.Server
}

func newBenchLLM(b *testing.B) *benchLLM {
	l := &benchLLM{}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := l.cur.Load(); s != nil {
			s.ServeHTTP(w, r)
			return
		}
		http.Error(w, "no script", http.StatusServiceUnavailable)
	}))
	b.Cleanup(l.srv.Close)
	return l
}

// play makes script the one the server plays, until the next play.
func (l *benchLLM) play(b *testing.B, script fakellm.Script) {
	s, err := fakellm.NewHandler(script)
	if err != nil {
		b.Fatal(err)
	}
	if old := l.cur.Swap(s); old != nil {
		old.Close()
	}
}

// streamTurn is a scripted answer of n stamped chunks, "0;<stamp>" to
// "n-1;<stamp>", pause milliseconds apart.
func streamTurn(model string, n, pause int) fakellm.Turn {
	steps := make([]fakellm.Step, 0, 2*n+1)
	for i := range n {
		if i > 0 && pause > 0 {
			steps = append(steps, fakellm.Pause(pause))
		}
		steps = append(steps, fakellm.Stamped(strconv.Itoa(i)+";"))
	}
	return fakellm.Turn{Model: model, Steps: append(steps, fakellm.Usage(10, n, 0))}
}

type turnBenchRig struct {
	*envRig
	llm *benchLLM
}

func turnBenchDaemon(b *testing.B, mutates ...func(*config.Config)) *turnBenchRig {
	return turnBenchDaemonIn(b, turnBenchNamespace, mutates...)
}

// turnBenchDaemonIn is turnBenchDaemon in containerd namespace ns, for a
// benchmark that runs two daemons side by side.
func turnBenchDaemonIn(b *testing.B, ns string, mutates ...func(*config.Config)) *turnBenchRig {
	llm := newBenchLLM(b)
	b.Setenv(testRuntimeKeyEnv, "k")
	cl := containerdtest.Namespace(b, ns)
	_, srv := newSandboxDaemon(b, ns, func(c *config.Config) {
		c.Providers = map[string]config.Provider{"fake": {Kind: config.KindOpenAI, BaseURL: llm.srv.URL + "/v1", APIKeyEnv: testRuntimeKeyEnv}}
		c.Agents = []config.Agent{
			{ID: "coder", Name: "Coder", Provider: "fake", Model: benchStreamModel, Prompt: "you code"},
			{ID: "quick", Name: "Quick", Provider: "fake", Model: benchQuickModel},
		}
		for _, m := range mutates {
			m(c)
		}
	})
	// No envRig frame log: the benchmark's own /ws client is the only one.
	return &turnBenchRig{envRig: &envRig{sessionRig: newSessionRig(b, srv, cl, "bench")}, llm: llm}
}

// sessions creates n Sessions with the extra fields and waits until all
// are Ready; they prepare concurrently.
func (r *turnBenchRig) sessions(b *testing.B, n int, extra string) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = r.create(b, extra).ID
	}
	for _, id := range ids {
		r.ready(b, id)
	}
	return ids
}

// settle waits until the turns (session ID to turn ID) have ended, so that
// a run after a failed one does not find its Sessions busy.
func (r *turnBenchRig) settle(b *testing.B, turns map[string]string) {
	deadline := time.Now().Add(time.Minute) // for all the turns together
	for id, turn := range turns {
		polltest.Check(b, func() error {
			var t projections.Turn
			resp := r.do(b, get, "/api/sessions/"+id+"/turns/"+turn, "")
			if resp.status == 404 || (resp.status == 200 && json.Unmarshal(resp.body, &t) == nil && !t.Live()) {
				return nil
			}
			return fmt.Errorf("turn %s of session %s still live: %d %s", turn, id, resp.status, resp.body)
		}, polltest.Within(time.Until(deadline)), polltest.Every(10*time.Millisecond))
	}
}

// turnTrack is what a client saw of one turn.
type turnTrack struct {
	want     int       // token chunks scripted
	sent     time.Time // when the session command was written
	accepted time.Time // when session-accepted was read
	tokens   int       // token frames read, each the next index
	terminal []string  // terminal frame kinds read
	problems []string
}

// turnTally is a /ws client that reads every frame as it arrives, times
// it and checks it against the turn it belongs to.
type turnTally struct {
	c *websocket.Conn

	mu      sync.Mutex
	turns   map[string]*turnTrack
	chunk   []time.Duration // stamp to token frame read, every chunk
	pending int             // turns sent and not yet ended
	ended   chan struct{}   // closed when pending drops to 0
	err     error           // the read error that ended the client
	gone    chan struct{}   // closed with err set
}

func openTurnTally(b *testing.B, r *turnBenchRig) *turnTally {
	ctx := testContext(b, 10*time.Second)
	c := dialWS(b, ctx, r.srv, nil)
	c.SetReadLimit(16 << 20) // the snapshot of many Sessions
	expectFrame(b, ctx, c, "ready")
	expectFrame(b, ctx, c, "snapshot")
	tl := &turnTally{c: c, turns: map[string]*turnTrack{}, ended: make(chan struct{}), gone: make(chan struct{})}
	rctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go tl.read(rctx)
	return tl
}

func (tl *turnTally) read(ctx context.Context) {
	for {
		_, raw, err := tl.c.Read(ctx)
		at := time.Now()
		if err != nil {
			tl.mu.Lock()
			tl.err = err
			tl.mu.Unlock()
			close(tl.gone)
			return
		}
		tl.frame(at, raw)
	}
}

func (tl *turnTally) frame(at time.Time, raw []byte) {
	var f turnFrame
	if err := json.Unmarshal(raw, &f); err != nil || f.TurnID == "" {
		return // event, environment and other frames
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tr := tl.turns[f.TurnID]
	if tr == nil {
		return
	}
	bad := func(format string, args ...any) {
		tr.problems = append(tr.problems, fmt.Sprintf(format, args...))
	}
	if len(tr.terminal) > 0 {
		bad("%s after %s", f.Kind, tr.terminal[0])
	}
	switch {
	case f.Kind == "session-accepted":
		if !tr.accepted.IsZero() {
			bad("second session-accepted")
		}
		tr.accepted = at
	case f.Kind == "token":
		if tr.accepted.IsZero() {
			bad("token before session-accepted")
		}
		// A frame carries one chunk, or several merged when the daemon was
		// behind (transport coalesces a turn's adjacent deltas).
		for rest := f.Delta; rest != ""; {
			i := strings.IndexByte(rest, ';') + 1 + fakellm.StampDigits
			if i <= fakellm.StampDigits || i > len(rest) {
				bad("token %q: not whole stamped chunks", f.Delta)
				return
			}
			text, sent, err := fakellm.SplitStamp(rest[:i])
			if err != nil || text != strconv.Itoa(tr.tokens)+";" {
				bad("token %q, want chunk %d", f.Delta, tr.tokens)
				return
			}
			tr.tokens++
			tl.chunk = append(tl.chunk, at.Sub(sent))
			rest = rest[i:]
		}
	case f.terminal():
		if tr.terminal = append(tr.terminal, f.Kind); len(tr.terminal) == 1 {
			if tl.pending--; tl.pending == 0 {
				close(tl.ended)
			}
		}
	}
}

// start registers a turn of want chunks, then writes its session command.
func (tl *turnTally) start(b *testing.B, session, turn string, want int) {
	tl.mu.Lock()
	if tl.pending == 0 {
		tl.ended = make(chan struct{})
	}
	tl.pending++
	tr := &turnTrack{want: want, sent: time.Now()}
	tl.turns[turn] = tr
	tl.mu.Unlock()
	cmd, _ := json.Marshal(map[string]string{"cmd": "session", "id": session, "turn_id": turn, "input": "stream please"})
	if err := tl.c.Write(testContext(b, 10*time.Second), websocket.MessageText, cmd); err != nil {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		b.Fatalf("send turn %s: %v (the client's read ended with: %v)", turn, err, tl.err)
	}
}

// streaming reports whether any turn sent has not ended.
func (tl *turnTally) streaming() bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.pending > 0
}

// wait waits until every turn sent has ended, then checks each of turns:
// accepted once, every chunk in order, one terminal frame, session-done.
// It returns their accept latencies.
func (tl *turnTally) wait(b *testing.B, turns []string, within time.Duration) []time.Duration {
	tl.mu.Lock()
	ended := tl.ended
	tl.mu.Unlock()
	select {
	case <-ended:
	case <-tl.gone:
	case <-time.After(within):
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.err != nil {
		b.Fatalf("/ws client ended: %v", tl.err)
	}
	accept := make([]time.Duration, 0, len(turns))
	var failed []string
	for _, id := range turns {
		tr := tl.turns[id]
		switch {
		case len(tr.problems) > 0:
			failed = append(failed, fmt.Sprintf("%s: %s", id, strings.Join(tr.problems, "; ")))
		case tr.accepted.IsZero() || tr.tokens != tr.want || !slices.Equal(tr.terminal, []string{"session-done"}):
			failed = append(failed, fmt.Sprintf("%s: accepted %v, %d of %d chunks, terminal %v", id, !tr.accepted.IsZero(), tr.tokens, tr.want, tr.terminal))
		default:
			accept = append(accept, tr.accepted.Sub(tr.sent))
		}
	}
	if len(failed) > 0 {
		b.Fatalf("%d of %d turns incomplete or out of order within %v:\n%s", len(failed), len(turns), within, strings.Join(failed[:min(len(failed), 10)], "\n"))
	}
	return accept
}

// chunks takes the chunk latencies recorded so far.
func (tl *turnTally) chunks() []time.Duration {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := tl.chunk
	tl.chunk = nil
	return out
}

// reportPercentiles reports the p50, p99 and max of ds, in milliseconds, as
// name-p50-ms and so on.
func reportPercentiles(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		b.Fatalf("no %s samples", name)
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(ds[len(ds)/2]), name+"-p50-ms")
	b.ReportMetric(ms(ds[min(len(ds)-1, len(ds)*99/100)]), name+"-p99-ms")
	b.ReportMetric(ms(ds[len(ds)-1]), name+"-max-ms")
}

// BenchmarkTurnChunkLatency measures the latency the daemon adds to a
// streamed token: from the scripted provider writing and flushing a chunk
// to a /ws client reading its token frame. One Session runs 10 turns of 200
// chunks 1ms apart per iteration, one turn at a time, so the figure is
// latency, not throughput. Target: p99 <= 2ms. It also reports the accept
// latency of those turns on an otherwise idle daemon.
func BenchmarkTurnChunkLatency(b *testing.B) { benchChunkLatency(b, turnBenchDaemon(b)) }

func benchChunkLatency(b *testing.B, r *turnBenchRig) {
	const turns, chunks = 10, 200
	id := r.sessions(b, 1, "")[0]
	tl := openTurnTally(b, r)
	var all, accept []time.Duration
	iter := 0
	for b.Loop() {
		script := fakellm.Script{}
		for range turns {
			script.Turns = append(script.Turns, streamTurn(benchStreamModel, chunks, 1))
		}
		r.llm.play(b, script)
		for i := range turns {
			turn := fmt.Sprintf("lat-%d-%d", iter, i)
			tl.start(b, id, turn, chunks)
			accept = append(accept, tl.wait(b, []string{turn}, time.Minute)...)
		}
		all = append(all, tl.chunks()...)
		iter++
	}
	b.ReportMetric(float64(len(all)), "chunks")
	reportPercentiles(b, "chunk", all)
	reportPercentiles(b, "accept-idle", accept)
}

// BenchmarkTurnFifty starts 50 streaming turns at once, on 50 Ready
// Sessions, from one /ws client, each streaming 200 chunks (back to back
// in "burst", 2ms apart in "paced"), and checks that every turn's frames
// arrive complete, in order, with exactly one terminal frame. Meanwhile a
// second client sends a one-chunk turn every 10ms to further Sessions. It
// reports the total time and token frames/s, the chunk latency under that
// load, and the accept latency (command written to session-accepted read)
// of the 50-turn burst (one connection's commands run one at a time, so
// the last waits for all before it) and of the probes sent while the 50
// stream. Target for accept latency: p99 <= 15ms.
func BenchmarkTurnFifty(b *testing.B) {
	const streams, chunks, probes = 50, 200, 30
	r := turnBenchDaemon(b)
	streamIDs := r.sessions(b, streams, "")
	probeIDs := r.sessions(b, probes, benchQuickMode)
	sent := map[string]string{} // the last turn sent to each Session
	for _, pace := range []int{0, 2} {
		name := "burst"
		if pace > 0 {
			name = fmt.Sprintf("paced-%dms", pace)
		}
		b.Run(name, func(b *testing.B) {
			r.settle(b, sent)
			tl, prober := openTurnTally(b, r), openTurnTally(b, r)
			var took time.Duration
			var frames int
			var burst, probe, chunk []time.Duration
			iter := 0
			for b.Loop() {
				script := fakellm.Script{}
				for range streams {
					script.Turns = append(script.Turns, streamTurn(benchStreamModel, chunks, pace))
				}
				for range probes {
					script.Turns = append(script.Turns, streamTurn(benchQuickModel, 1, 0))
				}
				r.llm.play(b, script)

				t0 := time.Now()
				var streamTurns, probeTurns []string
				for i, id := range streamIDs {
					turn := fmt.Sprintf("%s-%d-s%d", name, iter, i)
					streamTurns, sent[id] = append(streamTurns, turn), turn
					tl.start(b, id, turn, chunks)
				}
				tick := time.NewTicker(10 * time.Millisecond)
				for i := 0; i < probes && tl.streaming(); i++ {
					<-tick.C
					turn := fmt.Sprintf("%s-%d-p%d", name, iter, i)
					probeTurns, sent[probeIDs[i]] = append(probeTurns, turn), turn
					prober.start(b, probeIDs[i], turn, 1)
				}
				tick.Stop()
				burst = append(burst, tl.wait(b, streamTurns, 2*time.Minute)...)
				took += time.Since(t0)
				probe = append(probe, prober.wait(b, probeTurns, time.Minute)...)
				frames += streams * chunks
				chunk = append(chunk, tl.chunks()...)
				iter++
			}
			b.ReportMetric(took.Seconds()/float64(iter), "total-s")
			b.ReportMetric(float64(frames)/took.Seconds(), "frames/s")
			reportPercentiles(b, "chunk", chunk)
			reportPercentiles(b, "accept-burst", burst)
			b.ReportMetric(float64(len(probe)), "probes")
			if len(probe) > 0 {
				reportPercentiles(b, "accept-probe", probe)
			}
		})
	}
}
