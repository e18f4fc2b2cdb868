// Package terminal runs one interactive process on a sandbox TTY and shares
// it: a bounded scrollback ring of its raw output, live output fanned out to
// any number of subscribers, keystrokes in, resize, exit.
//
// Each subscriber has a bounded queue of pending output. Output is never held
// back for a slow subscriber: one whose queue would overflow is dropped, and
// its Next reports ErrLagging, so that its client can clear its view and
// attach again for a fresh scrollback.
package terminal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"unicode/utf8"

	"lathe/runtime/sandbox"
)

// Defaults and bounds.
const (
	DefaultScrollback = 256 << 10 // bytes of output retained for Attach
	DefaultQueue      = 1 << 20   // bytes a subscriber may have pending
	DefaultRows       = 24
	DefaultCols       = 80
	MaxRows           = 1000
	MaxCols           = 1000
)

var (
	// ErrLagging is what Next returns to a subscriber dropped for falling
	// behind the output.
	ErrLagging = errors.New("terminal: subscriber fell behind the output; attach again")
	// ErrExited is returned by Write and Resize once the process has exited.
	ErrExited = errors.New("terminal: the process has exited")
	// ErrDetached is what Next returns after the subscriber's own Close.
	ErrDetached = errors.New("terminal: subscriber detached")
	// ErrSize marks rows or cols out of range.
	ErrSize = fmt.Errorf("terminal: rows must be 1-%d and cols 1-%d", MaxRows, MaxCols)
)

// Spec is one interactive process to run.
type Spec struct {
	Args []string
	Dir  string   // default: the sandbox's working dir
	Env  []string // added to the sandbox's environment, KEY=value
	// Rows and Cols are the initial size; 0 means DefaultRows/DefaultCols.
	Rows, Cols int
	// Scrollback is how many bytes of output Attach replays (default
	// DefaultScrollback).
	Scrollback int
	// Queue bounds each subscriber's pending output in bytes (default
	// DefaultQueue).
	Queue int
	// Tee, if set, receives all output as well, such as a tail kept as
	// evidence. It is written under the terminal's lock: it must not block.
	Tee io.Writer
}

// CheckSize validates a terminal size.
func CheckSize(rows, cols int) error {
	if rows < 1 || rows > MaxRows || cols < 1 || cols > MaxCols {
		return fmt.Errorf("%w (got %dx%d)", ErrSize, rows, cols)
	}
	return nil
}

// Terminal is one process running on a TTY in a sandbox. It is safe for
// concurrent use.
type Terminal struct {
	proc  sandbox.Process
	stdin *input

	mu    sync.Mutex
	ring  ring
	subs  map[*Subscriber]struct{}
	ended bool // no more output will come
	queue int
	tee   io.Writer
	rows  int
	cols  int

	done chan struct{}
	code int
	err  error
}

// Start runs spec in sb on a terminal. The process outlives ctx, which
// bounds only its start.
func Start(ctx context.Context, sb sandbox.Sandbox, spec Spec) (*Terminal, error) {
	if len(spec.Args) == 0 {
		return nil, errors.New("terminal: no command")
	}
	if spec.Rows == 0 && spec.Cols == 0 {
		spec.Rows, spec.Cols = DefaultRows, DefaultCols
	}
	if spec.Rows == 0 {
		spec.Rows = DefaultRows
	}
	if spec.Cols == 0 {
		spec.Cols = DefaultCols
	}
	if err := CheckSize(spec.Rows, spec.Cols); err != nil {
		return nil, err
	}
	t := newTerminal(spec)
	proc, err := sb.Exec(ctx, sandbox.ExecSpec{
		Args: spec.Args, Dir: spec.Dir, Env: spec.Env,
		TTY: true, Rows: uint16(spec.Rows), Cols: uint16(spec.Cols),
		Stdin: t.stdin, Stdout: output{t}, Stderr: output{t},
	})
	if err != nil {
		t.stdin.close()
		return nil, err
	}
	t.proc = proc
	go t.wait()
	return t, nil
}

func newTerminal(spec Spec) *Terminal {
	if spec.Scrollback == 0 {
		spec.Scrollback = DefaultScrollback
	}
	if spec.Queue <= 0 {
		spec.Queue = DefaultQueue
	}
	return &Terminal{
		ring:  ring{max: spec.Scrollback},
		subs:  map[*Subscriber]struct{}{},
		queue: spec.Queue,
		tee:   spec.Tee,
		rows:  spec.Rows,
		cols:  spec.Cols,
		done:  make(chan struct{}),
		stdin: newInput(),
	}
}

// wait records the exit, then ends every subscriber once it has read what
// is pending.
func (t *Terminal) wait() {
	code, err := t.proc.Wait(context.Background())
	t.finish(code, err)
}

func (t *Terminal) finish(code int, err error) {
	t.mu.Lock()
	t.code, t.err = code, err
	t.ended = true
	subs := t.subs
	t.subs = map[*Subscriber]struct{}{}
	t.mu.Unlock()
	close(t.done)
	for s := range subs {
		s.end()
	}
	t.stdin.close()
}

// output is the process's stdout (and stderr) writer.
type output struct{ t *Terminal }

func (o output) Write(p []byte) (int, error) {
	o.t.publish(p)
	return len(p), nil
}

// publish retains p and queues it for every subscriber, dropping those
// whose queue it would overflow.
func (t *Terminal) publish(p []byte) {
	if len(p) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring.write(p)
	if t.tee != nil {
		_, _ = t.tee.Write(p)
	}
	for s := range t.subs {
		if !s.push(p) {
			delete(t.subs, s)
		}
	}
}

// Attach returns the retained scrollback and a subscriber that receives
// all output after it: nothing is missed or repeated between the two. After
// the process has exited, the subscriber's Next reports io.EOF at once.
// Close the subscriber when done with it.
func (t *Terminal) Attach() (scrollback []byte, sub *Subscriber) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sub = &Subscriber{t: t, max: t.queue, wake: make(chan struct{}, 1)}
	if t.ended {
		sub.state = subEnded
	} else {
		t.subs[sub] = struct{}{}
	}
	return t.ring.bytes(), sub
}

// Scrollback returns a copy of the retained output.
func (t *Terminal) Scrollback() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ring.bytes()
}

// Subscribers returns how many subscribers are attached.
func (t *Terminal) Subscribers() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.subs)
}

// Write sends keystrokes to the process's terminal, as WriteContext
// without a deadline.
func (t *Terminal) Write(p []byte) (int, error) {
	return t.WriteContext(context.Background(), p)
}

// WriteContext sends keystrokes to the process's terminal. A few writes are
// queued; beyond that it waits until the sandbox takes them (a process that
// reads no input holds them back), or ctx ends. It fails with ErrExited once
// the process is gone.
func (t *Terminal) WriteContext(ctx context.Context, p []byte) (int, error) {
	return t.stdin.write(ctx, p)
}

// Resize changes the terminal's size; rows and cols must be 1-1000.
func (t *Terminal) Resize(ctx context.Context, rows, cols int) error {
	if err := CheckSize(rows, cols); err != nil {
		return err
	}
	select {
	case <-t.done:
		return ErrExited
	default:
	}
	if err := t.proc.Resize(ctx, uint16(rows), uint16(cols)); err != nil {
		return fmt.Errorf("terminal: resize: %w", err)
	}
	t.mu.Lock()
	t.rows, t.cols = rows, cols
	t.mu.Unlock()
	return nil
}

// Size returns the terminal's current size.
func (t *Terminal) Size() (rows, cols int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rows, t.cols
}

// Signal sends sig to the process.
func (t *Terminal) Signal(ctx context.Context, sig syscall.Signal) error {
	return t.proc.Signal(ctx, sig)
}

// Done is closed once the process has exited and its output is published.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// Wait returns the exit code once the process has exited: the process's
// own, or -1 with the error when it could not be known.
func (t *Terminal) Wait(ctx context.Context) (int, error) {
	select {
	case <-t.done:
		return t.code, t.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// Exited reports whether the process has exited, and then its exit code.
func (t *Terminal) Exited() (code int, exited bool) {
	select {
	case <-t.done:
		return t.code, true
	default:
		return 0, false
	}
}

// Subscriber states.
const (
	subLive = iota
	subEnded
	subLagged
	subDetached
)

// Subscriber receives a terminal's live output.
type Subscriber struct {
	t    *Terminal
	wake chan struct{} // cap 1: output or a state change is waiting

	mu      sync.Mutex
	pending []byte
	spare   []byte // the slice Next returned last
	max     int
	state   int
}

// push queues p, or drops the subscriber when p would overflow its queue
// and reports false. t.mu is held.
func (s *Subscriber) push(p []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != subLive {
		return false
	}
	if len(s.pending)+len(p) > s.max {
		s.state, s.pending, s.spare = subLagged, nil, nil
		s.signal()
		return false
	}
	s.pending = append(s.pending, p...)
	s.signal()
	return true
}

func (s *Subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// end marks the output finished: Next returns what is pending, then io.EOF.
func (s *Subscriber) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == subLive {
		s.state = subEnded
		s.signal()
	}
}

// Next returns all output pending for the subscriber, waiting for some if
// there is none. The slice is valid until the next call. Once the process
// has exited and everything was returned it reports io.EOF; a subscriber
// that fell behind gets ErrLagging, and one closed with Close ErrDetached.
func (s *Subscriber) Next(ctx context.Context) ([]byte, error) {
	for {
		s.mu.Lock()
		switch {
		case s.state == subLagged:
			s.mu.Unlock()
			return nil, ErrLagging
		case s.state == subDetached:
			s.mu.Unlock()
			return nil, ErrDetached
		case len(s.pending) > 0:
			out := s.pending
			s.pending, s.spare = s.spare[:0], out
			if cap(s.pending) > 4*64<<10 {
				s.pending = nil // do not pin a rare burst
			}
			s.mu.Unlock()
			return out, nil
		case s.state == subEnded:
			s.mu.Unlock()
			return nil, io.EOF
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Lagging reports whether the subscriber was dropped for falling behind.
func (s *Subscriber) Lagging() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == subLagged
}

// Close detaches the subscriber. It is safe to call more than once.
func (s *Subscriber) Close() {
	s.t.mu.Lock()
	delete(s.t.subs, s)
	s.t.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == subLive || s.state == subEnded {
		s.state, s.pending, s.spare = subDetached, nil, nil
		s.signal()
	}
}

// inputQueue is how many writes the input holds before WriteContext waits.
const inputQueue = 64

// input is the process's stdin: an io.Reader the sandbox reads from, fed by
// writes that can give up (unlike an io.Pipe's) when their context ends.
type input struct {
	ch   chan []byte
	done chan struct{} // closed when the process has exited
	once sync.Once
	rest []byte // owned by the reader
}

func newInput() *input {
	return &input{ch: make(chan []byte, inputQueue), done: make(chan struct{})}
}

func (in *input) write(ctx context.Context, p []byte) (int, error) {
	select {
	case <-in.done:
		return 0, ErrExited
	default:
	}
	if len(p) == 0 {
		return 0, nil
	}
	select {
	case in.ch <- append([]byte(nil), p...):
		return len(p), nil
	case <-in.done:
		return 0, ErrExited
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Read gives the sandbox the queued keystrokes; io.EOF once the process exited.
func (in *input) Read(p []byte) (int, error) {
	if len(in.rest) == 0 {
		select {
		case in.rest = <-in.ch:
		case <-in.done:
			return 0, io.EOF
		}
	}
	n := copy(p, in.rest)
	in.rest = in.rest[n:]
	return n, nil
}

func (in *input) close() { in.once.Do(func() { close(in.done) }) }

// ring keeps the last max bytes written to it.
type ring struct {
	max  int
	buf  []byte
	head int  // once full: where the oldest byte is and the next write goes
	full bool // buf has reached max and wraps
	cut  bool // older bytes were dropped
}

func (r *ring) write(p []byte) {
	if r.max <= 0 {
		return
	}
	if len(p) > r.max {
		p, r.cut = p[len(p)-r.max:], true
	}
	if !r.full {
		if len(r.buf)+len(p) <= r.max {
			r.buf = append(r.buf, p...)
			return
		}
		old := r.buf
		r.buf = make([]byte, r.max)
		copy(r.buf, old)
		r.head, r.full, r.cut = len(old), true, true
	}
	n := copy(r.buf[r.head:], p)
	copy(r.buf, p[n:])
	r.head = (r.head + len(p)) % r.max
}

// bytes returns a copy of the retained bytes, oldest first. Once older
// output was dropped it starts at a UTF-8 character boundary.
func (r *ring) bytes() []byte {
	var out []byte
	if !r.full {
		out = append(out, r.buf...)
	} else {
		out = make([]byte, 0, r.max)
		out = append(append(out, r.buf[r.head:]...), r.buf[:r.head]...)
	}
	if !r.cut {
		return out
	}
	for i := 0; i < len(out) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(out[i]) {
			return out[i:]
		}
	}
	return out
}
