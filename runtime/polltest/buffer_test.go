package polltest

import (
	"strings"
	"sync"
	"testing"
)

// TestBuffer: writers on other goroutines and a reader polling at once
// (run with -race); the reader sees every write once they are done.
func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				if _, err := b.Write([]byte("x")); err != nil {
					t.Error(err)
				}
			}
		})
	}
	Until(t, "400 writes", func() bool { return strings.Count(b.String(), "x") == 400 })
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Errorf("buffer %q", got)
	}
}
