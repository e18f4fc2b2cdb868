package daemon

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/sandboxtest"
)

// BenchmarkOutsideAgent times, for each outside agent, in a Ready sandbox:
// its cold start (a first turn sent → its first model call at the
// provider: the process's start, initialize, session/new and the prompt),
// and, once it runs, a turn's accept → its first model call (the issue's
// bound: 50 ms). The model calls carry one token each.
func BenchmarkOutsideAgent(b *testing.B) {
	for _, p := range []struct{ preset, kind, main string }{
		{"claude-code", config.KindAnthropic, "Claude"},
		{"opencode", config.KindOpenAI, "You are opencode"},
		{"codex", config.KindOpenAI, "Codex"},
		{"gemini", config.KindOpenAI, "You are Gemini CLI"},
	} {
		b.Run(p.preset, func(b *testing.B) {
			turns := []fakellm.Turn{{Contains: "title generator", Steps: []fakellm.Step{fakellm.Text("t"), fakellm.Usage(1, 1, 0)}}}
			for range b.N + 1 {
				turns = append(turns, fakellm.Turn{Contains: p.main, Steps: []fakellm.Step{fakellm.Text("ok"), fakellm.Usage(1, 1, 0)}})
			}
			r := turnDaemon(b, p.kind, fakellm.Script{Turns: turns}, func(c *config.Config) {
				c.Agents = append(c.Agents, config.Agent{ID: "x", Name: p.preset, Kind: "acp", ACP: &config.ACP{Preset: p.preset}, Provider: "fake", Model: "m1"})
			}, sharedAgents(b, p.preset))
			id := r.create(b, `"mode":{"kind":"single_agent","agent_id":"x"}`).ID
			r.ready(b, id)
			tc := openTurnConn(b, r)
			mainCalls := func() int {
				n := 0
				for _, q := range r.llm.Requests() {
					if strings.Contains(string(q.Body), p.main) {
						n++
					}
				}
				return n
			}
			// firstCall sends a turn and waits for its first model call.
			firstCall := func(turn string) time.Duration {
				before := mainCalls()
				start := time.Now()
				tc.send(b, map[string]any{"cmd": "session", "id": id, "turn_id": turn, "input": "say ok"})
				if _, err := polltest.Poll(func() error {
					if mainCalls() > before {
						return nil
					}
					return errors.New("no model call yet")
				}, polltest.Within(2*time.Minute), polltest.Every(100*time.Microsecond)); err != nil {
					b.Fatal(err)
				}
				took := time.Since(start)
				if f := outsideTurn(b, tc, turn, "deny"); f[len(f)-1].Kind != "session-done" {
					b.Fatalf("turn %s ended %s", turn, f[len(f)-1].line())
				}
				return took
			}
			cold := firstCall("cold")
			var warm []time.Duration
			b.ResetTimer()
			for i := range b.N {
				warm = append(warm, firstCall(fmt.Sprintf("w%d", i)))
			}
			b.StopTimer()
			b.ReportMetric(sandboxtest.MS(cold), "cold-ms")
			b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(warm, 50)), "accept-to-call-p50-ms")
			b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(warm, 99)), "accept-to-call-p99-ms")
		})
	}
}
