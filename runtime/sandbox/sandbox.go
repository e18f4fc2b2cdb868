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
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"syscall"
)

// ProcessToken names this daemon process in what it leaves in a sandbox
// runtime (a driver's exec FIFO folders and leases, the tool runs'
// markers), so that the next process tells a stopped process's leftovers
// from its own.
var ProcessToken = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

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
	// Tools are directories of programs from the host (an outside agent's
	// install), each read-only at its own path inside. The local driver
	// binds Dir; the remote one, which cannot bind a path of this machine,
	// copies it once into a volume of the engine keyed by Name and mounts
	// that. A Name always means the same content.
	Tools []Tool `json:",omitempty"`
	// Masked are paths inside that read as empty whatever lies there: a
	// file reads as /dev/null, a directory as an empty read-only one, over
	// every mount above; a path that does not exist is left alone. The
	// daemon's config file, when a Workspace holds it, is one.
	Masked []string `json:",omitempty"`
	// Network is NetworkNone or NetworkHostEgress; empty means NetworkNone.
	Network string
	Limits  Limits
	// Env is added to every process's environment, as KEY=value.
	Env []string
	// CreationToken names one provisioning attempt: the caller draws a fresh
	// one per attempt and journals it before Prepare, and a provider that
	// labels its sandboxes with it (the remote one, as
	// service_creation_token) lets a restarted daemon match a sandbox to the
	// attempt that made it. It is not part of the spec a repeated Prepare
	// compares: a sandbox of another attempt is replaced, not refused.
	CreationToken string `json:"-"`
}

// Check validates what every provider requires of a spec (a session ID, a
// clean absolute working dir other than /, a known network, no negative
// limit) and fills in the network's default. Providers check the rest.
func (s *Spec) Check() error {
	if s.SessionID == "" {
		return errors.New("sandbox spec has no session ID")
	}
	if !path.IsAbs(s.WorkingDir) || path.Clean(s.WorkingDir) != s.WorkingDir || s.WorkingDir == "/" {
		return fmt.Errorf("sandbox working dir %q must be a clean absolute path other than /", s.WorkingDir)
	}
	switch s.Network {
	case "":
		s.Network = NetworkNone
	case NetworkNone, NetworkHostEgress:
	default:
		return fmt.Errorf("unknown sandbox network %q", s.Network)
	}
	for _, t := range s.Tools {
		if t.Name == "" || len(t.Name) > maxToolName {
			return fmt.Errorf("sandbox tool %q must have a name of 1 to %d bytes", t.Dir, maxToolName)
		}
		if !path.IsAbs(t.Dir) || path.Clean(t.Dir) != t.Dir || t.Dir == "/" {
			return fmt.Errorf("sandbox tool %s: %q must be a clean absolute path other than /", t.Name, t.Dir)
		}
	}
	if l := s.Limits; l.MemoryMB < 0 || l.CPUs < 0 || l.PIDs < 0 {
		return fmt.Errorf("negative sandbox limits %+v", l)
	}
	return nil
}

// Tool is one Spec.Tools entry.
type Tool struct {
	// Name is the key of Dir's content, such as an install's name@version.
	Name string
	// Dir is a clean absolute host path, also the path inside.
	Dir string
}

// maxToolName bounds a Tool's name.
const maxToolName = 255

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

// Capabilities say what a driver's sandboxes share with the daemon's host.
// A driver declares them by implementing Capable; one that does not is the
// local kind (HostWorkingDir true).
type Capabilities struct {
	// HostWorkingDir: Spec.WorkingDir (or Source) is the host directory
	// itself, mounted at the same path, so that what the host writes there
	// the sandbox sees and the other way round. Without it (a remote
	// provider) the working dir is the sandbox's own: the driver creates it
	// empty, and Spec.Source is refused.
	HostWorkingDir bool
}

// Capable is implemented by drivers that declare their Capabilities.
type Capable interface {
	Capabilities() Capabilities
}

// CapabilitiesOf returns what d declares, or the local kind's.
func CapabilitiesOf(d Driver) Capabilities {
	if c, ok := d.(Capable); ok {
		return c.Capabilities()
	}
	return Capabilities{HostWorkingDir: true}
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
