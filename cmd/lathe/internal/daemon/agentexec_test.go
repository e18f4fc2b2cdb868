package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"lathe/commands/agents"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal/events"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/sandboxtest"
)

// A stateful execute (commands.Agents.Execute, which the execute route
// calls) advertises the Agent's MCP tools and runs the tool loop, and is
// journaled: an effect intent, then agent-executed with the settlement. A
// stateless execute stays one inference with no tools.
func TestAgentExecuteRunsTheToolLoop(t *testing.T) {
	bin := mcpTestServer(t)
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "mcp__t__echo", `{"text":"hello over mcp"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("the server said it"), fakellm.Usage(20, 4, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("alone"), fakellm.Usage(5, 2, 0)}},
	}})
	defer fake.Close()
	d, srv := newTestDaemon(t, func(c *config.Config) {
		runtimeConfig(config.KindOpenAI, fake.URL())(c)
		c.MCP.Servers = []config.MCPServer{{Name: "t", Transport: "stdio", Command: bin, Approval: "never"}}
	})
	sandboxtest.WaitFor(t, 30*time.Second, func() bool {
		return strings.Contains(string(call(t, srv, get, "/api/mcp/servers", "").body), `"status":"connected"`)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, err := d.cmds.Agents.Execute(ctx, "a", agents.ExecuteRequest{Input: "ask the server"})
	if err != nil || res.Output != "the server said it" || res.Stateless || res.InputTokens != 30 || res.OutputTokens != 9 || !res.TokenUsageKnown {
		t.Fatalf("stateful execute: %+v %v", res, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model saw %d requests, want 2 (the call, then its result)", len(reqs))
	}
	if _, _, tools := wireMessages(t, config.KindOpenAI, reqs[0]); !tools || !strings.Contains(string(reqs[0].Body), `"mcp__t__echo"`) {
		t.Errorf("the stateful execute advertised no MCP tools: %s", reqs[0].Body)
	}
	if !strings.Contains(string(reqs[1].Body), "hello over mcp") {
		t.Errorf("the tool's result did not reach the model: %s", reqs[1].Body)
	}

	res, err = d.cmds.Agents.Execute(ctx, "a", agents.ExecuteRequest{Input: "solo", Stateless: true})
	if err != nil || res.Output != "alone" || !res.Stateless {
		t.Fatalf("stateless execute: %+v %v", res, err)
	}
	if _, _, tools := wireMessages(t, config.KindOpenAI, fake.Requests()[2]); tools {
		t.Errorf("the stateless execute advertised tools")
	}

	// Journaled: two intents, each settled, and two agent-executed.
	counts := map[string]int{}
	var executed []events.AgentExecuted
	err = d.journal.Scan(ctx, 0, 0, func(_ uint64, raw []byte) error {
		env, p, err := events.DecodeStored(raw)
		if err != nil {
			return err
		}
		counts[env.Type]++
		if e, ok := p.(events.AgentExecuted); ok {
			executed = append(executed, e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if counts["effect-intended"] != 2 || counts["effect-settled"] != 2 || len(executed) != 2 {
		t.Fatalf("journal: %v", counts)
	}
	if e := executed[0]; e.Input.Inline != "ask the server" || e.Output.Inline != "the server said it" || e.Calls != 1 || e.Stateless || e.Intent == "" {
		t.Errorf("first agent-executed: %+v", e)
	}
	if e := executed[1]; !e.Stateless || e.Calls != 0 || e.Output.Inline != "alone" {
		t.Errorf("second agent-executed: %+v", e)
	}
}
