package core

import (
	"context"
	"fmt"
	"sync"
	"time"

	"lathe/projections"
)

// SessionLocks holds one lifecycle lock per Session: a lifecycle owner
// holds it for the whole bracket.
type SessionLocks struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// Forget drops the lock of a deleted Session. A caller still waiting on the
// old lock finds the Session gone.
func (e *SessionLocks) Forget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, id)
}

// Take waits for the lock of id, or ctx's end, and returns its release.
func (e *SessionLocks) Take(ctx context.Context, id string) (func(), error) {
	l := e.Lock(id)
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (e *SessionLocks) Lock(id string) chan struct{} {
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

// Own takes a Session's lifecycle lock, or fails with ErrConflict when
// another owner holds it and wait is false. It first waits for start-up
// reconciliation (commands/core/reconcile.go).
func (s *Core) Own(ctx context.Context, id string, wait bool) (release func(), err error) {
	if err := s.Reconciled.Wait(ctx); err != nil {
		return nil, err
	}
	return s.LockSession(ctx, id, wait)
}

// LockSession is own without the reconciliation wait, for reconciliation
// itself.
func (s *Core) LockSession(ctx context.Context, id string, wait bool) (release func(), err error) {
	l := s.Locks.Lock(id)
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

// OwnSession takes a Session's lifecycle lock and reads the Session under
// it; a missing Session releases the lock and is ErrNotFound.
func (s *Core) OwnSession(ctx context.Context, id string, wait bool) (projections.Session, func(), error) {
	release, err := s.Own(ctx, id, wait)
	if err != nil {
		return projections.Session{}, nil, err
	}
	ss, ok := s.Store.Session(id)
	if !ok {
		release()
		return ss, nil, fmt.Errorf("%w: session %q", ErrNotFound, id)
	}
	return ss, release, nil
}

func ClosedErr(id string) error {
	return fmt.Errorf("%w: session %q is closed; reopen it first", ErrConflict, id)
}

// AcceptLockWait bounds an accept's wait for the lifecycle lock.
const AcceptLockWait = 5 * time.Second
