package daemon

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// otlpSink is an OTLP/HTTP endpoint that takes every export and counts
// them; the benchmark's daemon exports every 100 ms.
func otlpSink(b *testing.B) (endpoint func(*config.Config), exports *atomic.Int64) {
	b.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	exports = &atomic.Int64{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	return func(c *config.Config) { c.Telemetry.OTLPEndpoint = sink.URL }, exports
}

// BenchmarkTurnChunkLatencyTelemetry is BenchmarkTurnChunkLatency with
// telemetry off (no endpoint: nothing is folded) and with an OTLP endpoint
// that receives every span, in one run: the chunk → frame figures must not
// differ beyond noise.
func BenchmarkTurnChunkLatencyTelemetry(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchChunkLatency(b, turnBenchDaemon(b)) })
	b.Run("otlp", func(b *testing.B) {
		endpoint, _ := otlpSink(b)
		benchChunkLatency(b, turnBenchDaemon(b, endpoint))
	})
}

// BenchmarkTelemetryFifty is issue 27's figure: chunk → frame latency
// under 50 concurrent streaming turns, without an OTLP endpoint and with
// one, in one run. Two daemons run side by side (each in its own
// containerd namespace, with 50 Ready Sessions and one /ws client); each
// iteration is a round that runs a burst of 50 turns (100 chunks 20 ms
// apart each) on one daemon, then on the other, the order swapped every
// round, so that the machine's drift weighs on both alike. It reports
// each side's percentiles (off-chunk-*, otlp-chunk-*), the p99 delta
// (target: at most 0.2 ms) and ratio, and the exports the endpoint got.
func BenchmarkTelemetryFifty(b *testing.B) {
	endpoint, exports := otlpSink(b)
	sides := []*fiftySide{
		{name: "off", r: turnBenchDaemonIn(b, turnBenchNamespace)},
		{name: "otlp", r: turnBenchDaemonIn(b, turnBenchNamespace+"-otlp", endpoint)},
	}
	for _, s := range sides {
		s.ids = s.r.sessions(b, fiftyStreams, "")
		s.tl = openTurnTally(b, s.r)
	}
	round := 0
	for b.Loop() {
		for i := range sides {
			sides[(i+round)%2].burst(b, round)
		}
		round++
	}
	if exports.Load() == 0 {
		b.Fatal("the OTLP endpoint received no export")
	}
	for _, s := range sides {
		reportPercentiles(b, s.name+"-chunk", s.chunks)
	}
	off, on := percentile(sides[0].chunks, 99), percentile(sides[1].chunks, 99)
	b.ReportMetric(float64((on-off).Microseconds())/1000, "p99-delta-ms")
	b.ReportMetric(float64(on)/float64(off), "p99-ratio")
	b.ReportMetric(float64(exports.Load()), "exports")
}

// The load of BenchmarkTelemetryFifty.
const fiftyStreams, fiftyChunks, fiftyPaceMS = 50, 100, 20

// fiftySide is one daemon of BenchmarkTelemetryFifty and what its client
// saw.
type fiftySide struct {
	name   string
	r      *turnBenchRig
	ids    []string
	tl     *turnTally
	chunks []time.Duration
}

// burst starts a turn on each of the side's Sessions at once and waits for
// them all.
func (s *fiftySide) burst(b *testing.B, round int) {
	script := fakellm.Script{}
	for range s.ids {
		script.Turns = append(script.Turns, streamTurn(benchStreamModel, fiftyChunks, fiftyPaceMS))
	}
	s.r.llm.play(b, script)
	turns := make([]string, len(s.ids))
	for i, id := range s.ids {
		turns[i] = fmt.Sprintf("%s-%d-%d", s.name, round, i)
		s.tl.start(b, id, turns[i], fiftyChunks)
	}
	s.tl.wait(b, turns, 2*time.Minute)
	s.chunks = append(s.chunks, s.tl.chunks()...)
}

// percentile is the p-th percentile of ds (sorted in place).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*p/100)]
}
