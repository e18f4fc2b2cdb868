package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
)

func runsOf(d *Daemon, id string) []projections.AutomationRun { return d.store.AutomationRuns(id) }

// Triggers: a Skill fire starts the on_skill Automation (a second fire
// while its run waits is recorded as skipped) and, through the typed event
// it emits, the on_event one; that one's completion is itself a typed
// event that starts a third. Every node start and end is an `event` frame
// and a message on lathe.automation.<id>.<type>.
func TestAutomationTriggersAndFeeds(t *testing.T) {
	d, srv := newTestDaemon(t, func(c *config.Config) {
		c.NATS.Listen = "127.0.0.1:0"
		c.Skills = []config.Skill{{ID: "triage", Name: "Triage", Emits: []string{"IncidentReported"}}}
	})
	nc, err := nats.Connect(d.NATSURL(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync("lathe.automation.onevent.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 30*time.Second)
	ws := dialWS(t, ctx, srv, nil)
	expectFrame(t, ctx, ws, "ready")
	expectFrame(t, ctx, ws, "snapshot")

	for _, rec := range []string{
		`{"id":"onskill","name":"On skill","trigger":{"kind":"on_skill","skill_id":"triage","input":"paged"},
		  "nodes":[{"id":"ack","kind":"interrupt","input":"ack {{trigger}}?","resume_strategy":"replace"}],"edges":[]}`,
		`{"id":"onevent","name":"On event","trigger":{"kind":"on_event","event":"IncidentReported","input":"incident"},
		  "nodes":[{"id":"say","kind":"tool","tool_id":"lathe__echo","input":"{\"text\": \"saw {{trigger}}\"}"}],"edges":[]}`,
		`{"id":"after","name":"After","trigger":{"kind":"on_event","event":"AutomationCompleted"},
		  "nodes":[{"id":"h","kind":"tool","tool_id":"lathe__sha256","input":"{\"text\": \"x\"}"}],"edges":[]}`,
	} {
		if r := call(t, srv, post, "/api/automations", rec); r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	if r := call(t, srv, post, "/api/automations", `{"id":"bad","name":"B","trigger":{"kind":"on_skill","skill_id":"ghost"},"nodes":[{"id":"a","kind":"tool","tool_id":"lathe__echo"}]}`); r.status != 400 {
		t.Errorf("on_skill of an unknown Skill: %d %s", r.status, r.body)
	}
	if r := call(t, srv, post, "/api/skills/triage/fire", ""); r.status != 200 {
		t.Fatalf("fire: %d %s", r.status, r.body)
	}
	polltest.Until(t, "the on_skill run waits", func() bool {
		runs := runsOf(d, "onskill")
		return len(runs) == 1 && runs[0].State == events.StateWaiting && runs[0].Trigger.Kind == events.TriggerOnSkill
	})
	polltest.Until(t, "the on_event run succeeds", func() bool {
		runs := runsOf(d, "onevent")
		return len(runs) == 1 && runs[0].State == events.StateSucceeded && runs[0].Output.Inline == "saw incident"
	})
	polltest.Until(t, "the completion starts the third", func() bool {
		runs := runsOf(d, "after")
		return len(runs) >= 1 && runs[0].Trigger.Event == "AutomationCompleted"
	})
	// A second fire while the on_skill run waits: skipped, recorded.
	if r := call(t, srv, post, "/api/skills/triage/fire", ""); r.status != 200 {
		t.Fatalf("fire: %d %s", r.status, r.body)
	}
	polltest.Until(t, "the second on_skill firing is skipped", func() bool {
		a, _ := d.store.Automation("onskill")
		return a.Skipped == 1
	})
	if runs := runsOf(d, "onskill"); len(runs) != 1 {
		t.Errorf("on_skill overlapped itself: %d runs", len(runs))
	}
	// A client connecting now finds the waiting run in its snapshot.
	ws2 := dialWS(t, ctx, srv, nil)
	expectFrame(t, ctx, ws2, "ready")
	var snap struct{ Runs []projections.Run }
	if err := json.Unmarshal(expectFrame(t, ctx, ws2, "snapshot"), &snap); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(snap.Runs, func(r projections.Run) bool { return r.Automation == "onskill" })
	if i < 0 || snap.Runs[i].Kind != "workflow" || strings.Join(snap.Runs[i].AwaitingHuman, ",") != "ack" || snap.Runs[i].Status != "waiting" {
		t.Errorf("snapshot runs %+v", snap.Runs)
	}
	if r := call(t, srv, get, "/api/proactive", ""); r.status != 200 || !strings.Contains(string(r.body), `"id":"onskill"`) || !strings.Contains(string(r.body), `"skipped_triggers":1`) {
		t.Errorf("proactive: %d %s", r.status, r.body)
	}

	// NATS: the on_event run's node start, end and completion.
	var subjects []string
	for len(subjects) < 3 {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("NATS after %v: %v", subjects, err)
		}
		var f projections.TypedEvent
		if json.Unmarshal(m.Data, &f) != nil || f.Kind != "event" || f.Automation != "onevent" || f.Workflow == "" {
			t.Errorf("NATS payload %s", m.Data)
		}
		subjects = append(subjects, m.Subject)
	}
	if got := strings.Join(subjects, " "); got != "lathe.automation.onevent.AutomationNodeStarted lathe.automation.onevent.AutomationNodeFinished lathe.automation.onevent.AutomationCompleted" {
		t.Errorf("subjects %s", got)
	}
	// /ws: the same typed events as `event` frames.
	seen := map[string]bool{}
	for !seen["AutomationNodeStarted"] || !seen["AutomationNodeFinished"] || !seen["AutomationCompleted"] {
		_, raw := readFrame(t, ctx, ws)
		var f projections.TypedEvent
		if json.Unmarshal(raw, &f) == nil && f.Kind == "event" && f.Automation == "onevent" {
			seen[f.Type] = true
		}
	}
}

// run-workflow streams a manual Automation and ends with workflow-done, or
// workflow-error with the usage; the execute route waits the same way.
func TestRunWorkflowCommand(t *testing.T) {
	_, srv := newTestDaemon(t, nil)
	ctx := testContext(t, 30*time.Second)
	for _, rec := range []string{
		`{"id":"wf","name":"WF","trigger":{"kind":"manual"},"nodes":[{"id":"a","kind":"tool","tool_id":"lathe__echo","input":"{\"text\": \"got {{trigger}}\"}"}],"edges":[]}`,
		`{"id":"broken","name":"Broken","trigger":{"kind":"manual"},"nodes":[{"id":"m","kind":"map","input":"{{trigger}}","body_node":"b"},{"id":"b","kind":"tool","tool_id":"lathe__echo","input":"{}"}],"edges":[]}`,
	} {
		if r := call(t, srv, post, "/api/automations", rec); r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	ws := dialWS(t, ctx, srv, nil)
	expectFrame(t, ctx, ws, "ready")
	expectFrame(t, ctx, ws, "snapshot")
	send := func(cmd string) {
		if err := ws.Write(ctx, websocket.MessageText, []byte(cmd)); err != nil {
			t.Fatal(err)
		}
	}
	until := func(kind string) map[string]any {
		for {
			k, raw := readFrame(t, ctx, ws)
			if k == kind {
				var m map[string]any
				_ = json.Unmarshal(raw, &m)
				return m
			}
			if k == "workflow-done" || k == "workflow-error" {
				t.Fatalf("got %s, want %s: %s", k, kind, raw)
			}
		}
	}
	send(`{"cmd":"run-workflow","id":"wf","input":"hello"}`)
	done := until("workflow-done")
	if done["output"] != "got hello" || done["completed"] != true || done["token_usage_known"] != true || done["workflow"] == "" {
		t.Errorf("workflow-done %v", done)
	}
	send(`{"cmd":"run-workflow","id":"broken","input":"not json"}`)
	fail := until("workflow-error")
	if !strings.Contains(fail["error"].(string), "not a JSON array") || fail["input_tokens"] != float64(0) || fail["token_usage_known"] != true {
		t.Errorf("workflow-error %v", fail)
	}
	send(`{"cmd":"run-workflow","id":"ghost","input":"x"}`)
	if f := until("workflow-error"); !strings.Contains(f["error"].(string), "no workflow") {
		t.Errorf("unknown workflow: %v", f)
	}
	if r := call(t, srv, post, "/api/workflows/broken/execute", `{"input":"[1"}`); r.status != 502 || !strings.Contains(string(r.body), `"completed":false`) || !strings.Contains(string(r.body), `"token_usage_known":true`) {
		t.Errorf("execute a failing workflow: %d %s", r.status, r.body)
	}
	if r := call(t, srv, post, "/api/workflows/wf/execute", `{"input":"x"}`); r.status != 200 || !strings.Contains(string(r.body), `"output":"got x","completed":true`) {
		t.Errorf("execute: %d %s", r.status, r.body)
	}
}

// A schedule survives a restart and does not fire its missed runs in a
// burst: after a stop of several intervals, the restart fires one
// catch-up run, and the next one only an interval later.
func TestScheduleCatchUpOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	start, stop := restartable(t, cfg, dir)
	d := start()
	sched := events.Automation{ID: "tick", Name: "Tick", Enabled: true, Trigger: events.Trigger{Kind: events.TriggerSchedule, Every: "1s", Input: "t"},
		Nodes: []events.Node{{ID: "a", Kind: events.NodeTool, ToolID: "lathe__echo", Input: `{"text": "{{trigger}}"}`}}}
	if _, err := d.cmds.Automations.CreateAutomation(context.Background(), sched); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "a scheduled run ends", func() bool {
		runs := runsOf(d, "tick")
		return len(runs) >= 1 && runs[0].EndedAt != nil
	})
	before := len(runsOf(d, "tick"))
	stop(d)
	stopped := time.Now()
	polltest.Until(t, "four intervals pass", func() bool { return time.Since(stopped) > 4*time.Second })

	d = start()
	defer stop(d)
	restarted := time.Now()
	polltest.Until(t, "the window after the restart passes", func() bool { return time.Since(restarted) > 900*time.Millisecond })
	var caught int
	for _, r := range runsOf(d, "tick") {
		if r.StartedAt.After(restarted.Add(-100*time.Millisecond)) && r.StartedAt.Before(restarted.Add(900*time.Millisecond)) {
			caught++
		}
	}
	if caught != 1 {
		for _, r := range runsOf(d, "tick") {
			t.Logf("run %s at %s (restart %s)", r.RunID, r.StartedAt, restarted)
		}
		t.Errorf("%d runs right after the restart (had %d before), want one catch-up", caught, before)
	}
	if next := d.cmds.Automations.NextRun("tick"); next == nil {
		t.Errorf("no next run")
	}
}

// Agent and MCP tool nodes against real parts: an agent node runs the
// Agent (the scripted model server) outside any Session, a tool node calls
// a real MCP server's tool (listed in GET /api/tools), and a model failure
// mid-run fails the run with the usage paid so far, without blocking the
// next run.
func TestAutomationAgentAndMCPNodes(t *testing.T) {
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	bin := mcpTestServer(t)
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "mcp__t__echo", `{"text":"looked"}`), fakellm.Usage(4, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("LGTM, ship"), fakellm.Usage(6, 3, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("first"), fakellm.Usage(6, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Fail(503)}},
	}})
	defer fake.Close()
	d, srv := newTestDaemon(t, func(c *config.Config) {
		runtimeConfig(config.KindOpenAI, fake.URL())(c)
		c.MCP.Servers = []config.MCPServer{{Name: "t", Transport: "stdio", Command: bin, Approval: "never"}}
	})
	polltest.Until(t, "the MCP server connects", func() bool {
		return strings.Contains(string(call(t, srv, get, "/api/tools", "").body), `"mcp__t__echo"`)
	})
	if r := call(t, srv, get, "/api/tools", ""); !strings.Contains(string(r.body), `"lathe__echo"`) {
		t.Errorf("tools: %s", r.body)
	}
	for _, rec := range []string{
		`{"id":"review","name":"Review","trigger":{"kind":"manual"},
		  "nodes":[{"id":"ask","kind":"agent","agent_id":"a","input":"Review: {{trigger}}"},
		           {"id":"route","kind":"conditional","input":"{{node:ask}}","branches":[{"name":"ok","when":"matches","value":"^LGTM"}],"default":"fix"},
		           {"id":"say","kind":"tool","tool_id":"mcp__t__echo","input":"{\"text\": \"approved: {{node:ask}}\"}"},
		           {"id":"fix","kind":"tool","tool_id":"lathe__echo","input":"{\"text\": \"fix it\"}"}],
		  "edges":[{"from":"ask","to":"route"},{"from":"route","to":"say","branch":"ok"},{"from":"route","to":"fix","branch":"default"}]}`,
		`{"id":"twice","name":"Twice","trigger":{"kind":"manual"},
		  "nodes":[{"id":"one","kind":"agent","agent_id":"a","input":"one"},{"id":"two","kind":"agent","agent_id":"a","input":"two {{node:one}}"}],
		  "edges":[{"from":"one","to":"two"}]}`,
	} {
		if r := call(t, srv, post, "/api/automations", rec); r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	ctx := testContext(t, 30*time.Second)
	ws := dialWS(t, ctx, srv, nil)
	expectFrame(t, ctx, ws, "ready")
	expectFrame(t, ctx, ws, "snapshot")
	r := call(t, srv, post, "/api/workflows/review/execute", `{"input":"the diff"}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"output":"approved: LGTM, ship","completed":true,"input_tokens":10,"output_tokens":4`) {
		t.Fatalf("review: %d %s", r.status, r.body)
	}
	run := runsOf(d, "review")[0]
	if run.Nodes["fix"].State != events.StateSkipped || run.Nodes["route"].Branch != "ok" || run.Nodes["ask"].Usage == nil || run.Nodes["ask"].Usage.InputTokens != 10 {
		t.Errorf("review nodes: fix %+v route %+v ask %+v", run.Nodes["fix"], run.Nodes["route"], run.Nodes["ask"])
	}
	// The agent node streamed: its tool call (recorded on the run) and its
	// text, with the run key in workflow and the node as turn_id.
	var streamed string
	var calls []string
	for !strings.Contains(streamed, "LGTM, ship") {
		kind, raw := readFrame(t, ctx, ws)
		var f struct {
			Workflow, Agent, Delta, Name, Phase string
			TurnID                              string  `json:"turn_id"`
			Result                              *string `json:"result"`
		}
		_ = json.Unmarshal(raw, &f)
		if f.Workflow != run.RunID || f.Agent != "a" || f.TurnID != "ask" {
			continue
		}
		switch kind {
		case "token":
			streamed += f.Delta
		case "tool-call":
			calls = append(calls, f.Name+" "+f.Phase)
			if f.Phase == "result" && (f.Result == nil || !strings.Contains(*f.Result, "looked")) {
				t.Errorf("tool-call result %v", f.Result)
			}
		}
	}
	if strings.Join(calls, ", ") != "mcp__t__echo start, mcp__t__echo result" {
		t.Errorf("tool-call frames: %v", calls)
	}
	if !strings.Contains(string(fake.Requests()[0].Body), "Review: the diff") {
		t.Errorf("the agent's request: %s", fake.Requests()[0].Body)
	}
	r = call(t, srv, post, "/api/workflows/twice/execute", `{"input":"x"}`)
	if r.status != 502 || !strings.Contains(string(r.body), `"completed":false`) || !strings.Contains(string(r.body), `"input_tokens":6,"output_tokens":2`) {
		t.Fatalf("a model failure mid-run: %d %s", r.status, r.body)
	}
	failed := runsOf(d, "twice")[0]
	if failed.State != events.StateFailed || failed.Nodes["one"].State != events.StateSucceeded || failed.Nodes["two"].State != events.StateFailed || failed.Error == "" {
		t.Errorf("failed run: %+v", failed)
	}
	if r := call(t, srv, post, "/api/workflows/review/execute", `{"input":"again"}`); r.status == 200 {
		t.Errorf("the script is spent, so the next run fails: %d %s", r.status, r.body)
	}
}

// The frames a run-workflow client gets, from the command to workflow-done:
// each run event's `event` frame, the typed node and run events with the run
// key in workflow, and the terminal frame (testdata/automation_flow.golden).
func TestRunWorkflowFrameSequence(t *testing.T) {
	_, srv := newTestDaemon(t, nil)
	ctx := testContext(t, 30*time.Second)
	rec := `{"id":"flow","name":"Flow","trigger":{"kind":"manual"},
	  "nodes":[{"id":"route","kind":"conditional","input":"{{trigger}}","branches":[{"name":"go","when":"contains","value":"go"}],"default":"stop"},
	           {"id":"say","kind":"tool","tool_id":"lathe__echo","input":"{\"text\": \"going: {{trigger}}\"}"},
	           {"id":"halt","kind":"tool","tool_id":"lathe__echo","input":"{\"text\": \"halted\"}"}],
	  "edges":[{"from":"route","to":"say","branch":"go"},{"from":"route","to":"halt","branch":"stop"}]}`
	if r := call(t, srv, post, "/api/automations", rec); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	ws := dialWS(t, ctx, srv, nil)
	expectFrame(t, ctx, ws, "ready")
	expectFrame(t, ctx, ws, "snapshot")
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"cmd":"run-workflow","id":"flow","input":"let's go"}`)); err != nil {
		t.Fatal(err)
	}
	n := &normaliser{dir: t.TempDir(), ulid: map[string]string{}}
	var got []byte
	for {
		kind, raw := readFrame(t, ctx, ws)
		got = append(got, n.frame(t, raw)...)
		if kind == "workflow-done" || kind == "workflow-error" {
			break
		}
	}
	golden := filepath.Join("testdata", "automation_flow.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("frame sequence differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
}

// An event that committed while no trigger follower ran (a stop between
// its commit and its firing) fires its Automation at the next start, once:
// the firing records the event's seq, and a later start does not fire it
// again.
func TestEventTriggerCatchUpOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Skills = []config.Skill{{ID: "triage", Name: "Triage", Emits: []string{"IncidentReported"}}}
	start, stop := restartable(t, cfg, dir)
	d := start()
	for _, a := range []events.Automation{
		{ID: "onskill", Name: "S", Enabled: true, Trigger: events.Trigger{Kind: events.TriggerOnSkill, SkillID: "triage"},
			Nodes: []events.Node{{ID: "a", Kind: events.NodeTool, ToolID: "lathe__echo", Input: `{"text": "skill"}`}}},
		{ID: "onevent", Name: "E", Enabled: true, Trigger: events.Trigger{Kind: events.TriggerOnEvent, Event: "IncidentReported", Input: "x"},
			Nodes: []events.Node{{ID: "a", Kind: events.NodeTool, ToolID: "lathe__echo", Input: `{"text": "event"}`}}},
	} {
		if _, err := d.cmds.Automations.CreateAutomation(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	stop(d)
	// The Skill fires while no daemon follows: its event is in the journal only.
	j, err := journal.Open(filepath.Join(dir, "journal.db"), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(context.Background(), []journal.Event{events.New("triage", events.SkillFired{Name: "Triage", Emits: []string{"IncidentReported"}})}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	d = start()
	polltest.Until(t, "both Automations fire once at the start", func() bool {
		a, b := runsOf(d, "onskill"), runsOf(d, "onevent")
		return len(a) == 1 && len(b) == 1 && a[0].EndedAt != nil && b[0].EndedAt != nil
	})
	stop(d)
	d = start()
	defer stop(d)
	// A later start fires nothing again: a live fire after it (handled
	// after the follower's catch-up) brings each to exactly two runs.
	if _, err := d.cmds.Skills.Fire(context.Background(), "triage"); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "the live fire's runs end", func() bool {
		a, b := runsOf(d, "onskill"), runsOf(d, "onevent")
		return len(a) >= 2 && len(b) >= 2 && a[0].EndedAt != nil && b[0].EndedAt != nil
	})
	if a, b := len(runsOf(d, "onskill")), len(runsOf(d, "onevent")); a != 2 || b != 2 {
		t.Errorf("runs after a restart and a live fire: onskill %d, onevent %d; want 2 each", a, b)
	}
}

// Deleting an Automation whose run is under way (its MCP tool node parked
// for an operator's approval) cancels the run first: the approval closes as
// cancelled, the tool is never called, and the Automation is gone.
func TestDeleteCancelsARunningRun(t *testing.T) {
	bin := mcpTestServer(t)
	calls := filepath.Join(t.TempDir(), "calls.log")
	d, srv := newTestDaemon(t, func(c *config.Config) {
		c.MCP.Servers = []config.MCPServer{{Name: "t", Transport: "stdio", Command: bin, Env: map[string]string{"LATHE_MCPTEST_LOG": calls}}}
	})
	polltest.Until(t, "the MCP server connects", func() bool {
		return strings.Contains(string(call(t, srv, get, "/api/tools", "").body), `"mcp__t__echo"`)
	})
	rec := `{"id":"park","name":"Park","trigger":{"kind":"manual"},"nodes":[{"id":"call","kind":"tool","tool_id":"mcp__t__echo","input":"{\"text\": \"hi\"}"}],"edges":[]}`
	if r := call(t, srv, post, "/api/automations", rec); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := call(t, srv, post, "/api/automations/park/run", ""); r.status != 200 {
		t.Fatalf("run: %d %s", r.status, r.body)
	}
	polltest.Until(t, "the tool call is parked", func() bool { return len(d.store.PendingApprovals()) == 1 })
	if runs := runsOf(d, "park"); len(runs) != 1 || runs[0].State != events.StateRunning || runs[0].Nodes["call"].State != events.StateRunning {
		t.Fatalf("before the delete: %+v", runs)
	}
	runID := runsOf(d, "park")[0].RunID
	if r := call(t, srv, del, "/api/automations/park", ""); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := call(t, srv, get, "/api/events/journal?aggregate="+runID, ""); !strings.Contains(string(r.body), `"type":"automation-run-finished"`) || !strings.Contains(string(r.body), `"state":"cancelled"`) {
		t.Errorf("the run's record: %s", r.body)
	}
	if n := len(d.store.PendingApprovals()); n != 0 {
		t.Errorf("%d approvals still pending", n)
	}
	if r := call(t, srv, get, "/api/automations/park", ""); r.status != 404 {
		t.Errorf("after the delete: %d", r.status)
	}
	if len(d.store.ActiveAutomationRuns("")) != 0 {
		t.Errorf("active runs left")
	}
	if b, _ := os.ReadFile(calls); len(b) != 0 {
		t.Errorf("the MCP tool was called: %s", b)
	}
}

// restartable starts and stops daemons on one data dir, without sandboxes,
// for tests of what a restart keeps.
func restartable(tb testing.TB, cfg config.Config, dir string) (start func() *Daemon, stop func(*Daemon)) {
	log := slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	start = func() *Daemon {
		d, err := Start(testContext(tb, time.Minute), cfg, dir, log, "test", WithoutSandbox())
		if err != nil {
			tb.Fatal(err)
		}
		return d
	}
	stop = func(d *Daemon) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
		d.Close()
	}
	return start, stop
}
