// Package polltest is the tests' one way to wait for something that happens
// on another goroutine or in another process: poll a condition with a
// deadline, as nats-server's checkFor does, and fail the test with what was
// awaited (or the condition's last error) when the deadline passes. No test
// sleeps to wait; a sleep that is itself the behaviour under test (a
// trickling client) stays where it is, with a comment. A Buffer holds what
// such a writer wrote so far, for the condition to read.
//
// It is a leaf under runtime/, beside jsonlimit and usage, so that every
// layer's tests may import it.
package polltest

import (
	"errors"
	"testing"
	"time"
)

// The defaults: long enough for a loaded 2-core CI machine running -race,
// short enough to fail a hung test well inside go test's own timeout.
const (
	DefaultWithin = 20 * time.Second
	DefaultEvery  = 5 * time.Millisecond
)

// Option changes one poll's deadline or step.
type Option func(*poll)

type poll struct{ within, every time.Duration }

// Within sets how long the condition has to come true (DefaultWithin).
func Within(d time.Duration) Option { return func(p *poll) { p.within = d } }

// Every sets the pause between two checks (DefaultEvery).
func Every(d time.Duration) Option { return func(p *poll) { p.every = d } }

// Until polls cond until it reports true, and fails t, naming what, when it
// has not within the deadline. cond runs on the caller's goroutine, so it
// may call t.Fatal itself to stop early.
func Until(t testing.TB, what string, cond func() bool, opts ...Option) {
	t.Helper()
	notYet := errors.New("still waiting for " + what)
	Check(t, func() error {
		if cond() {
			return nil
		}
		return notYet
	}, opts...)
}

// Check polls f until it returns nil, and fails t with f's last error when
// it has not within the deadline. The error is the place to say what the
// state was, so the failure shows it.
func Check(t testing.TB, f func() error, opts ...Option) {
	t.Helper()
	if within, err := Poll(f, opts...); err != nil {
		t.Fatalf("after %s: %v", within, err)
	}
}

// Poll polls f until it returns nil or the deadline passes, and answers
// the deadline and f's last error (nil when it came true): for a driver
// that records a timeout as a finding instead of failing at once.
func Poll(f func() error, opts ...Option) (within time.Duration, err error) {
	p := poll{within: DefaultWithin, every: DefaultEvery}
	for _, o := range opts {
		o(&p)
	}
	deadline := time.Now().Add(p.within)
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		if err = f(); err == nil || time.Now().After(deadline) {
			return p.within, err
		}
		<-tick.C
	}
}
