package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// turnRuns tracks the turns this process runs: Stop and the execute route's
// wait find them here. A live turn in the projection without an entry here
// was left by an earlier process (ReconcileTurns ends it).
type turnRuns struct {
	mu     sync.Mutex
	m      map[string]*turnRun
	closed bool
	wg     sync.WaitGroup
	// ctx is the parent of every turn: cancelled (with a cause) at shutdown.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

type turnRun struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func newTurnRuns() *turnRuns {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &turnRuns{m: map[string]*turnRun{}, ctx: ctx, cancel: cancel}
}

// running is the run this daemon holds for a turn, or nil.
func (r *turnRuns) running(session, turn string) *turnRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[turnKey(session, turn)]
}

func turnKey(session, turn string) string { return session + "\x00" + turn }

// errShutdown is the cause that ends the turns running at shutdown.
var errShutdown = errors.New("interrupted: the daemon is shutting down")

// reserve registers a turn's run before its accept is appended, so that
// a Stop sent the moment session-accepted arrives finds it. A daemon that
// is shutting down accepts no turn.
func (r *turnRuns) reserve(session, turn string) (*turnRun, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("%w: the daemon is shutting down", ErrUnavailable)
	}
	run := &turnRun{stop: make(chan struct{}), done: make(chan struct{})}
	r.m[turnKey(session, turn)] = run
	r.wg.Add(1)
	return run, nil
}

// release ends a reservation or a run.
func (r *turnRuns) release(session, turn string, run *turnRun) {
	r.mu.Lock()
	if r.m[turnKey(session, turn)] == run {
		delete(r.m, turnKey(session, turn))
	}
	r.mu.Unlock()
	close(run.done)
	r.wg.Done()
}
