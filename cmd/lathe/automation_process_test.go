package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"lathe/projections"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
)

// procAutomationRun reads one run.
func procAutomationRun(t *testing.T, d *daemonProc, automation, run string) projections.AutomationRun {
	t.Helper()
	status, body := procDo(t, http.MethodGet, d.url+"/api/automations/"+automation+"/runs/"+run, "")
	var r projections.AutomationRun
	if status != 200 || json.Unmarshal(body, &r) != nil {
		t.Fatalf("GET run %s: %d %s", run, status, body)
	}
	return r
}

// procAwaitRun polls a run until ok holds for it.
func procAwaitRun(t *testing.T, d *daemonProc, automation, run string, ok func(projections.AutomationRun) bool) projections.AutomationRun {
	t.Helper()
	var r projections.AutomationRun
	polltest.Check(t, func() error {
		if r = procAutomationRun(t, d, automation, run); !ok(r) {
			return fmt.Errorf("run %s never got there: %+v\nstderr:\n%s", run, r, d.stderr.String())
		}
		return nil
	}, polltest.Within(30*time.Second))
	return r
}

func procRunAutomation(t *testing.T, d *daemonProc, id, input string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"input": input})
	status, body := procDo(t, http.MethodPost, d.url+"/api/automations/"+id+"/run", string(b))
	var res struct {
		OK    bool   `json:"ok"`
		ID    string `json:"id"`
		RunID string `json:"run_id"`
	}
	if status != 200 || json.Unmarshal(body, &res) != nil || !res.OK || res.ID != id || res.RunID == "" {
		t.Fatalf("run %s: %d %s", id, status, body)
	}
	return res.RunID
}

// TestAutomationRunsResumeAcrossKill9 kills the daemon while an agent node
// is mid-flight and while another run waits at an interrupt. After the
// restart the running run resumes from its last completed node (the first
// agent node is not asked again), the node that was mid-flight runs again
// exactly once, and the waiting run is still waiting, listed and
// resumable. The scripted model server counts the requests.
func TestAutomationRunsResumeAcrossKill9(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Text("plan: ship"), fakellm.Usage(5, 3, 0)}},
		{Steps: []fakellm.Step{fakellm.Stall(release)}}, // the daemon dies here
		{Steps: []fakellm.Step{fakellm.Text("reviewed: ship"), fakellm.Usage(7, 2, 0)}},
	}})
	t.Cleanup(fake.Close)
	cfg := turnProcConfig(t, fake, "")
	data := t.TempDir()
	d := procStart(t, data, "--config", cfg)

	for _, rec := range []string{
		`{"id":"crash","name":"Crash","trigger":{"kind":"manual"},
		  "nodes":[{"id":"plan","kind":"agent","agent_id":"coder","input":"plan {{trigger}}"},
		           {"id":"review","kind":"agent","agent_id":"coder","input":"review {{node:plan}}"},
		           {"id":"out","kind":"tool","tool_id":"lathe__echo","input":"{\"text\": \"done: {{node:review}}\"}"}],
		  "edges":[{"from":"plan","to":"review"},{"from":"review","to":"out"}]}`,
		`{"id":"wait","name":"Wait","trigger":{"kind":"manual"},
		  "nodes":[{"id":"first","kind":"interrupt","input":"first {{trigger}}","resume_strategy":"replace"},
		           {"id":"second","kind":"interrupt","input":"second {{node:first}}","resume_strategy":"append"}],
		  "edges":[{"from":"first","to":"second"}]}`,
	} {
		if status, body := procDo(t, http.MethodPost, d.url+"/api/automations", rec); status != 201 {
			t.Fatalf("create: %d %s", status, body)
		}
	}
	waiting := procRunAutomation(t, d, "wait", "w")
	procAwaitRun(t, d, "wait", waiting, func(r projections.AutomationRun) bool { return r.State == "waiting" })
	crash := procRunAutomation(t, d, "crash", "x")
	polltest.Until(t, "the second agent node to ask the model", func() bool { return len(fake.Requests()) >= 2 }, polltest.Within(30*time.Second))
	if r := procAutomationRun(t, d, "crash", crash); r.Nodes["plan"].State != "succeeded" || r.Nodes["review"].State != "running" {
		t.Fatalf("before the kill: %+v %+v", r.Nodes["plan"], r.Nodes["review"])
	}
	d.kill(t)

	d = procStart(t, data, "--config", cfg)
	r := procAwaitRun(t, d, "crash", crash, func(r projections.AutomationRun) bool { return r.EndedAt != nil })
	if r.State != "succeeded" || r.Output.Inline != "done: reviewed: ship" {
		t.Fatalf("after the restart: %s %q %s", r.State, r.Output.Inline, r.Error)
	}
	if n := len(fake.Requests()); n != 3 {
		t.Errorf("the model was asked %d times, want 3 (plan once, review twice: before and after the kill)", n)
	}
	if !strings.Contains(string(fake.Requests()[2].Body), "review plan: ship") {
		t.Errorf("the rerun of review was not given plan's durable output: %s", fake.Requests()[2].Body)
	}
	starts := map[string]int{}
	for _, env := range procEvents(t, d, crash) {
		if env.Type == "automation-node-started" || env.Type == "automation-node-finished" {
			var p struct{ Node string }
			_ = json.Unmarshal(env.Data, &p)
			starts[env.Type+" "+p.Node]++
		}
	}
	if starts["automation-node-started plan"] != 1 || starts["automation-node-started review"] != 2 || starts["automation-node-finished review"] != 1 || starts["automation-node-finished plan"] != 1 {
		t.Errorf("node records: %v", starts)
	}
	if !r.Usage.TokenUsageKnown || r.Usage.InputTokens != 12 || r.Usage.OutputTokens != 5 {
		t.Errorf("usage %+v, want the two finished inferences", r.Usage)
	}

	// The waiting run is still waiting, listed, and resumable twice.
	w := procAutomationRun(t, d, "wait", waiting)
	if w.State != "waiting" {
		t.Fatalf("waiting run after the restart: %s", w.State)
	}
	status, body := procDo(t, http.MethodGet, d.url+"/api/interrupts", "")
	if status != 200 || !strings.Contains(string(body), `"node_id":"first"`) || !strings.Contains(string(body), `"prompt":"first w"`) {
		t.Fatalf("interrupts after the restart: %d %s", status, body)
	}
	resume := func(node, body string) {
		t.Helper()
		if status, b := procDo(t, http.MethodPost, d.url+"/api/automations/wait/runs/"+waiting+"/nodes/"+node+"/resume", body); status != 200 {
			t.Fatalf("resume %s: %d %s", node, status, b)
		}
	}
	resume("first", `{"value":"go"}`)
	procAwaitRun(t, d, "wait", waiting, func(r projections.AutomationRun) bool {
		return r.Nodes["second"].State == "waiting" && r.State == "waiting"
	})
	if status, _ := procDo(t, http.MethodPost, d.url+"/api/automations/wait/runs/"+waiting+"/nodes/first/resume", `{"value":"again"}`); status != 409 {
		t.Errorf("a second resume of first: %d, want 409", status)
	}
	resume("second", `{"value":"ok"}`)
	w = procAwaitRun(t, d, "wait", waiting, func(r projections.AutomationRun) bool { return r.EndedAt != nil })
	if w.State != "succeeded" || w.Output.Inline != "second go\nok" {
		t.Errorf("the waiting run's end: %s %q", w.State, w.Output.Inline)
	}
}
