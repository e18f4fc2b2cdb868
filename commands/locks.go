package commands

import (
	"context"
	"fmt"
	"sync"
	"time"

	"lathe/projections"
)

// sessionLocks holds one lifecycle lock per Session: a lifecycle owner
// holds it for the whole bracket.
type sessionLocks struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// forget drops the lock of a deleted Session. A caller still waiting on the
// old lock finds the Session gone.
func (e *sessionLocks) forget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, id)
}

// take waits for the lock of id, or ctx's end, and returns its release.
func (e *sessionLocks) take(ctx context.Context, id string) (func(), error) {
	l := e.lock(id)
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (e *sessionLocks) lock(id string) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]chan struct{}{}
	}
	l, ok := e.m[id]
	if !ok {
		l = make(chan struct{}, 1)
		e.m[id] = l
	}
	return l
}

// own takes a Session's lifecycle lock, or fails with ErrConflict when
// another owner holds it and wait is false. It first waits for start-up
// reconciliation (commands/reconcile.go).
func (s *core) own(ctx context.Context, id string, wait bool) (release func(), err error) {
	if err := s.reconciled.wait(ctx); err != nil {
		return nil, err
	}
	return s.lockSession(ctx, id, wait)
}

// lockSession is own without the reconciliation wait, for reconciliation
// itself.
func (s *core) lockSession(ctx context.Context, id string, wait bool) (release func(), err error) {
	l := s.locks.lock(id)
	if !wait {
		select {
		case l <- struct{}{}:
			return func() { <-l }, nil
		default:
			return nil, fmt.Errorf("%w: another environment change of session %q is in progress", ErrConflict, id)
		}
	}
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ownSession takes a Session's lifecycle lock and reads the Session under
// it; a missing Session releases the lock and is ErrNotFound.
func (s *core) ownSession(ctx context.Context, id string, wait bool) (projections.Session, func(), error) {
	release, err := s.own(ctx, id, wait)
	if err != nil {
		return projections.Session{}, nil, err
	}
	ss, ok := s.store.Session(id)
	if !ok {
		release()
		return ss, nil, fmt.Errorf("%w: session %q", ErrNotFound, id)
	}
	return ss, release, nil
}

func closedErr(id string) error {
	return fmt.Errorf("%w: session %q is closed; reopen it first", ErrConflict, id)
}

// acceptLockWait bounds an accept's wait for the lifecycle lock.
const acceptLockWait = 5 * time.Second
