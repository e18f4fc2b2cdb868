package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"lathe/runtime/polltest"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// hubContext returns a context that ends with the test or after d.
func hubContext(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// hubEnv is a Hub served by an httptest server. Its snapshot reports the
// seq in applied, the last event the test's "projection" has applied.
type hubEnv struct {
	hub     *Hub
	url     string
	applied atomic.Uint64
}

// newHubEnv starts a hub; opts.Snapshot defaults to hubSnapshot(applied).
func newHubEnv(t testing.TB, opts HubOptions) *hubEnv {
	t.Helper()
	e := &hubEnv{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	if opts.Snapshot == nil {
		opts.Snapshot = func(context.Context) ([]byte, Cursor, error) {
			seq := e.applied.Load()
			return hubSnapshot(seq), Cursor{Seq: seq}, nil
		}
	}
	e.hub = NewHub(opts)
	srv := httptest.NewServer(e.hub)
	e.url = "ws" + strings.TrimPrefix(srv.URL, "http")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.hub.Shutdown(ctx); err != nil {
			t.Errorf("hub shutdown: %v", err)
		}
		srv.Close()
	})
	return e
}

func hubSnapshot(seq uint64) []byte {
	return fmt.Appendf(nil, `{"kind":"snapshot","seq":%d}`, seq)
}

// hubTestFrame is a journaled test frame; pad makes it larger.
func hubTestFrame(seq uint64, pad int) Frame {
	return Frame{Seq: seq, Data: fmt.Appendf(nil, `{"kind":"test","seq":%d,"pad":"%s"}`, seq, strings.Repeat("x", pad))}
}

// dial connects a client that the test cleans up.
func (e *hubEnv) dial(t testing.TB, ctx context.Context) *websocket.Conn {
	t.Helper()
	conn, _, err := websocket.Dial(ctx, e.url, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.SetReadLimit(1 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	return conn
}

// hubFrameHead is the part of a server frame the tests look at.
type hubFrameHead struct {
	Kind    string `json:"kind"`
	Seq     uint64 `json:"seq"`
	Message string `json:"message"`
}

// wsRead reads one text frame and decodes its head.
func wsRead(ctx context.Context, conn *websocket.Conn) (hubFrameHead, []byte, error) {
	typ, data, err := conn.Read(ctx)
	if err != nil {
		return hubFrameHead{}, nil, err
	}
	if typ != websocket.MessageText {
		return hubFrameHead{}, data, fmt.Errorf("got a %v frame, want text", typ)
	}
	var h hubFrameHead
	if err := json.Unmarshal(data, &h); err != nil {
		return hubFrameHead{}, data, fmt.Errorf("frame %q is not JSON: %w", data, err)
	}
	return h, data, nil
}

// wsMustRead is wsRead that fails the test on error.
func wsMustRead(t testing.TB, ctx context.Context, conn *websocket.Conn) (hubFrameHead, []byte) {
	t.Helper()
	h, data, err := wsRead(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	return h, data
}

// wsHydrate reads ready and the snapshot, and returns the snapshot's seq.
func wsHydrate(t testing.TB, ctx context.Context, conn *websocket.Conn) uint64 {
	t.Helper()
	if h, data := wsMustRead(t, ctx, conn); h.Kind != "ready" {
		t.Fatalf("first frame = %s, want ready", data)
	}
	h, data := wsMustRead(t, ctx, conn)
	if h.Kind != "snapshot" {
		t.Fatalf("second frame = %s, want snapshot", data)
	}
	return h.Seq
}

func wsSend(t testing.TB, ctx context.Context, conn *websocket.Conn, typ websocket.MessageType, msg string) {
	t.Helper()
	if err := conn.Write(ctx, typ, []byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
}

// wsExpectSeqs reads frames and checks they carry exactly seqs from..to in order.
func wsExpectSeqs(ctx context.Context, conn *websocket.Conn, from, to uint64) error {
	for want := from; want <= to; want++ {
		h, data, err := wsRead(ctx, conn)
		if err != nil {
			return fmt.Errorf("waiting for seq %d: %w", want, err)
		}
		if h.Kind != "test" || h.Seq != want {
			return fmt.Errorf("got %.80s, want test frame seq %d", data, want)
		}
	}
	return nil
}

func TestHubReadyThenSnapshot(t *testing.T) {
	e := newHubEnv(t, HubOptions{})
	e.applied.Store(42)
	ctx := hubContext(t, 10*time.Second)
	conn := e.dial(t, ctx)

	_, ready := wsMustRead(t, ctx, conn)
	if string(ready) != `{"kind":"ready"}` {
		t.Errorf("first frame = %s", ready)
	}
	_, snap := wsMustRead(t, ctx, conn)
	if string(snap) != string(hubSnapshot(42)) {
		t.Errorf("second frame = %s, want %s", snap, hubSnapshot(42))
	}
	if n := e.hub.Clients(); n != 1 {
		t.Errorf("Clients() = %d, want 1", n)
	}
}

func TestHubPing(t *testing.T) {
	e := newHubEnv(t, HubOptions{})
	ctx := hubContext(t, 10*time.Second)
	conn := e.dial(t, ctx)
	wsHydrate(t, ctx, conn)

	wsSend(t, ctx, conn, websocket.MessageText, `{"cmd":"ping"}`)
	if _, data := wsMustRead(t, ctx, conn); string(data) != `{"kind":"pong"}` {
		t.Errorf("reply = %s, want pong", data)
	}
}

func TestHubBadCommands(t *testing.T) {
	tests := []struct {
		name string
		typ  websocket.MessageType
		msg  string
		want string // in the error message
	}{
		{"malformed JSON", websocket.MessageText, `{"cmd":`, "malformed command"},
		{"not an object", websocket.MessageText, `["ping"]`, `command must be a JSON object, not array`},
		{"cmd not a string", websocket.MessageText, `{"cmd":7}`, `"cmd" must be a string`},
		{"missing cmd", websocket.MessageText, `{"id":"s1"}`, `missing "cmd"`},
		{"empty cmd", websocket.MessageText, `{"cmd":""}`, `missing "cmd"`},
		{"unknown cmd", websocket.MessageText, `{"cmd":"warp \"9\""}`, `unknown command "warp \"9\""`},
		{"binary", websocket.MessageBinary, `{"cmd":"ping"}`, "binary frames are not supported"},
		// Issue 23, findings 1 and 10: the rules of an HTTP body.
		{"a key twice", websocket.MessageText, `{"cmd":"ping","cmd":"ping"}`, `the key "cmd" twice`},
		{"nested 9,000 deep", websocket.MessageText, `{"cmd":"ping","x":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`, "nests too deeply"},
	}
	e := newHubEnv(t, HubOptions{})
	ctx := hubContext(t, 10*time.Second)
	conn := e.dial(t, ctx)
	wsHydrate(t, ctx, conn)

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wsSend(t, ctx, conn, tt.typ, tt.msg)
			h, data := wsMustRead(t, ctx, conn)
			if h.Kind != "error" || !strings.Contains(h.Message, tt.want) {
				t.Errorf("reply = %s, want an error containing %q", data, tt.want)
			}
			// The connection survives.
			wsSend(t, ctx, conn, websocket.MessageText, `{"cmd":"ping"}`)
			if h, data := wsMustRead(t, ctx, conn); h.Kind != "pong" {
				t.Errorf("reply to ping = %s, want pong", data)
			}
		})
	}
}

func TestHubErrorFrameIsJSON(t *testing.T) {
	msg := "quote \" backslash \\ newline \n tag </script> \u2028"
	var got hubFrameHead
	if err := json.Unmarshal(ErrorFrame(msg), &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "error" || got.Message != msg {
		t.Errorf("ErrorFrame round trip = %+v", got)
	}
}

func TestHubCommandDispatch(t *testing.T) {
	e := newHubEnv(t, HubOptions{})
	handlerCtx := make(chan context.Context, 1)
	e.hub.Handle("echo", func(ctx context.Context, c *Client, raw json.RawMessage) {
		handlerCtx <- ctx
		if !c.Send(fmt.Appendf(nil, `{"kind":"echo","raw":%s}`, raw)) {
			t.Error("Send to a live client returned false")
		}
	})
	ctx := hubContext(t, 10*time.Second)
	conn := e.dial(t, ctx)
	wsHydrate(t, ctx, conn)

	wsSend(t, ctx, conn, websocket.MessageText, `{"cmd":"echo","n":1}`)
	if _, data := wsMustRead(t, ctx, conn); string(data) != `{"kind":"echo","raw":{"cmd":"echo","n":1}}` {
		t.Errorf("reply = %s", data)
	}
	hctx := <-handlerCtx
	if hctx.Err() != nil {
		t.Fatal("handler context ended while the connection is open")
	}
	conn.Close(websocket.StatusNormalClosure, "")
	select {
	case <-hctx.Done():
	case <-ctx.Done():
		t.Fatal("handler context outlived the connection")
	}
}

func TestHubBroadcastOrder(t *testing.T) {
	e := newHubEnv(t, HubOptions{})
	ctx := hubContext(t, 20*time.Second)
	const clients, frames = 3, 1000
	conns := make([]*websocket.Conn, clients)
	for i := range conns {
		conns[i] = e.dial(t, ctx)
		wsHydrate(t, ctx, conns[i])
	}
	for seq := uint64(1); seq <= frames; seq++ {
		e.hub.Broadcast(hubTestFrame(seq, 0))
	}
	var wg sync.WaitGroup
	for _, conn := range conns {
		wg.Go(func() {
			if err := wsExpectSeqs(ctx, conn, 1, frames); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// TestHubSnapshotSeqFilter broadcasts while the snapshot is being built:
// frames the snapshot covers are dropped, later ones and unjournaled ones
// are delivered after it.
func TestHubSnapshotSeqFilter(t *testing.T) {
	var e *hubEnv
	e = newHubEnv(t, HubOptions{Snapshot: func(context.Context) ([]byte, Cursor, error) {
		// Events 4 and 5 are applied and broadcast during the snapshot;
		// 6 is broadcast after the snapshot's read.
		e.hub.Broadcast(hubTestFrame(4, 0))
		e.hub.Broadcast(Frame{Data: []byte(`{"kind":"live"}`)})
		e.hub.Broadcast(Frame{Live: 2, Data: []byte(`{"kind":"token","delta":"covered"}`)})
		e.hub.Broadcast(hubTestFrame(5, 0))
		e.hub.Broadcast(Frame{Live: 3, Data: []byte(`{"kind":"token","delta":"after"}`)})
		e.hub.Broadcast(hubTestFrame(6, 0))
		return hubSnapshot(5), Cursor{Seq: 5, Live: 2}, nil
	}})
	for seq := uint64(1); seq <= 3; seq++ {
		e.hub.Broadcast(hubTestFrame(seq, 0)) // before the client connects
	}
	ctx := hubContext(t, 10*time.Second)
	conn := e.dial(t, ctx)
	if seq := wsHydrate(t, ctx, conn); seq != 5 {
		t.Fatalf("snapshot seq = %d, want 5", seq)
	}
	if h, data := wsMustRead(t, ctx, conn); h.Kind != "live" {
		t.Fatalf("got %s, want the unjournaled live frame", data)
	}
	if _, data := wsMustRead(t, ctx, conn); !strings.Contains(string(data), `"after"`) {
		t.Fatalf("got %s, want the live delta the snapshot does not cover (and not the one it does)", data)
	}
	e.hub.Broadcast(hubTestFrame(7, 0))
	if err := wsExpectSeqs(ctx, conn, 6, 7); err != nil {
		t.Fatal(err)
	}
}

// TestHubSnapshotRace connects clients while events are applied and
// broadcast as fast as possible: each client must see every event after its
// snapshot exactly once, in order.
func TestHubSnapshotRace(t *testing.T) {
	const events, clients = 3000, 8
	e := newHubEnv(t, HubOptions{SendBuffer: events + 1})
	ctx := hubContext(t, 60*time.Second)

	connect := make([]chan struct{}, clients)
	for i := range connect {
		connect[i] = make(chan struct{})
	}
	go func() {
		next := 0
		for seq := uint64(1); seq <= events; seq++ {
			e.applied.Store(seq) // apply, then broadcast
			e.hub.Broadcast(hubTestFrame(seq, 0))
			if next < clients && seq == uint64(next+1)*events/(clients+1) {
				close(connect[next])
				next++
			}
		}
	}()

	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			<-connect[i]
			conn, _, err := websocket.Dial(ctx, e.url, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.CloseNow()
			if h, data, err := wsRead(ctx, conn); err != nil || h.Kind != "ready" {
				t.Errorf("first frame = %s (%v), want ready", data, err)
				return
			}
			h, data, err := wsRead(ctx, conn)
			if err != nil || h.Kind != "snapshot" {
				t.Errorf("second frame = %s (%v), want snapshot", data, err)
				return
			}
			if err := wsExpectSeqs(ctx, conn, h.Seq+1, events); err != nil {
				t.Errorf("client %d after snapshot seq %d: %v", i, h.Seq, err)
			}
		})
	}
	wg.Wait()
}

func TestHubStalledClientCutOff(t *testing.T) {
	e := newHubEnv(t, HubOptions{SendBuffer: 4})
	held := make(chan *Client, 1)
	e.hub.Handle("hold", func(_ context.Context, c *Client, _ json.RawMessage) { held <- c })
	ctx := hubContext(t, 60*time.Second)
	healthy := e.dial(t, ctx)
	wsHydrate(t, ctx, healthy)
	stalled := e.dial(t, ctx)
	wsSend(t, ctx, stalled, websocket.MessageText, `{"cmd":"hold"}`)
	stalledClient := <-held

	// The healthy client acknowledges each frame; the stalled one never
	// reads until it has been cut off.
	acks := wsAcks(ctx, healthy)
	broadcast := func(seq uint64) {
		t.Helper()
		start := time.Now()
		e.hub.Broadcast(hubTestFrame(seq, 64<<10))
		if d := time.Since(start); d > time.Second {
			t.Errorf("Broadcast took %v", d)
		}
		if got := <-acks; got.err != nil || got.seq != seq {
			t.Fatalf("healthy client got seq %d (%v), want %d", got.seq, got.err, seq)
		}
	}
	seq := uint64(0)
	for e.hub.Clients() == 2 {
		if seq++; seq > 10_000 {
			t.Fatal("stalled client was never cut off")
		}
		broadcast(seq)
	}
	for range 3 { // The healthy client keeps receiving.
		seq++
		broadcast(seq)
	}
	if stalledClient.Send(hubPongFrame) {
		t.Error("Send to a client that was cut off returned true")
	}
	if n := e.hub.CutOffs(); n != 1 {
		t.Errorf("CutOffs() = %d, want 1", n)
	}

	wsExpectLagging(t, ctx, stalled)
}

// wsAck is one frame a reading client acknowledged, or its read error.
type wsAck struct {
	seq uint64
	err error
}

// wsAcks reads test frames from conn until an error, acknowledging each.
func wsAcks(ctx context.Context, conn *websocket.Conn) <-chan wsAck {
	acks := make(chan wsAck, 1)
	go func() {
		for {
			h, data, err := wsRead(ctx, conn)
			if err == nil && h.Kind != "test" {
				err = fmt.Errorf("reading client got %.80s", data)
			}
			acks <- wsAck{h.Seq, err}
			if err != nil {
				return
			}
		}
	}()
	return acks
}

// wsExpectLagging reads what was written to a client that was cut off for
// lagging, then expects the close frame 1013.
func wsExpectLagging(t testing.TB, ctx context.Context, conn *websocket.Conn) {
	t.Helper()
	for {
		_, _, err := conn.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusTryAgainLater || ce.Reason != hubReasonLagging {
			t.Fatalf("lagging client read error = %v, want close 1013 %q", err, hubReasonLagging)
		}
		return
	}
}

func TestHubShutdown(t *testing.T) {
	e := newHubEnv(t, HubOptions{})
	ctx := hubContext(t, 20*time.Second)
	conn := e.dial(t, ctx)
	wsHydrate(t, ctx, conn)

	const frames = 200
	for seq := uint64(1); seq <= frames; seq++ {
		e.hub.Broadcast(hubTestFrame(seq, 1024))
	}
	shutdown := make(chan error, 1)
	go func() { shutdown <- e.hub.Shutdown(ctx) }()

	if err := wsExpectSeqs(ctx, conn, 1, frames); err != nil {
		t.Fatal(err)
	}
	if _, _, err := conn.Read(ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("after the queue: %v, want close 1001", err)
	}
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n := e.hub.Clients(); n != 0 {
		t.Errorf("Clients() = %d after shutdown", n)
	}

	_, resp, err := websocket.Dial(ctx, e.url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial after shutdown: resp %v, err %v; want 503", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	var eb errorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error == "" {
		t.Errorf("503 body = %q, want {\"error\": ...}", body)
	}
}

// TestHubShutdownDeadline: a client that does not read cannot be drained;
// when Shutdown's context ends, its connection is aborted.
func TestHubShutdownDeadline(t *testing.T) {
	e := newHubEnv(t, HubOptions{})
	ctx := hubContext(t, 30*time.Second)
	e.dial(t, ctx) // never reads
	polltest.Check(t, func() error {
		if n := e.hub.Clients(); n != 1 {
			return fmt.Errorf("Clients() = %d, want 1", n)
		}
		return nil
	}, polltest.Within(10*time.Second))
	for seq := uint64(1); seq <= 256; seq++ { // 16 MiB: more than loopback buffers
		e.hub.Broadcast(hubTestFrame(seq, 64<<10))
	}

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := e.hub.Shutdown(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a stuck client = %v, want DeadlineExceeded", err)
	}
	// Well within the 10s write timeout, the aborted connection is gone.
	long, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.hub.Shutdown(long); err != nil {
		t.Fatalf("second Shutdown = %v", err)
	}
}

func TestHubNoGoroutineLeak(t *testing.T) {
	e := newHubEnv(t, HubOptions{SendBuffer: 2})
	e.hub.Handle("noop", func(context.Context, *Client, json.RawMessage) {})
	ctx := hubContext(t, 30*time.Second)
	base := runtime.NumGoroutine()

	const clients = 12
	conns := make([]*websocket.Conn, clients)
	for i := range conns {
		conns[i] = e.dial(t, ctx)
		wsHydrate(t, ctx, conns[i])
		wsSend(t, ctx, conns[i], websocket.MessageText, `{"cmd":"noop"}`)
		wsSend(t, ctx, conns[i], websocket.MessageText, `{"cmd":"ping"}`)
		wsMustRead(t, ctx, conns[i])
	}
	polltest.Check(t, func() error {
		if n := e.hub.Clients(); n != clients {
			return fmt.Errorf("Clients() = %d, want %d", n, clients)
		}
		return nil
	}, polltest.Within(10*time.Second))
	// Three ways to go: a clean close, a dropped socket, and being cut off
	// for lagging (the last four do not read while frames are broadcast).
	for _, conn := range conns[:4] {
		conn.Close(websocket.StatusNormalClosure, "")
	}
	for _, conn := range conns[4:8] {
		conn.CloseNow()
	}
	for seq := uint64(1); e.hub.Clients() > 0; seq++ {
		if seq > 10_000 {
			t.Fatalf("%d clients still connected", e.hub.Clients())
		}
		e.hub.Broadcast(hubTestFrame(seq, 64<<10))
	}
	for _, conn := range conns[8:] {
		for {
			if _, _, err := conn.Read(ctx); err != nil {
				if websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
					t.Errorf("lagging client: %v, want close 1013", err)
				}
				break
			}
		}
	}

	polltest.Check(t, func() error {
		if n := e.hub.Clients(); n != 0 {
			return fmt.Errorf("Clients() = %d, want 0", n)
		}
		if n := runtime.NumGoroutine(); n > base {
			return fmt.Errorf("%d goroutines, %d before the clients connected", n, base)
		}
		return nil
	}, polltest.Within(15*time.Second))
}

// TestHubQueueBoundedInBytes: a client that reads nothing while a few large
// frames are broadcast is cut off once its queue would pass QueueBytes,
// long before its frame count is reached, and its queue never holds more.
func TestHubQueueBoundedInBytes(t *testing.T) {
	e := newHubEnv(t, HubOptions{}) // the defaults: 1024 frames, 4 MiB
	ctx := hubContext(t, 60*time.Second)
	healthy := e.dial(t, ctx)
	wsHydrate(t, ctx, healthy)
	stalled, _, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPClient: smallReceiveBufferClient()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stalled.CloseNow() })
	stalled.SetReadLimit(1 << 20)
	wsHydrate(t, ctx, stalled)
	var clients []*Client // both; a healthy client's queue stays small
	polltest.Check(t, func() error {
		e.hub.mu.Lock()
		defer e.hub.mu.Unlock()
		clients = clients[:0]
		for c := range e.hub.clients {
			clients = append(clients, c)
		}
		if len(clients) != 2 {
			return fmt.Errorf("%d clients, want 2", len(clients))
		}
		return nil
	}, polltest.Within(10*time.Second))

	acks := wsAcks(ctx, healthy)
	const frameBytes = 256 << 10
	big := hubTestFrame(0, frameBytes).Data // shared by every frame, as broadcast frames are
	frames, maxQueued := 0, int64(0)
	for e.hub.Clients() == 2 {
		if frames++; frames > 400 {
			t.Fatal("the stalled client was never cut off")
		}
		e.hub.Broadcast(Frame{Data: big})
		for _, c := range clients {
			maxQueued = max(maxQueued, c.queued.Load())
		}
		if got := <-acks; got.err != nil {
			t.Fatalf("healthy client: %v", got.err)
		}
	}
	if maxQueued > hubQueueBytes {
		t.Errorf("a client's queue held %d bytes, over the %d-byte bound", maxQueued, hubQueueBytes)
	}
	if frames >= hubSendBuffer {
		t.Errorf("cut off after %d frames: the frame bound, not the byte bound", frames)
	}
	t.Logf("cut off after %d frames of %d KiB", frames, frameBytes>>10)

	// Once it reads, the stalled client gets what was written and then 1013.
	wsExpectLagging(t, ctx, stalled)
	// The healthy client still receives.
	e.hub.Broadcast(Frame{Data: big})
	if got := <-acks; got.err != nil {
		t.Fatalf("healthy client after the cut: %v", got.err)
	}
}

// TestHubFrameOverQueueBytes: one frame larger than the byte bound still
// reaches a client that is keeping up.
func TestHubFrameOverQueueBytes(t *testing.T) {
	e := newHubEnv(t, HubOptions{QueueBytes: 4 << 10})
	ctx := hubContext(t, 20*time.Second)
	conn := e.dial(t, ctx)
	wsHydrate(t, ctx, conn)
	for seq := uint64(1); seq <= 3; seq++ {
		e.hub.Broadcast(hubTestFrame(seq, 64<<10))
		if h, _ := wsMustRead(t, ctx, conn); h.Seq != seq {
			t.Fatalf("got seq %d, want %d", h.Seq, seq)
		}
	}
	if n := e.hub.Clients(); n != 1 {
		t.Fatalf("Clients() = %d, want 1", n)
	}
}

// TestHubControlFrames: the hub answers a websocket ping with a pong and a
// client's close with its own, completing the closing handshake.
func TestHubControlFrames(t *testing.T) {
	e := newHubEnv(t, HubOptions{})
	ctx := hubContext(t, 10*time.Second)
	conn := e.dial(t, ctx)
	wsHydrate(t, ctx, conn)
	// Ping's answer is read by a reader: the client reads until it ends.
	read := make(chan error, 1)
	go func() {
		_, _, err := conn.Read(ctx)
		read <- err
	}()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := conn.Close(websocket.StatusNormalClosure, "bye"); err != nil {
		t.Fatalf("close handshake: %v", err)
	}
	if err := <-read; websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("read after close: %v, want the server's close 1000", err)
	}
	polltest.Check(t, func() error {
		if n := e.hub.Clients(); n != 0 {
			return fmt.Errorf("Clients() = %d, want 0", n)
		}
		return nil
	}, polltest.Within(5*time.Second))
}

// TestHubRefusesPlainRequest: a request to /ws without an upgrade is 426
// with an {error} body and the Upgrade header, over HTTP.
func TestHubRefusesPlainRequest(t *testing.T) {
	e := newHubEnv(t, HubOptions{})
	resp, err := http.Get("http" + strings.TrimPrefix(e.url, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Error string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusUpgradeRequired ||
		resp.Header.Get("Upgrade") != "websocket" || !strings.Contains(body.Error, "WebSocket upgrade") {
		t.Fatalf("%d %v %+v (%v), want 426 with Upgrade: websocket and an error", resp.StatusCode, resp.Header, body, err)
	}
}
