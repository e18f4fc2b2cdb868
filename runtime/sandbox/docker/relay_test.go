package docker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
	"lathe/runtime/sandbox/sandboxtest"
)

// TestRelayStreams: the connections of one sandbox share its relay. Each
// carries its own bytes both ways, past the stream window; one whose echo
// nobody reads holds up none of the others; the app's close comes back as
// EOF and a close reaches the app; and when the relay goes, its
// connections fail and the next Dial starts another.
func TestRelayStreams(t *testing.T) {
	d := dockertest.Docker(t, docker.Options{Owner: "lathe-test-relay"})
	sb := sandboxtest.Prepare(t, d, sandboxtest.NewSpec(t))
	ctx := sandboxtest.Context(t, 2*time.Minute)
	if _, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"python3", "-c", pyEcho, "8000"}}); err != nil {
		t.Fatal(err)
	}
	dial := func() net.Conn { return dialPort(t, sb, 8000) }

	// Stuck: 2 MiB written, nothing read; the echo fills every buffer on
	// the way back and the relay stops reading it.
	stuck := dial()
	defer stuck.Close()
	go func() { _, _ = stuck.Write(make([]byte, 2<<20)) }()

	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			c := dial()
			defer c.Close()
			c.SetDeadline(time.Now().Add(time.Minute))
			want := make([]byte, 1<<20)
			rand.Read(want)
			go func() { _, _ = c.Write(want) }()
			got := make([]byte, len(want))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Errorf("echo of 1 MiB: %v", err)
			} else if !bytes.Equal(got, want) {
				t.Error("echo of 1 MiB came back changed")
			}
		})
	}
	wg.Wait()

	// The app's close is the connection's EOF; the daemon's close reaches
	// an app that writes without end at once (its next send fails).
	for _, mode := range []string{"8001 read", "8002 stream"} {
		if _, err := sb.Exec(ctx, sandbox.ExecSpec{Args: append([]string{"python3", "-c", pyCloser}, strings.Fields(mode)...)}); err != nil {
			t.Fatal(err)
		}
	}
	byApp := dialPort(t, sb, 8001)
	byApp.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := byApp.Write([]byte("quit")); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(byApp); err != nil || string(got) != "hi" {
		t.Errorf("the app's close: read %q, %v; want its greeting, then EOF", got, err)
	}
	byApp.Close()
	byDaemon := dialPort(t, sb, 8002)
	if _, err := io.ReadFull(byDaemon, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	byDaemon.Close()
	sandboxtest.WaitFor(t, 30*time.Second, func() bool {
		out, _, _ := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"cat", "/tmp/ended"}})
		return string(out) == "stream"
	})

	open := dial()
	defer open.Close()
	docker.CloseLink(sb.(*docker.Sandbox))
	open.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := open.Read(make([]byte, 1)); err == nil {
		t.Error("a connection read after its relay closed")
	}
	again := dial()
	defer again.Close()
	again.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := again.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(again, make([]byte, 1)); err != nil {
		t.Errorf("a Dial after the relay closed: %v", err)
	}
}

// pyCloser listens on port argv[1]. In mode "read" it greets each
// connection with "hi" and reads until "quit", then closes it; in mode
// "stream" it sends without end, and when a send fails it writes
// "stream" to /tmp/ended.
const pyCloser = `import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
while True:
    c, _ = s.accept()
    if sys.argv[2] == "read":
        c.sendall(b"hi")
        while c.recv(65536) not in (b"", b"quit"):
            pass
    else:
        try:
            while True:
                c.sendall(b"x" * 65536)
        except OSError:
            with open("/tmp/ended", "w") as f:
                f.write("stream")
    c.close()
`

// dialPort dials port in sb until something listens there.
func dialPort(t *testing.T, sb sandbox.Sandbox, port int) net.Conn {
	t.Helper()
	var c net.Conn
	sandboxtest.WaitFor(t, 30*time.Second, func() bool {
		var err error
		c, err = sb.Dial(sandboxtest.Context(t, 30*time.Second), port)
		return err == nil
	})
	return c
}

// TestRelayConnectDoesNotStall: a Dial to an app whose accept queue is full
// waits for it alone; the sandbox's other Dials go through meanwhile.
func TestRelayConnectDoesNotStall(t *testing.T) {
	d := dockertest.Docker(t, docker.Options{Owner: "lathe-test-relay"})
	sb := sandboxtest.Prepare(t, d, sandboxtest.NewSpec(t))
	ctx := sandboxtest.Context(t, 2*time.Minute)
	full := `import socket, time
s = socket.socket()
s.bind(("127.0.0.1", 8003))
s.listen(0)
time.sleep(600)
`
	for _, args := range [][]string{{"python3", "-c", pyEcho, "8000"}, {"python3", "-c", full}} {
		if _, err := sb.Exec(ctx, sandbox.ExecSpec{Args: args}); err != nil {
			t.Fatal(err)
		}
	}
	dialPort(t, sb, 8000).Close()
	queued := dialPort(t, sb, 8003) // the one connection the queue holds
	defer queued.Close()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		if c, err := sb.Dial(hctx, 8003); err == nil {
			c.Close()
		}
	}()
	// Until the kernel holds that connect in SYN_SENT.
	sandboxtest.WaitFor(t, 30*time.Second, func() bool {
		out, _, _ := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"sh", "-c", `awk '$4 == "02"' /proc/net/tcp`}})
		return len(out) > 0
	})
	c, err := sb.Dial(sandboxtest.Context(t, 10*time.Second), 8000)
	if err != nil {
		t.Fatalf("a Dial beside a connect that waits: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Errorf("echo beside a connect that waits: %v", err)
	}
}
