package sessions

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/lattice"
	"lathe/commands/turns"
	"lathe/commands/worktrees"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/project"
)

// SessionSpec is a request to create a Session. Pointers distinguish an
// omitted field from its zero value.
type SessionSpec struct {
	Name          string       `json:"name"`
	Mode          *events.Mode `json:"mode"`
	EnabledSkills []string     `json:"enabled_skills"`
	ExposedPorts  []int        `json:"exposed_ports"`
	Image         *string      `json:"image"`
	SetupCommand  *string      `json:"setup_command"`
	SetupApproved *bool        `json:"setup_approved"`
	SetupReviewed *bool        `json:"setup_reviewed"`
	// Isolation is "shared" (default: the Workspace folder) or "worktree"
	// (a git worktree on branch lathe/<id>: commands/worktrees/worktree.go).
	Isolation *string `json:"isolation" enum:"shared,worktree"`
}

// Limits on Session fields.
const (
	maxPorts  = 32
	maxSkills = 64
)

// CreateSession creates a Session in a Workspace.
func (s *Sessions) CreateSession(ctx context.Context, workspaceID string, spec SessionSpec) (projections.Session, error) {
	ev, err := s.DecideSession(spec)
	if err != nil {
		return projections.Session{}, err
	}
	s.Membership.RLock()
	defer s.Membership.RUnlock()
	w, ok := s.Store.Workspace(workspaceID)
	if !ok {
		return projections.Session{}, fmt.Errorf("%w: workspace %q", core.ErrNotFound, workspaceID)
	}
	if ev, err = s.adoptDevcontainer(ev, spec, w.Path); err != nil {
		return projections.Session{}, err
	}
	if ev.Isolation, err = worktrees.CheckIsolation(ctx, s.Core, spec.Isolation, w); err != nil {
		return projections.Session{}, err
	}
	return s.createIn(ctx, w, ev)
}

// adoptDevcontainer takes the Workspace's devcontainer image and
// postCreateCommand when the request names neither an image nor a setup
// command. The operator's auto-approve default covers exactly that command,
// and only while the Session is unreviewed; a reviewed request decides alone.
func (s *Sessions) adoptDevcontainer(ev events.SessionCreated, spec SessionSpec, dir string) (events.SessionCreated, error) {
	if spec.Image != nil || spec.SetupCommand != nil {
		return ev, nil
	}
	dc, err := project.FindDevcontainer(dir)
	if err != nil {
		return ev, fmt.Errorf("%w: %v; fix it, or name image and setup_command in the request", core.ErrInvalid, err)
	}
	if dc == nil {
		return ev, nil
	}
	env := &ev.Environment
	if dc.Image != "" {
		if s.Opts.RemoteSandbox {
			return ev, fmt.Errorf("%w: the devcontainer image %q is not supported under the remote sandbox provider", core.ErrInvalid, dc.Image)
		}
		env.Image = dc.Image
	}
	if cmd := strings.TrimSpace(dc.PostCreateCommand); cmd != "" {
		env.SetupCommand, env.SetupSource = cmd, events.SourceDevcontainer
		if !env.SetupReviewed {
			env.SetupApproved = env.SetupApproved || s.Opts.AutoApproveDevcontainerSetup
		}
		env.State = events.PlannedState(env.SetupCommand, env.SetupApproved, env.SetupReviewed)
	}
	return ev, nil
}

// CreateSessionAt is the compatibility create: it finds or registers the
// Workspace at workingDir and creates the Session there.
func (s *Sessions) CreateSessionAt(ctx context.Context, workingDir string, spec SessionSpec) (projections.Session, error) {
	ev, err := s.DecideSession(spec)
	if err != nil {
		return projections.Session{}, err
	}
	for range core.MaxRetries {
		real, err := CanonicalDir(workingDir)
		if err != nil {
			return projections.Session{}, fmt.Errorf("working_dir: %w", err)
		}
		s.Membership.RLock()
		w, ok := s.Store.WorkspaceByPath(real)
		if ok {
			defer s.Membership.RUnlock()
			if ev, err = s.adoptDevcontainer(ev, spec, w.Path); err != nil {
				return projections.Session{}, err
			}
			if ev.Isolation, err = worktrees.CheckIsolation(ctx, s.Core, spec.Isolation, w); err != nil {
				return projections.Session{}, err
			}
			return s.createIn(ctx, w, ev)
		}
		s.Membership.RUnlock()
		if _, _, err := s.RegisterWorkspace(ctx, real, nil); err != nil {
			return projections.Session{}, err
		}
	}
	return projections.Session{}, fmt.Errorf("%w: workspace at %q keeps disappearing", core.ErrConflict, workingDir)
}

// createIn creates the Session and, when its plan needs no decision,
// takes its runtime boundary in the same append and prepares it in the
// background: the 201 already shows "preparing".
func (s *Sessions) createIn(ctx context.Context, w projections.Workspace, ev events.SessionCreated) (projections.Session, error) {
	// A Workspace registered before the data dir was refused there.
	if err := checkDataDir(s.Opts.DataDir, w.Path); err != nil {
		return projections.Session{}, err
	}
	ev.WorkspaceID, ev.WorkingDir = w.ID, w.Path
	id := ulid.Make().String()
	var added *core.Effect
	var addedEv events.WorktreeAdded
	if ev.Isolation == events.IsolationWorktree {
		var err error
		if added, addedEv, err = worktrees.AddWorktree(ctx, s.Core, id, w, &ev); err != nil { // commands/worktrees/worktree.go
			return projections.Session{}, err
		}
	}
	evs := []journal.Event{events.New(id, ev)}
	prepare := s.Connect != nil && ev.Environment.State == events.EnvUnprepared
	var release func()
	if prepare {
		release, _ = s.Own(ctx, id, false) // a new ID: never contended
		evs = append(evs, events.New(id, events.EnvironmentChanging{Generation: ev.Environment.Generation, Owner: events.OwnerPrepare}))
	}
	if err := s.Append(ctx, worktrees.CreatedWith(evs, id, added, addedEv), journal.Expectation{AggregateID: id}); err != nil {
		if release != nil {
			release()
		}
		if added != nil {
			worktrees.UndoAdd(ctx, added, w.Path, ev, err) // commands/worktrees/worktree.go
		}
		return projections.Session{}, err
	}
	if prepare {
		s.StartPrepare(id, release, nil)
	}
	ss, _ := s.Store.Session(id)
	return ss, nil
}

// DecideSession validates a create request and decides the initial
// environment: a setup command runs only once a reviewed approval binds it.
func (s *Sessions) DecideSession(spec SessionSpec) (events.SessionCreated, error) {
	var ev events.SessionCreated
	name, err := core.CleanName("name", spec.Name)
	if err != nil {
		return ev, err
	}
	mode, err := s.checkMode(spec.Mode)
	if err != nil {
		return ev, err
	}
	ports, err := checkPorts(spec.ExposedPorts)
	if err != nil {
		return ev, err
	}
	skills, err := checkSkills(spec.EnabledSkills)
	if err != nil {
		return ev, err
	}
	env := events.Environment{State: events.EnvUnprepared, Generation: 1}
	if env.Image, err = s.PlanImage(spec.Image); err != nil {
		return ev, err
	}
	if spec.SetupCommand != nil {
		cmd, err := environments.CheckSetup(*spec.SetupCommand)
		if err != nil {
			return ev, err
		}
		env.SetupCommand = cmd
		if cmd != "" {
			env.SetupSource = events.SourceUser
		}
	}
	env.SetupApproved = spec.SetupApproved != nil && *spec.SetupApproved
	env.SetupReviewed = spec.SetupReviewed != nil && *spec.SetupReviewed
	if env.SetupApproved && env.SetupCommand == "" {
		env.SetupApproved = false // nothing to bind the approval to
	}
	env.State = events.PlannedState(env.SetupCommand, env.SetupApproved, env.SetupReviewed)
	return events.SessionCreated{Name: name, Mode: mode, EnabledSkills: skills, ExposedPorts: ports, Environment: env}, nil
}

func (s *Sessions) checkMode(m *events.Mode) (events.Mode, error) {
	if m == nil {
		return events.Mode{}, fmt.Errorf("%w: mode is required: {\"kind\":\"single_agent\",\"agent_id\":…} or {\"kind\":\"lattice\"}", core.ErrInvalid)
	}
	switch m.Kind {
	case events.ModeSingleAgent:
		if m.AgentID == "" {
			return events.Mode{}, fmt.Errorf("%w: mode.agent_id is required for single_agent", core.ErrInvalid)
		}
		if !s.Agents[m.AgentID] {
			return events.Mode{}, fmt.Errorf("%w: mode.agent_id %q is not a configured agent", core.ErrInvalid, m.AgentID)
		}
		if m.Workers != nil {
			return events.Mode{}, fmt.Errorf("%w: mode.workers is only for lattice", core.ErrInvalid)
		}
		return *m, nil
	case events.ModeLattice:
		if m.AgentID != "" {
			return events.Mode{}, fmt.Errorf("%w: mode.agent_id is only for single_agent", core.ErrInvalid)
		}
		return lattice.CheckLatticeMode(lattice.Team(s.Opts), *m)
	default:
		return events.Mode{}, fmt.Errorf("%w: mode.kind %q must be single_agent or lattice", core.ErrInvalid, m.Kind)
	}
}

func checkPorts(ports []int) ([]int, error) {
	if len(ports) > maxPorts {
		return nil, fmt.Errorf("%w: exposed_ports has more than %d ports", core.ErrInvalid, maxPorts)
	}
	out := slices.Clone(ports)
	for _, p := range out {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("%w: exposed_ports: %d is not a port (1-65535)", core.ErrInvalid, p)
		}
	}
	slices.Sort(out)
	return append([]int{}, slices.Compact(out)...), nil
}

func checkSkills(skills []string) ([]string, error) {
	if len(skills) > maxSkills {
		return nil, fmt.Errorf("%w: enabled_skills has more than %d entries", core.ErrInvalid, maxSkills)
	}
	for _, sk := range skills {
		if strings.TrimSpace(sk) == "" || len(sk) > 128 {
			return nil, fmt.Errorf("%w: enabled_skills entries must be 1 to 128 characters", core.ErrInvalid)
		}
	}
	return append([]string{}, skills...), nil
}

// RenameSession changes a Session's display name.
func (s *Sessions) RenameSession(ctx context.Context, id, name string) (projections.Session, error) {
	name, err := core.CleanName("name", name)
	if err != nil {
		return projections.Session{}, err
	}
	return s.UpdateSession(ctx, id, func(ss projections.Session) (events.Payload, error) {
		if ss.Name == name {
			return nil, nil
		}
		return events.SessionRenamed{Name: name}, nil
	})
}

// CloseSession soft-closes a Session, tearing its runtime down under a
// close bracket; closing a closed Session is a no-op.
func (s *Sessions) CloseSession(ctx context.Context, id string) (projections.Session, error) {
	return s.endRuntime(ctx, id, events.OwnerClose, func(ss projections.Session) []events.Payload {
		if ss.Closed() {
			return nil
		}
		return []events.Payload{events.SessionClosed{}}
	})
}

// DeleteSession tears the runtime down under a delete bracket and deletes
// the Session's record.
func (s *Sessions) DeleteSession(ctx context.Context, id string) error {
	_, err := s.endRuntime(ctx, id, events.OwnerDelete, func(projections.Session) []events.Payload {
		return []events.Payload{events.SessionDeleted{}}
	})
	if err == nil {
		s.Locks.Forget(id)
	}
	return err
}

// endRuntime waits for any lifecycle owner of the Session, then appends the
// events decide returns, bracketing a teardown when a runtime exists.
func (s *Sessions) endRuntime(ctx context.Context, id, owner string, decide func(projections.Session) []events.Payload) (projections.Session, error) {
	return s.endRuntimeWith(ctx, id, owner, decide, runtimeEnd{})
}

// runtimeEnd are the steps a worktree Session adds to a delete: check
// refuses before anything changes; after runs once the sandbox is gone,
// before the final events (commands/worktrees/worktree.go).
type runtimeEnd struct {
	check, after func(projections.Session) error
}

func (s *Sessions) endRuntimeWith(ctx context.Context, id, owner string, decide func(projections.Session) []events.Payload, end runtimeEnd) (projections.Session, error) {
	ss, release, err := s.OwnSession(ctx, id, true)
	if err != nil {
		return ss, err
	}
	defer release()
	if err := s.RefuseLiveTurn(id); err != nil {
		return ss, err
	}
	if end.check != nil {
		if err := end.check(ss); err != nil {
			return ss, err
		}
	}
	ps := decide(ss)
	if len(ps) == 0 {
		return ss, nil
	}
	if owner == events.OwnerDelete {
		if err := s.Remote().RefuseDelete(ss); err != nil { // commands/environments/remote.go
			return ss, err
		}
		(&turns.TurnCode{Sandboxes: s.Sandboxes}).DropTurnRefs(ctx, id) // commands/turns/turncode.go
	}
	var kept error
	gen := ss.Environment.Generation
	if s.LiveSandbox(id) != nil || ss.Environment.State == events.EnvReady {
		if err := s.AppendExpecting(ctx, id, ss.Version, events.EnvironmentChanging{Generation: gen, Owner: owner}); err != nil {
			return ss, err
		}
		if err := s.Teardown(ctx, id); err != nil {
			s.Log.Warn("tear down sandbox", "session", id, "err", err)
		}
		// Settled comes before a delete, which ends the aggregate.
		ps = append([]events.Payload{events.EnvironmentStopped{Generation: gen}, events.EnvironmentSettled{Generation: gen}}, ps...)
		ss, _ = s.Store.Session(id)
		if owner == events.OwnerDelete {
			// A runtime the engine kept keeps its Session's record (closed).
			if kept = s.Remote().RefuseDelete(ss); kept != nil {
				ps = ps[:2]
				if !ss.Closed() {
					ps = append(ps, events.SessionClosed{})
				}
			}
		}
	}
	if end.after != nil {
		if len(ps) > 1 {
			if err := s.AppendExpecting(ctx, id, ss.Version, ps[:len(ps)-1]...); err != nil {
				return ss, err
			}
			ps = ps[len(ps)-1:]
		}
		if err := end.after(ss); err != nil {
			return ss, err
		}
		ss, _ = s.Store.Session(id)
	}
	if err := s.AppendExpecting(ctx, id, ss.Version, ps...); err != nil {
		return ss, err
	}
	ss, _ = s.Store.Session(id)
	return ss, kept
}

// ReopenSession reactivates a closed Session and prepares its environment
// again when its plan needs no decision; reopening an open one is a no-op.
func (s *Sessions) ReopenSession(ctx context.Context, id string) (projections.Session, error) {
	ss, release, err := s.OwnSession(ctx, id, true)
	if err != nil {
		return ss, err
	}
	if !ss.Closed() {
		release()
		return ss, nil
	}
	ps := []events.Payload{events.SessionReopened{}}
	prepare := s.Connect != nil && ss.Environment.State == events.EnvUnprepared
	if prepare {
		ps = append(ps, events.EnvironmentChanging{Generation: ss.Environment.Generation, Owner: events.OwnerPrepare})
	}
	if err := s.AppendExpecting(ctx, id, ss.Version, ps...); err != nil {
		release()
		return ss, err
	}
	if prepare {
		s.StartPrepare(id, release, nil)
	} else {
		release()
	}
	ss, _ = s.Store.Session(id)
	return ss, nil
}

// Sessions registers Workspaces and creates, renames, closes, reopens and
// deletes their Sessions (commands/sessions/workspace.go, commands/sessions/session.go).
type Sessions struct{ *environments.Sandboxes }
