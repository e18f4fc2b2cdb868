package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// BenchmarkLattice8On4 runs lattice turns whose plan has 8 independent
// subtasks on 4 Workers, each subtask one scripted inference that takes
// latticeWork, through the whole daemon (real sandbox, the OpenAI client,
// /ws). It reports, from the coordinator-plan frame: the lattice overhead
// until the last of the 4 Workers started (its AgentActivated frame;
// target <= 50 ms), and the wall time until the last TaskCompleted in
// rounds of Worker time (8 subtasks on 4 Workers: about 2, not 8).
func BenchmarkLattice8On4(b *testing.B) {
	const latticeWork = 200 * time.Millisecond
	llm := newBenchLLM(b)
	b.Setenv(testRuntimeKeyEnv, "k")
	cl := containerdtest.Namespace(b, latticeNamespace)
	workers := []string{"w1", "w2", "w3", "w4"}
	_, srv := newSandboxDaemon(b, latticeNamespace, func(c *config.Config) {
		c.Providers = map[string]config.Provider{"fake": {Kind: config.KindOpenAI, BaseURL: llm.srv.URL + "/v1", APIKeyEnv: testRuntimeKeyEnv}}
		c.Agents = []config.Agent{{ID: "planner", Provider: "fake", Model: "plan-m"}}
		for _, w := range workers {
			c.Agents = append(c.Agents, config.Agent{ID: w, Provider: "fake", Model: "work-m"})
		}
		c.Lattice = config.Lattice{Coordinator: "planner"}
	})
	r := newEnvRig(b, srv, cl)
	id := r.create(b, `"mode":{"kind":"lattice"}`).ID
	r.ready(b, id)
	ctx := testContext(b, 40*time.Second)
	ws := dialWS(b, ctx, srv, nil)
	expectFrame(b, ctx, ws, "ready")
	expectFrame(b, ctx, ws, "snapshot")

	var subtasks []string
	for i := range 8 {
		subtasks = append(subtasks, subtask(fmt.Sprintf("s%d", i), "work"))
	}
	var overhead, rounds []time.Duration
	iter := 0
	for b.Loop() {
		script := fakellm.Script{Turns: []fakellm.Turn{{Model: "plan-m", Steps: []fakellm.Step{planCall(subtasks...), fakellm.Usage(1, 1, 0)}}}}
		for range 8 {
			script.Turns = append(script.Turns, fakellm.Turn{Model: "work-m", Steps: []fakellm.Step{
				fakellm.Pause(int(latticeWork / time.Millisecond)), fakellm.Text("done"), fakellm.Usage(1, 1, 0)}})
		}
		script.Turns = append(script.Turns, fakellm.Turn{Model: "plan-m", Steps: []fakellm.Step{fakellm.Text("all done"), fakellm.Usage(1, 1, 0)}})
		llm.play(b, script)
		planned, lastStart, lastDone := latticeBenchTurn(b, ctx, ws, id, fmt.Sprintf("bench-%d", iter), len(workers))
		iter++
		overhead = append(overhead, lastStart.Sub(planned))
		rounds = append(rounds, lastDone.Sub(planned))
	}
	reportPercentiles(b, "plan-to-last-start", overhead)
	var sum time.Duration
	for _, d := range rounds {
		sum += d
	}
	b.ReportMetric(float64(sum)/float64(len(rounds))/float64(latticeWork), "rounds")
}

// latticeBenchTurn sends one lattice turn and times its frames.
func latticeBenchTurn(b *testing.B, ctx context.Context, ws *websocket.Conn, id, turn string, workers int) (planned, lastStart, lastDone time.Time) {
	cmd, _ := json.Marshal(map[string]any{"cmd": "session", "id": id, "turn_id": turn, "input": "go"})
	if err := ws.Write(ctx, websocket.MessageText, cmd); err != nil {
		b.Fatal(err)
	}
	started, completed := 0, 0
	for {
		kind, raw := readFrame(b, ctx, ws)
		now := time.Now()
		var f struct {
			Type      string `json:"type"`
			TurnID    string `json:"turn_id"`
			Error     string `json:"error"`
			Aggregate string `json:"aggregate"`
		}
		_ = json.Unmarshal(raw, &f)
		if f.TurnID != turn || f.Aggregate != "" {
			continue
		}
		switch kind {
		case "coordinator-plan":
			planned = now
		case "event":
			switch f.Type {
			case "AgentActivated":
				if started++; started == workers {
					lastStart = now
				}
			case "TaskCompleted":
				completed, lastDone = completed+1, now
			}
		case "session-done", "session-error", "session-cancelled":
			if kind != "session-done" || completed != 8 || planned.IsZero() || lastStart.IsZero() {
				b.Fatalf("turn %s ended %s (%s) with %d subtasks completed", turn, kind, f.Error, completed)
			}
			return planned, lastStart, lastDone
		}
	}
}
