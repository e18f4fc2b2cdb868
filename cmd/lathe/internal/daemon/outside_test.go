package daemon

import (
	"encoding/json"
	"lathe/runtime/acp"
	"lathe/runtime/acp/install"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/sandboxtest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// sharedAgents is one install folder for outside agents per machine, so
// that each test does not install the same pinned packages again (the
// installer's atomic rename keeps concurrent users apart).
// The preset's package is installed first, within minutes on a fresh
// machine, so that the Session's preparation finds it in place.
func sharedAgents(t *testing.T, preset string) Option {
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

	// Stop while the model streams: the agent is cancelled, the turn ends
	// cancelled, once.
	calls := len(r.llm.Requests())
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "c2", "input": "take your time"})
	polltest.Until(t, "the second turn's model call", func() bool { return len(r.llm.Requests()) > calls }, polltest.Within(60*time.Second))
	tc.send(t, map[string]any{"cmd": "session-stop", "id": id, "turn_id": "c2"})
	if f := outsideTurn(t, tc, "c2", "deny"); f[len(f)-1].Kind != "session-cancelled" {
		t.Fatalf("stopped turn ended %s", f[len(f)-1].line())
	}

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
	// The gateway added the provider key; the agent never had it.
	for _, q := range reqs {
		if q.Header.Get("X-Api-Key") != outsideSecret {
			t.Errorf("a model call reached the provider with key %q", q.Header.Get("X-Api-Key"))
		}
	}
	sb := r.daemon.cmds.Environments.LiveSandbox(id)
	// The key comes on stdin, so that no argv of this check holds it.
	out, errOut, code := sandboxtest.Output(t, sb, sandbox.ExecSpec{Stdin: strings.NewReader(outsideSecret + "\n"), Args: []string{"bash", "-c",
		`key=$(cat); cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -c -F -f <(printf '%s\n' "$key"); ` +
			`grep -r -l -F -f <(printf '%s\n' "$key") /root ` + r.dir + ` 2>/dev/null; true`}})
	if !strings.HasPrefix(out, "0\n") {
		t.Errorf("the provider key is inside the sandbox: %q %q (exit %d)", out, errOut, code)
	}
}

// outsideTurn reads turn's frames to its terminal one, answering each
// permission request with decision.
func outsideTurn(t *testing.T, tc *turnConn, turn, decision string) []turnFrame {
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
