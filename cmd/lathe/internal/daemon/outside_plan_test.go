package daemon

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal/events"
	"lathe/runtime/llm/fakellm"
)

// todoWrite is a Claude Code TodoWrite call of the scripted model: Claude
// Code sends it to the client as an ACP plan.
func todoWrite(id string, second string) fakellm.Step {
	return fakellm.ToolCall(id, "TodoWrite", `{"todos":[{"content":"Read the task","status":"completed","activeForm":"Reading the task"},`,
		`{"content":"Write the answer","status":"`+second+`","activeForm":"Writing the answer"}]}`)
}

// TestOutsideAgentPlanAndIdentity runs the real Claude Code on a turn
// whose model writes a plan (TodoWrite) and then moves it on: each plan is
// a turn-plan frame and the turn's latest plan in its record, and the
// turn records what ran it, the name and version the agent reported and
// the model, on session-start and in History.
func TestOutsideAgentPlanAndIdentity(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{todoWrite("toolu_p1", "in_progress"), fakellm.Usage(50, 10, 0)}},
		{Steps: []fakellm.Step{todoWrite("toolu_p2", "completed"), fakellm.Usage(60, 10, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("Planned and done."), fakellm.Usage(70, 4, 0)}},
	}}
	r := turnDaemon(t, config.KindAnthropic, script, func(c *config.Config) {
		c.Agents = append(c.Agents, config.Agent{ID: "claude", Name: "Claude Code", Kind: "acp", ACP: &config.ACP{Preset: "claude-code"}, Provider: "fake", Model: "m1"})
	}, sharedAgents(t, "claude-code"))
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"claude"}`).ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "p1", "input": "plan it"})

	type frame struct {
		Kind         string             `json:"kind"`
		TurnID       string             `json:"turn_id"`
		Workflow     string             `json:"workflow"`
		Agent        string             `json:"agent"`
		Model        string             `json:"model"`
		AgentName    string             `json:"agent_name"`
		AgentVersion string             `json:"agent_version"`
		Entries      []events.PlanEntry `json:"entries"`
		Output       string             `json:"output"`
		Error        string             `json:"error"`
	}
	var start *frame
	var plans [][]events.PlanEntry
	ctx := testContext(t, 2*time.Minute)
	for {
		kind, raw := readFrame(t, ctx, tc.c)
		var f frame
		if err := json.Unmarshal(raw, &f); err != nil || f.TurnID != "p1" {
			continue
		}
		if kind == "mcp-approval-required" {
			t.Fatalf("TodoWrite asked for approval: %s", raw)
		}
		switch kind {
		case "session-start":
			start = &f
		case "turn-plan":
			if f.Workflow != id || f.Agent != "claude" {
				t.Errorf("turn-plan frame: %s", raw)
			}
			plans = append(plans, f.Entries)
		}
		if kind == "session-done" || kind == "session-error" || kind == "session-cancelled" {
			if kind != "session-done" || f.Output != "Planned and done." {
				t.Fatalf("the turn ended %s: %s", kind, raw)
			}
			break
		}
	}
	if start == nil || start.Agent != "claude" || start.Model != "m1" || start.AgentName != "@zed-industries/claude-agent-acp" || start.AgentVersion != "0.23.1" {
		t.Errorf("session-start: %+v", start)
	}
	entry := func(content, status string) events.PlanEntry {
		return events.PlanEntry{Content: content, Status: status, Priority: "medium"}
	}
	first := []events.PlanEntry{entry("Read the task", events.PlanCompleted), entry("Write the answer", events.PlanInProgress)}
	second := []events.PlanEntry{entry("Read the task", events.PlanCompleted), entry("Write the answer", events.PlanCompleted)}
	if !reflect.DeepEqual(plans, [][]events.PlanEntry{first, second}) {
		t.Errorf("turn-plan frames: %q", plans)
	}

	var turns struct {
		Turns []struct {
			TurnID       string             `json:"turn_id"`
			AgentID      string             `json:"agent_id"`
			Model        string             `json:"model"`
			AgentName    string             `json:"agent_name"`
			AgentVersion string             `json:"agent_version"`
			Plan         []events.PlanEntry `json:"plan"`
			Steps        []struct {
				Reasoning string `json:"reasoning"`
			} `json:"steps"`
		} `json:"turns"`
	}
	resp := r.do(t, get, "/api/sessions/"+id+"/turns", "")
	if resp.status != 200 || json.Unmarshal(resp.body, &turns) != nil || len(turns.Turns) != 1 {
		t.Fatalf("GET turns: %d %s", resp.status, resp.body)
	}
	tr := turns.Turns[0]
	if tr.AgentID != "claude" || tr.Model != "m1" || tr.AgentName != "@zed-industries/claude-agent-acp" || tr.AgentVersion != "0.23.1" || !reflect.DeepEqual(tr.Plan, second) {
		t.Errorf("the turn's record: %s", resp.body)
	}
}
