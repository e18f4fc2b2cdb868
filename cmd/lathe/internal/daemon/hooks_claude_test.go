package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// TestClaudeCodeHooksInSandbox runs hooks configured as Claude Code's users
// write them, on a real sandbox (issue 35): scripts in the checkout's
// .claude/hooks, called as "$CLAUDE_PROJECT_DIR"/.claude/hooks/x.sh, under
// Claude Code's matchers (Bash for the shell tool, Edit|Write for the file
// writers, a regular expression for MCP tools), reading tool_use_id and
// permission_mode from the event.
func TestClaudeCodeHooksInSandbox(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "shell", `{"command":"rm -rf notes"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("it was blocked"), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c2", "write_file", `{"path":"a.txt","content":"x\n"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c3", "shell", `{"command":"echo fine"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("done"), fakellm.Usage(10, 2, 0)}},
	}}
	r := turnDaemonIn(t, "lathe-test-cchooks", config.KindOpenAI, script, func(c *config.Config) {
		c.Hooks = []config.Hook{
			{Event: "PreToolUse", Matcher: "Bash", Name: "cc-bash", Command: `"$CLAUDE_PROJECT_DIR"/.claude/hooks/bash-guard.sh`},
			{Event: "PreToolUse", Matcher: "Edit|Write", Name: "cc-protect", Command: `"$CLAUDE_PROJECT_DIR"/.claude/hooks/protect.sh`},
			{Event: "PreToolUse", Matcher: "mcp__.*", Name: "mcp-only", Command: `echo "ran on $(cat)" >&2; exit 2`},
		}
	})
	hooksDir := filepath.Join(r.dir, ".claude", "hooks")
	if err := os.MkdirAll(filepath.Join(r.dir, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(r.dir, "notes", "keep.txt"), "keep me\n")
	if err := os.MkdirAll(hooksDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"bash-guard.sh": `#!/bin/sh
python3 -c '
import json, sys
e = json.load(sys.stdin)
if "rm -rf" in e["tool_input"]["command"]:
    print("%s %s in %s mode: no rm -rf" % (e["tool_name"], e["tool_use_id"], e["permission_mode"]), file=sys.stderr)
    sys.exit(2)
'
`,
		"protect.sh": `#!/bin/sh
echo "no writes to $(python3 -c 'import json, sys; print(json.load(sys.stdin)["tool_input"]["path"])')" >&2
exit 2
`,
	} {
		if err := os.WriteFile(filepath.Join(hooksDir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	id := r.create(t, "").ID
	r.ready(t, id)
	tc := openTurnConn(t, r)

	tc.runDone(t, id, "guard", "clean up")
	if _, err := os.Stat(filepath.Join(r.dir, "notes", "keep.txt")); err != nil {
		t.Errorf("the blocked rm -rf ran: %v", err)
	}
	if body := string(r.llm.Requests()[1].Body); !strings.Contains(body, "blocked by hook `cc-bash`: shell c1 in default mode: no rm -rf") {
		t.Errorf("the model did not get the Bash guard's reason: %s", body)
	}

	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "write", "input": "write, then echo"})
	var c3 *turnFrame
	for _, f := range tc.terminal(t, "write") {
		if f.Kind == "tool-call" && f.CallID == "c3" && f.Result != nil {
			c3 = &f
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("the write the Edit|Write guard blocked ran: %v", err)
	}
	reqs := r.llm.Requests()
	if body := string(reqs[3].Body); !strings.Contains(body, "blocked by hook `cc-protect`: no writes to a.txt") {
		t.Errorf("the model did not get the Edit|Write guard's reason: %s", body)
	}
	if c3 == nil || c3.IsError || !strings.Contains(*c3.Result, "fine") {
		t.Errorf("a shell call no guard blocks (the mcp__.* hook must not match it): %+v", c3)
	}
}
