package docker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/moby/moby/client"
)

// The engine publishes no port and may be on another host, so the way into
// a sandbox's own loopback is an exec: one relay process per sandbox
// (relayScript, run by the template's python3) whose stdin and stdout
// carry a yamux session (github.com/hashicorp/yamux on this side; the
// relay speaks the same framing, spec.md of that module). Each Dial opens
// one stream. The stream's first bytes are the port and a newline; the
// relay connects to 127.0.0.1:port and answers one NUL byte, or the
// connect error and the end of the stream. Then the stream carries the
// connection's bytes both ways, with yamux's per-stream windows, so that a
// connection nobody reads never stalls the others. The socket's EOF is the
// relay's FIN; the daemon's FIN (the connection's Close) closes the socket
// at once, so that the app sees a client that went away.
//
// One process for every connection, rather than one exec each, is what
// makes the Preview fast through the engine: a request costs no exec, and
// the bytes of many connections cross dockerd and the shim in one write
// (batchWriter on this side; the relay writes what one pass of its loop
// gathered at once).
const relayScript = `import errno, os, selectors, socket, struct, sys
H = struct.Struct(">BBHII")
DATA, WIN, PING, AWAY = 0, 1, 2, 3
SYN, ACK, FIN, RST = 1, 2, 4, 8
WINDOW = 256 * 1024
sel = selectors.DefaultSelector()
out = []
streams = {}

def emit(kind, flags, sid, length, body=b""):
    out.append(H.pack(0, kind, flags, sid, length))
    if body:
        out.append(body)

class St:
    def __init__(self, sid):
        self.sid, self.sock, self.line = sid, None, b""
        self.pend, self.send, self.used = bytearray(), WINDOW, 0
        self.fin_out = self.connecting = False
        self.events = 0

def watch(st):
    ev = 0
    if st.sock is None:
        return
    if st.connecting:
        ev = selectors.EVENT_WRITE
    else:
        if not st.fin_out and st.send > 0:
            ev |= selectors.EVENT_READ
        if st.pend:
            ev |= selectors.EVENT_WRITE
    if ev == st.events:
        return
    if st.events == 0:
        sel.register(st.sock, ev, st)
    elif ev == 0:
        sel.unregister(st.sock)
    else:
        sel.modify(st.sock, ev, st)
    st.events = ev

def drop(st, rst):
    if rst:
        emit(WIN, RST, st.sid, 0)
    if st.sock is not None:
        if st.events:
            sel.unregister(st.sock)
            st.events = 0
        st.sock.close()
        st.sock = None
    streams.pop(st.sid, None)

def consumed(st, n):
    st.used += n
    if st.used >= WINDOW // 2:
        emit(WIN, 0, st.sid, st.used)
        st.used = 0

def flush(st):
    try:
        n = st.sock.send(st.pend)
    except BlockingIOError:
        return
    except OSError:
        drop(st, True)
        return
    del st.pend[:n]
    consumed(st, n)
    watch(st)

def refuse(st, msg):
    drop(st, False)
    msg = msg.encode()[:1024] or b"connect failed"
    emit(DATA, FIN, st.sid, len(msg), msg)

# The connect does not block the loop: an app whose backlog is full
# holds up its own Dial only.
def connect(st):
    i = st.line.index(b"\n")
    port, rest = st.line[:i], st.line[i + 1:]
    st.line = b""
    consumed(st, i + 1)
    st.pend += rest
    try:
        p = int(port)
        if not 0 < p < 65536:
            raise ValueError("port %d out of range" % p)
        st.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        st.sock.setblocking(False)
        err = st.sock.connect_ex(("127.0.0.1", p))
    except (OSError, ValueError) as e:
        refuse(st, str(e))
        return
    if err == errno.EINPROGRESS:
        st.connecting = True
        watch(st)
    elif err:
        refuse(st, "[Errno %d] %s" % (err, os.strerror(err)))
    else:
        connected(st)

def connected(st):
    err = st.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        refuse(st, "[Errno %d] %s" % (err, os.strerror(err)))
        return
    st.connecting = False
    st.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    st.send -= 1
    emit(DATA, 0, st.sid, 1, b"\0")
    if st.pend:
        flush(st)
    else:
        watch(st)

def pull(st):
    try:
        b = st.sock.recv(min(65536, st.send))
    except BlockingIOError:
        return
    except OSError:
        drop(st, True)
        return
    if b:
        st.send -= len(b)
        emit(DATA, 0, st.sid, len(b), b)
    else:
        st.fin_out = True
        emit(WIN, FIN, st.sid, 0)
    watch(st)

def frame(kind, flags, sid, length, body):
    if kind == PING:
        if flags & SYN:
            emit(PING, ACK, 0, length)
        return
    if kind == AWAY:
        sys.exit(0)
    st = streams.get(sid)
    if st is None:
        if not flags & SYN:
            return
        st = streams[sid] = St(sid)
        emit(WIN, ACK, sid, 0)
    if flags & RST:
        drop(st, False)
        return
    if kind == WIN:
        st.send += length
    elif body:
        if st.sock is None:
            st.line += body
            if len(st.line) > 16 and b"\n" not in st.line:
                emit(DATA, FIN, sid, 13, b"bad port line")
                streams.pop(sid, None)
                return
            if b"\n" in st.line:
                connect(st)
                if sid not in streams:
                    return
        elif st.connecting:
            st.pend += body
        else:
            st.pend += body
            flush(st)
            if sid not in streams:
                return
    if flags & FIN:
        # The daemon closed the connection: what it wrote last goes out
        # if the socket takes it now, and the socket closes.
        if st.sock is not None and st.pend and not st.connecting:
            try:
                st.sock.send(st.pend)
            except OSError:
                pass
        if not st.fin_out:
            emit(WIN, FIN, sid, 0)
        drop(st, False)
        return
    watch(st)

def main():
    os.write(1, b"\1")
    sel.register(0, selectors.EVENT_READ, None)
    buf = bytearray()
    while True:
        for key, ev in sel.select():
            st = key.data
            if st is None:
                b = os.read(0, 262144)
                if not b:
                    return
                buf += b
                i = 0
                while len(buf) - i >= 12:
                    _, kind, flags, sid, length = H.unpack_from(buf, i)
                    n = 12 + (length if kind == DATA else 0)
                    if len(buf) - i < n:
                        break
                    frame(kind, flags, sid, length, bytes(buf[i + 12:i + n]))
                    i += n
                del buf[:i]
            elif st.sid in streams and st.sock is not None:
                if st.connecting:
                    connected(st)
                    continue
                if ev & selectors.EVENT_WRITE:
                    flush(st)
                if ev & selectors.EVENT_READ and st.sid in streams and st.sock is not None:
                    pull(st)
        if out:
            data = b"".join(out)
            out.clear()
            while data:
                data = data[os.write(1, data):]

try:
    main()
except BrokenPipeError:
    pass
`

// relays holds a sandbox's relay session, started at its first Dial.
type relays struct {
	mu   sync.Mutex
	sess *yamux.Session
}

// Dial connects to 127.0.0.1:port inside the sandbox through its relay. A
// closed port fails with the sandbox's own error.
func (s *Sandbox) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("dial: port %d out of range", port)
	}
	if s.exited() {
		return nil, s.notFound(s.Err())
	}
	sess, err := s.relay(ctx)
	if err != nil {
		return nil, err
	}
	st, err := sess.OpenStream()
	if err != nil {
		return nil, s.d.wrap(ctx, err, "open a stream to the relay in sandbox "+s.name)
	}
	cctx, cancel := s.d.call(ctx)
	defer cancel()
	dl, _ := cctx.Deadline()
	st.SetDeadline(dl)
	var b [1]byte
	_, err = io.WriteString(st, strconv.Itoa(port)+"\n")
	if err == nil {
		_, err = io.ReadFull(st, b[:])
	}
	switch {
	case err == nil && b[0] == 0:
		st.SetDeadline(time.Time{})
		return st, nil
	case err == nil:
		// The connect error, then the end of the stream.
		msg, _ := io.ReadAll(io.LimitReader(st, 1024))
		st.Close()
		return nil, fmt.Errorf("dial 127.0.0.1:%d in sandbox %s: %s", port, s.name, append(b[:], msg...))
	}
	st.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, s.d.wrap(ctx, err, fmt.Sprintf("dial 127.0.0.1:%d in sandbox %s", port, s.name))
}

// relay returns the sandbox's relay session, starting one when there is
// none or the last one ended. Dials that come while it starts wait for it.
func (s *Sandbox) relay(ctx context.Context) (*yamux.Session, error) {
	s.relays.mu.Lock()
	defer s.relays.mu.Unlock()
	if s.relays.sess != nil && !s.relays.sess.IsClosed() {
		return s.relays.sess, nil
	}
	c, err := s.startRelay(ctx)
	if err != nil {
		return nil, err
	}
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.StreamOpenTimeout = 30 * time.Second
	// The relay answers a FIN with its own at once; a stream whose answer
	// never comes is dropped after this, with a reset.
	cfg.StreamCloseTimeout = time.Minute
	sess, err := yamux.Client(relayPipe{c, newBatchWriter(c)}, cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.relays.sess = sess
	return sess, nil
}

// closeRelay ends the relay session, if any: its streams end with it.
func (s *Sandbox) closeRelay() {
	s.relays.mu.Lock()
	defer s.relays.mu.Unlock()
	if s.relays.sess != nil {
		s.relays.sess.Close()
		s.relays.sess = nil
	}
}

// startRelay execs the relay and returns once it runs.
func (s *Sandbox) startRelay(ctx context.Context) (*relayConn, error) {
	cctx, cancel := s.d.call(ctx)
	defer cancel()
	res, err := s.d.c.ExecCreate(cctx, s.id, client.ExecCreateOptions{
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Cmd: []string{"python3", "-c", relayScript},
	})
	if err != nil {
		return nil, s.execError(ctx, err)
	}
	hj, err := s.d.c.ExecAttach(cctx, res.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, s.execError(ctx, err)
	}
	c := &relayConn{Conn: hj.Conn, r: hj.Reader}
	// Wait until the interpreter runs.
	dl, _ := cctx.Deadline()
	c.SetReadDeadline(dl)
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.Close()
		if msg := strings.TrimSpace(c.stderr.String()); msg != "" {
			return nil, fmt.Errorf("relay in sandbox %s: %s", s.name, msg)
		}
		return nil, s.d.wrap(ctx, err, "start a relay in sandbox "+s.name)
	}
	c.SetReadDeadline(time.Time{})
	return c, nil
}

// relayPipe is the relay's exec stream as yamux's connection: reads
// demultiplex the engine's framing, writes are batched.
type relayPipe struct {
	*relayConn
	w *batchWriter
}

func (p relayPipe) Write(b []byte) (int, error) { return p.w.Write(b) }

func (p relayPipe) Close() error {
	p.w.Close()
	return p.relayConn.Close()
}

// relayConn is the relay's exec stream as a net.Conn: writes go to its
// stdin; reads demultiplex the engine's framing (an 8-byte header, stream
// and length, per frame) inline, so that the connection's deadlines hold.
// The relay's stderr is kept for the start error.
type relayConn struct {
	net.Conn
	r      *bufio.Reader
	left   int // bytes left in the current stdout frame
	stderr strings.Builder
}

func (c *relayConn) Read(p []byte) (int, error) {
	for c.left == 0 {
		var h [8]byte
		if _, err := io.ReadFull(c.r, h[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.EOF
			}
			return 0, err
		}
		n := int(binary.BigEndian.Uint32(h[4:]))
		if h[0] != 1 { // stderr (2), or stdin (0), which the engine never sends
			if _, err := io.CopyN(&limitedBuilder{&c.stderr, 4096}, c.r, int64(n)); err != nil {
				return 0, err
			}
			continue
		}
		c.left = n
	}
	n, err := c.r.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

// limitedBuilder keeps the first max bytes written to it and drops the
// rest: a relay's stderr is kept for its error, never without bound.
type limitedBuilder struct {
	b   *strings.Builder
	max int
}

func (l *limitedBuilder) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// batchWriter writes to w from one goroutine of its own: what callers
// write while it writes gathers, and goes out in its next single write.
// Under load the frames of many connections share one write to the engine
// (one wakeup of dockerd and of the shim instead of one per frame); alone,
// a frame goes out at once. A caller waits only when batchLimit bytes are
// waiting. The first error of w is every later Write's.
type batchWriter struct {
	w     io.Writer
	mu    sync.Mutex
	cond  sync.Cond
	buf   []byte
	spare []byte
	err   error
}

const batchLimit = 1 << 20

var errBatchClosed = errors.New("relay stream closed")

func newBatchWriter(w io.Writer) *batchWriter {
	b := &batchWriter{w: w}
	b.cond.L = &b.mu
	go b.run()
	return b
}

func (b *batchWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.err == nil && len(b.buf) >= batchLimit {
		b.cond.Wait()
	}
	if b.err != nil {
		return 0, b.err
	}
	b.buf = append(b.buf, p...)
	b.cond.Broadcast()
	return len(p), nil
}

// Close ends the writer: what waits is dropped.
func (b *batchWriter) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = errBatchClosed
	}
	b.cond.Broadcast()
}

func (b *batchWriter) run() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for b.err == nil && len(b.buf) == 0 {
			b.cond.Wait()
		}
		if b.err != nil {
			return
		}
		out := b.buf
		b.buf = b.spare[:0]
		b.mu.Unlock()
		_, err := b.w.Write(out)
		b.mu.Lock()
		b.spare = out[:0]
		if err != nil && b.err == nil {
			b.err = err
		}
		b.cond.Broadcast()
	}
}
