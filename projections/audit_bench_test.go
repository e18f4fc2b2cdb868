package projections_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/polltest"
	"lathe/runtime/usage"
)

// BenchmarkSessionHistory10k measures the history reads of a Session with
// 10,000 events (2,000 turns) among other Sessions' events: the Session as
// of a late seq (goal ≤ 50 ms) with the images of its past the store keeps
// as it grows (at), and without any (at-cold: its first time travel after
// a restart); and one audit page of 500 entries from the middle of the
// trail (goal ≤ 30 ms).
func BenchmarkSessionHistory10k(b *testing.B) {
	j, live := fedStore(b)
	ctx := context.Background()
	live.KeepPasts(ctx, j) // as the daemon does
	must := func(evs ...journal.Event) {
		if _, err := j.Append(ctx, evs); err != nil {
			b.Fatal(err)
		}
	}
	must(events.New("W1", events.WorkspaceRegistered{Path: "/repo", Name: "repo"}))
	mode := events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}
	for _, s := range []string{"S0", "S1"} {
		must(events.New(s, events.SessionCreated{WorkspaceID: "W1", Name: s, WorkingDir: "/repo", Mode: mode,
			Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}}))
	}
	var batch []journal.Event
	for i := range 2000 {
		turn := fmt.Sprintf("T%d", i)
		batch = append(batch,
			events.New("S1", events.TurnAccepted{TurnID: turn, IdempotencyKey: turn, AgentID: "coder", Input: events.NewText("do the thing " + turn), Source: "ws"}),
			events.New("S1", events.TurnStarted{TurnID: turn, Agent: "coder", Model: "m"}),
			events.New("S1", events.TurnOutput{TurnID: turn, Agent: "coder", Step: 1, Text: events.NewText("done with " + turn)}),
			events.New("S1", events.TurnUsage{TurnID: turn, Agent: "coder", Step: 1, Model: "m", Tokens: usage.Tokens{InputTokens: 100, OutputTokens: 20, TokenUsageKnown: true}}),
			events.New("S1", events.TurnDone{TurnID: turn, Output: events.NewText("done with " + turn), Totals: usage.Tokens{InputTokens: 100, OutputTokens: 20, TokenUsageKnown: true}}),
			events.New("S0", events.SessionRenamed{Name: turn}), // another Session's history in between
		)
		if len(batch) >= 600 {
			must(batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		must(batch...)
	}
	if err := live.Await(ctx, j.Last()); err != nil {
		b.Fatal(err)
	}
	polltest.Until(b, "the images of the past to be taken", live.PastsIdle, polltest.Within(time.Minute))
	at := func(b *testing.B, before func()) {
		var worst time.Duration
		cpu0 := cpuTime()
		for b.Loop() {
			before()
			t0 := time.Now()
			at, err := live.SessionAt(ctx, j, "S1", j.Last()-1)
			if err != nil || at.Events != 10001 || len(at.Turns) != 2000 {
				b.Fatalf("%d events, %d turns: %v", at.Events, len(at.Turns), err)
			}
			worst = max(worst, time.Since(t0))
		}
		b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
		// The CPU time of every thread per call: on a shared machine, what
		// the work costs whatever the other loads do to the wall time.
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	}
	b.Run("at", func(b *testing.B) { at(b, func() {}) })
	b.Run("at-cold", func(b *testing.B) { at(b, live.DropPasts) })
	b.Run("audit-page-500", func(b *testing.B) {
		var worst time.Duration
		cpu0 := cpuTime()
		for b.Loop() {
			t0 := time.Now()
			page, more, err := live.SessionAudit(ctx, j, "S1", projections.AuditQuery{After: j.Last() / 2, Limit: 500})
			if err != nil || len(page) != 500 || !more {
				b.Fatalf("%d entries, more %v: %v", len(page), more, err)
			}
			worst = max(worst, time.Since(t0))
		}
		b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	})
}
