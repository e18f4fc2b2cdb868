package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"lathe/runtime/sandbox"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Sandbox is one container and its running main task.
type Sandbox struct {
	d   *Driver
	ctr client.Container
	sid string
	gen uint64

	mu    sync.Mutex
	task  client.Task    // nil once exited
	netns *os.File       // the task's network namespace, held open
	base  *specs.Process // the container's process spec, loaded once

	done chan struct{}
	err  error // why done; set before done is closed
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

func newSandbox(d *Driver, ctr client.Container, sid string, gen uint64) *Sandbox {
	return &Sandbox{d: d, ctr: ctr, sid: sid, gen: gen, done: make(chan struct{})}
}

func (s *Sandbox) SessionID() string     { return s.sid }
func (s *Sandbox) Generation() uint64    { return s.gen }
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// Err says why Done was closed, or is nil while the sandbox runs.
func (s *Sandbox) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

func (s *Sandbox) notRunning() error {
	if err := s.Err(); err != nil {
		return fmt.Errorf("%w: sandbox %s is not running: %w", sandbox.ErrNotFound, s.ctr.ID(), err)
	}
	return fmt.Errorf("%w: sandbox %s is not running", sandbox.ErrNotFound, s.ctr.ID())
}

func (s *Sandbox) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Teardown removes the sandbox; see Driver.Remove.
func (s *Sandbox) Teardown(ctx context.Context) error {
	return s.d.Remove(ctx, s.sid, s.gen)
}

// running records the live task and opens its network namespace. Holding the
// namespace open means Dial can never enter another process's namespace
// through a reused pid.
func (s *Sandbox) running(task client.Task) error {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", task.Pid()))
	if err != nil {
		return fmt.Errorf("%w: network namespace of sandbox %s: %w", sandbox.ErrNotFound, s.ctr.ID(), err)
	}
	s.mu.Lock()
	s.task, s.netns = task, ns
	s.mu.Unlock()
	return nil
}

func (s *Sandbox) closeNetns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.netns != nil {
		s.netns.Close()
		s.netns = nil
	}
}

// finish marks the sandbox exited for reason err.
func (s *Sandbox) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exited() {
		return
	}
	s.task = nil
	s.err = err
	close(s.done)
}

// watch closes Done when the main task exits. A broken wait (containerd
// restarting) is retried: the task usually outlives it.
func (s *Sandbox) watch(task client.Task, exitC <-chan client.ExitStatus) {
	backoff := 100 * time.Millisecond
	for {
		var st client.ExitStatus
		select {
		case st = <-exitC:
		case <-s.d.ctx.Done():
			return
		}
		code, at, err := st.Result()
		if err == nil {
			s.finish(fmt.Errorf("sandbox main task exited with status %d at %s", code, at.Format(time.RFC3339)))
			return
		}
		for {
			select {
			case <-s.d.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			t, terr := s.ctr.Task(s.d.ctx, nil)
			if errdefs.IsNotFound(terr) {
				s.finish(fmt.Errorf("%w: sandbox main task is gone (lost track of it: %v)", sandbox.ErrNotFound, err))
				return
			}
			if terr != nil {
				continue
			}
			if exitC, terr = t.Wait(s.d.ctx); terr == nil {
				break
			}
		}
	}
}

// Exec starts a process in the sandbox's task.
func (s *Sandbox) Exec(ctx context.Context, es sandbox.ExecSpec) (sandbox.Process, error) {
	ctx = s.d.nsCtx(ctx)
	if len(es.Args) == 0 {
		return nil, errors.New("exec: no command")
	}
	if es.Dir != "" && !filepath.IsAbs(es.Dir) {
		return nil, fmt.Errorf("exec: dir %q is not absolute", es.Dir)
	}
	s.mu.Lock()
	task := s.task
	s.mu.Unlock()
	if task == nil {
		return nil, s.notRunning()
	}
	base, err := s.baseProcess(ctx)
	if err != nil {
		return nil, err
	}
	p := *base
	p.Args = es.Args
	if es.Dir != "" {
		p.Cwd = es.Dir
	}
	p.Env = mergeEnv(base.Env, es.Env)
	p.Terminal = es.TTY
	var stdin *eofReader
	if es.Stdin != nil {
		stdin = &eofReader{r: es.Stdin, eof: make(chan struct{})}
		es.Stdin = stdin
	}
	// One lock for both: callers may pass the same writer twice.
	var mu sync.Mutex
	stdout, stderr := &lockedWriter{&mu, orDiscard(es.Stdout)}, &lockedWriter{&mu, orDiscard(es.Stderr)}
	opts := []cio.Opt{cio.WithStreams(es.Stdin, stdout, stderr)}
	if dir := s.d.fifoDir(); dir != "" {
		opts = append(opts, cio.WithFIFODir(dir))
	}
	if es.TTY {
		if envValue(p.Env, "TERM") == "" {
			p.Env = append(p.Env, "TERM=xterm-256color")
		}
		if es.Rows > 0 && es.Cols > 0 {
			p.ConsoleSize = &specs.Box{Height: uint(es.Rows), Width: uint(es.Cols)}
		}
		opts = append(opts, cio.WithTerminal)
	}
	id := execID()
	proc, err := task.Exec(ctx, id, &p, cio.NewCreator(opts...))
	if err != nil {
		return nil, s.d.wrap(err, "exec in "+s.ctr.ID())
	}
	exitC, err := proc.Wait(s.d.ctx)
	if err != nil {
		deleteProcess(ctx, proc)
		return nil, s.d.wrap(err, "exec in "+s.ctr.ID())
	}
	if err := proc.Start(ctx); err != nil {
		deleteProcess(ctx, proc)
		return nil, s.d.wrap(err, fmt.Sprintf("start %q in %s", es.Args[0], s.ctr.ID()))
	}
	pr := &process{d: s.d, proc: proc, tty: es.TTY, done: make(chan struct{})}
	go pr.reap(exitC)
	if stdin != nil {
		// The shim holds the stdin fifo open too: tell it when ours ends.
		go func() {
			select {
			case <-stdin.eof:
				proc.CloseIO(s.d.ctx, client.WithStdinCloser)
			case <-pr.done:
			}
		}()
	}
	return pr, nil
}

// baseProcess is the container's process spec, which every exec starts from:
// image environment, Spec.Env, working dir, user and capabilities.
func (s *Sandbox) baseProcess(ctx context.Context) (*specs.Process, error) {
	s.mu.Lock()
	base := s.base
	s.mu.Unlock()
	if base != nil {
		return base, nil
	}
	spec, err := s.ctr.Spec(ctx)
	if err != nil {
		return nil, s.d.wrap(err, "spec of "+s.ctr.ID())
	}
	if spec.Process == nil {
		return nil, fmt.Errorf("container %s has no process spec", s.ctr.ID())
	}
	s.mu.Lock()
	s.base = spec.Process
	s.mu.Unlock()
	return spec.Process, nil
}

// Dial connects to 127.0.0.1:port inside the sandbox's network namespace.
func (s *Sandbox) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("dial: port %d out of range", port)
	}
	// A private copy of the namespace handle: Remove may close ours meanwhile.
	s.mu.Lock()
	ns := -1
	if s.netns != nil && s.task != nil {
		ns, _ = unix.Dup(int(s.netns.Fd()))
	}
	s.mu.Unlock()
	if ns < 0 {
		return nil, s.notRunning()
	}
	defer unix.Close(ns)
	return dialInNetns(ctx, ns, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// mergeEnv returns base with add's KEY=value entries replacing or appended.
func mergeEnv(base, add []string) []string {
	out := append([]string(nil), base...)
	for _, kv := range add {
		key, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, old := range out {
			if k, _, _ := strings.Cut(old, "="); k == key {
				out[i], replaced = kv, true
				break
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func execID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "exec-" + hex.EncodeToString(b)
}

// eofReader closes eof when its reader reports an end or an error.
type eofReader struct {
	r    io.Reader
	once sync.Once
	eof  chan struct{}
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.eof) })
	}
	return n, err
}
