package commands

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"lathe/commands/core"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/sandbox"
)

// fakeDriver is a sandbox driver without containers: prepare decides each
// generation's fate (nil: a fakeSandbox that runs nothing).
type fakeDriver struct {
	prepare func(ctx context.Context, spec sandbox.Spec) error
	// exec, when set, answers each Exec of its sandboxes: the output, and
	// the process exits 0. Unset, the sandboxes run nothing.
	exec    func(spec sandbox.ExecSpec) string
	mu      sync.Mutex
	removed []uint64
}

func (d *fakeDriver) Prepare(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if d.prepare != nil {
		if err := d.prepare(ctx, spec); err != nil {
			return nil, err
		}
	}
	return &fakeSandbox{id: spec.SessionID, gen: spec.Generation, done: make(chan struct{}), exec: d.exec}, nil
}

func (d *fakeDriver) Attach(context.Context) ([]sandbox.Sandbox, error) { return nil, nil }

func (d *fakeDriver) Remove(_ context.Context, _ string, generation uint64) error {
	d.mu.Lock()
	d.removed = append(d.removed, generation)
	d.mu.Unlock()
	return nil
}

type fakeSandbox struct {
	id   string
	gen  uint64
	exec func(spec sandbox.ExecSpec) string
	once sync.Once
	done chan struct{}
}

func (f *fakeSandbox) SessionID() string  { return f.id }
func (f *fakeSandbox) Generation() uint64 { return f.gen }
func (f *fakeSandbox) Exec(_ context.Context, spec sandbox.ExecSpec) (sandbox.Process, error) {
	if f.exec == nil {
		return nil, errors.New("the fake sandbox runs nothing")
	}
	out := f.exec(spec)
	if spec.Stdout != nil {
		_, _ = io.WriteString(spec.Stdout, out)
	}
	return exited{}, nil
}

// exited is a process that has exited 0.
type exited struct{}

func (exited) Wait(context.Context) (int, error)            { return 0, nil }
func (exited) Signal(context.Context, syscall.Signal) error { return nil }
func (exited) Resize(context.Context, uint16, uint16) error { return nil }
func (f *fakeSandbox) Dial(context.Context, int) (net.Conn, error) {
	return nil, errors.New("the fake sandbox listens nowhere")
}
func (f *fakeSandbox) Done() <-chan struct{} { return f.done }
func (f *fakeSandbox) Err() error            { return nil }
func (f *fakeSandbox) Teardown(context.Context) error {
	f.once.Do(func() { close(f.done) })
	return nil
}

// newServiceWith is a Service on a real journal with connect as its
// sandbox provider, and a registered Workspace in a temporary directory.
func newServiceWith(t *testing.T, connect core.Connect) (*Service, *projections.Store, projections.Workspace) {
	t.Helper()
	j, store := openJournal(t)
	s := New(j, store, core.Options{Agents: []string{"coder"}, Connect: connect, DefaultImage: "img"})
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	w, _, err := s.Sessions.RegisterWorkspace(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, store, w
}

func singleAgent() *events.Mode {
	return &events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}
}
