// Package helper is Lathe's own process inside a sandbox: the lathe binary
// itself, run as `lathe sandbox-helper …` from where the drivers put it
// (Path, a read-only mount), so that nothing Lathe does in a sandbox on its
// own behalf needs anything of the image: no Python, no shell of a given
// kind, no coreutils, no libc. The binary is static (CGO_ENABLED=0); Open
// checks that a build is (binary.go).
//
// The helper runs in one of two ways:
//   - `serve`: one long-lived process per sandbox whose stdin and stdout
//     carry a yamux session (github.com/hashicorp/yamux on both ends). The
//     host opens streams (Link.Open); a stream's first bytes are its Kind
//     and an argument, and the helper answers one NUL byte once it serves
//     the stream, or an error and the stream's end. KindDial connects to
//     the sandbox's own 127.0.0.1:port (the remote driver's way into its
//     loopback); the other kinds are Handlers.Streams (the file RPC of
//     runtime/remotefs). The session is symmetric: the helper can open
//     streams to the host too.
//   - a one-shot command per exec (Handlers.Commands): the Agent's file
//     tools, the tool runs' kill, the Ways restore. An exec of a static Go
//     binary starts in a few milliseconds.
//
// Each protocol's two halves live together in the package that owns it
// (the tools in runtime/agent/tools, the file RPC in runtime/remotefs, the
// restore in runtime/git); cmd/lathe hands their in-sandbox halves to Main.
// This package holds the process, the stream multiplexing both ends use,
// the relay, and the delivery of the binary (binary.go, install.go).
package helper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"
)

// Subcommand is the lathe subcommand that runs the helper.
const Subcommand = "sandbox-helper"

// Dir is where the drivers mount the helper's directory in a sandbox,
// read-only, and Path the binary in it.
const (
	Dir  = "/.lathe"
	Path = Dir + "/lathe"
)

// Command is one of the helper's one-shot commands, run with the rest of
// its argv and the exec's streams; it returns the exit code.
type Command func(args []string, stdin io.Reader, stdout, stderr io.Writer) int

// Stream serves one stream of a kind: it answers with Ready or Refuse
// first, then speaks its protocol until the stream or the session ends.
type Stream func(st io.ReadWriteCloser, arg string)

// Handlers are what the helper serves beyond the relay.
type Handlers struct {
	Commands map[string]Command
	Streams  map[Kind]Stream
}

// Main runs the helper with args (after the subcommand) and returns the
// process's exit code.
func Main(args []string, h Handlers) int {
	if len(args) == 0 {
		usage(h)
		return 2
	}
	switch args[0] {
	case "serve":
		if err := Serve(pollStdio(), h); err != nil {
			fmt.Fprintln(os.Stderr, "lathe sandbox-helper:", err)
			return 1
		}
		return 0
	case "install":
		return install(args[1:], os.Stderr)
	}
	cmd, ok := h.Commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "lathe sandbox-helper: unknown command %q\n", args[0])
		usage(h)
		return 2
	}
	return cmd(args[1:], os.Stdin, os.Stdout, os.Stderr)
}

func usage(h Handlers) {
	names := []string{"serve", "install"}
	for name := range h.Commands {
		names = append(names, name)
	}
	sort.Strings(names[2:])
	fmt.Fprintf(os.Stderr, "usage: lathe %s %s …\n(Lathe runs this inside its sandboxes; it is not for use by hand.)\n", Subcommand, strings.Join(names, "|"))
}

// stdio is the process's stdin and stdout as one connection.
type stdio struct{ in, out *os.File }

// pollStdio returns stdin and stdout in Go's poller (non-blocking), as a
// socket is, so that a read or write that waits parks its goroutine
// rather than holding a thread in a system call, which the runtime must
// notice before the stream's goroutine it woke gets that thread's
// processor. The pipes are the exec's own: no other process sees the
// flag.
func pollStdio() stdio {
	for _, fd := range []int{0, 1} {
		syscall.SetNonblock(fd, true) // else the file stays blocking: slower, not wrong
	}
	return stdio{in: os.NewFile(0, "stdin"), out: os.NewFile(1, "stdout")}
}

func (s stdio) Read(p []byte) (int, error)  { return s.in.Read(p) }
func (s stdio) Write(p []byte) (int, error) { return s.out.Write(p) }
func (s stdio) Close() error {
	return errors.Join(s.in.Close(), s.out.Close())
}

// Locator is a sandbox whose helper may be elsewhere than Path: a remote
// container that another build of Lathe made, into which the driver
// copies this build's helper on first use.
type Locator interface {
	HelperPath(ctx context.Context) (string, error)
}

// Argv is the command line that runs the helper's args in sb.
func Argv(ctx context.Context, sb any, args ...string) ([]string, error) {
	path := Path
	if l, ok := sb.(Locator); ok {
		p, err := l.HelperPath(ctx)
		if err != nil {
			return nil, fmt.Errorf("the sandbox helper: %w", err)
		}
		path = p
	}
	return append([]string{path, Subcommand}, args...), nil
}
