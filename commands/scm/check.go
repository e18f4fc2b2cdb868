package scm

// A Session's Check: one command (tests, a linter, a build) set on the
// Session record and run on request in its Ready sandbox. Setting it and
// every run are events on the Session.

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/tasks"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent/tools"
	"lathe/runtime/sandbox"
)

// Check bounds.
const (
	// DefaultCheckTimeout and MaxCheckTimeout bound one run.
	DefaultCheckTimeout = 10 * time.Minute
	MaxCheckTimeout     = time.Hour
)

// CheckResult is one run of a Session's Check, as its CheckRan event
// records it.
type CheckResult struct {
	events.CheckRan
	Passed bool `json:"passed"`
}

// SetCheck sets the Session's Check command; nil, empty or blank clears it.
// Setting the command it already has records nothing.
func (s *Git) SetCheck(ctx context.Context, id string, command *string) (projections.Session, error) {
	var cmd *string
	if command != nil && strings.TrimSpace(*command) != "" {
		c := *command
		switch {
		case len(c) > tasks.MaxTaskCommand:
			return projections.Session{}, fmt.Errorf("%w: check_command is longer than %d bytes", core.ErrInvalid, tasks.MaxTaskCommand)
		case !utf8.ValidString(c) || strings.IndexByte(c, 0) >= 0:
			return projections.Session{}, fmt.Errorf("%w: check_command must be valid UTF-8 without NUL bytes", core.ErrInvalid)
		}
		cmd = &c
	}
	// Like a rename, it is durable config: it takes no lifecycle lock, so it
	// is never refused while an environment prepares.
	return s.UpdateSession(ctx, id, func(ss projections.Session) (events.Payload, error) {
		if (ss.CheckCommand == nil) == (cmd == nil) && (cmd == nil || *ss.CheckCommand == *cmd) {
			return nil, nil
		}
		return events.CheckSet{CheckCommand: cmd}, nil
	})
}

// RunCheck runs the Session's Check command with `bash -lc` in its Ready
// sandbox, at the Session root, for at most timeout (0: the default), and
// records the run: exit code (-1 when it did not finish), the last 16 KiB
// of its combined output, its duration. A timed-out run is killed with
// everything it started. One run at a time per Session; the run goes on
// to its end, and is recorded, even if the client goes away.
func (s *Git) RunCheck(ctx context.Context, id string, timeout time.Duration) (CheckResult, error) {
	switch {
	case timeout == 0:
		timeout = DefaultCheckTimeout
	case timeout < time.Second || timeout > MaxCheckTimeout:
		return CheckResult{}, fmt.Errorf("%w: timeout_seconds must be between 1 and %d", core.ErrInvalid, int(MaxCheckTimeout/time.Second))
	}
	sb, ss, err := s.ReadySandbox(id)
	if err != nil {
		return CheckResult{}, err
	}
	if ss.CheckCommand == nil {
		return CheckResult{}, fmt.Errorf("%w: session %q has no check command; set one with PUT /api/sessions/%s/check", core.ErrConflict, id, id)
	}
	if _, running := s.checks.LoadOrStore(id, true); running {
		return CheckResult{}, fmt.Errorf("%w: a check of session %q is already running", core.ErrConflict, id)
	}
	defer s.checks.Delete(id)

	cmd := *ss.CheckCommand
	tail := core.NewTail(environments.TailBytes)
	start := time.Now()
	code, timedOut, err := tools.Run(context.WithoutCancel(ctx), sb, sandbox.ExecSpec{Args: []string{"bash", "-lc", cmd}, Dir: ss.WorkingDir, Stdout: tail, Stderr: tail}, timeout)
	run := events.CheckRan{Command: cmd, ExitCode: code, DurationMS: time.Since(start).Milliseconds(), TimedOut: timedOut}
	switch {
	case err != nil:
		run.ExitCode, run.Error = -1, "the check did not complete: "+err.Error()
	case timedOut:
		run.ExitCode, run.Error = -1, fmt.Sprintf("timed out after %v; the command and its children were killed", timeout)
	case s.LiveSandbox(id) != sb || environments.IsDone(sb):
		run.Error = "the sandbox stopped while the check ran (environment closed, rebuilt or lost); the exit code is not the command's own"
	}
	run.OutputTail = tail.String()

	release, err := s.Own(context.WithoutCancel(ctx), id, true)
	if err != nil {
		return CheckResult{}, err
	}
	defer release()
	if _, ok := s.Store.Session(id); !ok {
		return CheckResult{}, fmt.Errorf("%w: session %q was deleted while its check ran", core.ErrNotFound, id)
	}
	if err := s.Append(context.WithoutCancel(ctx), []journal.Event{events.New(id, run)}); err != nil {
		return CheckResult{}, err
	}
	return CheckResult{CheckRan: run, Passed: run.ExitCode == 0 && run.Error == ""}, nil
}
