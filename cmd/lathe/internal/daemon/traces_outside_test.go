package daemon

import (
	"encoding/hex"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
)

// TestTelemetryOutsideSessions runs a Chat turn, an Automation run whose
// agent node and an Agent execute that each make an MCP tool call, with
// telemetry.otlp_endpoint set, and checks what a real OTLP receiver gets (a trace each: the tree,
// the names, the gen_ai.* attributes, the journal seq of the start), the
// time to first token /metrics reports by scope, and their tokens and
// cost in /metrics' token and cost series.
func TestTelemetryOutsideSessions(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	rc := newOTLPReceiver(t)
	bin := mcpTestServer(t)
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "mcp__t__echo", `{"text":"one"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("chat reply"), fakellm.Usage(20, 6, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c2", "mcp__t__echo", `{"text":"two"}`), fakellm.Usage(30, 7, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("LGTM"), fakellm.Usage(40, 8, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c3", "mcp__t__echo", `{"text":"three"}`), fakellm.Usage(1, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("echoed"), fakellm.Usage(1, 1, 0)}},
	}})
	defer fake.Close()
	d, srv := newTestDaemon(t, func(c *config.Config) {
		runtimeConfig(config.KindOpenAI, fake.URL())(c)
		c.MCP.Servers = []config.MCPServer{{Name: "t", Transport: "stdio", Command: bin, Approval: "never"}}
		c.Telemetry.OTLPEndpoint = rc.srv.URL
	})
	polltest.Until(t, "the MCP server connects", func() bool {
		return strings.Contains(string(call(t, srv, get, "/api/tools", "").body), `"mcp__t__echo"`)
	})

	chat := mustCall(t, srv, 201, post, "/api/chat", `{"agent_id":"a"}`)["id"].(string)
	cc := openChatConn(t, srv)
	cc.send(t, map[string]any{"cmd": "chat-turn", "chat_id": chat, "content": "echo one"})
	if fs := cc.terminal(t); fs[len(fs)-1].Kind != "chat-done" {
		t.Fatalf("chat turn: %+v", fs[len(fs)-1])
	}
	if r := call(t, srv, post, "/api/automations",
		`{"id":"review","name":"Review","trigger":{"kind":"manual"},"nodes":[{"id":"ask","kind":"agent","agent_id":"a","input":"Review: {{trigger}}"}]}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := call(t, srv, post, "/api/workflows/review/execute", `{"input":"the diff"}`); r.status != 200 || !strings.Contains(string(r.body), `"output":"LGTM"`) {
		t.Fatalf("review: %d %s", r.status, r.body)
	}
	runs := runsOf(d, "review")
	if len(runs) != 1 {
		t.Fatalf("runs: %v", runs)
	}

	if r := call(t, srv, post, "/api/agents/a/execute", `{"input":"echo three"}`); r.status != 200 || !strings.Contains(string(r.body), `"output":"echoed"`) {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}

	// chat: invoke_agent, 2 chat, 1 execute_tool; the run: automation.run,
	// invoke_agent, 2 chat, 1 execute_tool; the execute: as the chat.
	spans := rc.await(t, 13)
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[hex.EncodeToString(s.SpanId)] = s
	}
	trees := map[string][]string{} // conversation → its spans, as "name<parent"
	roots := map[string]*tracepb.Span{}
	for _, s := range spans {
		a := attrs(s)
		conv := a["gen_ai.conversation.id"].GetStringValue()
		parent := "-"
		if p := byID[hex.EncodeToString(s.ParentSpanId)]; p != nil {
			parent = p.Name
			if hex.EncodeToString(p.TraceId) != hex.EncodeToString(s.TraceId) {
				t.Errorf("%s is in another trace than its parent", s.Name)
			}
		} else {
			roots[conv] = s
		}
		trees[conv] = append(trees[conv], s.Name+"<"+parent)
		switch op := a["gen_ai.operation.name"].GetStringValue(); op {
		case "chat":
			if a["gen_ai.request.model"].GetStringValue() != "m1" || a["gen_ai.usage.input_tokens"].GetIntValue() == 0 ||
				a["gen_ai.provider.name"].GetStringValue() != config.KindOpenAI || a["gen_ai.response.finish_reasons"] == nil {
				t.Errorf("chat span of %s: %v", conv, a)
			}
		case "execute_tool":
			if a["gen_ai.tool.name"].GetStringValue() != "mcp__t__echo" || a["lathe.mcp.server"].GetStringValue() != "t" {
				t.Errorf("tool span of %s: %v", conv, a)
			}
		}
		if s.EndTimeUnixNano < s.StartTimeUnixNano {
			t.Errorf("%s ends before it starts", s.Name)
		}
	}
	execute := "" // the execute's effect intent
	for conv, root := range roots {
		if attrs(root)["lathe.scope"].GetStringValue() == "agent" {
			execute = conv
		}
	}
	for conv, want := range map[string][]string{
		execute:       {"chat m1<invoke_agent A", "chat m1<invoke_agent A", "execute_tool mcp__t__echo<invoke_agent A", "invoke_agent A<-"},
		chat:          {"chat m1<invoke_agent A", "chat m1<invoke_agent A", "execute_tool mcp__t__echo<invoke_agent A", "invoke_agent A<-"},
		runs[0].RunID: {"automation.run review<-", "chat m1<invoke_agent A", "chat m1<invoke_agent A", "execute_tool mcp__t__echo<invoke_agent A", "invoke_agent A<automation.run review"},
	} {
		got := trees[conv]
		if sort.Strings(got); !slices.Equal(got, want) {
			t.Errorf("spans of %s: %v, want %v", conv, got, want)
		}
		if ra := attrs(roots[conv]); roots[conv] == nil || ra["lathe.accept_seq"].GetIntValue() <= 0 {
			t.Errorf("root of %s: %v", conv, roots[conv])
		}
	}

	body := string(call(t, srv, get, "/metrics", "").body)
	for _, want := range []string{
		`lathe_time_to_first_token_seconds_count{agent="a",scope="chat"} `,
		`lathe_time_to_first_token_seconds_count{agent="a",scope="automation"} `,
		`lathe_time_to_first_token_seconds_count{agent="a",scope="agent"} `,
		`lathe_inference_seconds_count{agent="a"} 6`,
		// Their tokens and cost count as a Session turn's: 10+20+30+40+1+1
		// in, 5+6+7+8+1+1 out, at 1000 USD per million.
		`lathe_tokens_total{agent="a",direction="input"} 102` + "\n",
		`lathe_tokens_total{agent="a",direction="output"} 28` + "\n",
		`lathe_model_tokens_total{agent="a",direction="input",model="m1",usage_known="true"} 102` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	const cost = `lathe_cost_usd_total{agent="a"} `
	_, v, _ := strings.Cut(body, "\n"+cost)
	v, _, _ = strings.Cut(v, "\n")
	if usd, err := strconv.ParseFloat(v, 64); err != nil || math.Abs(usd-0.130) > 1e-9 || strings.Contains(body, "lathe_inferences_unpriced_total{") {
		t.Errorf("/metrics: cost %q (%v), want 0.130, none unpriced:\n%s", v, err, body)
	}
}
