package core

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
	Mu     sync.Mutex
	M      map[string]*TurnRun
	Closed bool
	Wg     sync.WaitGroup
	// Ctx is the parent of every turn: cancelled (with a cause) at shutdown.
	Ctx    context.Context
	Cancel context.CancelCauseFunc
}

type TurnRun struct {
	Stop     chan struct{}
	StopOnce sync.Once
	Done     chan struct{}
}

func newTurnRuns() *turnRuns {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &turnRuns{M: map[string]*TurnRun{}, Ctx: ctx, Cancel: cancel}
}

// Running is the run this daemon holds for a turn, or nil.
func (r *turnRuns) Running(session, turn string) *TurnRun {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	return r.M[TurnKey(session, turn)]
}

func TurnKey(session, turn string) string { return session + "\x00" + turn }

// ErrShutdown is the cause that ends the turns running at shutdown.
var ErrShutdown = errors.New("interrupted: the daemon is shutting down")

// Reserve registers a turn's run before its accept is appended, so that
// a Stop sent the moment session-accepted arrives finds it. A daemon that
// is shutting down accepts no turn.
func (r *turnRuns) Reserve(session, turn string) (*TurnRun, error) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	if r.Closed {
		return nil, fmt.Errorf("%w: the daemon is shutting down", ErrUnavailable)
	}
	run := &TurnRun{Stop: make(chan struct{}), Done: make(chan struct{})}
	r.M[TurnKey(session, turn)] = run
	r.Wg.Add(1)
	return run, nil
}

// Release ends a reservation or a run.
func (r *turnRuns) Release(session, turn string, run *TurnRun) {
	r.Mu.Lock()
	if r.M[TurnKey(session, turn)] == run {
		delete(r.M, TurnKey(session, turn))
	}
	r.Mu.Unlock()
	close(run.Done)
	r.Wg.Done()
}
