// Package hooks runs the operator's hooks at fixed points of the Agent turn
// loop, in the shape Claude Code's users already write (CONTRACT.md "Hooks,
// traces and metrics"): an event, an optional matcher on the tool name, and
// a command that gets the event as JSON on stdin.
//
// Decisions:
//   - A hook runs with `sh -c` in the Session's sandbox, in its checkout,
//     through the same exec path as the shell tool (tools.Run): bounded in
//     time, and killed with everything it started when the time is up. A
//     hook marked Host runs on the daemon host instead, in the same
//     directory, with a scrubbed environment (PATH, HOME, LANG, the
//     LATHE_* variables and CLAUDE_PROJECT_DIR only), in its own process
//     group.
//   - Exit 0 allows; stdout may then be JSON with {"decision": "block",
//     "reason": …} (or Claude Code's hookSpecificOutput.permissionDecision
//     "deny"), or context for the model (additionalContext, or plain text
//     for UserPromptSubmit and SessionStart). Exit 2 blocks with stderr as
//     the reason. Any other exit, a timeout, a command that cannot start, is
//     a failure (Failed) with its message.
//   - A PreToolUse hook's permissionDecision "ask" (Ask) leaves the call to
//     the operator: the caller parks it as an approval whose server is the
//     hook's (Hook.Server). {"continue": false, "stopReason": …} (Halt), on
//     any event, ends the turn: it wins over every other answer, as in
//     Claude Code, and ends the chain.
//   - Blocking events (PreToolUse, UserPromptSubmit) fail closed: a hook
//     that fails blocks as a block does, so that a broken guard never
//     passes silently. The hooks of one event run one after another in
//     config order (the global ones, then the Agent's); the first that
//     blocks ends the chain.
//   - What a hook printed is kept bounded (MaxStdout, MaxStderr).
package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lathe/runtime/agent/tools"
	"lathe/runtime/sandbox"
)

// Events, with Claude Code's names.
const (
	SessionStart     = "SessionStart"
	UserPromptSubmit = "UserPromptSubmit"
	PreToolUse       = "PreToolUse"
	PostToolUse      = "PostToolUse"
	Stop             = "Stop"
)

// Events lists every event a hook may name.
var Events = []string{SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop}

// ToolEvent reports whether event concerns one tool call (and so may have
// a matcher).
func ToolEvent(event string) bool { return event == PreToolUse || event == PostToolUse }

// blocking reports whether a hook of event can stop what follows.
func blocking(event string) bool { return event == PreToolUse || event == UserPromptSubmit }

// Timeouts, in seconds.
const (
	DefaultTimeoutSeconds = 30
	MaxTimeoutSeconds     = 600
)

// Bounds on what a hook's output keeps.
const (
	MaxStdout = 64 << 10
	MaxStderr = 8 << 10
)

// TimeoutOf is a configured timeout_seconds as a duration (0: the default).
func TimeoutOf(seconds int) time.Duration {
	if seconds <= 0 {
		seconds = DefaultTimeoutSeconds
	}
	return time.Duration(seconds) * time.Second
}

// Hook is one configured hook.
type Hook struct {
	Event string
	// Matcher selects the tool calls of a tool event, as Claude Code's
	// matchers do (CheckMatcher); empty matches every tool.
	Matcher string
	Command string
	// Name labels the hook in tool cards and History; "" shows the command.
	Name    string
	Host    bool
	Timeout time.Duration
	// ID names the hook where it asks the operator (Server): its name, or
	// its place in the config ("2", "<agent>.0").
	ID string
}

// Server is the approval server of the calls the hook asks about.
func (h Hook) Server() string { return "hook:" + h.ID }

// Label is how a hook is named to the user.
func (h Hook) Label() string {
	if h.Name != "" {
		return h.Name
	}
	const max = 60
	if c := strings.TrimSpace(h.Command); len(c) > max {
		return c[:max] + "…"
	}
	return strings.TrimSpace(h.Command)
}

// ClaudeCodeNames maps each of Lathe's sandbox tools to the names Claude
// Code gives its counterparts, which a matcher may use instead
// (docs/design/toolchain.md lists their input fields side by side).
var ClaudeCodeNames = map[string][]string{
	"shell":      {"Bash"},
	"write_file": {"Write"},
	"edit_file":  {"Edit", "MultiEdit"},
	"read_file":  {"Read"},
	"search":     {"Grep"},
	"list_files": {"Glob", "LS"},
}

// A matcher is read as Claude Code reads it: "" or "*" matches every tool;
// one made only of letters, digits, "_", "-", spaces and "|" is an exact
// name or a list of them ("Bash", "write_file | edit_file"); any other is
// a regular expression that matches anywhere in the name, unanchored as
// Claude Code's JavaScript RegExp.test is ("mcp__memory__.*", "^mcp__"),
// in Go's syntax (RE2: no lookaround, no backreferences).
func exactList(m string) bool {
	return strings.IndexFunc(m, func(r rune) bool {
		return !(strings.ContainsRune("_-| ", r) || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0
}

// alternatives are an exact list's names.
func alternatives(m string) []string {
	alts := strings.Split(m, "|")
	for i := range alts {
		alts[i] = strings.TrimSpace(alts[i])
	}
	return alts
}

// compiled holds the regular expression of each matcher seen; matchers
// come from the config alone, so it stays as small as the config.
var compiled sync.Map // string → *regexp.Regexp

// pattern is m's regular expression (m is neither "", "*" nor an exact list).
func pattern(m string) (*regexp.Regexp, error) {
	if re, ok := compiled.Load(m); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(m)
	if err != nil {
		return nil, err
	}
	compiled.Store(m, re)
	return re, nil
}

// CheckMatcher reports a matcher that cannot match as Claude Code's would:
// a regular expression that does not compile (a glob's leading "*" among
// them: the glob "*_file" is the expression ".*_file").
func CheckMatcher(m string) error {
	if m == "" || m == "*" || exactList(m) {
		if m != "" && slices.Contains(alternatives(m), "") {
			return fmt.Errorf("%q has an empty alternative", m)
		}
		return nil
	}
	if _, err := pattern(m); err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			err = fmt.Errorf("%s: `%s`", se.Code, se.Expr)
		}
		return fmt.Errorf("%q is not a valid regular expression (%v); a matcher is an exact tool name, \"*\", or a regular expression as in Claude Code (a glob's * is .*)", m, err)
	}
	return nil
}

// Matches reports whether h applies to a call of tool, by its name or,
// for a sandbox tool, by any of its Claude Code names.
func (h Hook) Matches(tool string) bool {
	m := h.Matcher
	if m == "" || m == "*" {
		return true
	}
	names := append([]string{tool}, ClaudeCodeNames[tool]...)
	if exactList(m) {
		alts := alternatives(m)
		return slices.ContainsFunc(names, func(n string) bool { return slices.Contains(alts, n) })
	}
	re, err := pattern(m)
	if err != nil { // refused at start-up (CheckMatcher); matches nothing
		return false
	}
	return slices.ContainsFunc(names, re.MatchString)
}

// Set is every configured hook.
type Set struct {
	Global   []Hook
	PerAgent map[string][]Hook
}

// Empty reports whether no hook is configured.
func (s Set) Empty() bool {
	if len(s.Global) > 0 {
		return false
	}
	for _, l := range s.PerAgent {
		if len(l) > 0 {
			return false
		}
	}
	return true
}

// For lists the hooks of event for Agent agent (and, for a tool event, a
// call of tool), in the order they run.
func (s Set) For(agent, event, tool string) []Hook {
	var out []Hook
	for _, list := range [][]Hook{s.Global, s.PerAgent[agent]} {
		for _, h := range list {
			if h.Event == event && (!ToolEvent(event) || h.Matches(tool)) {
				out = append(out, h)
			}
		}
	}
	return out
}

// Input is the JSON a hook reads on stdin, with Claude Code's field names.
type Input struct {
	HookEventName string `json:"hook_event_name"`
	SessionID     string `json:"session_id"`
	TurnID        string `json:"turn_id"`
	AgentID       string `json:"agent_id"`
	// Cwd is the checkout as the sandbox sees it; outside a Session, the
	// directory a host hook runs in.
	Cwd string `json:"cwd"`
	// PermissionMode is always PermissionMode (Run sets it).
	PermissionMode string `json:"permission_mode"`
	ToolName       string `json:"tool_name,omitempty"`
	// TranscriptPath is a file with the turn so far, in Claude Code's
	// transcript shape, where the hook runs (Place.Transcript); "" when
	// the run has none.
	TranscriptPath string `json:"transcript_path,omitempty"`
	// ToolUseID is the tool call's ID (a tool event's).
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	ToolInput    json.RawMessage `json:"tool_input,omitempty"`
	ToolResponse *ToolResponse   `json:"tool_response,omitempty"`
	Prompt       string          `json:"prompt,omitempty"`
	// Scope says what runs the Agent: a Session turn ("session"), a Ways
	// lane ("lane"), a Chat ("chat", session_id is the Chat's ID) or an
	// Automation run's agent node ("automation", session_id is the run's
	// ID, turn_id the node's) or a direct execute of the Agent ("agent",
	// session_id and turn_id are the execute's effect intent).
	Scope string `json:"lathe_scope,omitempty"`
}

// PermissionMode is Claude Code's name for how Lathe grants tool calls,
// sent as every hook's permission_mode: "default" (Claude Code's others
// are acceptEdits, plan, dontAsk and bypassPermissions). Lathe has that
// one mode: the sandbox tools run unasked inside the sandbox, which is
// their boundary, and an MCP call waits for the operator as its server's
// approval and the saved decisions say.
const PermissionMode = "default"

// Scopes of Input.
const (
	ScopeSession    = "session"
	ScopeLane       = "lane"
	ScopeChat       = "chat"
	ScopeAutomation = "automation"
	ScopeAgent      = "agent"
)

// ToolResponse is a finished call's result, for PostToolUse.
type ToolResponse struct {
	Output  string `json:"output"`
	IsError bool   `json:"is_error"`
}

// Decisions of one hook run.
const (
	Allow  = "allow"
	Block  = "block"
	Failed = "error"
	// Ask: a PreToolUse hook leaves the call to the operator.
	Ask = "ask"
	// Halt: the hook ends the turn (continue: false); Reason is its
	// stopReason.
	Halt = "stop"
)

// Outcome is one hook run.
type Outcome struct {
	Hook     string
	Event    string
	Decision string
	// Reason says why it blocked or failed.
	Reason string
	// Context is what the hook adds for the model.
	Context string
	// ExitCode is -1 when the command did not exit (timeout, no start).
	ExitCode int
	Stdout   string
	Stderr   string
	TimedOut bool
	Duration time.Duration
	// Server is the hook's approval server (Hook.Server), for Ask.
	Server string
}

// Place is where hooks run: a Session's sandbox and its checkout (Dir, as
// the sandbox sees it), and HostDir, the same checkout on the host, where
// Host hooks run (a Ways lane's copy differs from Dir). A nil Sandbox runs
// only Host hooks; the others fail with a message (so a blocking event's
// hook blocks: a Chat has no sandbox). An empty HostDir refuses Host
// hooks.
type Place struct {
	Sandbox sandbox.Sandbox
	Dir     string
	HostDir string
	// Transcript, when set, is the turn so far as JSON Lines: each hook
	// run reads it at its transcript_path (transcript.go), which
	// TranscriptDir holds for host hooks.
	Transcript    func() []byte
	TranscriptDir string
}

// Run runs one hook with in on stdin and decides.
func Run(ctx context.Context, h Hook, in Input, at Place) Outcome {
	in.HookEventName, in.Cwd, in.PermissionMode = h.Event, at.Dir, PermissionMode
	if h.Host {
		// Where it runs: the checkout's copy on the host (a Ways lane's, a
		// remote Session's clone), so that its cwd, CLAUDE_PROJECT_DIR and
		// a tool's file_path name host paths.
		in.Cwd = at.HostDir
	}
	in.ToolInput = claudeFields(in.ToolName, in.Cwd, in.ToolInput)
	if at.Transcript != nil {
		path, done := at.transcriptFile(ctx, h, in.SessionID+"\x00"+in.TurnID)
		defer done()
		in.TranscriptPath = path
	}
	o := Outcome{Hook: h.Label(), Event: h.Event, ExitCode: -1, Server: h.Server()}
	stdin, err := json.Marshal(in)
	if err != nil {
		o.Decision, o.Reason = Failed, fmt.Sprintf("encode the event: %v", err)
		return o
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = TimeoutOf(0)
	}
	stdout, stderr := tools.NewBounded(MaxStdout), tools.NewBounded(MaxStderr)
	// Claude Code's documented command form, "$CLAUDE_PROJECT_DIR"/.claude/hooks/x.sh, finds the checkout's script.
	env := []string{"LATHE_HOOK_EVENT=" + h.Event, "LATHE_PROJECT_DIR=" + in.Cwd, "CLAUDE_PROJECT_DIR=" + in.Cwd, "LATHE_SESSION_ID=" + in.SessionID}
	t0 := time.Now()
	var code int
	var timedOut bool
	switch {
	case h.Host && at.HostDir == "":
		err = errors.New("no host directory to run it in")
	case h.Host:
		code, timedOut, err = runHost(ctx, h.Command, at.HostDir, env, stdin, stdout, stderr, timeout)
	case at.Sandbox == nil:
		err = errors.New("no sandbox to run it in (mark it host: true to run it on the daemon host)")
	default:
		code, timedOut, err = tools.Run(ctx, at.Sandbox, sandbox.ExecSpec{Args: []string{"sh", "-c", h.Command}, Dir: at.Dir,
			Env: env, Stdin: bytes.NewReader(stdin), Stdout: stdout, Stderr: stderr}, timeout)
	}
	o.Duration, o.Stdout, o.Stderr, o.TimedOut = time.Since(t0), stdout.String(), stderr.String(), timedOut
	switch {
	case err != nil:
		o.Decision, o.Reason = Failed, err.Error()
	case timedOut:
		o.Decision, o.Reason = Failed, fmt.Sprintf("timed out after %v; it and what it started were killed", timeout)
	default:
		o.ExitCode = code
		o.Decision, o.Reason, o.Context = decide(h.Event, code, o.Stdout, o.Stderr)
	}
	return o
}

// answer is the JSON a hook may print on stdout.
type answer struct {
	// Continue false ends the turn (Claude Code's common field).
	Continue          *bool  `json:"continue"`
	StopReason        string `json:"stopReason"`
	Decision          string `json:"decision"`
	Reason            string `json:"reason"`
	AdditionalContext string `json:"additionalContext"`
	Specific          struct {
		AdditionalContext        string `json:"additionalContext"`
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason"`
	} `json:"hookSpecificOutput"`
}

// decide reads an exited hook's decision.
func decide(event string, code int, stdout, stderr string) (decision, reason, context string) {
	switch code {
	case 0:
	case 2:
		if reason = strings.TrimSpace(stderr); reason == "" {
			reason = "the hook exited with status 2"
		}
		return Block, reason, ""
	default:
		reason = fmt.Sprintf("exited with status %d", code)
		if e := strings.TrimSpace(stderr); e != "" {
			reason += ": " + e
		}
		return Failed, reason, ""
	}
	out := strings.TrimSpace(stdout)
	var a answer
	if strings.HasPrefix(out, "{") && json.Unmarshal([]byte(out), &a) == nil {
		switch {
		case a.Continue != nil && !*a.Continue:
			return Halt, orDefault(a.StopReason, "stopped without a reason"), ""
		case strings.EqualFold(a.Decision, "block"):
			return Block, orDefault(a.Reason, "blocked without a reason"), ""
		case strings.EqualFold(a.Specific.PermissionDecision, "deny"):
			return Block, orDefault(a.Specific.PermissionDecisionReason, a.Reason, "denied without a reason"), ""
		case event == PreToolUse && strings.EqualFold(a.Specific.PermissionDecision, "ask"):
			return Ask, orDefault(a.Specific.PermissionDecisionReason, a.Reason), ""
		}
		return Allow, "", orDefault(a.Specific.AdditionalContext, a.AdditionalContext)
	}
	if event == UserPromptSubmit || event == SessionStart {
		context = out
	}
	return Allow, "", context
}

func orDefault(vs ...string) string {
	for _, v := range vs {
		if strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Verdict is what the hooks of one event decided together.
type Verdict struct {
	// Blocked is set when a hook of a blocking event blocked or failed, or
	// a hook of any event stopped the turn (Stopped); By is that hook's
	// outcome.
	Blocked bool
	By      Outcome
	// Stopped: a hook ended the turn (continue: false); By says which and
	// why (StopMessage).
	Stopped bool
	// Asked: no hook blocked, and one (AskedBy) leaves the call to the
	// operator.
	Asked   bool
	AskedBy Outcome
	// Context joins what the hooks added for the model.
	Context string
	// Notes are the blocks and failures of non-blocking events, one line
	// each, for the model and the tool card.
	Notes []string
}

// Message is the reason a blocked call or turn is given: "blocked by hook
// `no-rm`: …" or "hook `…` failed: …".
func (v Verdict) Message() string { return note(v.By) }

func note(o Outcome) string {
	switch o.Decision {
	case Block:
		return fmt.Sprintf("blocked by hook `%s`: %s", o.Hook, o.Reason)
	case Halt:
		return fmt.Sprintf("stopped by hook `%s`: %s", o.Hook, o.Reason)
	}
	return fmt.Sprintf("hook `%s` failed: %s", o.Hook, o.Reason)
}

// RunAll runs hooks in order and decides together; record sees each
// outcome as it ends. On a blocking event the first block or failure ends
// the chain; on any event, the first stop does. A block after an ask wins
// over it (Claude Code: deny, then ask, then allow).
func RunAll(ctx context.Context, list []Hook, in Input, at Place, record func(Outcome)) Verdict {
	var v Verdict
	var contexts []string
	for _, h := range list {
		o := Run(ctx, h, in, at)
		if record != nil {
			record(o)
		}
		if o.Context != "" {
			contexts = append(contexts, o.Context)
		}
		switch o.Decision {
		case Allow:
			continue
		case Ask:
			if !v.Asked {
				v.Asked, v.AskedBy = true, o
			}
			continue
		case Halt:
			v.Blocked, v.Stopped, v.By, v.Asked = true, true, o, false
			v.Context = strings.Join(contexts, "\n")
			return v
		}
		if blocking(h.Event) {
			v.Blocked, v.By, v.Asked = true, o, false
			break
		}
		v.Notes = append(v.Notes, note(o))
	}
	v.Context = strings.Join(contexts, "\n")
	return v
}

// scrubbedPath is a host hook's PATH.
const scrubbedPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// runHost runs command on the daemon host in dir with a scrubbed
// environment, in its own process group, killed as a group at the timeout.
// Nothing it started outlives its shell: once that exits, whatever carries
// the run's mark is killed (endRun, runtime/hooks/leftovers.go), before
// Wait waits for the output pipes such a process would hold open.
func runHost(ctx context.Context, command, dir string, env []string, stdin []byte, stdout, stderr tools.Bounded, timeout time.Duration) (code int, timedOut bool, err error) {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	run := newRun()
	cmd := exec.CommandContext(tctx, "/bin/sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(append([]string{"PATH=" + scrubbedPath, "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8"}, run.env()...), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	if err = cmd.Start(); err == nil {
		ended := afterExit(cmd.Process.Pid, func() { endRun(run) })
		err = cmd.Wait()
		<-ended
	}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return -1, false, ctx.Err()
	case tctx.Err() != nil:
		return -1, true, nil
	case errors.As(err, &exit):
		return exit.ExitCode(), false, nil
	case err != nil:
		return -1, false, fmt.Errorf("start on the host: %w", err)
	}
	return 0, false, nil
}

// afterExit runs f once process pid (a child not yet waited for) has
// exited, reaped or not, and closes the channel it returns when f is done.
// Where the kernel has no pidfd, f runs once the caller's wait returns
// (the caller receives from the channel after it).
func afterExit(pid int, f func()) <-chan struct{} {
	done := make(chan struct{})
	fd, err := unix.PidfdOpen(pid, 0)
	go func() {
		defer close(done)
		if err == nil {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
					break
				}
			}
			unix.Close(fd)
		}
		f()
	}()
	return done
}
