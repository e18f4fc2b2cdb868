package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lathe/runtime/agent/tools"
	"lathe/runtime/polltest"
)

// TestMatcher: matchers mean what they mean in Claude Code: "" and "*"
// match every tool, a plain name or list matches exactly, anything else
// is an unanchored regular expression; a sandbox tool also answers to its
// Claude Code names (issue 35).
func TestMatcher(t *testing.T) {
	tests := []struct {
		matcher, tool string
		want          bool
	}{
		{"", "shell", true},
		{"*", "mcp__memory__read_graph", true},
		{"shell", "shell", true},
		{"shell", "read_file", false},
		{"write_file|edit_file", "edit_file", true},
		{"write_file|edit_file", "write_file_x", false},
		{"write_file | edit_file", "edit_file", true},
		{"mcp__my-server__echo", "mcp__my-server__echo", true},
		{"mcp__my-server__echo", "mcp__my-server__echo_all", false},
		// regular expressions, as Claude Code's documentation writes them
		{"mcp__memory__.*", "mcp__memory__create_entities", true},
		{"mcp__memory__.*", "mcp__github__create_issue", false},
		{"mcp__.*__write.*", "mcp__fs__write_file", true},
		{"^mcp__", "mcp__fs__x", true},
		{"^mcp__", "shell", false},
		{"_file$", "read_file", true},
		{"_file$", "list_files", false},
		{"list_.*", "list_files", true},
		{".*", "shell", true},
		// a glob that is also an expression: unanchored, it still matches
		// the server's tools
		{"mcp__github__*", "mcp__github__create_issue", true},
		{"mcp__github__*", "mcp__gitlab__x", false},
		// an exact name matches no other name that contains it
		{"mcp__memory", "mcp__memory__read_graph", false},
		// Claude Code's tool names
		{"Bash", "shell", true},
		{"Bash", "read_file", false},
		{"Edit|Write", "edit_file", true},
		{"Edit|Write", "write_file", true},
		{"Edit|Write", "shell", false},
		{"Edit|MultiEdit|Write", "edit_file", true},
		{"Read", "read_file", true},
		{"Grep", "search", true},
		{"Glob", "list_files", true},
		{"Read|Grep|Glob", "list_files", true},
		{"^Bash$", "shell", true},
		{"Notebook.*", "edit_file", false},
		{"bash", "shell", false},
	}
	for _, tt := range tests {
		if err := CheckMatcher(tt.matcher); err != nil {
			t.Errorf("CheckMatcher(%q): %v", tt.matcher, err)
		}
		if got := (Hook{Event: PreToolUse, Matcher: tt.matcher}).Matches(tt.tool); got != tt.want {
			t.Errorf("%q on %q = %v, want %v", tt.matcher, tt.tool, got, tt.want)
		}
	}
	for _, bad := range []string{"mcp__[", "*_file", "(?=x)", "a||b", "shell|", "shell| ", " "} {
		if CheckMatcher(bad) == nil {
			t.Errorf("CheckMatcher(%q) accepted it", bad)
		}
	}
	for name := range ClaudeCodeNames {
		if !tools.Has(name) {
			t.Errorf("ClaudeCodeNames names %q, which is no sandbox tool", name)
		}
	}
}

// FuzzMatcher: any matcher the config holds is checked and matched
// without a panic, and an exact name that passes the check matches that
// name.
func FuzzMatcher(f *testing.F) {
	for _, m := range []string{"", "*", "Bash", "Edit|Write", "mcp__memory__.*", "*_file", "a||b", "(?=x)", "write_file | edit_file"} {
		f.Add(m, "shell")
	}
	f.Fuzz(func(t *testing.T, m, tool string) {
		if len(m) > 1<<10 {
			return
		}
		err := CheckMatcher(m)
		got := Hook{Event: PreToolUse, Matcher: m}.Matches(tool)
		if err == nil && exactList(m) && !strings.Contains(m, "|") && strings.TrimSpace(m) == tool && !got {
			t.Errorf("%q does not match itself", m)
		}
	})
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name, event    string
		code           int
		stdout, stderr string
		decision       string
		reason, ctx    string
	}{
		{"exit 0", PreToolUse, 0, "", "", Allow, "", ""},
		{"exit 2 stderr", PreToolUse, 2, "", "no rm -rf\n", Block, "no rm -rf", ""},
		{"exit 2 silent", PreToolUse, 2, "", "", Block, "the hook exited with status 2", ""},
		{"json block", PreToolUse, 0, `{"decision":"block","reason":"not here"}`, "", Block, "not here", ""},
		{"claude deny", PreToolUse, 0, `{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"no"}}`, "", Block, "no", ""},
		{"json context", UserPromptSubmit, 0, `{"additionalContext":"it is Friday"}`, "", Allow, "", "it is Friday"},
		{"text context", UserPromptSubmit, 0, "branch: main\n", "", Allow, "", "branch: main"},
		{"text on a tool event is no context", PreToolUse, 0, "ok\n", "", Allow, "", ""},
		{"crash", PreToolUse, 127, "", "sh: guard: not found", Failed, "exited with status 127: sh: guard: not found", ""},
		{"claude ask", PreToolUse, 0, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"look first"}}`, "", Ask, "look first", ""},
		{"ask off a tool event is allow", UserPromptSubmit, 0, `{"hookSpecificOutput":{"permissionDecision":"ask"}}`, "", Allow, "", ""},
		{"claude allow", PreToolUse, 0, `{"hookSpecificOutput":{"permissionDecision":"allow"}}`, "", Allow, "", ""},
		{"continue false", PostToolUse, 0, `{"continue":false,"stopReason":"enough"}`, "", Halt, "enough", ""},
		{"continue false wins over a deny", PreToolUse, 0, `{"continue":false,"hookSpecificOutput":{"permissionDecision":"deny"}}`, "", Halt, "stopped without a reason", ""},
		{"continue true", PreToolUse, 0, `{"continue":true}`, "", Allow, "", ""},
	}
	for _, tt := range tests {
		d, r, c := decide(tt.event, tt.code, tt.stdout, tt.stderr)
		if d != tt.decision || r != tt.reason || c != tt.ctx {
			t.Errorf("%s: got %q %q %q, want %q %q %q", tt.name, d, r, c, tt.decision, tt.reason, tt.ctx)
		}
	}
}

// TestHostHooks runs hooks on the host: the event on stdin, the decisions,
// a timeout that kills the hook's children too, and the fail-closed chain.
func TestHostHooks(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	at := Place{Dir: dir, HostDir: dir}
	in := Input{SessionID: "S1", TurnID: "T1", AgentID: "coder", ToolName: "shell", ToolInput: json.RawMessage(`{"command":"rm -rf /"}`)}

	guard := Hook{Event: PreToolUse, Name: "no-rm", Host: true, Command: `grep -q 'rm -rf' && { echo "rm -rf is not allowed" >&2; exit 2; }; exit 0`}
	o := Run(ctx, guard, in, at)
	if o.Decision != Block || o.Reason != "rm -rf is not allowed" || o.ExitCode != 2 {
		t.Errorf("guard: %+v", o)
	}
	echo := Run(ctx, Hook{Event: PreToolUse, Host: true, Command: "cat; printf '\\n%s' \"$PATH $AWS_SECRET_ACCESS_KEY\" >&2"}, in, at)
	var got Input
	if err := json.Unmarshal([]byte(echo.Stdout), &got); err != nil || got.HookEventName != PreToolUse || got.Cwd != dir ||
		got.SessionID != "S1" || got.TurnID != "T1" || got.ToolName != "shell" || string(got.ToolInput) != `{"command":"rm -rf /"}` {
		t.Errorf("stdin: %q (%v)", echo.Stdout, err)
	}
	if !strings.HasSuffix(echo.Stderr, scrubbedPath+" ") {
		t.Errorf("host environment not scrubbed: %q", echo.Stderr)
	}

	t0 := time.Now()
	slow := Run(ctx, Hook{Event: PreToolUse, Host: true, Command: "sleep 30 & sleep 30", Timeout: 300 * time.Millisecond}, in, at)
	if slow.Decision != Failed || !slow.TimedOut || time.Since(t0) > 10*time.Second {
		t.Errorf("timeout: %+v after %v", slow, time.Since(t0))
	}

	var ran []string
	v := RunAll(ctx, []Hook{
		{Event: PreToolUse, Name: "ok", Host: true, Command: "true"},
		{Event: PreToolUse, Name: "missing", Host: true, Command: "/nonexistent/guard"},
		{Event: PreToolUse, Name: "never", Host: true, Command: "true"},
	}, in, at, func(o Outcome) { ran = append(ran, o.Hook+"="+o.Decision) })
	if !v.Blocked || !strings.HasPrefix(v.Message(), "hook `missing` failed: exited with status 127") || strings.Join(ran, " ") != "ok=allow missing=error" {
		t.Errorf("fail-closed chain: %+v %v", v, ran)
	}
	post := RunAll(ctx, []Hook{{Event: PostToolUse, Name: "lint", Host: true, Command: "echo bad >&2; exit 2"}}, in, at, nil)
	if post.Blocked || len(post.Notes) != 1 || post.Notes[0] != "blocked by hook `lint`: bad" {
		t.Errorf("post: %+v", post)
	}
	if o := Run(ctx, Hook{Event: PreToolUse, Command: "true"}, in, at); o.Decision != Failed || !strings.Contains(o.Reason, "no sandbox") {
		t.Errorf("sandbox hook without a sandbox: %+v", o)
	}
	if o := Run(ctx, Hook{Event: PreToolUse, Command: "true", Host: true}, in, Place{Dir: dir}); o.Decision != Failed || !strings.Contains(o.Reason, "no host directory") {
		t.Errorf("host hook without a host directory: %+v", o)
	}
}

// TestClaudeCodeForm: a hook written for Claude Code finds what it reads
// there (issue 35): $CLAUDE_PROJECT_DIR is the checkout, as
// $LATHE_PROJECT_DIR is, so the documented
// "$CLAUDE_PROJECT_DIR"/.claude/hooks/x.sh runs the checkout's script, and
// the event carries permission_mode and tool_use_id.
func TestClaudeCodeForm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, ".claude", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncat > \"$CLAUDE_PROJECT_DIR/seen.json\"\necho \"$CLAUDE_PROJECT_DIR $LATHE_PROJECT_DIR\" >&2\nexit 2\n"
	if err := os.WriteFile(filepath.Join(host, ".claude", "hooks", "guard.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	in := Input{SessionID: "S1", TurnID: "T1", AgentID: "coder", ToolName: "shell", ToolUseID: "call_7", ToolInput: json.RawMessage(`{"command":"ls"}`)}
	// A host hook's project is the checkout's copy on the host, where it
	// runs, whatever path the sandbox sees it at (a Ways lane, a remote
	// Session).
	o := Run(ctx, Hook{Event: PreToolUse, Matcher: "Bash", Host: true, Command: `"$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.sh`}, in,
		Place{Dir: "/workspaces/elsewhere", HostDir: host})
	if o.Decision != Block || o.Reason != host+" "+host {
		t.Fatalf("the documented command form: %+v", o)
	}
	b, err := os.ReadFile(filepath.Join(host, "seen.json"))
	var got map[string]any
	if err != nil || json.Unmarshal(b, &got) != nil {
		t.Fatalf("stdin: %q %v", b, err)
	}
	if got["permission_mode"] != "default" || got["tool_use_id"] != "call_7" || got["cwd"] != host || got["tool_name"] != "shell" {
		t.Errorf("stdin: %s", b)
	}
}

// TestHostHookLeavesNothing: nothing a host hook starts outlives it, a
// process that left its group (setsid, a daemonising double fork)
// included, whether the hook allows, blocks or times out (issue 32,
// finding 11). Each hook starts `sleep 600` in the background, waits
// until it has written its PID, and ends.
func TestHostHookLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := Input{SessionID: "S1", TurnID: "T1", AgentID: "coder", ToolName: "shell"}
	const bg, started = `setsid sh -c 'echo $$ > bg.pid; exec sleep 600'`, `until [ -s bg.pid ]; do sleep 0.01; done`
	for _, tc := range []struct {
		name, command string
		timeout       time.Duration
		decision      string
	}{
		{"setsid, output held", bg + " & " + started, 0, Allow},
		{"setsid, output closed", bg + " </dev/null >/dev/null 2>&1 & " + started + "; exit 0", 0, Allow},
		{"double fork", "(" + bg + " </dev/null >/dev/null 2>&1 &); " + started + "; exit 0", 0, Allow},
		{"nohup then block", "nohup " + bg + " >/dev/null 2>&1 & " + started + "; echo no >&2; exit 2", 0, Block},
		{"timeout", bg + " </dev/null >/dev/null 2>&1 & " + started + "; sleep 600", 2 * time.Second, Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := Run(ctx, Hook{Event: PreToolUse, Name: "bg", Host: true, Command: tc.command, Timeout: tc.timeout}, in, Place{Dir: dir, HostDir: dir})
			if o.Decision != tc.decision {
				t.Errorf("outcome %+v, want %s", o, tc.decision)
			}
			b, err := os.ReadFile(filepath.Join(dir, "bg.pid"))
			pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || perr != nil {
				t.Fatalf("the background process wrote no PID: %q %v", b, err)
			}
			t.Cleanup(func() {
				if alive(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			polltest.Until(t, "the background sleep to end", func() bool { return !alive(pid) }, polltest.Within(5*time.Second))
		})
	}
}

// alive reports whether process pid runs (a zombie has ended).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// TestRunAllDecides: the answers of one event's hooks together, as Claude
// Code takes them: a deny after an ask wins, an ask after allows stands
// with its hook's server, a stop ends the chain on any event.
func TestRunAllDecides(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const (
		ask  = `printf '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"why"}}'`
		deny = `exit 2`
		stop = `printf '{"continue":false,"stopReason":"halt"}'`
		ok   = `true`
	)
	hook := func(event, id, cmd string) Hook { return Hook{Event: event, Host: true, ID: id, Command: cmd} }
	tests := []struct {
		name                   string
		list                   []Hook
		blocked, stopped, asks bool
		server, ran            string
	}{
		{"ask", []Hook{hook(PreToolUse, "0", ok), hook(PreToolUse, "guard", ask)}, false, false, true, "hook:guard", "0,guard"},
		{"deny after ask", []Hook{hook(PreToolUse, "0", ask), hook(PreToolUse, "1", deny)}, true, false, false, "", "0,1"},
		{"stop ends the chain", []Hook{hook(PreToolUse, "0", stop), hook(PreToolUse, "1", deny)}, true, true, false, "", "0"},
		{"stop after a tool ran", []Hook{hook(PostToolUse, "0", stop), hook(PostToolUse, "1", ok)}, true, true, false, "", "0"},
	}
	for _, tt := range tests {
		var ran []string
		v := RunAll(ctx, tt.list, Input{ToolName: "shell"}, Place{HostDir: t.TempDir()}, func(o Outcome) { ran = append(ran, strings.TrimPrefix(o.Server, "hook:")) })
		if v.Blocked != tt.blocked || v.Stopped != tt.stopped || v.Asked != tt.asks || (tt.asks && v.AskedBy.Server != tt.server) || strings.Join(ran, ",") != tt.ran {
			t.Errorf("%s: %+v, ran %v", tt.name, v, ran)
		}
		if tt.stopped && v.Message() != "stopped by hook `"+v.By.Hook+"`: halt" {
			t.Errorf("%s: message %q", tt.name, v.Message())
		}
	}
}
