package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/julienschmidt/httprouter"
)

// Hub limits and close reasons.
const (
	hubSendBuffer   = 1024
	hubQueueBytes   = 4 << 20
	hubWriteTimeout = 10 * time.Second

	// hubMaxCommand caps one inbound client command. A frame header that
	// declares more is refused at once (see wsFrameLimit).
	hubMaxCommand = 1 << 20
	// hubMaxBatch caps how many queued bytes a writer sends with one socket write.
	hubMaxBatch = 64 << 10
	// hubWriteBudget is the number of socket writes a second the hub aims at
	// across all clients. After each write a client's writer pauses for
	// clients/hubWriteBudget (20ms with 1,000 clients, microseconds with a
	// few), so that the frames broadcast meanwhile share its next write:
	// a loopback write costs tens of microseconds of CPU across both ends,
	// far more than the bytes in it.
	hubWriteBudget = 50_000

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
// StatusTryAgainLater, so that it reconnects and hydrates from a fresh
// snapshot. Every client sees broadcast frames in the same order.
func (h *Hub) Broadcast(f Frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		h.enqueueLocked(c, f)
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
		h.dropLocked(c, websocket.StatusGoingAway, hubReasonShutdown)
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

	sw := &hubSocketWriter{ResponseWriter: w}
	conn, err := websocket.Accept(sw, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // Origin and auth are checked by outer middleware.
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		h.log.Debug("ws upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	conn.SetReadLimit(hubMaxCommand)

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.aborted, cancel)
	defer stop()

	c := &Client{
		hub:   h,
		conn:  conn,
		sock:  sw.sock,
		queue: make(chan Frame, h.opts.SendBuffer),
		gone:  make(chan struct{}),
	}
	err = c.serve(ctx, cancel)
	switch {
	case c.code == websocket.StatusTryAgainLater:
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
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	h.count.Store(int64(len(h.clients)))
}

// enqueueLocked queues f for c without blocking, and cuts c off when its
// queue is full, in frames or in bytes. It reports whether f was queued.
// h.mu must be held.
func (h *Hub) enqueueLocked(c *Client, f Frame) bool {
	if _, ok := h.clients[c]; !ok {
		return false
	}
	// Only enqueues, under h.mu, add to c.queued; the writer only takes
	// away, so the bound holds once checked here.
	n := int64(len(f.Data))
	if q := c.queued.Load(); q > 0 && q+n > h.opts.QueueBytes {
		h.dropLocked(c, websocket.StatusTryAgainLater, hubReasonLagging)
		return false
	}
	c.queued.Add(n) // before the send, so that the writer never takes more than was added
	select {
	case c.queue <- f:
		return true
	default:
		c.queued.Add(-n)
		h.dropLocked(c, websocket.StatusTryAgainLater, hubReasonLagging)
		return false
	}
}

// dropLocked takes c out of the broadcast set and tells its writer to close
// the connection with code and reason. h.mu must be held.
func (h *Hub) dropLocked(c *Client, code websocket.StatusCode, reason string) {
	if _, ok := h.clients[c]; !ok {
		return
	}
	delete(h.clients, c)
	h.count.Store(int64(len(h.clients)))
	if code == websocket.StatusTryAgainLater {
		h.cutOffs.Add(1)
	}
	c.code, c.reason = code, reason
	close(c.gone)
}

// dispatch runs one client command.
func (h *Hub) dispatch(ctx context.Context, c *Client, raw []byte) {
	var head struct {
		Cmd string `json:"cmd"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		var typ *json.UnmarshalTypeError
		msg := "malformed command: " + err.Error()
		switch {
		case errors.As(err, &typ) && typ.Field == "cmd":
			msg = `malformed command: "cmd" must be a string`
		case errors.As(err, &typ):
			msg = `malformed command: a command is a JSON object with a "cmd" field`
		}
		c.Send(ErrorFrame(msg))
		return
	}
	if err := checkJSONStrict(raw); err != nil { // the rules of an HTTP body
		c.Send(ErrorFrame("malformed command: " + err.Error()))
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

// Client is one /ws connection.
type Client struct {
	hub   *Hub
	conn  *websocket.Conn
	sock  *hubSocket // under conn
	queue chan Frame
	// queued is the bytes of the frames in queue (see enqueueLocked).
	queued atomic.Int64

	// gone is closed when the hub drops the client; code and reason,
	// written before, say how to close the connection.
	gone   chan struct{}
	code   websocket.StatusCode
	reason string

	// Owned by the writer.
	after Cursor // what the snapshot covered
	buf   []byte // the batch being written
}

// Send queues a frame for this client alone, such as a command's reply. It
// never blocks, and returns false if the client has been cut off (a client
// whose queue is full is cut off by Send as by Broadcast).
func (c *Client) Send(data []byte) bool {
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	return c.hub.enqueueLocked(c, Frame{Data: data})
}

// serve runs the connection: ready, snapshot, then the live queue, with the
// reader dispatching commands alongside. cancel ends ctx, the connection's
// lifetime.
func (c *Client) serve(ctx context.Context, cancel context.CancelFunc) error {
	defer c.conn.CloseNow()
	if err := c.send(hubReadyFrame); err != nil {
		return err
	}
	if !c.hub.add(c) {
		return c.conn.Close(websocket.StatusGoingAway, hubReasonShutdown)
	}
	defer c.hub.remove(c)

	read := make(chan struct{})
	go func() {
		defer close(read)
		defer cancel()
		c.readLoop(ctx)
	}()
	defer func() {
		c.conn.CloseNow()
		<-read
	}()

	// Frames broadcast from here on are queued; those the snapshot already
	// covers are skipped by the writer.
	snap, at, err := c.hub.opts.Snapshot(ctx)
	if err != nil {
		c.conn.Close(websocket.StatusInternalError, "snapshot unavailable")
		return fmt.Errorf("snapshot: %w", err)
	}
	c.after = at
	if err := c.send(snap); err != nil {
		return err
	}
	return c.writeLoop(ctx)
}

// readLoop dispatches client commands until the connection ends.
func (c *Client) readLoop(ctx context.Context) {
	for {
		typ, data, err := c.conn.Read(ctx)
		var tooBig *wsTooBigError
		if errors.As(err, &tooBig) {
			c.conn.Close(websocket.StatusMessageTooBig, tooBig.Error())
		}
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			c.Send(ErrorFrame("binary frames are not supported: send commands as JSON text frames"))
			continue
		}
		c.hub.dispatch(ctx, c, data)
	}
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
			return c.closeDropped()
		case <-ctx.Done():
			return ctx.Err()
		}
		pause.Reset(time.Duration(c.hub.count.Load()) * time.Second / hubWriteBudget)
		select {
		case <-pause.C:
		case <-c.gone:
			return c.closeDropped()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// closeDropped closes the connection of a client the hub has dropped. On
// shutdown it first flushes the queue; nothing is queued after the drop.
func (c *Client) closeDropped() error {
	for c.code == websocket.StatusGoingAway && len(c.queue) > 0 {
		if err := c.flush(c.took(<-c.queue)); err != nil {
			return err
		}
	}
	return c.conn.Close(c.code, c.reason)
}

// flush writes f and the frames queued behind it with one socket write,
// skipping journaled frames the snapshot already covers.
func (c *Client) flush(f Frame) error {
	buf := c.appendFrame(c.buf[:0], f)
	for more := true; more && len(buf) < hubMaxBatch; {
		select {
		case f = <-c.queue:
			buf = c.appendFrame(buf, c.took(f))
		default:
			more = false
		}
	}
	c.buf = buf
	if cap(buf) > 2*hubMaxBatch {
		c.buf = nil // do not pin a rare huge batch
	}
	if len(buf) == 0 {
		return nil
	}
	c.hub.writes.Add(1)
	return c.sock.write(buf, c.hub.opts.WriteTimeout)
}

// took accounts for f, just taken from the queue, and returns it.
func (c *Client) took(f Frame) Frame {
	c.queued.Add(-int64(len(f.Data)))
	return f
}

// appendFrame appends f as a websocket text frame unless the snapshot
// already covers it.
func (c *Client) appendFrame(buf []byte, f Frame) []byte {
	if c.after.covers(f) {
		return buf
	}
	return appendWSTextFrame(buf, f.Data)
}

// send writes one frame now.
func (c *Client) send(data []byte) error {
	return c.sock.write(appendWSTextFrame(nil, data), c.hub.opts.WriteTimeout)
}

// appendWSTextFrame appends data as one unmasked, unfragmented, uncompressed
// websocket text frame (RFC 6455, section 5.2), the only kind a server sends
// without extensions.
func appendWSTextFrame(b, data []byte) []byte {
	const finText = 0x81
	switch n := len(data); {
	case n < 126:
		b = append(b, finText, byte(n))
	case n <= 0xFFFF:
		b = append(b, finText, 126, byte(n>>8), byte(n))
	default:
		b = binary.BigEndian.AppendUint64(append(b, finText, 127), uint64(n))
	}
	return append(b, data...)
}

// hubSocket is the TCP connection under a client's websocket.Conn. The hub
// writes its text frames to it directly, several per write: encoding frames
// through websocket.Conn costs a syscall and two lock round trips per frame,
// which at hundreds of frames a second to each of a thousand clients is most
// of the hub's cost. The websocket.Conn still reads, answers control frames
// and closes; each of its writes is one whole frame, so serializing writes
// keeps frames intact.
//
// Reads pass through a wsFrameLimit, so that a frame header declaring more
// than hubMaxCommand ends the connection with 1009 as soon as it arrives.
type hubSocket struct {
	net.Conn
	in    io.Reader // what the client sent: the bytes buffered before the hijack, then Conn
	limit wsFrameLimit
	mu    sync.Mutex // serializes writes
}

// Read reads what the client sent, refusing an oversized frame header. Only
// the websocket.Conn's reader calls it, one call at a time.
func (s *hubSocket) Read(p []byte) (int, error) {
	if s.limit.err != nil {
		return 0, s.limit.err
	}
	n, err := s.in.Read(p)
	if lerr := s.limit.scan(p[:n]); lerr != nil {
		return 0, lerr
	}
	return n, err
}

// Write writes one of websocket.Conn's frames.
func (s *hubSocket) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Conn.Write(p)
}

// write writes the hub's encoded frames within timeout.
func (s *hubSocket) write(frames []byte, timeout time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	_, err := s.Conn.Write(frames)
	if err2 := s.Conn.SetWriteDeadline(time.Time{}); err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("write frames: %w", err)
	}
	return nil
}

// hubSocketWriter hands websocket.Accept the hijacked connection wrapped in a
// hubSocket.
type hubSocketWriter struct {
	http.ResponseWriter
	sock *hubSocket
}

// Hijack hijacks the underlying connection and wraps it.
func (w *hubSocketWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	// Bytes the client sent right behind its upgrade request may already be
	// buffered; they go through the frame limit too.
	early, _ := brw.Reader.Peek(brw.Reader.Buffered()) // cannot fail: it is buffered
	early = bytes.Clone(early)
	w.sock = &hubSocket{Conn: nc, in: io.MultiReader(bytes.NewReader(early), nc), limit: wsFrameLimit{limit: hubMaxCommand}}
	brw.Reader.Reset(w.sock)
	brw.Writer.Reset(w.sock)
	return w.sock, brw, nil
}

// Unwrap returns the wrapped ResponseWriter, for http.ResponseController.
func (w *hubSocketWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// wsFrameLimit follows the frame headers in the byte stream a client sends
// (RFC 6455, section 5.2) and refuses a data message whose declared length,
// summed over its fragments, exceeds limit, as soon as the header that
// declares it arrives. websocket.Conn checks its read limit only as payload
// bytes arrive, so a header declaring 2^62 bytes would hold the connection
// open while the client trickles bytes or none.
type wsFrameLimit struct {
	limit uint64
	hdr   [14]byte // the header being read
	n     int      // bytes of it read
	skip  uint64   // payload bytes of the current frame still to pass
	msg   uint64   // declared bytes of the current data message so far
	err   error    // sticky once the limit is passed
}

// wsTooBigError is wsFrameLimit's refusal.
type wsTooBigError struct{ declared, limit uint64 }

func (e *wsTooBigError) Error() string {
	return fmt.Sprintf("a message declaring %d bytes exceeds the %d-byte limit", e.declared, e.limit)
}

// scan follows p, the next bytes of the stream.
func (l *wsFrameLimit) scan(p []byte) error {
	for len(p) > 0 && l.err == nil {
		if l.skip > 0 {
			k := min(l.skip, uint64(len(p)))
			l.skip -= k
			p = p[k:]
			continue
		}
		l.hdr[l.n] = p[0]
		l.n++
		p = p[1:]
		h := l.hdr[:l.n]
		if l.n < wsHeaderLen(h) {
			continue
		}
		l.n = 0
		length := wsPayloadLen(h)
		l.skip = length
		switch op := h[0] & 0x0F; {
		case op&0x08 != 0: // a control frame: websocket.Conn bounds it (125 bytes)
			continue
		case op != 0: // a new message; 0 continues one
			l.msg = 0
		}
		if l.msg += length; l.msg < length { // overflowed
			l.msg = math.MaxUint64
		}
		if l.msg > l.limit {
			l.err = &wsTooBigError{declared: l.msg, limit: l.limit}
		}
	}
	return l.err
}

// wsHeaderLen is the length of the frame header h begins, once h holds its
// first two bytes (2 before).
func wsHeaderLen(h []byte) int {
	if len(h) < 2 {
		return 2
	}
	n := 2
	switch h[1] & 0x7F {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if h[1]&0x80 != 0 { // masked
		n += 4
	}
	return n
}

// wsPayloadLen is the payload length a whole frame header h declares.
func wsPayloadLen(h []byte) uint64 {
	switch n := h[1] & 0x7F; n {
	case 126:
		return uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		return binary.BigEndian.Uint64(h[2:10])
	default:
		return uint64(n)
	}
}
