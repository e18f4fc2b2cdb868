package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/usage"
)

// historyBatch is how many events one Append of the history builder carries
// (the journal's default MaxBatch).
const historyBatch = 4096

// writeHistory fills a fresh journal at path with a realistic history of
// about n events over the given number of Sessions, appended directly
// through the journal in large batches (one fsync per batch), which takes
// seconds where the HTTP API would take minutes.
//
// Each Session is created in one of sessions/100 Workspaces, prepares its
// environment (a third end Ready, a tenth failed, the rest wait for a setup
// review), runs a turn (accepted, started, output, usage, done) and tasks,
// and is renamed, closed and reopened; a quarter end closed. What a crash
// leaves behind is there too: one Session in 1,000 has a task still running
// and a turn still live, which the start-up reconciliation must end.
func writeHistory(ctx context.Context, path string, sessions, n int) (int, error) {
	j, err := journal.Open(path, journal.Options{})
	if err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(uint64(sessions), uint64(n)))
	var batch []journal.Event
	written := 0
	flush := func() error {
		for len(batch) > 0 {
			k := min(len(batch), historyBatch)
			if _, err := j.Append(ctx, batch[:k]); err != nil {
				return err
			}
			written += k
			batch = batch[k:]
		}
		batch = nil
		return nil
	}
	workspaces := make([]string, max(1, sessions/100))
	for i := range workspaces {
		workspaces[i] = ulid.Make().String()
		p := fmt.Sprintf("/home/dev/src/project-%05d", i)
		batch = append(batch, events.New(workspaces[i], events.WorkspaceRegistered{Path: p, Name: filepath.Base(p)}))
	}
	perSession := max(20, n/max(1, sessions))
	for i := 0; i < sessions; i++ {
		evs := sessionHistory(rng, i, workspaces, perSession)
		batch = append(batch, evs...)
		if len(batch) >= historyBatch {
			if err := flush(); err != nil {
				j.Close()
				return written, err
			}
		}
	}
	if err := flush(); err != nil {
		j.Close()
		return written, err
	}
	return written, j.Close()
}

// sessionHistory is one Session's events, about perSession of them.
func sessionHistory(rng *rand.Rand, i int, workspaces []string, perSession int) []journal.Event {
	id := ulid.Make().String()
	ws := i % len(workspaces)
	var evs []journal.Event
	on := func(ps ...events.Payload) {
		for _, p := range ps {
			evs = append(evs, events.New(id, p))
		}
	}
	created := events.SessionCreated{
		WorkspaceID: workspaces[ws], Name: fmt.Sprintf("Fix the flaky integration test %d", i),
		WorkingDir: fmt.Sprintf("/home/dev/src/project-%05d", ws), Mode: events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"},
		EnabledSkills: []string{"git"}, ExposedPorts: []int{3000},
		Environment: events.Environment{State: events.EnvUnprepared, Generation: 1, Image: "lathe.local/sandbox:bookworm"},
	}
	crashed := i%1000 == 999
	ready := false
	switch r := rng.IntN(10); {
	case r < 6 || crashed:
		on(created, events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare})
		if r == 0 && !crashed {
			on(events.EnvironmentFailed{Generation: 1, Evidence: events.Evidence{Error: "pull lathe.local/sandbox:bookworm: not found", Fix: "rebuild"}})
		} else {
			on(events.EnvironmentReady{Generation: 1, Sandbox: id + "/g1"})
			ready = true
		}
		on(events.EnvironmentSettled{Generation: 1})
	default:
		created.Environment.SetupCommand, created.Environment.SetupSource = "npm ci", events.SourceUser
		created.Environment.State = events.EnvAwaitingApproval
		on(created)
	}
	turn := ulid.Make().String()
	cost := 0.0021
	on(events.TurnAccepted{TurnID: turn, IdempotencyKey: turn, AgentID: "coder", Input: events.NewText("Why does TestReplay fail on CI but pass locally?"), Source: "ws"},
		events.TurnStarted{TurnID: turn, Agent: "coder", Model: "qwen2.5-coder:7b"},
		events.TurnOutput{TurnID: turn, Agent: "coder", Step: 1, Text: events.NewText("The test depends on map iteration order; sort the IDs before comparing.")},
		events.TurnUsage{TurnID: turn, Agent: "coder", Step: 1, Model: "qwen2.5-coder:7b", CostUSD: &cost,
			Tokens: usage.Tokens{InputTokens: 812, OutputTokens: 64, TokenUsageKnown: true}},
		events.TurnDone{TurnID: turn, Output: events.NewText("The test depends on map iteration order; sort the IDs before comparing."),
			Totals: usage.Tokens{InputTokens: 812, OutputTokens: 64, TokenUsageKnown: true}})
	if ready {
		task := ulid.Make().String()
		on(events.TaskStarted{TaskID: task, Command: "go test ./...", Generation: 1},
			events.TaskExited{TaskID: task, ExitCode: rng.IntN(2), OutputTail: "ok  \tlathe/projections\t2.104s\n", DurationMS: int64(rng.IntN(60000))})
	}
	closed := false
	// toggle closes or reopens the Session the way commands does: a Ready
	// runtime is torn down under a close bracket and prepared again on reopen.
	toggle := func() {
		switch {
		case !closed && ready:
			on(events.EnvironmentChanging{Generation: 1, Owner: events.OwnerClose}, events.EnvironmentStopped{Generation: 1},
				events.EnvironmentSettled{Generation: 1}, events.SessionClosed{})
		case !closed:
			on(events.SessionClosed{})
		case ready:
			on(events.SessionReopened{}, events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare},
				events.EnvironmentReady{Generation: 1, Sandbox: id + "/g1"}, events.EnvironmentSettled{Generation: 1})
		default:
			on(events.SessionReopened{})
		}
		closed = !closed
	}
	for len(evs) < perSession-8 {
		switch rng.IntN(4) {
		case 0:
			toggle()
		case 1:
			if ready && !closed {
				task := ulid.Make().String()
				on(events.TaskStarted{TaskID: task, Command: "make lint", Generation: 1},
					events.TaskExited{TaskID: task, ExitCode: 0, OutputTail: "0 issues.\n", DurationMS: int64(rng.IntN(9000))})
				continue
			}
			fallthrough
		default:
			on(events.SessionRenamed{Name: fmt.Sprintf("Investigate the failing build on branch feature-%d", rng.IntN(10000))})
		}
	}
	if closed != (rng.IntN(4) == 0) && !crashed {
		toggle()
	}
	for len(evs) < perSession {
		on(events.SessionRenamed{Name: fmt.Sprintf("Review the change %d", rng.IntN(10000))})
	}
	if crashed && !closed {
		// What a crash leaves: a task and a turn that never ended.
		evs = evs[:len(evs)-2]
		live := ulid.Make().String()
		on(events.TaskStarted{TaskID: ulid.Make().String(), Command: "npm run dev", Generation: 1},
			events.TurnAccepted{TurnID: live, IdempotencyKey: live, AgentID: "coder", Input: events.NewText("Now fix it."), Source: "ws"})
	}
	return evs
}
