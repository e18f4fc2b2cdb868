package daemon

import (
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal/events"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// TestOutsideAgentAlone runs the real Claude Code where no Session is: a
// stateful execute and an Automation's agent node each run it in a
// sandbox of their own, its command approved, its usage answered, and
// remove that sandbox when they end.
func TestOutsideAgentAlone(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		// The execute: a command, then the answer.
		{Steps: []fakellm.Step{
			fakellm.ToolCall("toolu_x", "Bash", `{"command":"echo scr$((6*7))atch > note.txt && cat note.txt","description":"write a note"}`), fakellm.Usage(50, 10, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("the note says scratch"), fakellm.Usage(70, 6, 0)}},
		// The Automation's node.
		{Steps: []fakellm.Step{fakellm.Text("reviewed: fine"), fakellm.Usage(30, 4, 0)}},
	}}
	r := turnDaemon(t, config.KindAnthropic, script, func(c *config.Config) {
		t.Setenv(testRuntimeKeyEnv, outsideSecret)
		c.Agents = append(c.Agents, config.Agent{ID: "claude", Name: "Claude Code", Kind: "acp", ACP: &config.ACP{Preset: "claude-code"}, Provider: "fake", Model: "m1"})
	}, sharedAgents(t, "claude-code"))
	approveAll(t, r.srv)
	before := len(containerdtest.ManagedContainers(t, r.cl))

	resp := r.do(t, post, "/api/agents/claude/execute", `{"input":"write a note and read it"}`)
	if resp.status != 200 || !strings.Contains(string(resp.body), `"output":"the note says scratch"`) ||
		!strings.Contains(string(resp.body), `"input_tokens":120`) || !strings.Contains(string(resp.body), `"token_usage_known":true`) {
		t.Fatalf("execute: %d %s", resp.status, resp.body)
	}
	// The command ran in the sandbox: its output (not its text) reached
	// the model.
	if reqs := r.llm.Requests(); len(reqs) < 2 || !strings.Contains(string(reqs[1].Body), "scr42atch") {
		t.Errorf("the command's output never reached the model")
	}
	if n := len(containerdtest.ManagedContainers(t, r.cl)); n != before {
		t.Errorf("the execute left %d sandboxes behind", n-before)
	}

	mustCall(t, r.srv, 201, post, "/api/automations",
		`{"id":"review","name":"Review","trigger":{"kind":"manual"},"nodes":[{"id":"n","kind":"agent","agent_id":"claude","input":"Review: {{trigger}}"}]}`)
	if resp := r.do(t, post, "/api/workflows/review/execute", `{"input":"the change"}`); resp.status != 200 ||
		!strings.Contains(string(resp.body), `"output":"reviewed: fine"`) || !strings.Contains(string(resp.body), `"completed":true`) {
		t.Fatalf("workflow execute: %d %s", resp.status, resp.body)
	}
	if n := len(containerdtest.ManagedContainers(t, r.cl)); n != before {
		t.Errorf("the Automation left %d sandboxes behind", n-before)
	}
	for _, q := range r.llm.Requests() {
		if q.Header.Get("X-Api-Key") != outsideSecret {
			t.Errorf("a model call reached the provider with key %q", q.Header.Get("X-Api-Key"))
		}
	}
}

// TestOutsideAgentInstallFails: an outside Agent whose pinned package npm
// cannot install fails its Session's environment, npm's own words as the
// evidence, and never hangs the preparation.
func TestOutsideAgentInstallFails(t *testing.T) {
	r := turnDaemon(t, config.KindAnthropic, fakellm.Script{}, func(c *config.Config) {
		c.Agents = append(c.Agents, config.Agent{ID: "ghost", Name: "Ghost", Kind: "acp",
			ACP: &config.ACP{Package: "@lathe-test-no-such-scope/no-such-agent@0.0.1", Command: "no-such-agent", Protocol: "anthropic"}, Provider: "fake", Model: "m1"})
	}, WithAgentsDir(t.TempDir()))
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"ghost"}`).ID
	ss := r.settled(t, id)
	if ss.Environment.State != events.EnvFailed || ss.Environment.Evidence == nil ||
		!strings.Contains(ss.Environment.Evidence.Error, "install the outside agent ghost") || !strings.Contains(ss.Environment.Evidence.Error, "npm error") {
		t.Fatalf("environment after a failed install: %+v %+v", ss.Environment, ss.Environment.Evidence)
	}
}
