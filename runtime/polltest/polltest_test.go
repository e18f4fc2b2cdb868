package polltest

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUntil(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	Until(t, "three", func() bool { return n.Load() == 3 })
}

func TestPollFailsAfterTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(tb testing.TB)
		want string
	}{
		{"until", func(tb testing.TB) {
			Until(tb, "never", func() bool { return false }, Within(20*time.Millisecond), Every(time.Millisecond))
		}, "after 20ms: still waiting for never"},
		{"check", func(tb testing.TB) {
			Check(tb, func() error { return errors.New("state x") }, Within(10*time.Millisecond))
		}, "after 10ms: state x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			start := time.Now()
			tc.run(r)
			if r.failed != tc.want {
				t.Errorf("failure %q, want %q", r.failed, tc.want)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("the poll took %s", time.Since(start))
			}
		})
	}
}
