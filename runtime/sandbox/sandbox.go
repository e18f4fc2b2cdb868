// Package sandbox defines what the daemon needs from a Session's isolated
// runtime, independent of the provider behind it: a Driver prepares, finds
// and removes sandboxes; a Sandbox runs processes and reaches ports inside
// itself; a Process is one running command.
//
// One sandbox exists per Session environment generation. The local provider
// lives in runtime/sandbox/containerd; runtime/sandbox/sandboxtest holds the
// suite every provider must pass.
package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// Network values for Spec.Network.
const (
	// NetworkNone gives the sandbox its own network namespace with only a
	// loopback interface: no way out, but its ports are its own.
	NetworkNone = "none"
	// NetworkHostEgress is NetworkNone plus outbound access through the host.
	NetworkHostEgress = "host-egress"
)

// Spec describes one generation of a Session's environment.
type Spec struct {
	SessionID  string
	Generation uint64
	// Image is an OCI image reference; empty means the provider's default.
	Image string
	// WorkingDir is an absolute host path. It is mounted read-write at the
	// same path inside the sandbox, so paths in tool output match the host,
	// and it is the default directory of every process. Whatever runs inside,
	// root included, what it creates there belongs on the host to the
	// directory's owner, and it can create no set-user-ID or set-group-ID
	// file and no device node there.
	WorkingDir string
	// Source, when set, is the host directory mounted read-write at
	// WorkingDir instead of WorkingDir itself: a copy of the Workspace that
	// the sandbox sees at the Workspace's path (a Ways lane), so paths in
	// its tool output match the Session's. The sandbox never sees
	// WorkingDir on the host then. Its owner is the Workspace owner.
	Source string `json:",omitempty"`
	// Mounts are more host paths, each bind-mounted at the same path
	// inside: a worktree Session's sandbox sees the Workspace's .git, where
	// its worktree's metadata lives, read-write, with the parts git would
	// run or obey on the host (its config and hooks) read-only over it.
	// Later mounts go over earlier ones. Each path must exist.
	Mounts []Mount `json:",omitempty"`
	// Network is NetworkNone or NetworkHostEgress; empty means NetworkNone.
	Network string
	Limits  Limits
	// Env is added to every process's environment, as KEY=value.
	Env []string
}

// Mount is one Spec.Mounts entry.
type Mount struct {
	Path     string // a clean absolute host path, also the path inside
	ReadOnly bool
}

// DefaultEnv is in every sandbox's environment, over the image's and under
// Spec.Env: PYTHONDONTWRITEBYTECODE=1 keeps a test run from littering the
// user's checkout (bind-mounted read-write) with __pycache__ folders.
var DefaultEnv = []string{"PYTHONDONTWRITEBYTECODE=1"}

// Limits bound a sandbox's resources. Zero means no limit.
type Limits struct {
	MemoryMB int
	CPUs     float64
	PIDs     int
}

// Driver creates, finds and removes sandboxes. Implementations are safe for
// concurrent use.
type Driver interface {
	// Prepare creates and starts the sandbox for spec's generation and returns
	// it once processes can run in it. Preparing a generation that already
	// runs with the same spec returns that sandbox.
	Prepare(ctx context.Context, spec Spec) (Sandbox, error)
	// Attach returns every sandbox this daemon owns that the provider still
	// knows, live or not: after a restart it is how runtime state is rebuilt.
	// A sandbox whose main process is gone comes back with Done closed.
	Attach(ctx context.Context) ([]Sandbox, error)
	// Remove stops and deletes the sandbox of that generation and everything
	// the provider holds for it. Removing a missing sandbox is not an error.
	Remove(ctx context.Context, sessionID string, generation uint64) error
}

// Sandbox is one running generation of a Session's environment.
type Sandbox interface {
	SessionID() string
	Generation() uint64
	// Exec starts a process in the sandbox. It returns once the process runs.
	Exec(ctx context.Context, spec ExecSpec) (Process, error)
	// Dial connects to 127.0.0.1:port as seen from inside the sandbox: its own
	// loopback, never the host's.
	Dial(ctx context.Context, port int) (net.Conn, error)
	// Done is closed when the sandbox's main process has exited, whoever
	// caused it; Err then says why. The sandbox cannot run anything after.
	Done() <-chan struct{}
	Err() error
	// Teardown removes the sandbox, as Driver.Remove does.
	Teardown(ctx context.Context) error
}

// ExecSpec is one command to run in a sandbox.
type ExecSpec struct {
	Args []string
	// Dir defaults to the sandbox's WorkingDir.
	Dir string
	// Env is added to the sandbox's environment, as KEY=value.
	Env []string
	// TTY runs the process on a terminal of Rows x Cols. Output then arrives
	// on Stdout only.
	TTY        bool
	Rows, Cols uint16
	// Nil streams mean no input and discarded output. Stdout and Stderr may
	// be the same writer. Stdin is read until EOF, which the process then sees.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Process is a command running in a sandbox.
type Process interface {
	// Wait returns the exit code once the process has exited and all its
	// output has been written. Callers may call it more than once.
	Wait(ctx context.Context) (exitCode int, err error)
	Signal(ctx context.Context, sig syscall.Signal) error
	// Resize changes the terminal size of a TTY process.
	Resize(ctx context.Context, rows, cols uint16) error
}

// Error classes. Drivers wrap them with %w; test with errors.Is.
var (
	// ErrUnavailable means the sandbox runtime cannot be reached. For the
	// local provider the fix is to start containerd with `make containerd-up`.
	ErrUnavailable = errors.New("sandbox runtime unavailable (start the local one with `make containerd-up`)")
	// ErrNotFound means the sandbox, or the process asked for, does not exist
	// (any more).
	ErrNotFound = errors.New("sandbox not found")
	// ErrImage means the sandbox image is neither present nor obtainable.
	ErrImage = errors.New("sandbox image unavailable")
)
