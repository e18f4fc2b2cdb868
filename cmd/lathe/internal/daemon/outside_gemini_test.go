package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/acp"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/sandboxtest"
)

// TestOutsideAgentGemini runs the real Gemini CLI (pinned, installed from
// npm, on Node) on the Gemini wire, which the gateway translates onto the
// Chat Completions provider: a turn that writes a file (Gemini's own write,
// since Lathe offers no fs capability) and runs a command, each after an
// approval; its usage as the model reported it; its settings file written
// into its HOME; a second turn on the same process; a Stop and a turn
// after it; and the provider key nowhere in the sandbox.
func TestOutsideAgentGemini(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.Text("Writing it."),
			fakellm.ToolCall("call_w", "write_file", `{"file_path":"hello.txt",`, `"content":"hi from gemini\n"}`),
			fakellm.ToolCall("call_r", "run_shell_command", `{"command":"cat hello.txt > seen.txt && cat seen.txt","description":"copy hello"}`),
			fakellm.Usage(100, 20, 0),
		}},
		{Steps: []fakellm.Step{fakellm.Text("Done: hello.txt says hi."), fakellm.Usage(120, 6, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("second turn"), fakellm.Usage(200, 3, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("thinking about it"), fakellm.Stall(release)}},
		{Steps: []fakellm.Step{fakellm.Text("after the stop"), fakellm.Usage(300, 2, 0)}},
	}}
	r := turnDaemon(t, config.KindOpenAI, script, func(c *config.Config) {
		t.Setenv(testRuntimeKeyEnv, outsideSecret)
		c.Agents = append(c.Agents, config.Agent{ID: "gem", Name: "Gemini CLI", Kind: "acp", ACP: &config.ACP{Preset: "gemini"}, Provider: "fake", Model: "m1"})
	}, sharedAgents(t, "gemini"))
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"gem"}`).ID
	r.ready(t, id)
	tc := openTurnConn(t, r)

	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "g1", "input": "write hello.txt"})
	lines := goldenLines(t, id, outsideTurn(t, tc, "g1", "allow"))
	got := strings.Join(lines, "\n")
	for _, want := range []string{"mcp-approval-required acp:gem edit", "mcp-approval-required acp:gem execute",
		"tool-call start write_file__call_w#1 edit", "tool-call start run_shell_command__call_r#1 execute",
		"hi from gemini", `session-done tokens=220/26/0 known=true output="Done: hello.txt says hi."`} {
		if !strings.Contains(got, want) {
			t.Errorf("frames lack %q:\n%s", want, got)
		}
	}
	for name, want := range map[string]string{"hello.txt": "hi from gemini\n", "seen.txt": "hi from gemini\n"} {
		if b, err := os.ReadFile(filepath.Join(r.dir, name)); err != nil || string(b) != want {
			t.Errorf("%s on the Workspace = %q, %v", name, b, err)
		}
	}
	// Each model call came on the Gemini wire and reached the provider with
	// the host's key; the second carries the tool results.
	reqs := r.llm.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `"tool_call_id":"call_w"`) || !strings.Contains(string(reqs[1].Body), "hi from gemini") {
		for _, q := range reqs {
			t.Logf("llm %d %.1500s", q.Seq, q.Body[max(0, len(q.Body)-1500):])
		}
		t.Fatalf("%d model calls, or the tool results are not in the second", len(reqs))
	}
	for _, q := range reqs {
		if q.Header.Get("Authorization") != "Bearer "+outsideSecret {
			t.Errorf("a model call reached the provider with %q", q.Header.Get("Authorization"))
		}
	}
	// Its settings file was written into its HOME before it started, in
	// the names it reads (it rewrites a file with deprecated ones).
	sb := r.daemon.cmds.Environments.LiveSandbox(id)
	want := acp.Presets["gemini"].Launch(acp.ProtocolGemini, acp.Gateway{}).Files[".gemini/settings.json"]
	if out, errOut, code := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"cat", "/root/.gemini/settings.json"}}); code != 0 || out != want {
		t.Errorf("settings.json: %q %q (exit %d), want %s", out, errOut, code, want)
	}

	// A second turn runs on the same process: its model call carries the
	// first turn's conversation, which only that process holds.
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "g2", "input": "and now?"})
	f := outsideTurn(t, tc, "g2", "deny")
	if l := f[len(f)-1].line(); l != `session-done tokens=200/3/0 known=true output="second turn"` {
		t.Fatalf("second turn ended %s", l)
	}
	reqs = r.llm.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), "write hello.txt") || !strings.Contains(string(last.Body), "and now?") {
		t.Errorf("the second turn's model call lacks the conversation: %.500s", last.Body)
	}

	// Stop while the model streams: the turn ends cancelled, once; the
	// next turn runs in a new process.
	stopMidStream(t, r, tc, id, "g3")
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "g4", "input": "once more"})
	if l := outsideTurn(t, tc, "g4", "deny"); l[len(l)-1].line() != `session-done tokens=300/2/0 known=true output="after the stop"` {
		t.Fatalf("the turn after the Stop ended %s", l[len(l)-1].line())
	}
	if resp := r.do(t, get, "/api/agents", ""); !strings.Contains(string(resp.body), `"reported":{"name":"gemini-cli","version":"0.61.0"}`) {
		t.Errorf("GET /api/agents: %s", resp.body)
	}
	keyAbsent(t, r, id)
}
