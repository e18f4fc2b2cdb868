package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"lathe/cmd/lathe/internal/config"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
)

const latticeNamespace = "lathe-test-lattice"

// latticeTeam is the team of the lattice tests: a coordinator and two
// Workers, each on its own model so the script answers each apart.
func latticeTeam(c *config.Config) {
	c.Agents = []config.Agent{
		{ID: "planner", Name: "Planner", Provider: "fake", Model: "plan-m", Prompt: "you plan"},
		{ID: "w1", Name: "Worker One", Provider: "fake", Model: "w1-m"},
		{ID: "w2", Name: "Worker Two", Provider: "fake", Model: "w2-m"},
	}
	c.Lattice = config.Lattice{Coordinator: "planner"}
	c.Prices = nil
}

// planCall is the coordinator's plan as a scripted submit_plan call.
func planCall(subtasks ...string) fakellm.Step {
	return fakellm.ToolCall("plan_1", "submit_plan", `{"goal":"build the thing","subtasks":[`+strings.Join(subtasks, ",")+`]}`)
}

func subtask(id, instruction string, dependsOn ...string) string {
	deps := ""
	if len(dependsOn) > 0 {
		b, _ := json.Marshal(dependsOn)
		deps = `,"depends_on":` + string(b)
	}
	return fmt.Sprintf(`{"id":%q,"title":"Task %s","instruction":%q%s}`, id, strings.ToUpper(id), instruction, deps)
}

// latticeFrame is a turn frame or a Worker lifecycle event of one turn.
type latticeFrame struct {
	turnFrame
	Type        string            `json:"type"`
	Task        string            `json:"task"`
	Tokens      *int              `json:"tokens"`
	Coordinator string            `json:"coordinator"`
	Goal        string            `json:"goal"`
	Subtasks    []json.RawMessage `json:"subtasks"`
}

func (f latticeFrame) line() string {
	switch f.Kind {
	case "event":
		s := fmt.Sprintf("event %s agent=%s task=%s", f.Type, f.Agent, f.Task)
		if f.Output != "" {
			s += fmt.Sprintf(" output=%q", f.Output)
		}
		if f.Tokens != nil {
			s += fmt.Sprintf(" tokens=%d", *f.Tokens)
		}
		return s
	case "coordinator-plan":
		var sts []string
		for _, raw := range f.Subtasks {
			sts = append(sts, string(raw))
		}
		return fmt.Sprintf("coordinator-plan coordinator=%s goal=%q %s", f.Coordinator, f.Goal, strings.Join(sts, " "))
	case "tool-call":
		return f.turnFrame.line() + " agent=" + f.Agent
	}
	return f.turnFrame.line()
}

// latticeFrames reads one turn's frames, lifecycle events included (the
// journal's own event frames skipped), until stop holds for one; adjacent
// deltas of one kind and Agent are merged (the daemon may merge a backlog).
func (tc *turnConn) latticeFrames(t *testing.T, turn string, stop func(latticeFrame) bool) []latticeFrame {
	t.Helper()
	ctx := testContext(t, 60*time.Second)
	var got []latticeFrame
	for {
		kind, raw := readFrame(t, ctx, tc.c)
		if strings.HasPrefix(kind, "session-environment") || kind == "checkout-changed" {
			continue
		}
		var head struct{ Aggregate string }
		if json.Unmarshal(raw, &head); kind == "event" && head.Aggregate != "" {
			continue // the journal's event frame, not a lifecycle notice
		}
		var f latticeFrame
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		if f.TurnID != turn {
			continue
		}
		if n := len(got); n > 0 && (f.Kind == "token" || f.Kind == "reasoning") && got[n-1].Kind == f.Kind && got[n-1].Agent == f.Agent {
			got[n-1].Delta += f.Delta
		} else {
			got = append(got, f)
		}
		if stop(f) {
			return got
		}
	}
}

func latticeLines(frames []latticeFrame) string {
	var b strings.Builder
	for _, f := range frames {
		b.WriteString(f.line() + "\n")
	}
	return b.String()
}

// checkGolden compares got with testdata/name (-update rewrites it).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("frame sequence:\n%s\nwant (%s):\n%s", got, golden, want)
	}
}

func terminalLattice(f latticeFrame) bool { return f.terminal() }

// TestLatticeTurn: a coordinator plans two subtasks, one waiting for the
// other; the Workers run them in the Session's sandbox, the coordinator
// synthesises, and everything streams keyed by Agent (golden sequence). A
// client that connects mid-turn sees the plan and the Workers so far, then
// exactly the later frames. The lifecycle notices reach NATS and the recent
// log; the turn record and the export keep the plan and each Worker's part.
func TestLatticeTurn(t *testing.T) {
	release := make(chan struct{})
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Model: "plan-m", Steps: []fakellm.Step{fakellm.Text("Planning."),
			planCall(subtask("a", "write notes/a.txt"), subtask("b", "summarise a", "a")), fakellm.Usage(100, 30, 0)}},
		{Model: "w1-m", Steps: []fakellm.Step{fakellm.ToolCall("call_1", "write_file", `{"path":"notes/a.txt","content":"alpha\n"}`), fakellm.Usage(40, 10, 0)}},
		{Model: "w1-m", Steps: []fakellm.Step{fakellm.Text("wrote a"), fakellm.Usage(60, 5, 0)}},
		{Model: "w2-m", Steps: []fakellm.Step{fakellm.Text("b sees "), fakellm.Stall(release), fakellm.Text("alpha"), fakellm.Usage(70, 6, 0)}},
		{Model: "plan-m", Steps: []fakellm.Step{fakellm.Text("Done: a wrote alpha, b summarised it."), fakellm.Usage(200, 12, 0)}},
	}}
	r := turnDaemonIn(t, latticeNamespace, config.KindOpenAI, script, func(c *config.Config) {
		latticeTeam(c)
		c.NATS.Listen = "127.0.0.1:0"
	})
	nc, err := nats.Connect(r.daemon.NATSURL(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync("lathe.lattice.>")
	if err != nil || nc.Flush() != nil {
		t.Fatal(err)
	}
	id := r.create(t, `"mode":{"kind":"lattice"}`).ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "L1", "input": "build the thing"})
	before := tc.latticeFrames(t, "L1", func(f latticeFrame) bool { return f.Kind == "token" && f.Agent == "w2" })

	// A client connecting now, while w2 is held mid-stream.
	late := openTurnConn(t, r)
	var run *projections.Run
	for i := range late.snap.Runs {
		if late.snap.Runs[i].TurnID == "L1" {
			run = &late.snap.Runs[i]
		}
	}
	if run == nil || run.Coordinator != "planner" || run.Goal != "build the thing" || len(run.Subtasks) != 2 ||
		run.Subtasks[0].Status != "completed" || run.Subtasks[0].Worker != "w1" || run.Subtasks[0].Output.String() != "wrote a" ||
		run.Subtasks[1].Status != "activated" || run.Subtasks[1].Worker != "w2" {
		t.Fatalf("snapshot run: %+v", run)
	}
	agents := map[string]projections.RunAgent{}
	for _, a := range run.Agents {
		agents[a.Agent] = a
	}
	if agents["w2"].Text != "b sees " || agents["w2"].Status != "activated" || agents["w1"].Text != "wrote a" || agents["w1"].Status != "completed" ||
		agents["planner"].Text != "Planning." {
		t.Errorf("snapshot agents: %+v", run.Agents)
	}
	close(release)
	after := tc.latticeFrames(t, "L1", terminalLattice)
	lateFrames := late.latticeFrames(t, "L1", terminalLattice)
	if latticeLines(lateFrames) != latticeLines(after) {
		t.Errorf("the late client's frames:\n%s\nwant exactly the frames after its snapshot:\n%s", latticeLines(lateFrames), latticeLines(after))
	}
	checkGolden(t, "lattice_turn.golden", latticeLines(append(before, after...)))

	// The Worker's tool ran in the sandbox.
	if b, err := os.ReadFile(filepath.Join(r.dir, "notes", "a.txt")); err != nil || string(b) != "alpha\n" {
		t.Errorf("notes/a.txt = %q, %v", b, err)
	}
	// w2 got a's result; the synthesis got both.
	var w2Req, synth string
	for _, req := range r.llm.Requests() {
		switch {
		case req.Model == "w2-m":
			w2Req = string(req.Body)
		case req.Model == "plan-m":
			synth = string(req.Body)
		}
	}
	if !strings.Contains(w2Req, `Result of subtask \"a\"`) || !strings.Contains(w2Req, "wrote a") {
		t.Errorf("w2's request lacks a's result: %s", w2Req)
	}
	if !strings.Contains(synth, "wrote a") || !strings.Contains(synth, "b sees alpha") || strings.Contains(synth, `"tools"`) {
		t.Errorf("the synthesis request: %s", synth)
	}

	// NATS and the recent log carry the lifecycle notices.
	var subjects []string
	for len(subjects) < 4 {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("NATS after %v: %v", subjects, err)
		}
		subjects = append(subjects, m.Subject)
	}
	if want := []string{"lathe.lattice.AgentActivated", "lathe.lattice.TaskCompleted", "lathe.lattice.AgentActivated", "lathe.lattice.TaskCompleted"}; !slices.Equal(subjects, want) {
		t.Errorf("NATS subjects %v, want %v", subjects, want)
	}
	recent := r.do(t, get, "/api/events/recent", "")
	if !strings.Contains(string(recent.body), `"type":"TaskCompleted","agent":"w2","task":"b","output":"b sees alpha","tokens":76`) {
		t.Errorf("recent log: %s", recent.body)
	}

	// The turn record: the plan, each Worker's steps and output, the synthesis.
	var turn projections.Turn
	if resp := r.do(t, get, "/api/sessions/"+id+"/turns/L1", ""); resp.status != 200 || json.Unmarshal(resp.body, &turn) != nil {
		t.Fatalf("GET turn: %d %s", resp.status, resp.body)
	}
	if turn.Status != projections.TurnDone || turn.Output.String() != "Done: a wrote alpha, b summarised it." || turn.Lattice == nil ||
		turn.Lattice.Subtasks[1].Status != "completed" || turn.Lattice.Subtasks[1].Output.String() != "b sees alpha" ||
		turn.Usage.InputTokens != 470 || turn.Usage.OutputTokens != 63 || !turn.Usage.TokenUsageKnown {
		t.Errorf("turn record: %+v", turn)
	}
	var stepAgents []string
	for _, st := range turn.Steps {
		stepAgents = append(stepAgents, st.Agent)
	}
	if want := []string{"planner", "w1", "w1", "w2", "planner"}; !slices.Equal(stepAgents, want) {
		t.Errorf("steps by %v, want %v", stepAgents, want)
	}
	export := r.do(t, get, "/api/sessions/"+id+"/export?format=markdown", "")
	for _, want := range []string{"### Plan (coordinator `planner`)", "`a` **Task A** → Worker `w1`: completed", "`b` **Task B** → Worker `w2`: completed (after a)",
		"#### Result of `b` (`w2`)", "### Agent `w1`", "Done: a wrote alpha"} {
		if !strings.Contains(string(export.body), want) {
			t.Errorf("export lacks %q:\n%s", want, export.body)
		}
	}
	// The next lattice turn's coordinator sees the request and the answer,
	// not the Workers' tool calls.
	if msgs := r.do(t, get, "/api/sessions/"+id+"/messages", ""); strings.Contains(string(msgs.body), "write_file") || !strings.Contains(string(msgs.body), "Done: a wrote") {
		t.Errorf("messages: %s", msgs.body)
	}
}

// TestLatticeFaults: a Worker's failure skips its dependents while an
// independent subtask finishes and the coordinator states the failure; a
// plan that is not structured output, and one with a cycle, end the turn
// with session-error before any Worker runs; target_agent runs one Worker
// alone; Stop reaches a running Worker and a waiting one.
func TestLatticeFaults(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	script := fakellm.Script{Turns: []fakellm.Turn{
		// failure: a fails on w1, b (after a) is skipped, c on w2 finishes.
		{Model: "plan-m", Steps: []fakellm.Step{planCall(subtask("a", "x"), subtask("c", "z"), subtask("b", "y", "a")), fakellm.Usage(10, 5, 0)}},
		{Model: "w1-m", Steps: []fakellm.Step{fakellm.Fail(400)}},
		{Model: "w2-m", Steps: []fakellm.Step{fakellm.Text("c ok"), fakellm.Usage(3, 2, 0)}},
		{Model: "plan-m", Steps: []fakellm.Step{fakellm.Text("a failed, so b was skipped; c is done."), fakellm.Usage(20, 9, 0)}},
		// free text instead of a plan
		{Model: "plan-m", Steps: []fakellm.Step{fakellm.Text("I think we should split it."), fakellm.Usage(7, 3, 0)}},
		// a cycle
		{Model: "plan-m", Steps: []fakellm.Step{planCall(subtask("a", "x", "b"), subtask("b", "y", "a")), fakellm.Usage(8, 4, 0)}},
		// target_agent
		{Model: "w2-m", Steps: []fakellm.Step{fakellm.Text("just me"), fakellm.Usage(1, 1, 0)}},
		// an Agent's dependencies: w2 waits for w1's subtasks though the plan's are independent
		{Model: "plan-m", Steps: []fakellm.Step{planCall(subtask("a", "x"), subtask("b", "y")), fakellm.Usage(10, 5, 0)}},
		{Model: "w1-m", Steps: []fakellm.Step{fakellm.Pause(300), fakellm.Text("a done"), fakellm.Usage(1, 1, 0)}},
		{Model: "w2-m", Steps: []fakellm.Step{fakellm.Text("b done"), fakellm.Usage(1, 1, 0)}},
		{Model: "plan-m", Steps: []fakellm.Step{fakellm.Text("both"), fakellm.Usage(1, 1, 0)}},
		// stop: a runs on w1 and c on w2 (both held), b waits for a.
		{Model: "plan-m", Steps: []fakellm.Step{planCall(subtask("a", "x"), subtask("c", "z"), subtask("b", "y", "a")), fakellm.Usage(10, 5, 0)}},
		{Model: "w1-m", Steps: []fakellm.Step{fakellm.Text("working"), fakellm.Stall(release)}},
		{Model: "w2-m", Steps: []fakellm.Step{fakellm.Text("also working"), fakellm.Stall(release)}},
		// execute: the same lattice turn, synchronously
		{Model: "plan-m", Steps: []fakellm.Step{planCall(subtask("a", "x")), fakellm.Usage(2, 1, 0)}},
		{Model: "w1-m", Steps: []fakellm.Step{fakellm.Text("a via execute"), fakellm.Usage(2, 1, 0)}},
		{Model: "plan-m", Steps: []fakellm.Step{fakellm.Text("executed"), fakellm.Usage(2, 1, 0)}},
	}}
	r := turnDaemonIn(t, latticeNamespace, config.KindOpenAI, script, latticeTeam)
	if resp := r.do(t, get, "/api/lattice", ""); resp.status != 200 || string(resp.body) != `{"coordinator":"planner","workers":["w1","w2"]}`+"\n" {
		t.Errorf("GET /api/lattice: %d %q", resp.status, resp.body)
	}
	id := r.create(t, `"mode":{"kind":"lattice"}`).ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	turn := func(tid string) projections.Turn {
		var out projections.Turn
		if resp := r.do(t, get, "/api/sessions/"+id+"/turns/"+tid, ""); resp.status != 200 || json.Unmarshal(resp.body, &out) != nil {
			t.Fatalf("GET turn: %d %s", resp.status, resp.body)
		}
		return out
	}

	t.Run("a Worker fails", func(t *testing.T) {
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "F1", "input": "go"})
		frames := tc.latticeFrames(t, "F1", terminalLattice)
		last := frames[len(frames)-1]
		if last.Kind != "session-done" || !strings.Contains(last.Output, "a failed") || *last.TokenUsageKnown {
			t.Errorf("terminal %s (known %v): want session-done, the failure stated, usage a subtotal", last.line(), *last.TokenUsageKnown)
		}
		var events []string
		for _, f := range frames {
			if f.Kind == "event" {
				events = append(events, f.Type+":"+f.Task)
			}
		}
		slices.Sort(events)
		if want := []string{"AgentActivated:a", "AgentActivated:c", "AgentFailed:a", "AgentFailed:b", "TaskCompleted:c"}; !slices.Equal(events, want) {
			t.Errorf("lifecycle events %v, want %v", events, want)
		}
		l := turn("F1").Lattice
		if l == nil || l.Subtasks[0].Status != "failed" || l.Subtasks[2].Status != "skipped" || l.Subtasks[1].Status != "completed" ||
			!strings.Contains(l.Subtasks[2].Error, `"a"`) {
			t.Errorf("plan record: %+v", l)
		}
	})
	for _, tt := range []struct{ name, turn, want string }{
		{"free text is no plan", "F2", "without calling submit_plan"},
		{"a cycle is refused", "F3", "cycle: a → b → a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requests := len(r.llm.Requests())
			tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": tt.turn, "input": "go"})
			frames := tc.latticeFrames(t, tt.turn, terminalLattice)
			last := frames[len(frames)-1]
			if last.Kind != "session-error" || !strings.Contains(last.Error, tt.want) || deref(last.InputTokens) == 0 {
				t.Errorf("terminal %s: want session-error naming %q, with the coordinator's usage", last.line(), tt.want)
			}
			for _, f := range frames {
				if f.Kind == "coordinator-plan" || f.Kind == "event" {
					t.Errorf("frame %s before a refused plan", f.line())
				}
			}
			if n := len(r.llm.Requests()) - requests; n != 1 {
				t.Errorf("%d model requests, want the coordinator's one", n)
			}
		})
	}
	t.Run("target_agent", func(t *testing.T) {
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "T1", "input": "just you", "target_agent": "w2"})
		frames := tc.latticeFrames(t, "T1", terminalLattice)
		if last := frames[len(frames)-1]; last.Kind != "session-done" || last.Output != "just me" {
			t.Errorf("terminal %s", last.line())
		}
		if tr := turn("T1"); tr.Lattice != nil || tr.AgentID != "w2" {
			t.Errorf("a targeted turn: agent %s, lattice %+v", tr.AgentID, tr.Lattice)
		}
		for _, target := range []string{"planner", "ghost"} {
			tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "T-" + target, "input": "x", "target_agent": target})
			if f := tc.latticeFrames(t, "T-"+target, terminalLattice); !f[0].Rejected || !strings.Contains(f[0].Error, "not a Worker of this lattice session") {
				t.Errorf("target %s: %s", target, f[0].line())
			}
		}
	})
	t.Run("agent dependencies", func(t *testing.T) {
		if resp := r.do(t, "PATCH", "/api/agents/w2", `{"dependencies":["w1"]}`); resp.status != 200 {
			t.Fatalf("PATCH w2: %d %s", resp.status, resp.body)
		}
		defer r.do(t, "PATCH", "/api/agents/w2", `{"dependencies":[]}`)
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "D1", "input": "go"})
		var order []string
		for _, f := range tc.latticeFrames(t, "D1", terminalLattice) {
			if f.Kind == "event" {
				order = append(order, f.Type+":"+f.Task)
			}
		}
		if want := []string{"AgentActivated:a", "TaskCompleted:a", "AgentActivated:b", "TaskCompleted:b"}; !slices.Equal(order, want) {
			t.Errorf("lifecycle %v, want %v: w2 activates after w1's TaskCompleted", order, want)
		}
	})
	t.Run("stop", func(t *testing.T) {
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "S1", "input": "go"})
		var w1, w2 bool
		tc.latticeFrames(t, "S1", func(f latticeFrame) bool {
			w1, w2 = w1 || f.Kind == "token" && f.Agent == "w1", w2 || f.Kind == "token" && f.Agent == "w2"
			return w1 && w2
		})
		tc.send(t, map[string]any{"cmd": "session-stop", "id": id, "turn_id": "S1"})
		frames := tc.latticeFrames(t, "S1", terminalLattice)
		if last := frames[len(frames)-1]; last.Kind != "session-cancelled" {
			t.Errorf("terminal %s", last.line())
		}
		var cancelled []string
		for _, f := range frames[:len(frames)-1] {
			if f.Kind != "event" || f.Type != "AgentCancelled" {
				t.Errorf("frame after the stop: %s", f.line())
			}
			cancelled = append(cancelled, f.Agent+":"+f.Task)
		}
		slices.Sort(cancelled)
		if !slices.Equal(cancelled, []string{"w1:a", "w2:c"}) {
			t.Errorf("cancelled %v, want both running Workers", cancelled)
		}
		for _, st := range turn("S1").Lattice.Subtasks {
			if st.Status != "cancelled" {
				t.Errorf("subtask %s after a stop: %s", st.ID, st.Status)
			}
		}
	})
	t.Run("execute", func(t *testing.T) {
		resp := r.do(t, post, "/api/sessions/"+id+"/execute", `{"input":"go"}`)
		var out struct {
			TurnID      string `json:"turn_id"`
			Output      string `json:"output"`
			InputTokens int    `json:"input_tokens"`
		}
		if resp.status != 200 || json.Unmarshal(resp.body, &out) != nil || out.Output != "executed" || out.InputTokens != 6 {
			t.Fatalf("execute: %d %s", resp.status, resp.body)
		}
		if l := turn(out.TurnID).Lattice; l == nil || l.Subtasks[0].Output.String() != "a via execute" {
			t.Errorf("the executed turn's plan: %+v", l)
		}
	})
}
