// Package commands validates requests against the current projections,
// decides, and appends the resulting events to the journal. It is the only
// writer of the journal; transport calls it and never appends itself.
package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/blobs"
)

// Options are the operator's settings commands decide with.
type Options struct {
	// Agents is the set of configured Agent IDs a single-Agent Session may name.
	Agents []string
	// DefaultImage is a new Session's image when the request names none.
	DefaultImage string
	// RemoteSandbox rejects explicit images (the remote provider picks its own).
	RemoteSandbox bool
	// AutoApproveDevcontainerSetup is the operator default that approves a
	// Workspace's exact devcontainer setup command for unreviewed Sessions.
	AutoApproveDevcontainerSetup bool
	// Connect reaches the sandbox driver; nil leaves environments unprepared.
	Connect Connect
	// Sandbox is applied to every Session sandbox.
	Sandbox SandboxOptions
	// Blobs stores Session attachment bytes; nil refuses uploads
	// (commands/attachments.go).
	Blobs *blobs.Store
	// Runtime is the live Agent actors Session turns run on; nil refuses
	// turns (commands/turns.go).
	Runtime *agent.Registry
	// Live carries turns' streamed deltas; nil drops them.
	Live LivePublisher
	// Turns bounds the turn loop; zero values take the runtime defaults.
	Turns TurnOptions
	// Logger receives lifecycle diagnostics; nil discards them.
	Logger *slog.Logger
}

// Service runs commands. It is safe for concurrent use.
type Service struct {
	journal *journal.Journal
	store   *projections.Store
	opts    Options
	agents  map[string]bool
	log     *slog.Logger

	connect     Connect
	sandboxOpts SandboxOptions
	envs        environments
	tasks       taskRegistry // commands/tasks.go
	turns       turnRuns     // commands/turns.go
	checks      sync.Map     // session id → a Check runs (commands/check.go)

	// membership serialises the decisions that span aggregates: registering
	// a path, removing a Workspace, adding a Session to one. Session creation
	// shares it; path registration and removal hold it alone.
	membership sync.RWMutex
}

// New returns a Service appending to j and deciding against store, which
// must be fed by j's commit feed.
func New(j *journal.Journal, store *projections.Store, opts Options) *Service {
	agents := map[string]bool{}
	for _, id := range opts.Agents {
		agents[id] = true
	}
	log := opts.Logger
	if log == nil {
		log = defaultLogger
	}
	return &Service{journal: j, store: store, opts: opts, agents: agents, log: log, connect: opts.Connect, sandboxOpts: opts.Sandbox, envs: newEnvironments(), turns: newTurnRuns()}
}

// append commits events and waits until the projections reflect them, so a
// caller that reads right after a command sees its effect.
func (s *Service) append(ctx context.Context, evs []journal.Event, expect ...journal.Expectation) error {
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
func (s *Service) retry(ctx context.Context, try func() error) error {
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

func (s *Service) appendExpecting(ctx context.Context, id string, version uint64, p ...events.Payload) error {
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
