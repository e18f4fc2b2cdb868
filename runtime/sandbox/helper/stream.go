package helper

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/yamux"
)

// Kind is what a stream carries, its first byte.
type Kind byte

// The stream kinds.
const (
	// KindDial: the argument is a port; the helper connects to
	// 127.0.0.1:port in the sandbox, and the stream is that connection.
	KindDial Kind = 'D'
	// KindFiles: the argument is a directory; the stream carries the file
	// RPC of runtime/remotefs, rooted there.
	KindFiles Kind = 'F'
)

// A stream opens with its header: the kind, then the argument's length
// (2 bytes, big-endian) and the argument. The helper answers one NUL byte
// (Ready), or an error of at most maxRefusal bytes and the stream's end.
const (
	maxArg     = 4096
	maxRefusal = 1024
	// headerWait bounds the wait for a stream's header in the helper.
	headerWait = 30 * time.Second
)

// hello is the first line the helper writes in serve mode, before the
// session starts: the host knows then that the binary runs and speaks
// this protocol.
const hello = "lathe sandbox-helper 1\n"

// Ready tells the host that the stream is served.
func Ready(st io.Writer) error {
	_, err := st.Write([]byte{0})
	return err
}

// Refuse ends the stream with msg as its answer.
func Refuse(st io.WriteCloser, msg string) {
	if msg == "" {
		msg = "refused"
	}
	if len(msg) > maxRefusal {
		msg = msg[:maxRefusal]
	}
	_, _ = io.WriteString(st, msg)
	st.Close()
}

// RefusedError is the helper's refusal of a stream, in its words.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

// config is the yamux configuration of both ends.
func config() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.StreamOpenTimeout = 30 * time.Second
	// Each end answers a FIN with its own at once; a stream whose answer
	// never comes is dropped after this, with a reset.
	cfg.StreamCloseTimeout = time.Minute
	return cfg
}

// pipe is a connection whose writes are batched (batchWriter).
type pipe struct {
	io.ReadWriteCloser
	w *batchWriter
}

func newPipe(c io.ReadWriteCloser) pipe { return pipe{c, newBatchWriter(c)} }

func (p pipe) Write(b []byte) (int, error) { return p.w.Write(b) }

func (p pipe) Close() error {
	p.w.Close()
	return p.ReadWriteCloser.Close()
}

// Serve runs the helper's session over c (its stdin and stdout) until the
// host ends it.
func Serve(c io.ReadWriteCloser, h Handlers) error {
	if _, err := io.WriteString(c, hello); err != nil {
		return err
	}
	sess, err := yamux.Server(newPipe(c), config())
	if err != nil {
		return err
	}
	defer sess.Close()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			if sess.IsClosed() {
				return nil // the host went: stdin's end
			}
			return err
		}
		go serveStream(st, h)
	}
}

func serveStream(st *yamux.Stream, h Handlers) {
	st.SetReadDeadline(time.Now().Add(headerWait))
	kind, arg, err := readHeader(st)
	if err != nil {
		Refuse(st, "bad stream header: "+err.Error())
		return
	}
	st.SetReadDeadline(time.Time{})
	if kind == KindDial {
		dial(st, arg)
		return
	}
	serve, ok := h.Streams[kind]
	if !ok {
		Refuse(st, fmt.Sprintf("unknown stream kind %q", byte(kind)))
		return
	}
	serve(st, arg)
}

// readHeader reads a stream's kind and argument.
func readHeader(r io.Reader) (Kind, string, error) {
	var h [3]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, "", err
	}
	n := binary.BigEndian.Uint16(h[1:])
	if n > maxArg {
		return 0, "", fmt.Errorf("argument of %d bytes, over %d", n, maxArg)
	}
	arg := make([]byte, n)
	if _, err := io.ReadFull(r, arg); err != nil {
		return 0, "", err
	}
	return Kind(h[0]), string(arg), nil
}

func appendHeader(b []byte, kind Kind, arg string) []byte {
	b = append(b, byte(kind))
	b = binary.BigEndian.AppendUint16(b, uint16(len(arg)))
	return append(b, arg...)
}

// dial connects the stream to 127.0.0.1:arg. The app's EOF is the
// stream's FIN; the host's FIN closes the socket at once, so that the app
// sees a client that went away. A stream the host does not read fills its
// window, and the helper stops reading that socket; the others go on.
func dial(st *yamux.Stream, arg string) {
	port, err := strconv.Atoi(arg)
	if err != nil || port < 1 || port > 65535 {
		Refuse(st, fmt.Sprintf("bad port %q", arg))
		return
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", arg), headerWait)
	if err != nil {
		Refuse(st, err.Error())
		return
	}
	if err := Ready(st); err != nil {
		c.Close()
		st.Close()
		return
	}
	go func() {
		_, _ = io.Copy(st, c)
		st.Close()
	}()
	_, _ = io.Copy(c, st)
	c.Close()
}

// Link is the host's end of one helper process: a yamux session over the
// process's stdin and stdout. Writes to the process are batched.
type Link struct {
	sess *yamux.Session
}

// Connect waits, within timeout, for the helper's hello on c (the exec's
// streams as a connection), then starts the session over it.
func Connect(c net.Conn, timeout time.Duration) (*Link, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	got := make([]byte, len(hello))
	if _, err := io.ReadFull(c, got); err != nil {
		return nil, fmt.Errorf("wait for the sandbox helper: %w", err)
	}
	if string(got) != hello {
		return nil, fmt.Errorf("the sandbox helper answered %q, not %q: it is not this build's", got, hello)
	}
	c.SetReadDeadline(time.Time{})
	sess, err := yamux.Client(newPipe(c), config())
	if err != nil {
		return nil, err
	}
	return &Link{sess: sess}, nil
}

// Open opens a stream of kind with arg and waits, within ctx, for the
// helper's answer. A refusal is a *RefusedError.
func (l *Link) Open(ctx context.Context, kind Kind, arg string) (net.Conn, error) {
	if len(arg) > maxArg {
		return nil, fmt.Errorf("stream argument of %d bytes, over %d", len(arg), maxArg)
	}
	st, err := l.sess.OpenStream()
	if err != nil {
		return nil, err
	}
	// ctx's end (not its deadline: ctx.Err is set by then) ends the wait.
	stop := context.AfterFunc(ctx, func() { st.SetDeadline(time.Now()) })
	var b [1]byte
	_, err = st.Write(appendHeader(nil, kind, arg))
	if err == nil {
		_, err = io.ReadFull(st, b[:])
	}
	if !stop() { // ctx ended meanwhile, and with it the stream's deadline
		st.Close()
		return nil, ctx.Err()
	}
	switch {
	case err == nil && b[0] == 0:
		st.SetDeadline(time.Time{})
		return st, nil
	case err == nil:
		msg, _ := io.ReadAll(io.LimitReader(st, maxRefusal))
		st.Close()
		return nil, &RefusedError{Msg: string(append(b[:], msg...))}
	}
	st.Close()
	return nil, err
}

// Closed reports whether the session has ended.
func (l *Link) Closed() bool { return l.sess.IsClosed() }

// Done is closed once the session has ended.
func (l *Link) Done() <-chan struct{} { return l.sess.CloseChan() }

// Close ends the session: its streams end with it, and the helper exits.
func (l *Link) Close() error { return l.sess.Close() }
