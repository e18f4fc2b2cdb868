package daemon

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"lathe/cmd/lathe/internal/config"
)

// BenchmarkTurnChunkLatencyTelemetry is BenchmarkTurnChunkLatency with
// telemetry off (no endpoint: nothing is folded) and with an OTLP endpoint
// that receives every span, in one run: the chunk → frame figures must not
// differ beyond noise.
func BenchmarkTurnChunkLatencyTelemetry(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchChunkLatency(b, turnBenchDaemon(b)) })
	b.Run("otlp", func(b *testing.B) {
		b.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		b.Cleanup(sink.Close)
		benchChunkLatency(b, turnBenchDaemon(b, func(c *config.Config) { c.Telemetry.OTLPEndpoint = sink.URL }))
	})
}
