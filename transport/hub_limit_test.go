package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// rawFrame encodes a masked client frame (mask key zero, so the payload
// goes as is) whose header declares length, followed by payload.
func rawFrame(fin bool, op ws.OpCode, length int64, payload []byte) []byte {
	var b bytes.Buffer
	ws.MustWriteFrame(&b, ws.Frame{Header: ws.Header{Fin: fin, OpCode: op, Length: length, Masked: true}})
	return append(b.Bytes(), payload...)
}

// rawDial opens a TCP connection to the hub, sends a hand-written upgrade
// request with early right behind it, and reads the 101 answer.
func rawDial(t *testing.T, ctx context.Context, wsURL string, early []byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	host := strings.TrimPrefix(wsURL, "ws://")
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	req := "GET / HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := conn.Write(append([]byte(req), early...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %s", resp.Status)
	}
	return conn, br
}

// rawReadFrame reads one unmasked server frame.
func rawReadFrame(br *bufio.Reader) (op ws.OpCode, payload []byte, err error) {
	f, err := ws.ReadFrame(br)
	return f.Header.OpCode, f.Payload, err
}

// TestHubRefusesOversizedFrameHeader: a header that declares more than the
// read limit ends the connection with 1009 at once, before any payload; a
// header the protocol does not allow, with 1002.
func TestHubRefusesOversizedFrameHeader(t *testing.T) {
	e := newHubEnv(t, HubOptions{})
	const over = "a message declaring"
	for _, tc := range []struct {
		name   string
		early  []byte // sent with the upgrade request
		after  []byte // sent once ready has been read
		code   uint16 // 0: no close; the client expects pong
		reason string
	}{
		{name: "a header declaring 2^62 bytes", after: rawFrame(true, ws.OpText, 1<<62, nil), code: 1009, reason: over + " 4611686018427387904 bytes"},
		{name: "the same header right behind the upgrade request", early: rawFrame(true, ws.OpText, 1<<62, nil), code: 1009, reason: over},
		{name: "a binary frame one byte over", after: rawFrame(true, ws.OpBinary, hubMaxCommand+1, nil), code: 1009, reason: over + " 1048577 bytes exceeds the 1048576-byte limit"},
		{name: "a length with the top bit set", after: topBitLength(rawFrame(true, ws.OpText, 1<<62, nil)), code: 1002, reason: "most significant bit"},
		{name: "fragments that together pass the limit", after: append(rawFrame(false, ws.OpText, hubMaxCommand, make([]byte, hubMaxCommand)), rawFrame(true, ws.OpContinuation, 1, nil)...),
			code: 1009, reason: over + " 1048577 bytes"},
		{name: "a continuation over the limit on its own", after: append(rawFrame(false, ws.OpText, 1, []byte("{")), rawFrame(true, ws.OpContinuation, 1<<40, nil)...),
			code: 1009, reason: over + " 1099511627777 bytes"},
		{name: "an unmasked frame", after: []byte{0x81, 0x00}, code: 1002, reason: "must be masked"},
		{name: "a command at the limit is read", after: rawFrame(true, ws.OpText, hubMaxCommand, append([]byte(`{"cmd":"ping"}`), bytes.Repeat([]byte(" "), hubMaxCommand-14)...))},
		{name: "a ping between fragments does not count", after: bytes.Join([][]byte{rawFrame(false, ws.OpText, 8, []byte(`{"cmd":"`)), rawFrame(true, ws.OpPing, 2, []byte("hi")), rawFrame(true, ws.OpContinuation, 6, []byte(`ping"}`))}, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := hubContext(t, 20*time.Second)
			conn, br := rawDial(t, ctx, e.url, tc.early)
			if op, p, err := rawReadFrame(br); err != nil || op != ws.OpText || string(p) != string(hubReadyFrame) {
				t.Fatalf("first frame %x %q (%v), want ready", op, p, err)
			}
			if _, err := conn.Write(tc.after); err != nil {
				t.Fatal(err)
			}
			for {
				op, p, err := rawReadFrame(br)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				switch {
				case op == ws.OpClose && tc.code == 0:
					t.Fatalf("closed: %q", p)
				case op == ws.OpClose:
					if len(p) < 2 || binary.BigEndian.Uint16(p) != tc.code || !strings.Contains(string(p[2:]), tc.reason) {
						t.Fatalf("close %q, want %d with %q", p, tc.code, tc.reason)
					}
					// Then the server ends the connection, without waiting for
					// the client's close.
					if _, err := io.Copy(io.Discard, br); err != nil && !endedByPeer(err) {
						t.Fatalf("after the close frame: %v", err)
					}
					return
				case op == ws.OpText && string(p) == string(hubPongFrame):
					if tc.code != 0 {
						t.Fatalf("got pong, want close %d", tc.code)
					}
					return
				}
			}
		})
	}
}

// endedByPeer reports a read error other than the test's deadline: a
// server that closes with unread bytes in its receive buffer resets the
// connection.
func endedByPeer(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !errors.Is(err, os.ErrDeadlineExceeded)
}

// topBitLength sets the most significant bit of the 64-bit length a frame
// header declares, which RFC 6455 requires to be 0.
func topBitLength(frame []byte) []byte {
	frame[2] |= 0x80 // the first byte of the extended length
	return frame
}

// FuzzHubRead feeds an arbitrary byte stream to a client's reader: it never
// panics, ends when the stream does, and runs a command only with a message
// within the read limit.
func FuzzHubRead(f *testing.F) {
	ping := rawFrame(true, ws.OpText, 14, []byte(`{"cmd":"ping"}`))
	f.Add(ping)
	f.Add(rawFrame(true, ws.OpText, 1<<62, nil))
	f.Add(append(rawFrame(false, ws.OpText, 10, make([]byte, 10)), rawFrame(true, ws.OpContinuation, 10, nil)...))
	f.Add(bytes.Join([][]byte{rawFrame(false, ws.OpText, 8, []byte(`{"cmd":"`)), rawFrame(true, ws.OpPing, 2, []byte("hi")), rawFrame(true, ws.OpContinuation, 6, []byte(`ping"}`))}, nil))
	f.Add(rawFrame(true, ws.OpClose, 2, []byte{0x03, 0xe8}))
	f.Add(append(rawFrame(true, ws.OpBinary, 3, []byte("abc")), ping...))
	f.Add([]byte{0x81, 0xFE, 0xFF})
	f.Fuzz(func(t *testing.T, stream []byte) {
		h := NewHub(HubOptions{Snapshot: func(context.Context) ([]byte, Cursor, error) { return nil, Cursor{}, nil }})
		h.Handle("echo", func(_ context.Context, _ *Client, raw json.RawMessage) {
			if len(raw) > hubMaxCommand {
				t.Fatalf("a command of %d bytes ran", len(raw))
			}
		})
		server, client := net.Pipe()
		defer client.Close()
		go io.Copy(io.Discard, client)
		c := &Client{hub: h, conn: server, in: bytes.NewReader(stream), queue: make(chan queuedFrame, hubSendBuffer), gone: make(chan struct{})}
		h.add(c)
		c.readLoop(context.Background()) // returns at the end of the stream at the latest
		for len(c.queue) > 0 {
			f, err := ws.ReadFrame(bytes.NewReader((<-c.queue).wire))
			if err != nil || !json.Valid(f.Payload) {
				t.Fatalf("queued reply %q (%v) is not a JSON text frame", f.Payload, err)
			}
		}
	})
}

// TestHubReadAllocatesWhatArrives: a header that declares a message within
// the limit does not make the reader allocate what it declares before the
// bytes arrive, so a client that declares 1 MiB and sends one byte costs
// about one byte.
func TestHubReadAllocatesWhatArrives(t *testing.T) {
	h := NewHub(HubOptions{Snapshot: func(context.Context) ([]byte, Cursor, error) { return nil, Cursor{}, nil }})
	stream := rawFrame(true, ws.OpText, hubMaxCommand, []byte("{")) // then the stream ends
	const runs = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		server, client := net.Pipe()
		go io.Copy(io.Discard, client)
		c := &Client{hub: h, conn: server, in: bytes.NewReader(stream), queue: make(chan queuedFrame, 1), gone: make(chan struct{})}
		c.readLoop(context.Background())
		client.Close()
	}
	runtime.ReadMemStats(&after)
	if n := (after.TotalAlloc - before.TotalAlloc) / runs; n > hubMaxCommand/8 {
		t.Fatalf("each truncated message allocated %d bytes", n)
	}
}
