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
	"time"

	"github.com/moby/moby/client"
)

// relayScript runs in the sandbox for each Dial: it connects to
// 127.0.0.1:argv[1], says so with one NUL byte on stdout, then copies
// stdin to the socket (half-closing it at EOF) and the socket to stdout,
// and exits when the peer closes. It fails with the reason on stderr. The
// engine publishes no port and may be on another host, so an exec'd relay
// is the way into the sandbox's own loopback; python3 is in the template.
const relayScript = `import os, socket, sys, threading
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
except OSError as e:
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

// Dial connects to 127.0.0.1:port inside the sandbox through an exec'd
// relay. A closed port fails with the sandbox's own error.
func (s *Sandbox) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("dial: port %d out of range", port)
	}
	if s.exited() {
		return nil, s.notFound(s.Err())
	}
	cctx, cancel := s.d.call(ctx)
	defer cancel()
	res, err := s.d.c.ExecCreate(cctx, s.id, client.ExecCreateOptions{
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Cmd: []string{"python3", "-c", relayScript, strconv.Itoa(port)},
	})
	if err != nil {
		return nil, s.execError(ctx, err)
	}
	hj, err := s.d.c.ExecAttach(cctx, res.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, s.execError(ctx, err)
	}
	c := &relayConn{Conn: hj.Conn, hj: hj.HijackedResponse, r: hj.Reader}
	// The first stdout byte says the relay connected; an end of stream
	// before it, that it failed.
	if dl, ok := cctx.Deadline(); ok {
		hj.Conn.SetReadDeadline(dl)
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		hj.Close()
		if msg := strings.TrimSpace(c.stderr.String()); msg != "" {
			return nil, fmt.Errorf("dial 127.0.0.1:%d in sandbox %s: %s", port, s.name, msg)
		}
		return nil, s.d.wrap(ctx, err, fmt.Sprintf("dial 127.0.0.1:%d in sandbox %s", port, s.name))
	}
	hj.Conn.SetReadDeadline(time.Time{})
	return c, nil
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
