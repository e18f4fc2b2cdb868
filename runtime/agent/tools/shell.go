package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"lathe/runtime/sandbox"
)

const shellDesc = `Run a command with bash -lc in the workspace root, inside the Session's sandbox. stdout and stderr come back combined, then "[exit code N]". Output beyond 64 KiB keeps its head and tail around a truncation notice. The command is killed after timeout_seconds (default 120, at most 600). There is no stdin and no terminal: do not start interactive programs.`

const shellSchema = `{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "The bash command line to run."},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Kill the command after this many seconds; default 120."}
  },
  "required": ["command"],
  "additionalProperties": false
}`

func (s *Set) shell(ctx context.Context, raw json.RawMessage) Result {
	var a struct {
		Command *string `json:"command"`
		Timeout *int    `json:"timeout_seconds"`
	}
	if err := decode("shell", raw, &a); err != nil {
		return fail("%v", err)
	}
	if a.Command == nil {
		return missing("shell", "command")
	}
	if strings.TrimSpace(*a.Command) == "" {
		return fail("shell: command is empty")
	}
	timeout := DefaultShellTimeout
	if a.Timeout != nil {
		t := time.Duration(*a.Timeout) * time.Second
		if t < time.Second || t > MaxShellTimeout {
			return fail("shell: timeout_seconds must be between 1 and %d, got %d", int(MaxShellTimeout/time.Second), *a.Timeout)
		}
		timeout = t
	}
	out := newCapped(MaxShellOutput)
	code, timedOut, err := s.run(ctx, sandbox.ExecSpec{Args: []string{"bash", "-lc", *a.Command}, Dir: s.root, Stdout: out, Stderr: out}, timeout)
	text := out.String()
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	switch {
	case err != nil:
		return Result{Output: text + fmt.Sprintf("[not completed: %v]", err), IsError: true}
	case timedOut:
		return Result{Output: text + fmt.Sprintf("[timed out after %v; the command and its children were killed with SIGKILL]", timeout), IsError: true}
	}
	return Result{Output: text + fmt.Sprintf("[exit code %d]", code), IsError: code != 0}
}
