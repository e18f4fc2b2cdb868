// Package tools holds the coding Agent's tools: list, read, write and edit
// files, search them, and run shell commands. Every tool runs inside the
// Session's sandbox through sandbox.Sandbox.Exec, never on the host.
//
// The file tools run in Lathe's own helper in the sandbox (`lathe
// sandbox-helper files …`, inside.go), which needs nothing of the image;
// the shell tool runs the image's bash.
//
// Paths are relative to the Session root, the sandbox's working dir. A path
// is refused before anything runs when runtime/confine refuses it (absolute,
// a ".." element, NUL, over PATH_MAX), and again inside the sandbox when it
// resolves (as `realpath -m` does), through symlinks, to somewhere outside
// the root.
//
// User content never reaches a command line: file content and edits go in
// on stdin, and paths and patterns are argv entries of the helper, never
// spliced into a script.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"time"

	"lathe/runtime/llm"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/helper"
)

// Bounds on what a tool call returns to the model.
const (
	// MaxReadBytes bounds read_file's output.
	MaxReadBytes = 256 << 10
	// MaxShellOutput bounds shell's combined output; the head and the tail
	// are kept around a truncation notice.
	MaxShellOutput = 64 << 10
	// MaxListEntries bounds list_files's output.
	MaxListEntries = 1000
	// MaxSearchMatches bounds search's output.
	MaxSearchMatches = 200
	// DefaultShellTimeout and MaxShellTimeout bound a shell command.
	DefaultShellTimeout = 120 * time.Second
	MaxShellTimeout     = 600 * time.Second

	// maxOutput bounds what the file tools' scripts may print, well above
	// what they print by design.
	maxOutput = MaxReadBytes + 64<<10
	// killWait bounds the wait for a killed process to be reaped.
	killWait = 10 * time.Second
	// markerEnv marks every process a tool starts, so that a timeout can
	// kill its whole tree, not only its first process.
	markerEnv = "LATHE_TOOL_CALL"
)

// Result is what a tool call returns to the model. IsError results carry a
// message the model can act on.
type Result struct {
	Output  string
	IsError bool
	// EndTurn, when set, ends the turn once this call finished, with no
	// further inference, and says why (a hook's continue: false).
	EndTurn string
}

// Set runs the tools in one sandbox. It is safe for concurrent use.
type Set struct {
	sb   sandbox.Sandbox
	root string
}

// New returns the tools of sandbox sb, whose working dir (the Session root)
// is root: the absolute path given as sandbox.Spec.WorkingDir.
func New(sb sandbox.Sandbox, root string) *Set {
	return &Set{sb: sb, root: root}
}

type tool struct {
	llm.Tool
	call func(s *Set, ctx context.Context, args json.RawMessage) Result
}

var all = []tool{
	{llm.Tool{Name: "list_files", Description: listDesc, Schema: json.RawMessage(listSchema)}, (*Set).listFiles},
	{llm.Tool{Name: "read_file", Description: readDesc, Schema: json.RawMessage(readSchema)}, (*Set).readFile},
	{llm.Tool{Name: "write_file", Description: writeDesc, Schema: json.RawMessage(writeSchema)}, (*Set).writeFile},
	{llm.Tool{Name: "edit_file", Description: editDesc, Schema: json.RawMessage(editSchema)}, (*Set).editFile},
	{llm.Tool{Name: "search", Description: searchDesc, Schema: json.RawMessage(searchSchema)}, (*Set).search},
	{llm.Tool{Name: "shell", Description: shellDesc, Schema: json.RawMessage(shellSchema)}, (*Set).shell},
}

// Tools returns the tools to advertise to the model.
func (s *Set) Tools() []llm.Tool {
	out := make([]llm.Tool, len(all))
	for i, t := range all {
		out[i] = t.Tool
	}
	return out
}

// Has reports whether name is one of the sandbox tools.
func Has(name string) bool {
	return slices.ContainsFunc(all, func(t tool) bool { return t.Name == name })
}

// Call runs tool name with its JSON arguments. Every failure, including an
// unknown tool or malformed arguments, is an IsError result.
func (s *Set) Call(ctx context.Context, name string, args json.RawMessage) Result {
	for _, t := range all {
		if t.Name == name {
			if err := ctx.Err(); err != nil {
				return fail("%s not run: %v", name, err)
			}
			return t.call(s, ctx, args)
		}
	}
	names := make([]string, len(all))
	for i, t := range all {
		names[i] = t.Name
	}
	return fail("unknown tool %q; the tools are %s", name, strings.Join(names, ", "))
}

func fail(format string, a ...any) Result {
	return Result{Output: fmt.Sprintf(format, a...), IsError: true}
}

// decode parses args into v, a pointer to a struct whose optional and
// required fields are pointers, with messages meant for the model.
func decode(tool string, args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the arguments object")
	}
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("%s: arguments must be a JSON object, got %s", tool, te.Value)
		}
		return fmt.Errorf("%s: field %q must be %s, got %s", tool, te.Field, typeName(te.Type.Kind().String()), te.Value)
	}
	return fmt.Errorf("%s: malformed arguments (%v); send one JSON object matching the schema", tool, err)
}

func typeName(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "an integer"
	case kind == "bool":
		return "a boolean"
	case kind == "string":
		return "a string"
	}
	return kind
}

func missing(tool, field string) Result {
	return fail("%s: missing required field %q", tool, field)
}

// inside runs file tool tool on rel with args in the sandbox's helper
// (inside.go), feeding stdin, and returns its stdout, or an error result
// made of its stderr.
func (s *Set) inside(ctx context.Context, tool, rel string, stdin io.Reader, args ...string) (string, *Result) {
	argv, err := helper.Argv(ctx, s.sb, append([]string{FilesCommand, tool, s.root, rel}, args...)...)
	if err != nil {
		r := fail("%s: %v", tool, err)
		return "", &r
	}
	out, errOut := newCapped(maxOutput), newCapped(8<<10)
	code, _, err := s.run(ctx, sandbox.ExecSpec{Args: argv, Dir: s.root, Stdin: stdin, Stdout: out, Stderr: errOut}, 0)
	if err != nil {
		r := fail("%s: %v", tool, err)
		return "", &r
	}
	if code != 0 {
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = fmt.Sprintf("failed with exit code %d", code)
		}
		r := fail("%s: %s", tool, msg)
		return "", &r
	}
	return out.String(), nil
}

// Run runs es in sb as the shell tool runs its commands: at most timeout
// (when positive), after which, or when ctx ends, the process and every
// process it started are killed. It returns the exit code, or timedOut, or
// ctx's error. It is for the daemon's own commands in a sandbox, such as a
// Session's Check.
func Run(ctx context.Context, sb sandbox.Sandbox, es sandbox.ExecSpec, timeout time.Duration) (code int, timedOut bool, err error) {
	return (&Set{sb: sb}).run(ctx, es, timeout)
}

// run starts es and waits for it, at most timeout when it is positive. When
// ctx ends or the timeout passes, the process and everything it started are
// killed with SIGKILL; a timeout returns timedOut, an ended ctx its error.
func (s *Set) run(ctx context.Context, es sandbox.ExecSpec, timeout time.Duration) (code int, timedOut bool, err error) {
	marker := newMarker()
	es.Env = append(es.Env, markerEnv+"="+marker)
	p, err := s.sb.Exec(ctx, es)
	if err != nil {
		return -1, false, fmt.Errorf("start in sandbox: %w", err)
	}
	waitCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	code, err = p.Wait(waitCtx)
	if err == nil || waitCtx.Err() == nil {
		if err != nil {
			err = fmt.Errorf("wait in sandbox: %w", err)
		}
		return code, false, err
	}
	s.kill(ctx, p, marker)
	if err := ctx.Err(); err != nil {
		return -1, false, err
	}
	return -1, true, nil
}

// kill sends SIGKILL to p, then to every process in the sandbox that carries
// marker in its environment (p's children), and waits a while for p.
func (s *Set) kill(ctx context.Context, p sandbox.Process, marker string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killWait)
	defer cancel()
	p.Signal(kctx, syscall.SIGKILL)
	_, _ = KillCarriers(kctx, s.sb, markerEnv+"="+marker)
	p.Wait(kctx)
}
