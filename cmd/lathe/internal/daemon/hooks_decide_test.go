package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
)

// TestClaudeCodeHookDecisions runs, on a real sandbox, the three answers a
// Claude Code PreToolUse hook gives beside allow (issue 35): deny, from
// the hook script of Claude Code's hooks reference, unmodified
// (testdata/claude-hooks/block-rm.sh, called as "$CLAUDE_PROJECT_DIR"/…,
// as the reference shows; it needs jq, so it runs on the host, as Claude
// Code's hooks do); "ask", which parks the call as an approval under the
// hook's server, and the call runs only once allowed; and continue: false,
// which ends the turn with its reason and asks the model nothing more.
func TestClaudeCodeHookDecisions(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("testdata", "claude-hooks", "block-rm.sh"))
	if err != nil {
		t.Fatal(err)
	}
	const stopScript = `grep -q deploy && printf '{"continue": false, "stopReason": "deploys wait for a human"}' || true`
	const askScript = `printf '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "writes need a look"}}'`
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("d1", "shell", `{"command":"rm -rf notes"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("it was denied"), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("a1", "write_file", `{"path":"allowed.txt","content":"yes\n"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("a2", "write_file", `{"path":"denied.txt","content":"no\n"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("one of two"), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("s1", "shell", `{"command":"echo deploy > deployed.txt"}`), fakellm.ToolCall("s2", "shell", `{"command":"echo more > more.txt"}`), fakellm.Usage(10, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("never asked for"), fakellm.Usage(10, 2, 0)}},
	}}
	r := turnDaemonIn(t, "lathe-test-ccdecide", config.KindOpenAI, script, func(c *config.Config) {
		c.Hooks = []config.Hook{
			{Event: "PreToolUse", Matcher: "Bash", Name: "block-rm", Host: true, Command: `"$CLAUDE_PROJECT_DIR"/.claude/hooks/block-rm.sh`},
			{Event: "PreToolUse", Matcher: "Write", Command: askScript},
			{Event: "PreToolUse", Matcher: "Bash", Name: "halt", Command: stopScript},
			// Each keeps the transcript it was given, in the sandbox and on the host.
			{Event: "PostToolUse", Matcher: "Write", Command: `python3 -c 'import json, shutil, sys; shutil.copy(json.load(sys.stdin)["transcript_path"], "sandbox-transcript.jsonl")'`},
			{Event: "PostToolUse", Matcher: "Write", Host: true, Command: `cp "$(jq -r .transcript_path)" host-transcript.jsonl`},
		}
	})
	if err := os.MkdirAll(filepath.Join(r.dir, ".claude", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, ".claude", "hooks", "block-rm.sh"), doc, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(r.dir, "notes", "keep.txt"), "keep me\n")
	id := r.create(t, "").ID
	r.ready(t, id)
	tc := openTurnConn(t, r)

	t.Run("deny, by the reference's script", func(t *testing.T) {
		tc.runDone(t, id, "deny", "clean up")
		if _, err := os.Stat(filepath.Join(r.dir, "notes", "keep.txt")); err != nil {
			t.Errorf("the denied rm -rf ran: %v", err)
		}
		if body := string(r.llm.Requests()[1].Body); !strings.Contains(body, "blocked by hook `block-rm`: Destructive command blocked by hook") {
			t.Errorf("the model did not get the hook's reason: %s", body)
		}
	})

	t.Run("ask parks the call under the hook's server", func(t *testing.T) {
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "ask", "input": "write two files"})
		decisions := []string{"allow", "deny"}
		var asked []turnFrame
		frames := tc.until(t, "ask", func(f turnFrame) bool {
			if f.Kind == "mcp-approval-required" {
				asked = append(asked, f)
				tc.send(t, map[string]any{"cmd": "mcp-approve", "approval_id": f.ApprovalID, "decision": decisions[len(asked)-1], "persist": "once"})
			}
			return f.terminal()
		})
		if end := frames[len(frames)-1]; end.Kind != "session-done" || end.Output != "one of two" {
			t.Fatalf("the turn ended %+v", end)
		}
		if len(asked) != 2 {
			t.Fatalf("asked %d times, want 2: %+v", len(asked), asked)
		}
		for _, a := range asked {
			if a.Server != "hook:1" || a.ToolDisplay != "write_file on hook:1: writes need a look" {
				t.Errorf("the approval names server %q, display %q", a.Server, a.ToolDisplay)
			}
		}
		if b, err := os.ReadFile(filepath.Join(r.dir, "allowed.txt")); err != nil || string(b) != "yes\n" {
			t.Errorf("the allowed write: %q, %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(r.dir, "denied.txt")); !os.IsNotExist(err) {
			t.Errorf("the denied write ran: %v", err)
		}
		// The transcript of the turn so far: the prompt, the call.
		for _, name := range []string{"sandbox-transcript.jsonl", "host-transcript.jsonl"} {
			b, err := os.ReadFile(filepath.Join(r.dir, name))
			var first struct {
				Type    string
				Message struct{ Role, Content string }
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if err != nil || json.Unmarshal([]byte(lines[0]), &first) != nil || first.Type != "user" || first.Message.Content != "write two files" ||
				len(lines) < 2 || !strings.Contains(lines[1], `{"type":"tool_use","id":"a1","name":"write_file","input":{"path":"allowed.txt"`) {
				t.Errorf("%s: %v\n%s", name, err, b)
			}
		}
	})

	t.Run("continue false ends the turn", func(t *testing.T) {
		before := len(r.llm.Requests())
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "halt", "input": "deploy it"})
		frames := tc.terminal(t, "halt")
		const why = "stopped by hook `halt`: deploys wait for a human"
		if end := frames[len(frames)-1]; end.Kind != "session-cancelled" || end.StopReason != why {
			t.Fatalf("the turn ended %+v", end)
		}
		if n := len(r.llm.Requests()) - before; n != 1 {
			t.Errorf("%d inferences after the stop, want the one before it", n-1)
		}
		for _, name := range []string{"deployed.txt", "more.txt"} {
			if _, err := os.Stat(filepath.Join(r.dir, name)); !os.IsNotExist(err) {
				t.Errorf("%s: a call of the stopped step ran: %v", name, err)
			}
		}
		resp := call(t, r.srv, get, "/api/sessions/"+id+"/turns", "")
		var out struct{ Turns []projections.Turn }
		if resp.status != http.StatusOK || json.Unmarshal(resp.body, &out) != nil || len(out.Turns) == 0 {
			t.Fatalf("GET turns: %d %s", resp.status, resp.body)
		}
		last := out.Turns[len(out.Turns)-1]
		if last.TurnID != "halt" || last.Status != "cancelled" || last.StopReason != why {
			t.Errorf("the turn's record: %+v", last)
		}
	})
}
