package commands

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/sandbox"
)

// fakeDriver is a sandbox driver without containers: prepare decides each
// generation's fate (nil: a fakeSandbox that runs nothing).
type fakeDriver struct {
	prepare func(ctx context.Context, spec sandbox.Spec) error
	mu      sync.Mutex
	removed []uint64
}

func (d *fakeDriver) Prepare(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if d.prepare != nil {
		if err := d.prepare(ctx, spec); err != nil {
			return nil, err
		}
	}
	return &fakeSandbox{id: spec.SessionID, gen: spec.Generation, done: make(chan struct{})}, nil
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
	once sync.Once
	done chan struct{}
}

func (f *fakeSandbox) SessionID() string  { return f.id }
func (f *fakeSandbox) Generation() uint64 { return f.gen }
func (f *fakeSandbox) Exec(context.Context, sandbox.ExecSpec) (sandbox.Process, error) {
	return nil, errors.New("the fake sandbox runs nothing")
}
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
func newServiceWith(t *testing.T, connect Connect) (*Service, *projections.Store, projections.Workspace) {
	t.Helper()
	j, store := openJournal(t)
	s := New(j, store, Options{Agents: []string{"coder"}, Connect: connect, DefaultImage: "img"})
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
