package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// rawFrame builds a masked client frame header (mask key zero, so the
// payload goes as is) followed by payload.
func rawFrame(fin bool, op byte, length uint64, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var b []byte
	switch {
	case length < 126:
		b = []byte{b0, 0x80 | byte(length)}
	case length <= 0xFFFF:
		b = binary.BigEndian.AppendUint16([]byte{b0, 0x80 | 126}, uint16(length))
	default:
		b = binary.BigEndian.AppendUint64([]byte{b0, 0x80 | 127}, length)
	}
	return append(append(b, 0, 0, 0, 0), payload...)
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
func rawReadFrame(br *bufio.Reader) (op byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7F)
	switch n {
	case 126:
		var ext [2]byte
		_, err = io.ReadFull(br, ext[:])
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		_, err = io.ReadFull(br, ext[:])
		n = binary.BigEndian.Uint64(ext[:])
	}
	if err != nil {
		return 0, nil, err
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(br, payload)
	return h[0] & 0x0F, payload, err
}

// TestHubRefusesOversizedFrameHeader: a header that declares more than the
// read limit ends the connection with 1009 at once, before any payload.
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
		{name: "a header declaring 2^62 bytes", after: rawFrame(true, 0x1, 1<<62, nil), code: 1009, reason: over + " 4611686018427387904 bytes"},
		{name: "the same header right behind the upgrade request", early: rawFrame(true, 0x1, 1<<62, nil), code: 1009, reason: over},
		{name: "a binary frame one byte over", after: rawFrame(true, 0x2, hubMaxCommand+1, nil), code: 1009, reason: over + " 1048577 bytes exceeds the 1048576-byte limit"},
		{name: "a length with the top bit set", after: rawFrame(true, 0x1, 1<<63, nil), code: 1009, reason: over},
		{name: "fragments that together pass the limit", after: append(rawFrame(false, 0x1, hubMaxCommand, make([]byte, hubMaxCommand)), rawFrame(true, 0x0, 1, nil)...),
			code: 1009, reason: over + " 1048577 bytes"},
		{name: "a command at the limit is read", after: rawFrame(true, 0x1, hubMaxCommand, append([]byte(`{"cmd":"ping"}`), bytes.Repeat([]byte(" "), hubMaxCommand-14)...))},
		{name: "a ping between fragments does not count", after: bytes.Join([][]byte{rawFrame(false, 0x1, 8, []byte(`{"cmd":"`)), rawFrame(true, 0x9, 2, []byte("hi")), rawFrame(true, 0x0, 6, []byte(`ping"}`))}, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := hubContext(t, 20*time.Second)
			conn, br := rawDial(t, ctx, e.url, tc.early)
			if op, p, err := rawReadFrame(br); err != nil || op != 0x1 || string(p) != string(hubReadyFrame) {
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
				case op == 0x8 && tc.code == 0:
					t.Fatalf("closed: %q", p)
				case op == 0x8:
					if len(p) < 2 || binary.BigEndian.Uint16(p) != tc.code || !strings.Contains(string(p[2:]), tc.reason) {
						t.Fatalf("close %q, want %d with %q", p, tc.code, tc.reason)
					}
					// Then the server ends the connection, without waiting for
					// the client's close.
					if _, err := io.Copy(io.Discard, br); err != nil && !endedByPeer(err) {
						t.Fatalf("after the close frame: %v", err)
					}
					return
				case op == 0x1 && string(p) == string(hubPongFrame):
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

// FuzzWSFrameLimit: the limit's verdict and state do not depend on how the
// stream is split into reads, and scanning never panics.
func FuzzWSFrameLimit(f *testing.F) {
	f.Add(rawFrame(true, 0x1, 1<<62, nil), uint(3))
	f.Add(append(rawFrame(false, 0x1, 10, make([]byte, 10)), rawFrame(true, 0x0, 10, nil)...), uint(13))
	f.Add(rawFrame(true, 0x9, 125, make([]byte, 125)), uint(1))
	f.Add([]byte{0x81, 0xFE, 0xFF}, uint(2))
	f.Fuzz(func(t *testing.T, stream []byte, split uint) {
		whole := wsFrameLimit{limit: 64}
		werr := whole.scan(stream)
		at := int(split % uint(len(stream)+1))
		parts := wsFrameLimit{limit: 64}
		perr := parts.scan(stream[:at])
		if perr == nil {
			perr = parts.scan(stream[at:])
		}
		if fmt.Sprint(werr) != fmt.Sprint(perr) {
			t.Fatalf("whole: %v; split at %d: %v", werr, at, perr)
		}
		if werr == nil && whole != parts {
			t.Fatalf("state differs: %+v vs %+v", whole, parts)
		}
	})
}
