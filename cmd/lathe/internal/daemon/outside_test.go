package daemon

import (
	"context"
	"encoding/json"
	"lathe/runtime/acp"
	"lathe/runtime/acp/install"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/sandboxtest"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"

	"github.com/coder/websocket"
)

// sharedAgents is one install folder for outside agents per machine, so
// that each test does not install the same pinned packages again (the
// installer's atomic rename keeps concurrent users apart).
// The preset's package is installed first, within minutes on a fresh
// machine, so that the Session's preparation finds it in place.
func sharedAgents(t testing.TB, preset string) Option {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "lathe-test-agents")
	p := acp.Presets[preset]
	in := &install.Installer{Dir: dir}
	if _, err := in.Ensure(testContext(t, 10*time.Minute), install.Spec{Package: p.Package, Command: p.Command}); err != nil {
		t.Fatalf("install %s: %v", p.Package, err)
	}
	return WithAgentsDir(dir)
}

// outsideSecret is the provider key of the outside-agent tests: it must
// reach the model server (the gateway adds it) and nothing in the sandbox.
const outsideSecret = "sk-lathe-provider-key-never-in-a-sandbox"

// TestOutsideAgentClaudeCode runs the real Claude Code (its ACP adapter,
// pinned, installed from npm by the daemon) in a Session's sandbox against
// the scripted model behind the gateway: a turn that runs a command which
// writes a file, its permission request answered through the approval
// prompt; a Stop; a second turn on the same process.
func TestOutsideAgentClaudeCode(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.Text("Writing it."),
			fakellm.ToolCall("toolu_1", "Bash", `{"command":"echo hi from claude > hello.txt && cat hello.txt",`, `"description":"write hello"}`),
			fakellm.Usage(100, 20, 0),
		}},
		{Steps: []fakellm.Step{fakellm.Text("Done: hello.txt says hi."), fakellm.Usage(120, 6, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("thinking about it"), fakellm.Stall(release)}},
		{Steps: []fakellm.Step{fakellm.Text("third turn"), fakellm.Usage(300, 2, 0)}},
	}}
	r := turnDaemon(t, config.KindAnthropic, script, func(c *config.Config) {
		t.Setenv(testRuntimeKeyEnv, outsideSecret)
		c.Agents = append(c.Agents, config.Agent{ID: "claude", Name: "Claude Code", Kind: "acp", ACP: &config.ACP{Preset: "claude-code"}, Provider: "fake", Model: "m1"})
	}, sharedAgents(t, "claude-code"))
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"claude"}`).ID
	r.ready(t, id)
	tc := openTurnConn(t, r)

	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "c1", "input": "write hello.txt"})
	frames := outsideTurn(t, tc, "c1", "allow")
	checkGolden(t, "turn_outside_claude_code.golden", strings.Join(goldenLines(t, id, frames), "\n")+"\n")
	if b, err := os.ReadFile(filepath.Join(r.dir, "hello.txt")); err != nil || string(b) != "hi from claude\n" {
		t.Errorf("hello.txt on the Workspace = %q, %v", b, err)
	}

	stopMidStream(t, r, tc, id, "c2")

	// A third turn runs on the same agent process: its model call carries
	// the first turn's conversation, which only that process holds.
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "c3", "input": "and now?"})
	f := outsideTurn(t, tc, "c3", "deny")
	if l := f[len(f)-1].line(); l != `session-done tokens=300/2/0 known=true output="third turn"` {
		for _, x := range f {
			t.Logf("c3 %s", x.line())
		}
		for _, q := range r.llm.Requests() {
			t.Logf("llm %d turn=%d %.200s", q.Seq, q.Turn, q.Body[max(0, len(q.Body)-200):])
		}
		t.Fatalf("third turn ended %s", l)
	}
	reqs := r.llm.Requests()
	last := reqs[len(reqs)-1]
	if !strings.Contains(string(last.Body), "write hello.txt") || !strings.Contains(string(last.Body), "and now?") {
		t.Errorf("the third turn's model call lacks the conversation: %.500s", last.Body)
	}
	// The Agent's view names what ran.
	if resp := r.do(t, get, "/api/agents", ""); !strings.Contains(string(resp.body), `"kind":"acp"`) || !strings.Contains(string(resp.body), `"reported":{"name":"@zed-industries/claude-agent-acp","version":"0.23.1"}`) {
		t.Errorf("GET /api/agents: %s", resp.body)
	}
	// The gateway added the provider key; the agent never had it.
	for _, q := range reqs {
		if q.Header.Get("X-Api-Key") != outsideSecret {
			t.Errorf("a model call reached the provider with key %q", q.Header.Get("X-Api-Key"))
		}
	}
	keyAbsent(t, r, id)
}

// keyAbsent checks that the provider key is in no process's environment
// or command line in Session id's sandbox, nor in a file of the agent's
// HOME or the checkout.
func keyAbsent(t *testing.T, r *turnRig, id string) {
	t.Helper()
	sb := r.daemon.cmds.Environments.LiveSandbox(id)
	// The key comes on stdin, so that no argv of this check holds it.
	out, errOut, code := sandboxtest.Output(t, sb, sandbox.ExecSpec{Stdin: strings.NewReader(outsideSecret + "\n"), Args: []string{"bash", "-c",
		`key=$(cat); cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -c -F -f <(printf '%s\n' "$key"); ` +
			`grep -r -l -F -f <(printf '%s\n' "$key") /root ` + r.dir + ` 2>/dev/null; true`}})
	if !strings.HasPrefix(out, "0\n") {
		t.Errorf("the provider key is inside the sandbox: %q %q (exit %d)", out, errOut, code)
	}
}

// stopMidStream sends turn and Stops it while the model streams (its
// script stalls): the agent is cancelled, the turn ends cancelled, once.
func stopMidStream(t *testing.T, r *turnRig, tc *turnConn, id, turn string) {
	t.Helper()
	calls := len(r.llm.Requests())
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": turn, "input": "take your time"})
	polltest.Until(t, "the stopped turn's model call", func() bool { return len(r.llm.Requests()) > calls }, polltest.Within(60*time.Second))
	tc.send(t, map[string]any{"cmd": "session-stop", "id": id, "turn_id": turn})
	if f := outsideTurn(t, tc, turn, "deny"); f[len(f)-1].Kind != "session-cancelled" {
		t.Fatalf("stopped turn ended %s", f[len(f)-1].line())
	}
}

// outsideTurn reads turn's frames to its terminal one, answering each
// permission request with decision.
func outsideTurn(t testing.TB, tc *turnConn, turn, decision string) []turnFrame {
	t.Helper()
	ctx := testContext(t, 90*time.Second)
	var got []turnFrame
	for {
		kind, raw := readFrame(t, ctx, tc.c)
		if kind == "mcp-approval-required" {
			var a struct {
				ApprovalID string `json:"approval_id"`
				Server     string `json:"server"`
				Tool       string `json:"tool"`
				TurnID     string `json:"turn_id"`
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				t.Fatal(err)
			}
			t.Logf("approval %s", raw)
			tc.send(t, map[string]any{"cmd": "mcp-approve", "approval_id": a.ApprovalID, "decision": decision, "persist": "once"})
			got = append(got, turnFrame{Kind: kind + " " + a.Server + " " + a.Tool})
			continue
		}
		if kind == "event" || strings.HasPrefix(kind, "session-environment") {
			continue
		}
		var f turnFrame
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		if f.TurnID != turn {
			continue
		}
		got = append(got, f)
		if f.terminal() {
			return got
		}
	}
}

// approveAll answers every permission request on a /ws connection of srv
// with allow, until the test ends.
func approveAll(t *testing.T, srv *httptest.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := dialWS(t, ctx, srv, nil)
	go func() {
		for {
			_, raw, err := c.Read(ctx)
			if err != nil {
				return
			}
			var f struct {
				Kind       string `json:"kind"`
				ApprovalID string `json:"approval_id"`
			}
			if json.Unmarshal(raw, &f) == nil && f.Kind == "mcp-approval-required" {
				c.Write(ctx, websocket.MessageText, []byte(`{"cmd":"mcp-approve","approval_id":"`+f.ApprovalID+`","decision":"allow","persist":"once"}`))
			}
		}
	}()
}

// TestOutsideAgentInWays races Claude Code against Codex against the
// built-in loop on one task: each lane in its own sandbox on its own copy,
// Claude Code's Anthropic calls and Codex's Responses calls translated by
// the gateway onto the Chat Completions provider, all three checked and
// priced side by side, Claude Code's kept.
func TestOutsideAgentInWays(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Model: "m1", Steps: []fakellm.Step{
			fakellm.ToolCall("toolu_w", "Bash", `{"command":"echo claude wins > a.txt","description":"rewrite a.txt"}`), fakellm.Usage(30, 6, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("claude lane done"), fakellm.Usage(40, 3, 0)}},
		{Model: "m2", Steps: []fakellm.Step{
			fakellm.ToolCall("d1", "write_file", `{"path":"a.txt","content":"built-in wins\n"}`), fakellm.Usage(20, 5, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("built-in lane done"), fakellm.Usage(20, 5, 0)}},
		{Model: "m3", Steps: []fakellm.Step{
			fakellm.ToolCall("call_c", "exec_command", `{"cmd":"echo codex wins > a.txt"}`), fakellm.Usage(25, 4, 0)}},
		{Model: "m3", Steps: []fakellm.Step{fakellm.Text("codex lane done"), fakellm.Usage(35, 2, 0)}},
	}}
	sharedAgents(t, "codex")
	install := sharedAgents(t, "claude-code") // the same folder
	r := newWaysRigWith(t, script, []Option{install}, func(c *config.Config) {
		c.Agents = append(c.Agents,
			config.Agent{ID: "claude", Name: "Claude Code", Kind: "acp", ACP: &config.ACP{Preset: "claude-code"}, Provider: "fake", Model: "m1"},
			config.Agent{ID: "codex", Name: "Codex", Kind: "acp", ACP: &config.ACP{Preset: "codex"}, Provider: "fake", Model: "m3"})
		c.Prices["fake/m3"] = config.Price{Input: 1, Output: 1}
	})
	r.gitWorkspace(t)
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"claude"}`).ID
	r.ready(t, id)
	r.discardAtEnd(t, id)
	approveAll(t, r.srv)
	mustCall(t, r.srv, 200, put, "/api/sessions/"+id+"/check", `{"check_command":"grep -q wins a.txt"}`)
	resp := r.do(t, post, "/api/sessions/"+id+"/variants", `{"input":"make a.txt win","lanes":[{"agent_id":"claude"},{"agent_id":"coder","model":"m2"},{"agent_id":"codex"}]}`)
	if resp.status != 202 {
		t.Fatalf("POST variants: %d %s", resp.status, resp.body)
	}
	res := r.waitResultsFor(t, 3*time.Minute, id, "every lane ended", func(w waysResults) bool {
		ended := func(s string) bool { return s == "succeeded" || s == "failed" || s == "cancelled" }
		return len(w.Attempts) == 3 && ended(w.Attempts[0].State) && ended(w.Attempts[1].State) && ended(w.Attempts[2].State)
	})
	for i, a := range res.Attempts {
		if a.State != "succeeded" || len(a.ChangedFiles) != 1 || a.ChangedFiles[0] != "a.txt" || !a.Usage.TokenUsageKnown {
			t.Errorf("lane %d: %+v", i, a)
		}
	}
	if res.Attempts[0].Output != "claude lane done" || res.Attempts[0].Usage.InputTokens != 70 || res.Attempts[0].Usage.USD == nil {
		t.Errorf("the Claude Code lane: %+v", res.Attempts[0])
	}
	if res.Attempts[2].Output != "codex lane done" || res.Attempts[2].Usage.InputTokens != 60 || res.Attempts[2].Usage.USD == nil {
		t.Errorf("the Codex lane: %+v", res.Attempts[2])
	}
	mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/verify", `{"attempt_set_id":"`+res.AttemptSetID+`"}`)
	r.waitResultsFor(t, time.Minute, id, "verified", func(w waysResults) bool {
		return w.Attempts[0].Verdict != nil && w.Attempts[1].Verdict != nil && w.Attempts[2].Verdict != nil
	})
	mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/adopt", `{"attempt_set_id":"`+res.AttemptSetID+`","index":0}`)
	r.waitResultsFor(t, time.Minute, id, "kept", func(w waysResults) bool { return w.Settled })
	if b, err := os.ReadFile(filepath.Join(r.dir, "a.txt")); err != nil || string(b) != "claude wins\n" {
		t.Errorf("a.txt after keeping Claude Code's lane = %q, %v", b, err)
	}
}

// TestOutsideAgentOpencode runs the real opencode (its native binary,
// pinned, installed from npm) on the Chat Completions wire: its side call
// for a title is metered with the turn; its command runs after an
// approval; a second turn runs on the same process.
func TestOutsideAgentOpencode(t *testing.T) {
	const main = "You are opencode"
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Contains: "title generator", Steps: []fakellm.Step{fakellm.Text("Hello file"), fakellm.Usage(50, 2, 0)}},
		{Contains: main, Steps: []fakellm.Step{
			fakellm.Text("Writing it."),
			fakellm.ToolCall("call_1", "bash", `{"command":"echo hi from opencode > hello.txt && cat hello.txt","description":"write hello"}`),
			fakellm.Usage(100, 20, 0),
		}},
		{Contains: main, Steps: []fakellm.Step{fakellm.Text("Done: hello.txt says hi."), fakellm.Usage(120, 6, 0)}},
		{Contains: main, Steps: []fakellm.Step{fakellm.Text("second turn"), fakellm.Usage(200, 3, 0)}},
	}}
	r := turnDaemon(t, config.KindOpenAI, script, func(c *config.Config) {
		c.Agents = append(c.Agents, config.Agent{ID: "oc", Name: "opencode", Kind: "acp", ACP: &config.ACP{Preset: "opencode"}, Provider: "fake", Model: "m1"})
	}, sharedAgents(t, "opencode"))
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"oc"}`).ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "o1", "input": "write hello.txt"})
	lines := goldenLines(t, id, outsideTurn(t, tc, "o1", "allow"))
	got := strings.Join(lines, "\n")
	for _, want := range []string{"mcp-approval-required acp:oc execute", `tool-call start call_1#1 execute`, "hi from opencode",
		`session-done tokens=270/28/0 known=true output="Done: hello.txt says hi."`} {
		if !strings.Contains(got, want) {
			t.Errorf("frames lack %q:\n%s", want, got)
		}
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "hello.txt")); err != nil || string(b) != "hi from opencode\n" {
		t.Errorf("hello.txt on the Workspace = %q, %v", b, err)
	}
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "o2", "input": "and now?"})
	f := outsideTurn(t, tc, "o2", "deny")
	if l := f[len(f)-1].line(); l != `session-done tokens=200/3/0 known=true output="second turn"` {
		t.Fatalf("second turn ended %s", l)
	}
	reqs := r.llm.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), "write hello.txt") {
		t.Errorf("the second turn's model call lacks the conversation: %.300s", last.Body)
	}
}

// TestOutsideAgentCodex runs the real Codex (its ACP adapter, a native
// binary, pinned, installed from npm) on the Responses wire, which the
// gateway translates onto the Chat Completions provider.
func TestOutsideAgentCodex(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.Text("Writing it."),
			fakellm.ToolCall("call_1", "exec_command", `{"cmd":"echo hi from codex > hello.txt && cat hello.txt"}`),
			fakellm.Usage(100, 20, 0),
		}},
		{Steps: []fakellm.Step{fakellm.Text("Done: hello.txt says hi."), fakellm.Usage(120, 6, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("spare"), fakellm.Usage(1, 1, 0)}},
	}}
	r := turnDaemon(t, config.KindOpenAI, script, func(c *config.Config) {
		c.Agents = append(c.Agents, config.Agent{ID: "codex", Name: "Codex", Kind: "acp", ACP: &config.ACP{Preset: "codex"}, Provider: "fake", Model: "m1"})
	}, sharedAgents(t, "codex"))
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"codex"}`).ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "x1", "input": "write hello.txt"})
	got := strings.Join(goldenLines(t, id, outsideTurn(t, tc, "x1", "allow")), "\n")
	for _, want := range []string{"mcp-approval-required acp:codex execute", "tool-call start call_1#1 execute", `hi from codex\\n`,
		`session-done tokens=220/26/0 known=true output="Done: hello.txt says hi."`} {
		if !strings.Contains(got, want) {
			t.Errorf("frames lack %q:\n%s", want, got)
		}
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "hello.txt")); err != nil || string(b) != "hi from codex\n" {
		t.Errorf("hello.txt on the Workspace = %q, %v", b, err)
	}
}

// TestOutsideAgentMCP gives Claude Code its Agent's MCP tools through the
// one Lathe-hosted MCP endpoint of its Session: the call reaches the real
// MCP server from the host, through Lathe's approval.
func TestOutsideAgentMCP(t *testing.T) {
	bin := mcpTestServer(t)
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.ToolCall("toolu_m", "mcp__lathe__mcp__t__echo", `{"text":"hello over lathe's mcp"}`),
			fakellm.Usage(10, 5, 0),
		}},
		{Steps: []fakellm.Step{fakellm.Text("the server answered"), fakellm.Usage(20, 4, 0)}},
	}}
	r := turnDaemon(t, config.KindAnthropic, script, func(c *config.Config) {
		c.Agents = append(c.Agents, config.Agent{ID: "claude", Name: "Claude Code", Kind: "acp", ACP: &config.ACP{Preset: "claude-code"}, Provider: "fake", Model: "m1"})
		c.MCP.Servers = []config.MCPServer{{Name: "t", Transport: "stdio", Command: bin, Approval: "always"}}
	}, sharedAgents(t, "claude-code"))
	polltest.Until(t, "the MCP server connected", func() bool {
		return strings.Contains(string(r.do(t, get, "/api/mcp/servers", "").body), `"status":"connected"`)
	}, polltest.Within(30*time.Second))
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"claude"}`).ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "m1", "input": "ask the server"})
	got := strings.Join(goldenLines(t, id, outsideTurn(t, tc, "m1", "allow")), "\n")
	for _, want := range []string{"mcp-approval-required t echo", "hello over lathe's mcp", `output="the server answered"`} {
		if !strings.Contains(got, want) {
			t.Errorf("frames lack %q:\n%s", want, got)
		}
	}
	// One decision, the MCP server's: the agent's own question about the
	// call was answered by the endpoint's policy.
	if n := strings.Count(got, "mcp-approval-required"); n != 1 {
		t.Errorf("%d approvals asked, want the MCP server's one:\n%s", n, got)
	}
	reqs := r.llm.Requests()
	if len(reqs) < 2 || !strings.Contains(string(reqs[0].Body), "mcp__lathe__mcp__t__echo") || !strings.Contains(string(reqs[len(reqs)-1].Body), "hello over lathe's mcp") {
		for _, q := range reqs {
			t.Logf("llm %.2000s", q.Body[max(0, len(q.Body)-2000):])
		}
		t.Errorf("the MCP tool was not offered, or its result did not reach the model")
	}
}
