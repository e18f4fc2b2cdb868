package helper

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// link serves h over a pipe, as the helper serves the exec's stdin and
// stdout, and returns the host's end.
func link(t *testing.T, h Handlers) *Link {
	t.Helper()
	ours, theirs := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- Serve(theirs, h) }()
	l, err := Connect(ours, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestStreams: a stream of a kind reaches its handler with its argument;
// a refusal comes back as a *RefusedError in the helper's words; an
// unknown kind and an over-long argument are refused.
func TestStreams(t *testing.T) {
	echo := func(st io.ReadWriteCloser, arg string) {
		if arg == "no" {
			Refuse(st, "not this one")
			return
		}
		Ready(st)
		io.WriteString(st, arg+":")
		io.Copy(st, st)
		st.Close()
	}
	l := link(t, Handlers{Streams: map[Kind]Stream{'E': echo}})

	c, err := l.Open(ctx(t), 'E', "arg")
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hello"))
	got := make([]byte, len("arg:hello"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "arg:hello" {
		t.Errorf("echo: %q, %v", got, err)
	}
	c.Close()

	for _, tc := range []struct {
		kind Kind
		arg  string
		want string
	}{
		{'E', "no", "not this one"},
		{'?', "x", `unknown stream kind '?'`},
		{KindDial, "70000", `bad port "70000"`},
		{KindDial, "http", `bad port "http"`},
	} {
		_, err := l.Open(ctx(t), tc.kind, tc.arg)
		if refused, ok := errors.AsType[*RefusedError](err); !ok || refused.Msg != tc.want {
			t.Errorf("Open(%q, %q): %v, want the refusal %q", tc.kind, tc.arg, err, tc.want)
		}
	}
	if _, err := l.Open(ctx(t), 'E', strings.Repeat("x", maxArg+1)); err == nil {
		t.Error("an argument over the bound was sent")
	}
}

// TestDial: a dial stream is a connection to the port on 127.0.0.1, both
// ways; a closed port is refused with the connect error.
func TestDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	l := link(t, Handlers{})
	c, err := l.Open(ctx(t), KindDial, port)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("0123456789"), 100_000) // past a stream window
	go c.Write(want)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Errorf("echo of %d bytes: %v", len(want), err)
	}
	c.Close()

	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	free.Close()
	_, err = l.Open(ctx(t), KindDial, closed)
	if refused, ok := errors.AsType[*RefusedError](err); !ok || !strings.Contains(refused.Msg, "connection refused") {
		t.Errorf("dial of a closed port: %v, want the refusal with the connect error", err)
	}
}

// TestConnectRefusesAStranger: a process that does not greet as this
// helper does is not spoken to.
func TestConnectRefusesAStranger(t *testing.T) {
	ours, theirs := net.Pipe()
	defer ours.Close()
	go func() {
		io.WriteString(theirs, "Python 3.11.2 on linux\n")
		io.Copy(io.Discard, theirs)
	}()
	if _, err := Connect(ours, 5*time.Second); err == nil || !strings.Contains(err.Error(), "not this build's") {
		t.Errorf("Connect to a stranger: %v", err)
	}
	silent, peer := net.Pipe()
	defer silent.Close()
	defer peer.Close()
	if _, err := Connect(silent, 50*time.Millisecond); err == nil {
		t.Error("Connect to a silent process returned without error")
	}
}

// TestOpenEndsWithItsContext: a helper that never answers holds up Open
// no longer than its context.
func TestOpenEndsWithItsContext(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	l := link(t, Handlers{Streams: map[Kind]Stream{'H': func(st io.ReadWriteCloser, _ string) { <-hang; st.Close() }}})
	c, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := l.Open(c, 'H', ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open of a stream never answered: %v, want the context's end", err)
	}
}

// FuzzReadHeader: any bytes are a header or an error, never a panic or an
// argument over the bound; what appendHeader writes reads back.
func FuzzReadHeader(f *testing.F) {
	f.Add(appendHeader(nil, KindDial, "8000"))
	f.Add(appendHeader(nil, KindFiles, "/workspace"))
	f.Add([]byte{'D', 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, arg, err := readHeader(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(arg) > maxArg {
			t.Fatalf("an argument of %d bytes", len(arg))
		}
		k2, a2, err := readHeader(bytes.NewReader(appendHeader(nil, kind, arg)))
		if err != nil || k2 != kind || a2 != arg {
			t.Fatalf("round trip: %q %q %v", k2, a2, err)
		}
	})
}
