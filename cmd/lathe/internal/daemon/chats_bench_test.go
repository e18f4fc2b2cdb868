package daemon

// Chat and shared-file benchmarks through the whole daemon (no sandboxes):
// the latency a Chat token frame gets on its way from the provider's socket
// to the /ws client that issued the turn, and how much the daemon's memory
// grows while a 25 MiB file is uploaded to the shared store.

import (
	"encoding/json"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// BenchmarkChatTokenLatency measures the latency the daemon adds to a
// Chat's streamed token: from the scripted provider writing and flushing a
// stamped chunk to the issuing /ws client reading its chat-token frame.
// Each iteration runs 10 turns of 200 chunks 1ms apart, one at a time.
// Target: p99 <= 2ms.
//
//	go test -run '^$' -bench ChatTokenLatency -benchtime 1x ./cmd/lathe/internal/daemon/
func BenchmarkChatTokenLatency(b *testing.B) {
	const turns, chunks = 10, 200
	llm := newBenchLLM(b)
	b.Setenv(testRuntimeKeyEnv, "k")
	_, srv := startDaemon(b, 10*time.Second, func(c *config.Config) {
		c.Providers = map[string]config.Provider{"fake": {Kind: config.KindOpenAI, BaseURL: llm.srv.URL + "/v1", APIKeyEnv: testRuntimeKeyEnv}}
		c.Agents = []config.Agent{{ID: "a", Name: "A", Provider: "fake", Model: benchStreamModel}}
	}, WithoutSandbox())
	id := mustCall(b, srv, 201, post, "/api/chat", `{"agent_id":"a"}`)["id"].(string)
	ctx := testContext(b, 10*time.Minute)
	c := dialWS(b, ctx, srv, nil)
	expectFrame(b, ctx, c, "ready")
	expectFrame(b, ctx, c, "snapshot")
	var lat []time.Duration
	for b.Loop() {
		script := fakellm.Script{}
		for range turns {
			script.Turns = append(script.Turns, streamTurn(benchStreamModel, chunks, 1))
		}
		llm.play(b, script)
		for range turns {
			cmd, _ := json.Marshal(map[string]any{"cmd": "chat-turn", "chat_id": id, "content": "stream"})
			if err := c.Write(ctx, 1, cmd); err != nil {
				b.Fatal(err)
			}
			next := 0
			for {
				_, raw, err := c.Read(ctx)
				at := time.Now()
				if err != nil {
					b.Fatal(err)
				}
				var f chatFrame
				if json.Unmarshal(raw, &f) != nil {
					continue
				}
				// A frame carries one chunk, or several merged when the
				// daemon was behind (the live projection coalesces a turn's
				// adjacent deltas).
				for rest := f.Delta; f.Kind == "chat-token" && rest != ""; {
					i := strings.IndexByte(rest, ';') + 1 + fakellm.StampDigits
					if i <= fakellm.StampDigits || i > len(rest) {
						b.Fatalf("token %q: not whole stamped chunks", f.Delta)
					}
					text, sent, err := fakellm.SplitStamp(rest[:i])
					if err != nil || text != strconv.Itoa(next)+";" {
						b.Fatalf("token %q, want chunk %d", f.Delta, next)
					}
					next++
					lat = append(lat, at.Sub(sent))
					rest = rest[i:]
				}
				if f.terminal() {
					if f.Kind != "chat-done" || next != chunks {
						b.Fatalf("%s after %d of %d chunks: %s", f.Kind, next, chunks, raw)
					}
					break
				}
			}
		}
	}
	b.ReportMetric(float64(len(lat)), "chunks")
	reportPercentiles(b, "chat-token", lat)
}

// BenchmarkUpload25MiB uploads a 25 MiB file to the shared store and
// reports the growth of this process's peak RSS (the daemon and the
// streaming client) over its level before: the upload streams to disk and
// is never held whole. Target: <= 8 MB.
//
//	go test -run '^$' -bench Upload25MiB -benchtime 3x ./cmd/lathe/internal/daemon/
func BenchmarkUpload25MiB(b *testing.B) {
	const size = 25 << 20
	_, srv := startDaemon(b, 10*time.Second, nil, WithoutSandbox())
	var growth float64
	i := 0
	for b.Loop() {
		runtime.GC()
		debug.FreeOSMemory()
		before := resetPeakRSS(b)
		r := upload(b, srv, "/api/files", filePart{field: "file", filename: "big-" + strconv.Itoa(i) + ".bin", contentType: "application/octet-stream", size: size})
		peak := peakRSS(b)
		if r.status != 201 {
			b.Fatalf("upload: %d %s", r.status, r.body)
		}
		growth = max(growth, float64(peak-before)/1e6)
		i++
	}
	b.ReportMetric(growth, "rss-growth-MB")
}

// resetPeakRSS resets this process's peak RSS to its current RSS and
// returns it (/proc/self/clear_refs, 5).
func resetPeakRSS(tb testing.TB) int64 {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Skipf("cannot reset the peak RSS: %v", err)
	}
	return procStatus(tb, "VmHWM:")
}

func peakRSS(tb testing.TB) int64 { return procStatus(tb, "VmHWM:") }

func procStatus(tb testing.TB, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}
