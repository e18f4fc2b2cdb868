//go:build unix

// The stalled client of BenchmarkHubFanoutWithStalledClient sets its socket
// receive buffer before connecting, and the fan-out benchmarks read the
// process's CPU time: both need Unix.

package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"lathe/runtime/polltest"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// fanoutConfig is the shape of a fan-out benchmark. Each field can be
// overridden from the environment for quick runs.
type fanoutConfig struct {
	clients    int           // LATHE_BENCH_CLIENTS, default 1000
	rate       int           // LATHE_BENCH_RATE, frames per second, default 500
	duration   time.Duration // LATHE_BENCH_DURATION, default 4s
	frameBytes int           // LATHE_BENCH_FRAME_BYTES, default 160
}

func fanoutConfigFromEnv(b *testing.B) fanoutConfig {
	cfg := fanoutConfig{clients: 1000, rate: 500, duration: 4 * time.Second, frameBytes: 160}
	for name, p := range map[string]*int{
		"LATHE_BENCH_CLIENTS":     &cfg.clients,
		"LATHE_BENCH_RATE":        &cfg.rate,
		"LATHE_BENCH_FRAME_BYTES": &cfg.frameBytes,
	} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				b.Fatalf("%s=%q: want a positive integer", name, v)
			}
			*p = n
		}
	}
	if v := os.Getenv("LATHE_BENCH_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("LATHE_BENCH_DURATION=%q: want a positive duration", v)
		}
		cfg.duration = d
	}
	return cfg
}

// BenchmarkHubFanout broadcasts timestamped frames at a fixed rate to many
// real websocket clients over loopback, and reports how long they took to
// arrive. Run it with -benchtime=1x: one iteration lasts the whole duration.
func BenchmarkHubFanout(b *testing.B) {
	runFanout(b, fanoutConfigFromEnv(b), false)
}

// BenchmarkHubFanoutWithStalledClient is BenchmarkHubFanout plus one client
// that never reads: it must be cut off, and the others must not notice.
func BenchmarkHubFanoutWithStalledClient(b *testing.B) {
	runFanout(b, fanoutConfigFromEnv(b), true)
}

func runFanout(b *testing.B, cfg fanoutConfig, stall bool) {
	hub := NewHub(HubOptions{
		Snapshot: func(context.Context) ([]byte, Cursor, error) { return []byte(`{"kind":"snapshot"}`), Cursor{}, nil },
		Logger:   slog.New(slog.DiscardHandler),
	})
	srv := httptest.NewUnstartedServer(hub)
	srv.Listener = smallSendBufferListener{srv.Listener}
	srv.Start()
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	frames := int(cfg.duration.Seconds() * float64(cfg.rate))
	clients := dialBenchClients(b, ctx, url, cfg.clients, frames)
	want := cfg.clients
	var stalled *websocket.Conn
	if stall {
		var err error
		stalled, _, err = websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: smallReceiveBufferClient()})
		if err != nil {
			b.Fatal(err)
		}
		want++
	}
	polltest.Check(b, func() error {
		if n := hub.Clients(); n != want {
			return fmt.Errorf("%d of %d clients connected", n, want)
		}
		return nil
	}, polltest.Within(30*time.Second))

	pad := bytes.Repeat([]byte("x"), max(0, cfg.frameBytes-70))
	interval := time.Second / time.Duration(cfg.rate)
	var (
		seq        uint64
		elapsed    time.Duration
		late       []time.Duration // how late the broadcaster ran: the host's own jitter
		cutAfter   time.Duration   = -1
		cpu0, cpu1                 = benchCPUTime(), time.Duration(0)
	)
	writes0 := hub.writes.Load()
	for b.Loop() {
		start := time.Now()
		for i := 1; i <= frames; i++ {
			due := start.Add(time.Duration(i) * interval)
			time.Sleep(time.Until(due)) // paces the broadcaster at the rate under test, not a wait
			late = append(late, time.Since(due))
			seq++
			hub.Broadcast(Frame{Seq: seq, Data: benchFrame(seq, pad)})
			if stall && cutAfter < 0 && hub.Clients() == cfg.clients {
				cutAfter = time.Since(start)
			}
		}
		elapsed += time.Since(start)
		cpu1 = benchCPUTime()
		// Wait for the last frame to reach every client still connected.
		polltest.Check(b, func() error {
			for i, c := range clients {
				if n := c.received.Load(); n < int64(seq) && !c.ended() {
					return fmt.Errorf("client %d has %d of %d frames", i, n, seq)
				}
			}
			return nil
		}, polltest.Within(60*time.Second))
	}
	writes := hub.writes.Load() - writes0
	if stalled != nil {
		stalled.CloseNow()
	}
	for _, c := range clients {
		c.conn.CloseNow()
		<-c.done
	}
	shutdownCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := hub.Shutdown(shutdownCtx); err != nil {
		b.Error(err)
	}

	var delays []int32
	lost, outOfSeq := 0, 0
	for _, c := range clients {
		delays = append(delays, c.delays...)
		lost += int(seq) - int(c.received.Load())
		outOfSeq += c.outOfSeq
	}
	slices.Sort(delays)
	slices.Sort(late)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(len(delays))/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(ms(time.Duration(benchPercentile(delays, 0.50))*time.Microsecond), "p50-ms")
	b.ReportMetric(ms(time.Duration(benchPercentile(delays, 0.99))*time.Microsecond), "p99-ms")
	b.ReportMetric(ms(time.Duration(benchPercentile(delays, 1))*time.Microsecond), "max-ms")
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(float64(len(delays))/float64(writes), "frames/write")
	b.ReportMetric((cpu1-cpu0).Seconds()/elapsed.Seconds(), "cpu-cores")
	b.ReportMetric(ms(benchPercentile(late, 0.99)), "tick-late-p99-ms")
	if stall {
		b.ReportMetric(cutAfter.Seconds(), "stalled-cut-s")
		if cutAfter < 0 {
			b.Error("the stalled client was not cut off")
		}
	}
	if lost != 0 || outOfSeq != 0 {
		b.Errorf("%d frames lost, %d out of sequence", lost, outOfSeq)
	}
}

func benchPercentile[T int32 | time.Duration](sorted []T, p float64) T {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}

// benchCPUTime returns the CPU time the process has used.
func benchCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchClient reads frames and records each one's delay.
type benchClient struct {
	conn     *websocket.Conn
	received atomic.Int64
	lastSeq  uint64
	outOfSeq int
	delays   []int32 // microseconds
	done     chan struct{}
}

// dialBenchClients connects n clients that read until closed.
func dialBenchClients(b *testing.B, ctx context.Context, url string, n, frames int) []*benchClient {
	clients := make([]*benchClient, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range clients {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{}})
			if err != nil {
				b.Error(err)
				return
			}
			clients[i] = &benchClient{conn: conn, delays: make([]int32, 0, frames+1), done: make(chan struct{})}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	for _, c := range clients {
		go c.run()
	}
	return clients
}

func (c *benchClient) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// run reads frames until the connection ends.
func (c *benchClient) run() {
	defer close(c.done)
	buf := make([]byte, 64<<10)
	for {
		// A context without Done spares the library a timer per message.
		_, r, err := c.conn.Reader(context.Background())
		if err != nil {
			return
		}
		n := 0
		for err == nil && n < len(buf) {
			var m int
			m, err = r.Read(buf[n:])
			n += m
		}
		if err != io.EOF {
			return
		}
		now := time.Since(benchEpoch)
		sent, seq, ok := parseBenchFrame(buf[:n])
		if !ok {
			continue // ready, snapshot
		}
		if seq != c.lastSeq+1 {
			c.outOfSeq++
		}
		c.lastSeq = seq
		c.delays = append(c.delays, int32((now-sent)/time.Microsecond))
		c.received.Add(1)
	}
}

// benchEpoch is the clock frames carry: nanoseconds since benchEpoch.
var benchEpoch = time.Now()

// benchFrame encodes a frame whose first field is its send time, so that
// clients can parse it without a JSON decoder.
func benchFrame(seq uint64, pad []byte) []byte {
	b := make([]byte, 0, 64+len(pad))
	b = append(b, `{"t":`...)
	b = strconv.AppendInt(b, int64(time.Since(benchEpoch)), 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"kind":"bench","pad":"`...)
	b = append(b, pad...)
	return append(b, `"}`...)
}

// parseBenchFrame returns the send time and seq at the head of a bench frame.
func parseBenchFrame(p []byte) (sent time.Duration, seq uint64, ok bool) {
	p, ok = bytes.CutPrefix(p, []byte(`{"t":`))
	if !ok {
		return 0, 0, false
	}
	t, p := benchUint(p)
	p, ok = bytes.CutPrefix(p, []byte(`,"seq":`))
	if !ok {
		return 0, 0, false
	}
	seq, _ = benchUint(p)
	return time.Duration(t), seq, true
}

func benchUint(p []byte) (uint64, []byte) {
	var n uint64
	i := 0
	for ; i < len(p) && '0' <= p[i] && p[i] <= '9'; i++ {
		n = n*10 + uint64(p[i]-'0')
	}
	return n, p[i:]
}

// smallSendBufferListener gives each accepted connection a 16 KiB socket
// send buffer. Loopback otherwise lets the kernel buffer megabytes for a
// client that never reads, so a stall would take a minute to show; a healthy
// client's writes are a few KiB.
type smallSendBufferListener struct{ net.Listener }

func (l smallSendBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := c.(*net.TCPConn).SetWriteBuffer(16 << 10); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// smallReceiveBufferClient dials with a 4 KiB socket receive buffer, set
// before connecting, so that a client that never reads stalls the hub's
// writes after a few kilobytes rather than megabytes.
func smallReceiveBufferClient() *http.Client {
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// BenchmarkHubBroadcast measures one Broadcast to 1,000 clients. "queued"
// only fills their queues; "parked" also wakes a goroutine parked on each
// queue, as an idle writer is.
func BenchmarkHubBroadcast(b *testing.B) {
	const clients = 1000
	frame := Frame{Seq: 1, Data: benchFrame(1, bytes.Repeat([]byte("x"), 90))}
	newHub := func() (*Hub, []*Client) {
		h := NewHub(HubOptions{Snapshot: func(context.Context) ([]byte, Cursor, error) { return nil, Cursor{}, nil }})
		cs := make([]*Client, clients)
		for i := range cs {
			cs[i] = &Client{hub: h, queue: make(chan queuedFrame, hubSendBuffer), gone: make(chan struct{})}
			h.add(cs[i])
		}
		return h, cs
	}

	b.Run("queued", func(b *testing.B) {
		h, cs := newHub()
		n := 0
		for b.Loop() {
			if n++; n == hubSendBuffer {
				b.StopTimer()
				for _, c := range cs {
					for len(c.queue) > 0 {
						<-c.queue
					}
				}
				n = 0
				b.StartTimer()
			}
			h.Broadcast(frame)
		}
		if h.Clients() != clients {
			b.Fatalf("%d clients cut off", clients-h.Clients())
		}
	})

	b.Run("parked", func(b *testing.B) {
		h, cs := newHub()
		var delivered sync.WaitGroup
		for _, c := range cs {
			go func() {
				for range c.queue {
					delivered.Done()
				}
			}()
		}
		defer func() {
			for _, c := range cs {
				close(c.queue)
			}
		}()
		for b.Loop() {
			delivered.Add(clients)
			h.Broadcast(frame)
			b.StopTimer()
			delivered.Wait()
			b.StartTimer()
		}
		if h.Clients() != clients {
			b.Fatalf("%d clients cut off", clients-h.Clients())
		}
	})
}
