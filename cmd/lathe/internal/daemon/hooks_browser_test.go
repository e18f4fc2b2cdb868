package daemon

import (
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// TestHookBlockInChromium: the workbench's tool card of a call a hook
// blocked says so, with the hook's name and reason, and a turn a hook
// ended (continue: false) says why it stopped (testdata/browser/hooks.mjs).
func TestHookBlockInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "shell", `{"command":"rm -rf notes"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("it was blocked"), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c2", "shell", `{"command":"echo deploy"}`), fakellm.Usage(10, 2, 0)}},
	}}
	r := turnDaemonIn(t, "lathe-test-hooks-browser", config.KindOpenAI, script, func(c *config.Config) {
		c.Hooks = []config.Hook{{Event: "PreToolUse", Matcher: "shell", Name: "no-rm",
			Command: `grep -q 'rm -rf' && { echo "rm -rf is not allowed here" >&2; exit 2; }; exit 0`},
			{Event: "PreToolUse", Matcher: "Bash", Name: "halt",
				Command: `grep -q deploy && echo '{"continue": false, "stopReason": "deploys wait for a human"}'; exit 0`}}
	})
	id := r.create(t, "").ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.runDone(t, id, "guarded", "clean up")
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "halted", "input": "deploy"})
	if f := tc.terminal(t, "halted"); f[len(f)-1].Kind != "session-cancelled" {
		t.Fatalf("the halted turn ended %+v", f[len(f)-1])
	}
	runBrowser(t, node, chromium, "hooks.mjs", 2*time.Minute, "LATHE_URL="+r.srv.URL, "LATHE_SESSION="+id)
}
