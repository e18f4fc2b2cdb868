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

	"github.com/moby/moby/client"
)

// relayScript runs in the sandbox for each Dial: it says it runs with a
// byte 1 on stdout, reads a port and a newline on stdin, connects to 127.0.0.1:port, says so with one NUL byte
// on stdout, then copies stdin to the socket (half-closing it at EOF) and
// the socket to stdout, and exits when the peer closes. It fails with the
// reason on stderr. The engine publishes no port and may be on another
// host, so an exec'd relay is the way into the sandbox's own loopback;
// python3 is in the template.
const relayScript = `import os, socket, sys, threading
os.write(1, b"\1")
line = b""
while not line.endswith(b"\n"):
    b = os.read(0, 1)
    if not b:
        sys.exit(0)
    line += b
try:
    s = socket.create_connection(("127.0.0.1", int(line)))
except (OSError, ValueError) as e:
    sys.stderr.write(str(e))
    sys.exit(1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
os.write(1, b"\0")
def up():
    try:
        while True:
            b = os.read(0, 65536)
            if not b:
                break
            s.sendall(b)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
threading.Thread(target=up, daemon=True).start()
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        while b:
            b = b[os.write(1, b):]
except OSError:
    pass
`

// relays keeps one relay started ahead, once a sandbox has been dialled,
// so that a Dial costs a round trip to it rather than an exec and an
// interpreter's start.
type relays struct {
	mu     sync.Mutex
	spare  *relayConn
	making bool
}

// errRelayGone: the relay ended before it read the port (its sandbox or
// its stream went).
var errRelayGone = errors.New("relay gone")

// Dial connects to 127.0.0.1:port inside the sandbox through a relay. A
// closed port fails with the sandbox's own error.
func (s *Sandbox) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("dial: port %d out of range", port)
	}
	if s.exited() {
		return nil, s.notFound(s.Err())
	}
	defer s.refill()
	if c := s.takeSpare(); c != nil {
		if err := s.open(ctx, c, port); !errors.Is(err, errRelayGone) {
			return c, err
		}
	}
	c, err := s.startRelay(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.open(ctx, c, port); err != nil {
		if errors.Is(err, errRelayGone) {
			return nil, s.d.wrap(ctx, err, fmt.Sprintf("dial 127.0.0.1:%d in sandbox %s", port, s.name))
		}
		return nil, err
	}
	return c, nil
}

func (s *Sandbox) takeSpare() *relayConn {
	s.relays.mu.Lock()
	defer s.relays.mu.Unlock()
	c := s.relays.spare
	s.relays.spare = nil
	return c
}

// refill starts the next spare relay in the background, unless one is
// there or on its way.
func (s *Sandbox) refill() {
	s.relays.mu.Lock()
	defer s.relays.mu.Unlock()
	if s.relays.spare != nil || s.relays.making || s.exited() {
		return
	}
	s.relays.making = true
	go func() {
		c, err := s.startRelay(s.d.ctx)
		s.relays.mu.Lock()
		defer s.relays.mu.Unlock()
		s.relays.making = false
		if err == nil && !s.exited() && s.d.ctx.Err() == nil {
			s.relays.spare = c
		} else if err == nil {
			c.Close()
		}
	}()
}

// closeSpare ends the spare relay, if any.
func (s *Sandbox) closeSpare() {
	if c := s.takeSpare(); c != nil {
		c.Close()
	}
}

// relayBurst is how many relays a driver starts at once. A burst of dials
// (a page opening a hundred connections through the Preview) queues for
// its turn rather than asking the engine for a hundred execs together,
// which on a busy engine all outlive their Timeout.
const relayBurst = 8

// startRelay execs a relay and returns once it waits for its port.
func (s *Sandbox) startRelay(ctx context.Context) (*relayConn, error) {
	select {
	case s.d.relayStarts <- struct{}{}:
		defer func() { <-s.d.relayStarts }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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
	c := &relayConn{Conn: hj.Conn, hj: hj.HijackedResponse, r: hj.Reader}
	// Wait until the interpreter runs: a spare is ready only then.
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

// open tells relay c the port and waits for its NUL byte: an end of stream
// before it is the relay's error, or errRelayGone when it gave none. c is
// closed on error.
func (s *Sandbox) open(ctx context.Context, c *relayConn, port int) error {
	cctx, cancel := s.d.call(ctx)
	defer cancel()
	dl, _ := cctx.Deadline()
	c.SetDeadline(dl)
	var b [1]byte
	_, err := io.WriteString(c, strconv.Itoa(port)+"\n")
	if err == nil {
		_, err = io.ReadFull(c, b[:])
	}
	if err != nil {
		c.Close()
		if msg := strings.TrimSpace(c.stderr.String()); msg != "" {
			return fmt.Errorf("dial 127.0.0.1:%d in sandbox %s: %s", port, s.name, msg)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %w", errRelayGone, err)
	}
	c.SetDeadline(time.Time{})
	return nil
}

// relayConn is the relay's exec stream as a net.Conn: writes go to its
// stdin; reads demultiplex the engine's framing (an 8-byte header, stream
// and length, per frame) inline, so that the connection's deadlines hold.
// The relay's stderr is kept for the dial error.
type relayConn struct {
	net.Conn
	hj     client.HijackedResponse
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
			if _, err := io.CopyN(&c.stderr, c.r, int64(n)); err != nil {
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

// CloseWrite ends the relay's stdin: the sandbox side sees EOF.
func (c *relayConn) CloseWrite() error { return c.hj.CloseWrite() }
