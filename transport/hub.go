package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/julienschmidt/httprouter"
	"golang.org/x/net/http/httpguts"
)

// Hub limits and close reasons.
const (
	hubSendBuffer   = 1024
	hubQueueBytes   = 4 << 20
	hubWriteTimeout = 10 * time.Second

	// hubMaxCommand caps one inbound client command. A frame header that
	// declares more is refused at once (see Client.readLoop).
	hubMaxCommand = 1 << 20
	// hubCommandBuffer is the most a command's buffer starts with.
	hubCommandBuffer = 4 << 10
	// hubCloseWait bounds how long a closing connection waits for the
	// client's answering close frame.
	hubCloseWait = 5 * time.Second
	// hubMaxBatch caps how many queued bytes a writer sends with one socket write.
	hubMaxBatch = 64 << 10
	// hubWriteBudget is the number of socket writes a second the hub aims at
	// across all clients. After each write a client's writer pauses for
	// clients/hubWriteBudget (20ms with 1,000 clients, microseconds with a
	// few), so that the frames broadcast meanwhile share its next write:
	// a loopback write costs tens of microseconds of CPU across both ends,
	// far more than the bytes in it.
	hubWriteBudget = 50_000

	// hubStatusTryAgainLater is close code 1013 (RFC 6455's registry), the
	// cut-off of a lagging client.
	hubStatusTryAgainLater ws.StatusCode = 1013

	hubReasonLagging  = "lagging: reconnect for a fresh snapshot"
	hubReasonShutdown = "server shutting down"
)

// The hub's own fixed frames.
var (
	hubReadyFrame = []byte(`{"kind":"ready"}`)
	hubPongFrame  = []byte(`{"kind":"pong"}`)
)

// Frame is one pre-encoded JSON text frame. Seq is the journal sequence of
// the event it was derived from, Live the live-delta sequence of a streamed
// delta; a frame with neither is always delivered.
// Data is shared by every client, never copied: once handed to the hub it
// must not be modified.
type Frame struct {
	Seq  uint64
	Live uint64
	Data []byte
}

// Cursor is what a snapshot covers: the journal seq and the live-delta seq.
type Cursor struct {
	Seq  uint64
	Live uint64
}

// covers reports whether a snapshot at c already shows f.
func (c Cursor) covers(f Frame) bool {
	return (f.Seq != 0 && f.Seq <= c.Seq) || (f.Live != 0 && f.Live <= c.Live)
}

// HubOptions configures a Hub. Snapshot is required.
type HubOptions struct {
	// SendBuffer is the per-client queue length in frames (default 1024).
	// A client whose queue is full is disconnected.
	SendBuffer int
	// QueueBytes bounds the frame bytes queued for one client (default
	// 4 MiB). A client whose queue would grow past it is disconnected,
	// whatever its frame count: coalesced deltas make few, large frames. A
	// frame is always queued for a client whose queue is empty, so one frame
	// larger than the bound cuts off only a client that is behind.
	QueueBytes int64
	// WriteTimeout bounds each socket write to a client (default 10s).
	WriteTimeout time.Duration
	// Snapshot builds the authoritative snapshot frame (JSON, kind
	// "snapshot") and returns the cursor it reflects. The hub calls it once
	// the client is in the broadcast set, without holding any lock: frames
	// broadcast meanwhile wait in the client's queue, and those the cursor
	// covers are dropped.
	Snapshot func(ctx context.Context) (data []byte, at Cursor, err error)
	// Logger receives connection diagnostics (default slog.Default()).
	Logger *slog.Logger
}

// CommandFunc handles one client command. raw is the whole command object.
// ctx lives as long as the connection. Commands of one connection run one at
// a time in arrival order on its reader, so a handler must not block for
// long: work that outlives the command runs in its own goroutine, and work
// that must outlive the connection uses its own context.
type CommandFunc func(ctx context.Context, c *Client, raw json.RawMessage)

// Hub is the /ws endpoint: it upgrades connections, sends each one ready and
// a snapshot, fans broadcast frames out to every client and dispatches client
// commands. It moves pre-encoded frames and knows nothing of their meaning.
//
// Broadcast a journaled frame only once the state read by Snapshot reflects
// its event: the hub then delivers every frame exactly once, either inside a
// client's snapshot or after it.
type Hub struct {
	opts     HubOptions
	log      *slog.Logger
	handlers map[string]CommandFunc

	mu      sync.Mutex
	clients map[*Client]struct{} // the broadcast set
	closing bool
	count   atomic.Int64 // len(clients), readable without mu
	writes  atomic.Int64 // socket writes of queued frames, for benchmarks
	cutOffs atomic.Int64 // clients cut off for lagging (/metrics)

	chats chatRouteTable // Chat turns' routes to their clients (transport/chatroutes.go)

	conns   sync.WaitGroup  // one per ServeHTTP call past the shutdown check
	aborted context.Context // done when Shutdown gives up waiting
	abort   context.CancelFunc
}

// NewHub returns a Hub. It panics if opts.Snapshot is nil.
func NewHub(opts HubOptions) *Hub {
	if opts.Snapshot == nil {
		panic("transport: HubOptions.Snapshot is required")
	}
	if opts.SendBuffer <= 0 {
		opts.SendBuffer = hubSendBuffer
	}
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = hubQueueBytes
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = hubWriteTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	aborted, abort := context.WithCancel(context.Background())
	return &Hub{
		opts:     opts,
		log:      log,
		handlers: make(map[string]CommandFunc),
		clients:  make(map[*Client]struct{}),
		aborted:  aborted,
		abort:    abort,
	}
}

// handle is the /ws route's handler (transport/routes.go).
func (h *Hub) handle(w http.ResponseWriter, r *http.Request, _ httprouter.Params) { h.ServeHTTP(w, r) }

// Handle registers fn for client command cmd. It must be called before the
// hub serves. It panics on a nil fn or an empty, built-in ("ping") or
// duplicate cmd.
func (h *Hub) Handle(cmd string, fn CommandFunc) {
	if fn == nil || cmd == "" || cmd == "ping" || h.handlers[cmd] != nil {
		panic(fmt.Sprintf("transport: invalid or duplicate /ws command %q", cmd))
	}
	h.handlers[cmd] = fn
}

// Broadcast queues f for every client. It never blocks on a client: one
// whose queue is full (in frames or in bytes) is cut off with
// 1013 (try again later), so that it reconnects and hydrates from a fresh
// snapshot. Every client sees broadcast frames in the same order. The frame
// is encoded once, and every client writes the same bytes.
func (h *Hub) Broadcast(f Frame) {
	q := encodeFrame(f)
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		h.enqueueLocked(c, q)
	}
}

// Clients returns the number of clients in the broadcast set.
func (h *Hub) Clients() int {
	return int(h.count.Load())
}

// CutOffs counts the clients cut off (1013) because their queue filled.
func (h *Hub) CutOffs() int64 { return h.cutOffs.Load() }

// Shutdown drains the hub: new upgrades get 503, each client's queued frames
// are flushed and the client is closed with StatusGoingAway. It returns once
// every connection goroutine has exited, or, when ctx ends first, aborts the
// remaining connections and returns ctx's error. http.Server.Shutdown does
// not wait for hijacked connections, so register the hub with the server:
//
//	srv.RegisterOnShutdown(func() { hub.Shutdown(ctx) })
func (h *Hub) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.closing = true
	for c := range h.clients {
		h.dropLocked(c, ws.StatusGoingAway, hubReasonShutdown)
	}
	h.mu.Unlock()

	done := make(chan struct{})
	go func() {
		h.conns.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		h.abort()
		return fmt.Errorf("ws hub shutdown: %w", ctx.Err())
	}
}

// ServeHTTP upgrades the request and serves the connection until it ends.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.enter() {
		writeError(w, http.StatusServiceUnavailable, "server is shutting down")
		return
	}
	defer h.conns.Done()
	// The upgrader answers a bad handshake itself, but only once it has
	// taken over the connection: a request that asks for no upgrade at all
	// gets its answer here, over HTTP.
	if !httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade") ||
		!httpguts.HeaderValuesContainsToken(r.Header["Upgrade"], "websocket") {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "websocket")
		writeError(w, http.StatusUpgradeRequired, "/ws takes a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket)")
		return
	}

	// Origin and authentication are the Guard's; no extension is negotiated.
	conn, rw, _, err := ws.HTTPUpgrader{}.Upgrade(r, w)
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		h.log.Debug("ws upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	defer conn.Close()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.aborted, cancel)
	defer stop()
	// Ending ctx ends the connection, and with it a write or read blocked on it.
	unblock := context.AfterFunc(ctx, func() { conn.Close() })
	defer unblock()

	c := &Client{
		hub:   h,
		conn:  conn,
		in:    rw.Reader, // holds what the client sent right behind its upgrade request
		queue: make(chan queuedFrame, h.opts.SendBuffer),
		gone:  make(chan struct{}),
	}
	err = c.serve(ctx, cancel)
	switch {
	case c.code == hubStatusTryAgainLater:
		h.log.Warn("ws client lagging; disconnected", "remote", r.RemoteAddr)
	case err != nil && ctx.Err() == nil:
		h.log.Debug("ws connection ended", "remote", r.RemoteAddr, "err", err)
	}
}

// enter admits one connection unless the hub is shutting down.
func (h *Hub) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.conns.Add(1)
	return true
}

// add puts c in the broadcast set unless the hub is shutting down.
func (h *Hub) add(c *Client) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.clients[c] = struct{}{}
	h.count.Store(int64(len(h.clients)))
	return true
}

// remove takes c out of the broadcast set, if it is still there.
func (h *Hub) remove(c *Client) {
	h.chats.dropClient(c)
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	h.count.Store(int64(len(h.clients)))
}

// enqueueLocked queues f for c without blocking, and cuts c off when its
// queue is full, in frames or in bytes. It reports whether f was queued.
// h.mu must be held.
func (h *Hub) enqueueLocked(c *Client, f queuedFrame) bool {
	if _, ok := h.clients[c]; !ok {
		return false
	}
	// Only enqueues, under h.mu, add to c.queued; the writer only takes
	// away, so the bound holds once checked here.
	n := int64(len(f.wire))
	if q := c.queued.Load(); q > 0 && q+n > h.opts.QueueBytes {
		h.dropLocked(c, hubStatusTryAgainLater, hubReasonLagging)
		return false
	}
	c.queued.Add(n) // before the send, so that the writer never takes more than was added
	select {
	case c.queue <- f:
		return true
	default:
		c.queued.Add(-n)
		h.dropLocked(c, hubStatusTryAgainLater, hubReasonLagging)
		return false
	}
}

// dropLocked takes c out of the broadcast set and tells its writer to close
// the connection with code and reason. h.mu must be held.
func (h *Hub) dropLocked(c *Client, code ws.StatusCode, reason string) {
	if _, ok := h.clients[c]; !ok {
		return
	}
	delete(h.clients, c)
	h.count.Store(int64(len(h.clients)))
	if code == hubStatusTryAgainLater {
		h.cutOffs.Add(1)
	}
	c.code, c.reason = code, reason
	close(c.gone)
}

// dispatch runs one client command. A command follows the rules of an HTTP
// body (decodeStrict), but for the fields other than cmd, which are its
// handler's.
func (h *Hub) dispatch(ctx context.Context, c *Client, raw []byte) {
	var head struct {
		Cmd string `json:"cmd"`
	}
	if err := decodeStrict("command", raw, &head); err != nil {
		c.Send(ErrorFrame("malformed command: " + errorMessage(err)))
		return
	}
	fn := h.handlers[head.Cmd]
	switch {
	case head.Cmd == "ping":
		c.Send(hubPongFrame)
	case head.Cmd == "":
		c.Send(ErrorFrame(`malformed command: missing "cmd" field`))
	case fn == nil:
		c.Send(ErrorFrame(fmt.Sprintf("unknown command %q", head.Cmd)))
	default:
		fn(ctx, c, raw)
	}
}

// decodeCommand decodes the fields of command name, raw as dispatch took
// it, into v by the rules of an HTTP body (decodeStrict: names match
// exactly), with no complaint about fields v lacks (cmd among them). On an
// error it answers c with an error frame naming the field and reports
// false.
func decodeCommand(c *Client, name string, raw json.RawMessage, v any) bool {
	if err := decodeStrict(name+" command", raw, v); err != nil {
		c.Send(ErrorFrame("malformed " + name + " command: " + errorMessage(err)))
		return false
	}
	return true
}

// ErrorFrame encodes {"kind":"error","message":message}, the reply to a
// malformed or unsupported command.
func ErrorFrame(message string) []byte {
	b, err := json.Marshal(struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}{"error", message})
	if err != nil {
		panic(err) // A struct of two strings always encodes.
	}
	return b
}

// queuedFrame is a frame in a client's queue: the cursor fields of its
// Frame and the whole websocket frame, encoded once for every client.
type queuedFrame struct {
	seq, live uint64
	wire      []byte
}

// encodeFrame encodes f as one websocket text frame.
func encodeFrame(f Frame) queuedFrame {
	return queuedFrame{seq: f.Seq, live: f.Live, wire: ws.MustCompileFrame(ws.NewTextFrame(f.Data))}
}

// Client is one /ws connection.
type Client struct {
	hub   *Hub
	conn  net.Conn
	in    io.Reader // what the client sends
	queue chan queuedFrame
	// queued is the bytes of the frames in queue (see enqueueLocked).
	queued atomic.Int64

	// gone is closed when the hub drops the client; code and reason,
	// written before, say how to close the connection.
	gone   chan struct{}
	code   ws.StatusCode
	reason string

	// wmu serializes the writes to conn: the writer's batches and the
	// reader's answers to control frames. Nothing is written after a close
	// frame.
	wmu       sync.Mutex
	closeSent bool

	// Owned by the writer.
	after Cursor      // what the snapshot covered
	batch net.Buffers // the frames being written
}

// Send queues a frame for this client alone, such as a command's reply. It
// never blocks, and returns false if the client has been cut off (a client
// whose queue is full is cut off by Send as by Broadcast).
func (c *Client) Send(data []byte) bool {
	f := encodeFrame(Frame{Data: data})
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	return c.hub.enqueueLocked(c, f)
}

// serve runs the connection: ready, snapshot, then the live queue, with the
// reader dispatching commands alongside. cancel ends ctx, the connection's
// lifetime.
func (c *Client) serve(ctx context.Context, cancel context.CancelFunc) error {
	if err := c.send(hubReadyFrame); err != nil {
		return err
	}
	if !c.hub.add(c) {
		return c.close(ws.StatusGoingAway, hubReasonShutdown)
	}
	defer c.hub.remove(c)

	read := make(chan struct{})
	go func() {
		defer close(read)
		defer cancel()
		c.readLoop(ctx)
	}()
	defer func() {
		c.conn.Close()
		<-read
	}()

	// Frames broadcast from here on are queued; those the snapshot already
	// covers are skipped by the writer.
	snap, at, err := c.hub.opts.Snapshot(ctx)
	if err != nil {
		c.close(ws.StatusInternalServerError, "snapshot unavailable")
		return fmt.Errorf("snapshot: %w", err)
	}
	c.after = at
	if err := c.send(snap); err != nil {
		return err
	}
	return c.writeLoop(ctx)
}

// readLoop dispatches client commands until the connection ends. It answers
// pings and a close itself, and closes the connection on a protocol error or
// a message whose frame headers declare more than hubMaxCommand bytes: the
// headers are checked before any payload is read, so a client cannot hold a
// huge message open by trickling it.
func (c *Client) readLoop(ctx context.Context) {
	declared := int64(0) // by the frames of the current message so far
	rd := &wsutil.Reader{
		Source: c.in,
		State:  ws.StateServerSide,
		OnContinuation: func(h ws.Header, _ io.Reader) error {
			declared += h.Length
			return checkDeclared(declared)
		},
	}
	control := func(h ws.Header, r io.Reader) error {
		err := wsutil.ControlHandler{Src: r, Dst: controlWriter{c}, State: ws.StateServerSide, DisableSrcCiphering: true}.Handle(h)
		if h.OpCode == ws.OpClose { // answered (unless the hub's close went first): write nothing more
			c.wmu.Lock()
			c.closeSent = true
			c.wmu.Unlock()
		}
		return err
	}
	rd.OnIntermediate = control
	for {
		h, err := rd.NextFrame()
		if err == nil && h.OpCode.IsControl() {
			err = control(h, rd)
			if err == nil {
				continue
			}
		}
		if err == nil {
			declared = h.Length
			err = checkDeclared(declared)
		}
		var msg []byte
		if err == nil {
			// The buffer grows with the bytes that arrive, not with what the
			// header declares, so a client that declares 1 MiB and sends
			// little holds little.
			msg = make([]byte, 0, min(h.Length, hubCommandBuffer))
			msg, err = readAll(rd, msg)
		}
		if err != nil {
			c.readFailed(err)
			return
		}
		if h.OpCode != ws.OpText {
			c.Send(ErrorFrame("binary frames are not supported: send commands as JSON text frames"))
			continue
		}
		c.hub.dispatch(ctx, c, msg)
	}
}

// readAll appends the rest of the message r is reading to b.
func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// wsTooBigError refuses a message whose frame headers declare more than
// hubMaxCommand bytes.
type wsTooBigError struct{ declared int64 }

func (e *wsTooBigError) Error() string {
	return fmt.Sprintf("a message declaring %d bytes exceeds the %d-byte limit", e.declared, hubMaxCommand)
}

// checkDeclared refuses a message that declares more than hubMaxCommand bytes.
func checkDeclared(declared int64) error {
	if declared > hubMaxCommand {
		return &wsTooBigError{declared}
	}
	return nil
}

// readFailed ends the connection after a read error, with a close frame that
// says why when the client broke the protocol or a limit.
func (c *Client) readFailed(err error) {
	var tooBig *wsTooBigError
	var protocol ws.ProtocolError
	switch {
	case errors.As(err, &tooBig):
		c.close(ws.StatusMessageTooBig, tooBig.Error())
	case errors.As(err, &protocol), errors.Is(err, ws.ErrHeaderLengthMSB), errors.Is(err, ws.ErrHeaderLengthUnexpected):
		c.close(ws.StatusProtocolError, err.Error())
	}
	c.conn.Close() // without waiting for the client's close
}

// controlWriter writes the reader's answers to control frames, each with
// one Write, between the writer's batches.
type controlWriter struct{ c *Client }

func (w controlWriter) Write(p []byte) (int, error) {
	if err := w.c.write(net.Buffers{p}, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeLoop delivers queued frames until the connection ends or the hub
// drops the client. After each socket write it pauses (see hubWriteBudget) so
// that the frames broadcast meanwhile go out together in the next one.
func (c *Client) writeLoop(ctx context.Context) error {
	pause := time.NewTimer(time.Hour)
	defer pause.Stop()
	for {
		select {
		case f := <-c.queue:
			if err := c.flush(c.took(f)); err != nil {
				return err
			}
		case <-c.gone:
			return c.closeDropped(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
		pause.Reset(time.Duration(c.hub.count.Load()) * time.Second / hubWriteBudget)
		select {
		case <-pause.C:
		case <-c.gone:
			return c.closeDropped(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// closeDropped closes the connection of a client the hub has dropped. On
// shutdown it first flushes the queue; nothing is queued after the drop.
func (c *Client) closeDropped(ctx context.Context) error {
	for c.code == ws.StatusGoingAway && len(c.queue) > 0 {
		if err := c.flush(c.took(<-c.queue)); err != nil {
			return err
		}
	}
	if err := c.close(c.code, c.reason); err != nil {
		return err
	}
	// The client answers with its own close, which ends the reader and ctx.
	wait := time.NewTimer(hubCloseWait)
	defer wait.Stop()
	select {
	case <-ctx.Done():
	case <-wait.C:
	}
	return nil
}

// flush writes f and the frames queued behind it with one socket write,
// skipping journaled frames the snapshot already covers.
func (c *Client) flush(f queuedFrame) error {
	batch, size := c.batch[:0], 0
	for more := true; more; {
		if !c.after.covers(Frame{Seq: f.seq, Live: f.live}) {
			batch = append(batch, f.wire)
			size += len(f.wire)
		}
		more = false
		if size < hubMaxBatch {
			select {
			case f = <-c.queue:
				c.took(f)
				more = true
			default:
			}
		}
	}
	c.batch = batch[:0] // the write clears the frames it has written
	if len(batch) == 0 {
		return nil
	}
	c.hub.writes.Add(1)
	return c.write(batch, false)
}

// took accounts for f, just taken from the queue, and returns it.
func (c *Client) took(f queuedFrame) queuedFrame {
	c.queued.Add(-int64(len(f.wire)))
	return f
}

// send writes one frame now.
func (c *Client) send(data []byte) error {
	return c.write(net.Buffers{encodeFrame(Frame{Data: data}).wire}, false)
}

// close writes a close frame with code and reason.
func (c *Client) close(code ws.StatusCode, reason string) error {
	return c.write(net.Buffers{ws.MustCompileFrame(ws.NewCloseFrame(ws.NewCloseFrameBody(code, reason)))}, true)
}

// write writes whole encoded frames with one socket write (writev) within
// the write timeout. closing says they end with a close frame.
func (c *Client) write(frames net.Buffers, closing bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closeSent {
		return net.ErrClosed
	}
	c.closeSent = closing
	if err := c.conn.SetWriteDeadline(time.Now().Add(c.hub.opts.WriteTimeout)); err != nil {
		return err
	}
	_, err := frames.WriteTo(c.conn)
	if err2 := c.conn.SetWriteDeadline(time.Time{}); err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("write frames: %w", err)
	}
	return nil
}
