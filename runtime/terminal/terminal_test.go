package terminal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/log"

	"lathe/runtime/polltest"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	log.SetLevel("warn")
	os.Exit(m.Run())
}

// ---------------------------------------------------------------------------
// Against the real sandbox

func newSandbox(t *testing.T) sandbox.Sandbox {
	t.Helper()
	return sandboxtest.Prepare(t, containerdtest.Containerd(t), sandboxtest.NewSpec(t))
}

func start(t *testing.T, sb sandbox.Sandbox, spec Spec) *Terminal {
	t.Helper()
	term, err := Start(sandboxtest.Context(t, time.Minute), sb, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if _, exited := term.Exited(); !exited {
			_ = term.Signal(context.Background(), 9)
			<-term.Done()
		}
	})
	return term
}

// reader collects a subscriber's output in the background.
type reader struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	err  error
	done chan struct{}
}

func read(sub *Subscriber) *reader {
	r := &reader{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			b, err := sub.Next(context.Background())
			r.mu.Lock()
			r.buf.Write(b)
			if err != nil {
				r.err = err
				r.mu.Unlock()
				return
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *reader) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

func (r *reader) waitFor(t *testing.T, s string) {
	t.Helper()
	polltest.Check(t, func() error {
		out := r.String()
		if strings.Contains(out, s) {
			return nil
		}
		r.mu.Lock()
		err := r.err
		r.mu.Unlock()
		failure := fmt.Errorf("output never contained %q (subscriber ended: %v); last of %d bytes: %q", s, err, len(out), out[max(0, len(out)-300):])
		if err != nil {
			t.Fatal(failure)
		}
		return failure
	}, polltest.Within(60*time.Second))
}

func (r *reader) end(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("subscriber never ended")
	}
	return r.err
}

func TestEchoScrollbackResizeExit(t *testing.T) {
	sb := newSandbox(t)
	term := start(t, sb, Spec{Args: []string{"bash", "--norc", "-i"}, Rows: 10, Cols: 40})

	scroll, sub := term.Attach()
	first := read(sub)
	if _, err := io.WriteString(term, "echo lathe-$((1+1))\r"); err != nil {
		t.Fatal(err)
	}
	first.waitFor(t, "lathe-2\r\n")
	if term.Subscribers() != 1 {
		t.Errorf("Subscribers = %d, want 1", term.Subscribers())
	}

	// A second watcher gets the past as scrollback, then the same live output.
	scroll2, sub2 := term.Attach()
	if !bytes.Contains(scroll2, []byte("lathe-2")) {
		t.Errorf("second scrollback lacks the earlier output: %q", scroll2)
	}
	second := read(sub2)

	if err := term.Resize(context.Background(), 33, 111); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	if r, c := term.Size(); r != 33 || c != 111 {
		t.Errorf("Size = %dx%d", r, c)
	}
	io.WriteString(term, "stty size\r")
	first.waitFor(t, "33 111")
	second.waitFor(t, "33 111")
	for _, bad := range [][2]int{{0, 80}, {24, 0}, {1001, 80}, {24, 1001}, {-1, -1}} {
		if err := term.Resize(context.Background(), bad[0], bad[1]); !errors.Is(err, ErrSize) {
			t.Errorf("Resize(%d, %d) = %v, want ErrSize", bad[0], bad[1], err)
		}
	}

	io.WriteString(term, "exit 7\r")
	if code, err := term.Wait(sandboxtest.Context(t, 30*time.Second)); code != 7 || err != nil {
		t.Fatalf("Wait = %d, %v; want 7", code, err)
	}
	if err := first.end(t); err != io.EOF {
		t.Errorf("first subscriber ended with %v, want EOF", err)
	}
	if err := second.end(t); err != io.EOF {
		t.Errorf("second subscriber ended with %v, want EOF", err)
	}
	// No gap, no duplicate: each watcher's scrollback + live is the whole output.
	all := string(scroll) + first.String()
	if got := string(scroll2) + second.String(); got != all {
		t.Errorf("second watcher saw\n%q\nfirst saw\n%q", got, all)
	}
	if got := string(term.Scrollback()); got != all {
		t.Errorf("final scrollback\n%q\nwant\n%q", got, all)
	}

	// After the exit: writes and resizes fail, attaching replays and ends.
	if _, err := term.Write([]byte("x")); !errors.Is(err, ErrExited) {
		t.Errorf("Write after exit: %v", err)
	}
	if err := term.Resize(context.Background(), 10, 10); !errors.Is(err, ErrExited) {
		t.Errorf("Resize after exit: %v", err)
	}
	scroll3, sub3 := term.Attach()
	if string(scroll3) != all {
		t.Errorf("scrollback after exit differs")
	}
	if _, err := sub3.Next(context.Background()); err != io.EOF {
		t.Errorf("Next after exit: %v, want EOF", err)
	}
	if code, ok := term.Exited(); !ok || code != 7 {
		t.Errorf("Exited = %d, %v", code, ok)
	}
}

func TestInitialSizeAndTee(t *testing.T) {
	sb := newSandbox(t)
	var tee polltest.Buffer
	term := start(t, sb, Spec{Args: []string{"bash", "-c", "stty size; exit 3"}, Rows: 17, Cols: 93, Tee: &tee})
	if code, err := term.Wait(sandboxtest.Context(t, 30*time.Second)); code != 3 || err != nil {
		t.Fatalf("Wait = %d, %v", code, err)
	}
	if !strings.Contains(tee.String(), "17 93") || !strings.Contains(string(term.Scrollback()), "17 93") {
		t.Errorf("tee %q, scrollback %q", tee.String(), term.Scrollback())
	}
	if _, err := Start(context.Background(), sb, Spec{Args: []string{"true"}, Rows: 2000, Cols: 10}); !errors.Is(err, ErrSize) {
		t.Errorf("Start with 2000 rows: %v", err)
	}
	if _, err := Start(context.Background(), sb, Spec{}); err == nil {
		t.Error("Start without a command succeeded")
	}
}

func TestLaggingSubscriberDropped(t *testing.T) {
	sb := newSandbox(t)
	term := start(t, sb, Spec{Args: []string{"bash", "--norc", "-i"}, Scrollback: 4 << 10})
	_, idle := term.Attach()
	_, busy := term.Attach()
	r := read(busy)
	// 4 MB, well past the idle subscriber's 1 MiB queue, paced at about
	// 10 MB/s so that the reading subscriber keeps up on a loaded machine.
	io.WriteString(term, "for i in $(seq 40); do head -c 75000 /dev/zero | base64 -w 100; sleep 0.01; done; echo done-$((6*7))\r")
	r.waitFor(t, "done-42")
	if _, err := idle.Next(context.Background()); !errors.Is(err, ErrLagging) {
		t.Errorf("idle subscriber: %v, want ErrLagging", err)
	}
	if !idle.Lagging() || busy.Lagging() {
		t.Errorf("Lagging: idle %v, busy %v", idle.Lagging(), busy.Lagging())
	}
	if n := term.Subscribers(); n != 1 {
		t.Errorf("Subscribers = %d, want 1 (the lagging one dropped)", n)
	}
	if n := len(term.Scrollback()); n != 4<<10 {
		t.Errorf("scrollback is %d bytes, want the bound %d", n, 4<<10)
	}
	if n := strings.Count(r.String(), strings.Repeat("A", 100)+"\r\n"); n < 40000 {
		t.Errorf("the reading subscriber missed output: %d full lines", n)
	}
	busy.Close()
	if err := r.end(t); !errors.Is(err, ErrDetached) {
		t.Errorf("after Close: %v, want ErrDetached", err)
	}
}

func TestSandboxGoneEndsTerminal(t *testing.T) {
	d := containerdtest.Containerd(t)
	spec := sandboxtest.NewSpec(t)
	sb := sandboxtest.Prepare(t, d, spec)
	term := start(t, sb, Spec{Args: []string{"sleep", "600"}})
	_, sub := term.Attach()
	r := read(sub)
	if err := sb.Teardown(sandboxtest.Context(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-term.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("terminal did not end with its sandbox")
	}
	code, err := term.Wait(context.Background())
	t.Logf("after teardown: code %d, err %v", code, err)
	if err := r.end(t); err != io.EOF {
		t.Errorf("subscriber: %v, want EOF", err)
	}
}

// ---------------------------------------------------------------------------
// Ring and fan-out, in memory

func TestRing(t *testing.T) {
	for _, max := range []int{1, 7, 64} {
		r := ring{max: max}
		var all []byte
		for i := range 300 {
			p := bytes.Repeat([]byte{byte('a' + i%26)}, rand.IntN(2*max+1))
			for j := range p {
				p[j] += byte(j % 3)
			}
			r.write(p)
			all = append(all, p...)
			want := all
			if len(want) > max {
				want = want[len(want)-max:]
			}
			if got := r.bytes(); !bytes.Equal(got, want) {
				t.Fatalf("max %d, step %d: %q, want %q", max, i, got, want)
			}
		}
	}
	r := ring{max: 0}
	r.write([]byte("x"))
	if len(r.bytes()) != 0 {
		t.Error("a ring of 0 kept bytes")
	}
	// A wrapped ring starts at a character boundary.
	r = ring{max: 5}
	r.write([]byte("ab€€")) // € is 3 bytes: the last 5 bytes cut the first one
	if got := string(r.bytes()); got != "€" {
		t.Errorf("wrapped UTF-8: %q", got)
	}
}

// TestAttachNoGapNoDuplicate attaches while output is published: for every
// subscriber, scrollback followed by live output is a contiguous run of the
// whole stream.
func TestAttachNoGapNoDuplicate(t *testing.T) {
	term := newTerminal(Spec{Scrollback: 1 << 20})
	var stream bytes.Buffer
	const chunks = 2000
	for i := range chunks {
		fmt.Fprintf(&stream, "<%d>", i)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range chunks {
			output{term}.Write(fmt.Appendf(nil, "<%d>", i))
		}
		term.finish(0, nil)
	}()
	type got struct {
		scroll []byte
		r      *reader
	}
	var subs []got
	for range 20 {
		s, sub := term.Attach()
		subs = append(subs, got{s, read(sub)})
		time.Sleep(50 * time.Microsecond) // spreads the attaches over the stream: the race under test, not a wait
	}
	wg.Wait()
	for i, g := range subs {
		if err := g.r.end(t); err != io.EOF {
			t.Fatalf("subscriber %d: %v", i, err)
		}
		if all := string(g.scroll) + g.r.String(); all != stream.String() {
			t.Fatalf("subscriber %d (scrollback %d bytes) saw a gap or duplicate", i, len(g.scroll))
		}
	}
}

func TestSubscriberQueue(t *testing.T) {
	term := newTerminal(Spec{Queue: 10})
	_, sub := term.Attach()
	out := output{term}
	out.Write([]byte("abc"))
	out.Write([]byte("def"))
	b, err := sub.Next(context.Background())
	if string(b) != "abcdef" || err != nil {
		t.Fatalf("Next = %q, %v; want the pending output coalesced", b, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with nothing pending: %v", err)
	}
	out.Write([]byte("0123456789")) // exactly the bound
	out.Write([]byte("x"))          // over it
	if _, err := sub.Next(context.Background()); !errors.Is(err, ErrLagging) {
		t.Fatalf("Next after overflow: %v", err)
	}
	if term.Subscribers() != 0 {
		t.Errorf("the lagging subscriber is still attached")
	}
	sub.Close() // harmless on a dropped subscriber
	if _, err := sub.Next(context.Background()); !errors.Is(err, ErrLagging) {
		t.Fatalf("Next after Close of a lagging subscriber: %v", err)
	}

	// Pending output is delivered before the end.
	_, sub = term.Attach()
	out.Write([]byte("tail"))
	term.finish(0, nil)
	if b, err := sub.Next(context.Background()); string(b) != "tail" || err != nil {
		t.Fatalf("Next = %q, %v", b, err)
	}
	if _, err := sub.Next(context.Background()); err != io.EOF {
		t.Fatalf("Next at the end: %v", err)
	}
}

func TestCheckSize(t *testing.T) {
	for _, ok := range [][2]int{{1, 1}, {24, 80}, {1000, 1000}} {
		if err := CheckSize(ok[0], ok[1]); err != nil {
			t.Errorf("CheckSize(%v): %v", ok, err)
		}
	}
	for _, bad := range [][2]int{{0, 1}, {1, 0}, {1001, 1}, {1, 1001}, {-5, 10}} {
		if err := CheckSize(bad[0], bad[1]); !errors.Is(err, ErrSize) {
			t.Errorf("CheckSize(%v): %v", bad, err)
		}
	}
}

// TestUnreadInputGivesUp: keystrokes to a process that reads none back up
// until a write gives up with its context, and fail once the process is gone.
func TestUnreadInputGivesUp(t *testing.T) {
	sb := newSandbox(t)
	// Raw mode: the line discipline then holds input back rather than drop it.
	term := start(t, sb, Spec{Args: []string{"bash", "-c", "stty raw -echo; echo ready; exec sleep 600"}})
	sandboxtest.WaitFor(t, 30*time.Second, func() bool { return bytes.Contains(term.Scrollback(), []byte("ready")) })
	chunk := bytes.Repeat([]byte("k"), 4<<10)
	var err error
	for i := 0; err == nil; i++ {
		if i > 10000 {
			t.Fatal("40 MB of unread keystrokes were all taken")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err = term.WriteContext(ctx, chunk)
		cancel()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write to a process reading nothing: %v", err)
	}
	if err := term.Signal(context.Background(), 9); err != nil {
		t.Fatal(err)
	}
	if code, err := term.Wait(sandboxtest.Context(t, 30*time.Second)); code != 137 || err != nil {
		t.Errorf("Wait after SIGKILL = %d, %v", code, err)
	}
	if _, err := term.WriteContext(context.Background(), chunk); !errors.Is(err, ErrExited) {
		t.Errorf("write after exit: %v", err)
	}
}

func TestInput(t *testing.T) {
	in := newInput()
	for i := range inputQueue {
		if n, err := in.write(context.Background(), []byte{byte('a' + i%26)}); n != 1 || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := in.write(ctx, []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write past the queue: %v", err)
	}
	buf := make([]byte, 1)
	if n, err := in.Read(buf); n != 1 || err != nil || buf[0] != 'a' {
		t.Fatalf("Read = %d, %v, %q", n, err, buf)
	}
	in.write(context.Background(), []byte("yz")) // room again
	in.close()
	if _, err := in.write(context.Background(), []byte("x")); !errors.Is(err, ErrExited) {
		t.Fatalf("write after close: %v", err)
	}
	if n, err := in.write(context.Background(), nil); n != 0 || !errors.Is(err, ErrExited) {
		t.Fatalf("empty write after close: %d, %v", n, err)
	}
}
