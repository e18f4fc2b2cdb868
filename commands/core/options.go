package core

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"time"

	"lathe/runtime/sandbox"

	"lathe/runtime/agent"
	"lathe/runtime/blobs"
	"lathe/runtime/git"
	"lathe/runtime/hooks"
	"lathe/runtime/mcp"
)

// Options are the operator's settings commands decide with.
type Options struct {
	// Agents is the set of configured Agent IDs a single-Agent Session may name.
	Agents []string
	// DefaultImage is a new Session's image when the request names none.
	DefaultImage string
	// RemoteSandbox rejects explicit images (the remote provider picks its
	// own) and clones the Workspace into each sandbox (commands/environments/remote.go).
	RemoteSandbox bool
	// RemoteHost names the remote engine in evidence; RemoteTemplate is
	// the one image every remote Session runs (empty: DefaultImage).
	RemoteHost, RemoteTemplate string
	// MaxRescue bounds the archive of a remote clone whose work could not
	// be brought home (commands/environments/remoterescue.go); 0 is
	// DefaultMaxRescue.
	MaxRescue int64
	// AutoApproveDevcontainerSetup is the operator default that approves a
	// Workspace's exact devcontainer setup command for unreviewed Sessions.
	AutoApproveDevcontainerSetup bool
	// Connect reaches the sandbox driver; nil leaves environments unprepared.
	Connect Connect
	// Sandbox is applied to every Session sandbox.
	Sandbox SandboxOptions
	// Blobs stores Session attachment bytes (nil refuses uploads,
	// commands/attachments/attachments.go), the large content of events
	// (append) and rescued remote clones (nil: none is rescued).
	Blobs *blobs.Store
	// Runtime is the live Agent actors Session turns run on; nil refuses
	// turns (commands/turns/turns.go).
	Runtime *agent.Registry
	// CredentialNames names the operators' credentials in audit summaries:
	// actor ID (the credential's fingerprint) → its configured name.
	CredentialNames map[string]string
	// Skills are the configured Skills (commands/agents/skills.go).
	Skills []SkillSpec
	// Lattice is the team of lattice Sessions (commands/lattice/lattice.go).
	Lattice LatticeTeam
	// MCP is the live MCP registry (commands/mcpservers/mcp.go).
	MCP *mcp.Registry
	// Live carries turns' streamed deltas and Chat turns' steps; nil drops
	// them.
	Live LivePublisher
	// Turns bounds the turn loop; zero values take the runtime defaults.
	Turns TurnOptions
	// GitAuthor signs Source Control commits in a repository that names no
	// identity of its own; zero means none is known, and such a commit is
	// refused (commands/scm/git.go). GitAuthorSource says where it came from:
	// "config" (git.author) or "host" (the daemon user's global git config).
	GitAuthor       git.Identity
	GitAuthorSource string
	// Logger receives lifecycle diagnostics; nil discards them.
	Logger *slog.Logger
	// WaysDir holds the Ways lanes' copies of the checkout
	// (commands/ways/ways.go); empty refuses Ways.
	WaysDir string
	// DataDir is the daemon's data dir: no Workspace may equal, lie
	// inside or contain it (commands/sessions/workspace.go). Empty checks nothing.
	DataDir string
	// ConfigFile is the daemon's config file: a sandbox whose Workspace
	// holds it reads it as empty (commands/core/paths.go configMasked).
	// Empty masks nothing.
	ConfigFile string
	// WorktreesDir holds worktree Sessions' worktrees
	// (commands/worktrees/worktree.go); empty refuses isolation "worktree".
	WorktreesDir string
	// A2A are the configured inbound A2A receivers (commands/a2a/a2a.go).
	A2A []A2AReceiver
	// Hooks are the operator's hooks (commands/agentrun/hooks.go).
	Hooks hooks.Set
	// Outside starts the outside Agents (commands/acprunner); nil: none.
	Outside OutsideAgents
	// ScratchDir holds the daemon's scratch files: bundles on their way to
	// or from a remote sandbox, hooks' scratch folders. The daemon empties
	// it at each start, which clears what a kill left. Empty: the system's
	// temporary folder, never emptied.
	ScratchDir string
}

// scratchDir is where scratch files go (Options.ScratchDir).
func (o Options) Scratch() string { return cmp.Or(o.ScratchDir, os.TempDir()) }

// A2AReceiver is one configured inbound A2A target (a2a.receivers): a skill
// on the agent card, run by AgentID.
type A2AReceiver struct {
	ID, AgentID, Name, Description string
}

// Connect returns the sandbox driver, connecting on first use and again
// after a failure, so a runtime started after the daemon is picked up.
type Connect func(ctx context.Context) (sandbox.Driver, error)

// SandboxOptions are what every Session sandbox gets from the operator.
type SandboxOptions struct {
	Network string
	Limits  sandbox.Limits
}

// LatticeTeam is the configured team of lattice Sessions.
type LatticeTeam struct {
	// Coordinator plans and synthesises; "" means lattice turns need
	// target_agent.
	Coordinator string
	// Workers are the Worker Agent IDs; empty means every configured Agent
	// but the coordinator.
	Workers []string
}

// SkillSpec is one configured Skill.
type SkillSpec struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Emits       []string `json:"emits"`
}

// TurnRunner settings: the daemon's turn loop bounds.
type TurnOptions struct {
	MaxSteps     int
	StallTimeout time.Duration
}
