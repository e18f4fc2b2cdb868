// Package commands validates requests against the current projections,
// decides, and appends the resulting events to the journal. It is the only
// writer of the journal; transport calls it and never appends itself.
package commands

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"lathe/journal"
	"lathe/journal/events"
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
	// own) and clones the Workspace into each sandbox (commands/remote.go).
	RemoteSandbox bool
	// RemoteHost names the remote engine in evidence; RemoteTemplate is
	// the one image every remote Session runs (empty: DefaultImage).
	RemoteHost, RemoteTemplate string
	// AutoApproveDevcontainerSetup is the operator default that approves a
	// Workspace's exact devcontainer setup command for unreviewed Sessions.
	AutoApproveDevcontainerSetup bool
	// Connect reaches the sandbox driver; nil leaves environments unprepared.
	Connect Connect
	// Sandbox is applied to every Session sandbox.
	Sandbox SandboxOptions
	// Blobs stores Session attachment bytes (nil refuses uploads,
	// commands/attachments.go) and the large content of events (append).
	Blobs *blobs.Store
	// Runtime is the live Agent actors Session turns run on; nil refuses
	// turns (commands/turns.go).
	Runtime *agent.Registry
	// CheckoutChanged hears that a live Session's checkout changed
	// (debounced), whoever wrote it; nil watches nothing.
	CheckoutChanged func(session string)
	// CredentialName names an operator's credential in audit summaries by
	// its actor ID (transport's Guard knows the configured names).
	CredentialName func(actorID string) string
	// Skills are the configured Skills (commands/skills.go).
	Skills []SkillSpec
	// Lattice is the team of lattice Sessions (commands/lattice.go).
	Lattice LatticeTeam
	// MCP is the live MCP registry (commands/mcp.go).
	MCP *mcp.Registry
	// Live carries turns' streamed deltas; nil drops them.
	Live LivePublisher
	// Turns bounds the turn loop; zero values take the runtime defaults.
	Turns TurnOptions
	// GitAuthor signs Source Control commits in a repository that names no
	// identity of its own; zero means none is known, and such a commit is
	// refused (commands/git.go). GitAuthorSource says where it came from:
	// "config" (git.author) or "host" (the daemon user's global git config).
	GitAuthor       git.Identity
	GitAuthorSource string
	// Logger receives lifecycle diagnostics; nil discards them.
	Logger *slog.Logger
	// WaysDir holds the Ways lanes' copies of the checkout
	// (commands/ways.go); empty refuses Ways.
	WaysDir string
	// DataDir is the daemon's data dir: no Workspace may equal, lie
	// inside or contain it (commands/workspace.go). Empty checks nothing.
	DataDir string
	// ConfigFile is the daemon's config file: a sandbox whose Workspace
	// holds it reads it as empty (commands/worktree.go sessionMounts).
	// Empty masks nothing.
	ConfigFile string
	// WorktreesDir holds worktree Sessions' worktrees
	// (commands/worktree.go); empty refuses isolation "worktree".
	WorktreesDir string
	// Hooks are the operator's hooks (commands/hooks.go).
	Hooks hooks.Set
	// ScratchDir holds the daemon's scratch files: bundles on their way to
	// or from a remote sandbox, hooks' scratch folders. The daemon empties
	// it at each start, which clears what a kill left. Empty: the system's
	// temporary folder, never emptied.
	ScratchDir string
}

// scratchDir is where scratch files go (Options.ScratchDir).
func (o Options) scratchDir() string { return cmp.Or(o.ScratchDir, os.TempDir()) }

// core is the plumbing every capability shares: the journal it appends to
// (append with an expected version, awaiting its own seq, retry on a lost
// race), the projections it decides against, and each Session's lifecycle
// lock. Each capability below embeds it and exports only its own commands;
// the runtime state of one capability lives on that capability's type
// (sandboxes: commands/sandboxes.go).
type core struct {
	journal *journal.Journal
	store   Reader
	opts    Options
	agents  map[string]bool
	log     *slog.Logger

	locks      sessionLocks  // commands/environment.go
	reconciled reconcileGate // start-up reconciliation (commands/reconcile.go)
	// approvalWaiters wakes parked MCP calls (commands/approvals.go).
	approvalWaiters *approvalWaiters

	// blobWrites keeps blob collection from seeing a blob between its
	// commit and the append that names it: uploads and appends that
	// offload content hold it shared across both, a collection's removals
	// hold it exclusively (commands/blobgc.go).
	blobWrites sync.RWMutex

	// membership serialises the decisions that span aggregates: registering
	// a path, removing a Workspace, adding a Session to one. Session creation
	// shares it; path registration and removal hold it alone.
	membership sync.RWMutex
}

// The capabilities, each a small command type over the shared core. transport
// depends on each through an interface of its own.
type (
	// Sessions registers Workspaces and creates, renames, closes, reopens and
	// deletes their Sessions (commands/workspace.go, commands/session.go).
	Sessions struct{ *sandboxes }
	// Environments changes, rebuilds and reconstructs Session environments
	// and hands out the live sandbox of a Ready one (commands/environment.go).
	Environments struct{ *sandboxes }
	// Turns accepts, stops, awaits, reconciles and rewinds Session turns
	// (commands/turns.go, commands/transcript.go).
	Turns struct {
		*sandboxes
		// attachments reads the text of the attachments a turn refers to.
		attachments attachmentTexts
	}
	// Git runs a Session's Git operations and its Check (commands/git.go,
	// commands/check.go).
	Git struct {
		*sandboxes
		checks sync.Map // session id → its Check's runs (commands/check.go)
	}
	// Attachments stores, rescopes, reads and deletes Session attachments
	// (commands/attachments.go).
	Attachments struct{ *uploads }
	// Tasks starts Session tasks and terminals (commands/tasks.go).
	Tasks struct {
		*sandboxes
		tasks taskRegistry
	}
	// Files lists, reads and writes a Session's files (commands/files.go).
	Files struct{ *sandboxes }
)

// Service is every capability of one daemon, sharing one core. It is safe for
// concurrent use.
type Service struct {
	Sessions     *Sessions
	Environments *Environments
	Turns        *Turns
	Git          *Git
	Attachments  *Attachments
	Tasks        *Tasks
	Files        *Files
	TurnCode     *TurnCode
	Agents       *Agents
	MCP          *MCP
	Approvals    *Approvals
	Skills       *Skills
	Audit        *Audit
	Automations  *Automations
	// Chats and SharedFiles: commands/chats.go, commands/sharedfiles.go.
	Chats       *Chats
	SharedFiles *SharedFiles
	Ways        *Ways
	// Worktrees merges worktree Sessions home (commands/merge.go).
	Worktrees *Worktrees
	// Effects settles the effect intents a stop left open
	// (commands/effects.go).
	Effects *Effects
}

// New returns the commands appending to j and deciding against store, which
// must be fed by j's commit feed.
func New(j *journal.Journal, store Reader, opts Options) *Service {
	agents := map[string]bool{}
	for _, id := range opts.Agents {
		agents[id] = true
	}
	log := opts.Logger
	if log == nil {
		log = defaultLogger
	}
	c := &core{journal: j, store: store, opts: opts, agents: agents, log: log,
		approvalWaiters: &approvalWaiters{ch: map[string]chan string{}}}
	runs := newTurnRuns() // the turns, Chat turns, A2A tasks and Ways lanes running here
	sb := newSandboxes(c, runs)
	attachments := &Attachments{&uploads{c}}
	ways := newWaysRuntime()
	merging := &sessionLocks{}
	return &Service{
		Sessions:     &Sessions{sb},
		Environments: &Environments{sb},
		Turns:        &Turns{sb, attachments},
		Git:          &Git{sandboxes: sb},
		Attachments:  attachments,
		Tasks:        &Tasks{sandboxes: sb},
		Files:        &Files{sb},
		TurnCode:     &TurnCode{sb},
		Agents:       &Agents{c, opts.Runtime},
		MCP:          &MCP{c, opts.MCP},
		Approvals:    &Approvals{c},
		Skills:       &Skills{c},
		Audit:        &Audit{c},
		Automations:  newAutomations(c, store),
		Chats:        &Chats{c, runs},
		SharedFiles:  &SharedFiles{attachments.uploads, newBlobRefs()},
		Ways:         &Ways{sandboxes: sb, ways: ways, lanes: &laneStore{c, ways}},
		Effects:      newEffects(c, sb, merging),
		Worktrees:    &Worktrees{sandboxes: sb, merging: merging},
	}
}

// append commits events and waits until the projections reflect them, so a
// caller that reads right after a command sees its effect.
func (s *core) append(ctx context.Context, evs []journal.Event, expect ...journal.Expectation) error {
	// Large content goes to the blob store and the event names it, so every
	// event stays small enough for the journal, NATS and /ws frames.
	if s.opts.Blobs != nil && slices.ContainsFunc(evs, func(ev journal.Event) bool { return events.Offloads(ev.Data) }) {
		s.blobWrites.RLock()
		defer s.blobWrites.RUnlock()
	}
	for i, ev := range evs {
		if p, ok := ev.Data.(events.Payload); ok && s.opts.Blobs != nil {
			var err error
			if evs[i].Data, err = events.Offload(p, s.opts.Blobs); err != nil {
				return fmt.Errorf("%s: %w", ev.Type, err)
			}
		}
	}
	recs, err := s.journal.Append(ctx, evs, expect...)
	switch {
	case errors.Is(err, journal.ErrVersionConflict):
		return fmt.Errorf("%w: the record changed concurrently; retry", ErrConflict)
	case errors.Is(err, journal.ErrClosed):
		return fmt.Errorf("%w: the daemon is shutting down", ErrUnavailable)
	case err != nil:
		return err
	}
	// The events are durable; wait for their projection even if the
	// caller has gone, so that a follow-up decision never reads stale state.
	return s.store.Await(context.WithoutCancel(ctx), recs[len(recs)-1].Seq)
}

// maxRetries bounds optimistic-concurrency retries of one command.
const maxRetries = 8

// retry runs decide-and-append until it does not lose an optimistic
// concurrency race, waiting for the projection to catch up between tries.
func (s *core) retry(ctx context.Context, try func() error) error {
	var err error
	for range maxRetries {
		var lost raced
		if err = try(); !errors.As(err, &lost) {
			return err
		}
		if err := s.store.Await(ctx, s.journal.Last()); err != nil {
			return err
		}
	}
	return err
}

// raced marks an ErrConflict that came from a lost optimistic race, which
// retry may repeat, as opposed to a decided conflict.
type raced struct{ error }

func (r raced) Unwrap() error { return r.error }

func (s *core) appendExpecting(ctx context.Context, id string, version uint64, p ...events.Payload) error {
	evs := make([]journal.Event, len(p))
	for i := range p {
		evs[i] = events.New(id, p[i])
	}
	err := s.append(ctx, evs, journal.Expectation{AggregateID: id, Version: version})
	if errors.Is(err, ErrConflict) {
		return raced{err}
	}
	return err
}

// maxNameLen bounds display names.
const maxNameLen = 200

// cleanName trims a display name and rejects empty, overlong or
// control-character names, naming the field.
func cleanName(field, name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", fmt.Errorf("%w: %s must not be empty", ErrInvalid, field)
	case !utf8.ValidString(name):
		return "", fmt.Errorf("%w: %s must be valid UTF-8", ErrInvalid, field)
	case utf8.RuneCountInString(name) > maxNameLen:
		return "", fmt.Errorf("%w: %s is longer than %d characters", ErrInvalid, field, maxNameLen)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "", fmt.Errorf("%w: %s must not contain control characters", ErrInvalid, field)
	}
	return name, nil
}
