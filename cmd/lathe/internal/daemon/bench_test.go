package daemon

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkCreateToReady measures, through the whole daemon and the real
// containerd with the image cached, the time from POST creating a Session
// to its environment reporting ready: p50 and p95 over b.N Sessions.
func BenchmarkCreateToReady(b *testing.B) {
	cl, _, srv := sandboxDaemon(b, envNamespace)
	r := newEnvRig(b, srv, cl)
	took := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		ss := r.create(b, "")
		r.ready(b, ss.ID)
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*95/100].Microseconds())/1000, "p95-ms")
}
