package projections

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"lathe/journal"
	"lathe/journal/events"
)

// Workspace is the read model of a registered directory.
type Workspace struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Path      string    `json:"path"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   uint64    `json:"-"` // events applied to this aggregate
}

// Session is the read model of a Session.
type Session struct {
	ID            string      `json:"id"`
	WorkspaceID   string      `json:"workspace_id"`
	Name          string      `json:"name"`
	WorkingDir    string      `json:"working_dir"`
	Mode          events.Mode `json:"mode"`
	EnabledSkills []string    `json:"enabled_skills"`
	ExposedPorts  []int       `json:"exposed_ports"`
	Environment   Environment `json:"environment"`
	CheckCommand  *string     `json:"check_command"`
	// Isolation is "shared" or "worktree"; Branch is a worktree Session's
	// branch, lathe/<id> (docs/design/git.md).
	Isolation string     `json:"isolation"`
	Branch    string     `json:"branch,omitempty"`
	Status    string     `json:"status"` // "open" or "closed"
	ClosedAt  *time.Time `json:"closed_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	Version   uint64     `json:"-"`
	// parked holds the Session's parts as a checkpoint kept them, until an
	// event or a reader needs them decoded (checkpoint.go); nil otherwise.
	parked *parked
	// json caches the record's JSON for the Session list (sessionjson.go);
	// nil outside the read model.
	json *jsonCache
}

// record is a copy of the Session for a reader, without the store's
// bookkeeping.
func (ss *Session) record() Session {
	c := *ss
	c.parked, c.json = nil, nil
	return c
}

// Environment is a Session's environment: its plan and state, the evidence
// of its last failure, and the lifecycle owner holding its runtime boundary.
type Environment struct {
	events.Environment
	Evidence     *events.Evidence `json:"evidence"`
	Owner        string           `json:"owner,omitempty"`
	SetupRan     bool             `json:"setup_ran"`
	SetupSkipped string           `json:"setup_skipped,omitempty"`
	// SetupOutput is the end of the setup command's output in the last
	// preparation that ran it, whether it succeeded or failed.
	SetupOutput string `json:"setup_output,omitempty"`
	// Reason says in words why the generation was last prepared, from the
	// owner of its bracket (reasonFor).
	Reason string `json:"reason,omitempty"`
	// RemoteRuntime: the remote sandbox provider's runtime (remote.go).
	RemoteRuntime
}

// Reasons a generation was prepared, derived from its bracket's owner.
const (
	ReasonCreated       = "prepared after create"
	ReasonReopened      = "reopened"
	ReasonPlanChanged   = "rebuilt: plan changed"
	ReasonRebuilt       = "rebuilt: rebuild requested"
	ReasonReconstructed = "reconstructed after a daemon restart"
)

// reasonFor is the reason a preparing bracket of owner gives the
// environment, "" for an owner that does not prepare (close, delete). A
// preparation after create and one after a reopen share their owner; the
// reopen marked the environment first (SessionReopened).
func reasonFor(owner, current string) string {
	switch owner {
	case events.OwnerPrepare:
		if current == ReasonReopened {
			return ReasonReopened
		}
		return ReasonCreated
	case events.OwnerChange:
		return ReasonPlanChanged
	case events.OwnerRebuild:
		return ReasonRebuilt
	case events.OwnerReconstruct:
		return ReasonReconstructed
	}
	return ""
}

// Session statuses.
const (
	StatusOpen   = "open"
	StatusClosed = "closed"
)

// Closed reports whether the Session is soft-closed.
func (s Session) Closed() bool { return s.Status == StatusClosed }

// SessionModel is the read model of the Workspaces and their Sessions (a
// Session's membership ties the two), with each Session's environment and
// the boundaries its lifecycle owners hold.
type SessionModel struct {
	sh         *shared
	workspaces map[string]*Workspace
	byPath     map[string]string // canonical path → workspace id
	sessions   map[string]*Session
	order      []*Session        // every Session, sorted by ID (oldest first)
	members    map[string]int    // workspace id → how many Sessions it has
	owned      map[string]uint64 // session id → generation whose boundary an owner holds
}

func newSessionModel(sh *shared) *SessionModel {
	return &SessionModel{sh: sh, workspaces: map[string]*Workspace{}, byPath: map[string]string{}, sessions: map[string]*Session{},
		members: map[string]int{}, owned: map[string]uint64{}}
}

// The Workspaces' and the Sessions' own events: their lifecycle,
// environment, runtime, files, worktree, Git and Check.
func init() {
	fold := func(s *Store, env journal.Envelope, p events.Payload) error { return s.SessionModel.fold(env, p) }
	claimFor("sessions", fold,
		events.WorkspaceRegistered{}, events.WorkspaceRenamed{}, events.WorkspaceRemoved{},
		events.SessionCreated{}, events.SessionRenamed{}, events.SessionClosed{}, events.SessionReopened{},
		events.FileWritten{}, events.FileCreated{}, events.FolderCreated{}, events.FileRenamed{}, events.FileDeleted{},
		events.TurnRestored{}, events.WorktreeAdded{}, events.SessionMerged{}, events.WorktreeRemoved{},
		events.GitStaged{}, events.GitUnstaged{}, events.GitHunkStaged{}, events.GitHunkUnstaged{}, events.GitHunkDiscarded{},
		events.GitDiscarded{}, events.GitCheckedOut{}, events.GitCommitted{}, events.CheckSet{}, events.CheckRan{},
		events.EnvironmentPlanned{}, events.EnvironmentChanging{}, events.EnvironmentReady{}, events.EnvironmentFailed{},
		events.EnvironmentStopped{}, events.EnvironmentSettled{},
		events.RuntimeProvisioning{}, events.RuntimeBound{}, events.RuntimeReleased{}, events.RuntimeRetained{},
		events.RuntimeCleanupConfirmed{}, events.SessionSynced{}, events.WorkRescued{})
	// A deleted Session's tasks, attachments and turns go with it.
	claimFor("sessions", func(s *Store, env journal.Envelope, p events.Payload) error {
		if err := s.SessionModel.fold(env, p); err != nil {
			return err
		}
		id := env.AggregateID
		delete(s.TaskModel.tasks, id)
		delete(s.AttachmentModel.attachments, id)
		return s.TurnModel.drop(id)
	}, events.SessionDeleted{})
}

// fold applies an event of a Workspace or of a Session itself (its
// lifecycle, environment, files, Git and Check).
func (m *SessionModel) fold(env journal.Envelope, p events.Payload) error {
	id, at := env.AggregateID, env.At
	switch e := p.(type) {
	case events.WorkspaceRegistered:
		m.workspaces[id] = &Workspace{ID: id, Name: e.Name, Path: e.Path, CreatedAt: at, UpdatedAt: at, Version: 1}
		m.byPath[e.Path] = id
		m.members[id] = 0
	case events.WorkspaceRenamed:
		w, err := m.workspace(id)
		if err != nil {
			return err
		}
		w.Name, w.UpdatedAt = e.Name, at
		w.Version++
	case events.WorkspaceRemoved:
		w, err := m.workspace(id)
		if err != nil {
			return err
		}
		delete(m.byPath, w.Path)
		delete(m.members, id)
		delete(m.workspaces, id)
	case events.SessionCreated:
		if _, ok := m.members[e.WorkspaceID]; !ok {
			return fmt.Errorf("session %s names unknown workspace %s", id, e.WorkspaceID)
		}
		ss := &Session{
			ID: id, WorkspaceID: e.WorkspaceID, Name: e.Name, WorkingDir: e.WorkingDir, Mode: e.Mode,
			EnabledSkills: nonNil(e.EnabledSkills), ExposedPorts: nonNil(e.ExposedPorts), Environment: Environment{Environment: e.Environment},
			Isolation: cmp.Or(e.Isolation, events.IsolationShared), Branch: e.Branch,
			Status: StatusOpen, CreatedAt: at, UpdatedAt: at, Version: 1, json: &jsonCache{},
		}
		if old, ok := m.sessions[id]; ok {
			m.forget(old)
		}
		m.members[e.WorkspaceID]++
		m.sessions[id] = ss
		m.insertOrdered(ss)
	case events.SessionRenamed:
		return m.update(id, at, func(ss *Session) { ss.Name = e.Name })
	case events.SessionClosed:
		return m.update(id, at, func(ss *Session) {
			ss.Status = StatusClosed
			ss.ClosedAt = &at
		})
	case events.SessionReopened:
		return m.update(id, at, func(ss *Session) {
			ss.Status = StatusOpen
			ss.ClosedAt = nil
			ss.Environment.Reason = ReasonReopened
		})
	case events.SessionDeleted:
		ss, err := m.session(id)
		if err != nil {
			return err
		}
		m.forget(ss)
		delete(m.owned, id)
	case events.FileWritten, events.FileCreated, events.FolderCreated, events.FileRenamed, events.FileDeleted:
		return m.update(id, at, func(*Session) {})
	case events.TurnRestored:
		return m.update(id, at, func(*Session) {}) // audit only: the files are the worktree's
	case events.WorktreeAdded, events.SessionMerged, events.WorktreeRemoved:
		return m.update(id, at, func(*Session) {}) // audit: the worktree and the Workspace are git's
	case events.GitStaged, events.GitUnstaged, events.GitHunkStaged, events.GitHunkUnstaged, events.GitHunkDiscarded,
		events.GitDiscarded, events.GitCheckedOut, events.GitCommitted, events.CheckSet, events.CheckRan:
		return m.foldGit(id, at, e) // projections/git.go
	case events.EnvironmentPlanned, events.EnvironmentChanging, events.EnvironmentReady, events.EnvironmentFailed,
		events.EnvironmentStopped, events.EnvironmentSettled:
		return m.foldEnvironment(id, at, e)
	case events.RuntimeProvisioning, events.RuntimeBound, events.RuntimeReleased, events.RuntimeRetained,
		events.RuntimeCleanupConfirmed, events.SessionSynced, events.WorkRescued:
		return m.foldRemote(id, at, e)
	default:
		return fmt.Errorf("no projection for %T", p)
	}
	return nil
}

// foldEnvironment applies an environment event of Session id.
func (m *SessionModel) foldEnvironment(id string, at time.Time, p events.Payload) error {
	return m.update(id, at, func(ss *Session) {
		switch e := p.(type) {
		case events.EnvironmentPlanned:
			ss.Environment = Environment{Environment: events.Environment{
				State: events.PlannedState(e.SetupCommand, e.SetupApproved, e.SetupReviewed), Generation: e.Generation, Image: e.Image,
				SetupCommand: e.SetupCommand, SetupSource: e.SetupSource, SetupApproved: e.SetupApproved, SetupReviewed: e.SetupReviewed,
			}, Owner: ss.Environment.Owner, RemoteRuntime: ss.Environment.RemoteRuntime}
		case events.EnvironmentChanging:
			ss.Environment.Owner = e.Owner
			m.owned[id] = e.Generation
			if reason := reasonFor(e.Owner, ss.Environment.Reason); reason != "" {
				ss.Environment.State = events.EnvPreparing
				ss.Environment.Reason, ss.Environment.SetupOutput = reason, ""
			}
		case events.EnvironmentReady:
			ss.Environment.State, ss.Environment.Evidence = events.EnvReady, nil
			ss.Environment.SetupRan, ss.Environment.SetupSkipped, ss.Environment.SetupOutput = e.SetupRan, e.SetupSkipped, e.SetupOutput
		case events.EnvironmentFailed:
			ev := e.Evidence
			ss.Environment.State, ss.Environment.Evidence, ss.Environment.SetupOutput = events.EnvFailed, &ev, e.Evidence.OutputTail
		case events.EnvironmentStopped:
			ss.Environment.State = events.PlannedState(ss.Environment.SetupCommand, ss.Environment.SetupApproved, ss.Environment.SetupReviewed)
			ss.Environment.SetupRan = false
		case events.EnvironmentSettled:
			ss.Environment.Owner = ""
			delete(m.owned, id)
		}
	})
}

// change copies the record env changed, as it stands now.
func (m *SessionModel) change(env journal.Envelope) Change {
	c := Change{Envelope: env}
	switch env.Aggregate {
	case events.Workspace:
		if w, ok := m.workspaces[env.AggregateID]; ok {
			cp := *w
			c.Workspace = &cp
		}
	case events.Session:
		if ss, ok := m.sessions[env.AggregateID]; ok {
			cp := ss.record()
			c.Session = &cp
		}
	}
	return c
}

func (m *SessionModel) workspace(id string) (*Workspace, error) {
	w, ok := m.workspaces[id]
	if !ok {
		return nil, fmt.Errorf("unknown workspace %s", id)
	}
	return w, nil
}

func (m *SessionModel) session(id string) (*Session, error) {
	ss, ok := m.sessions[id]
	if !ok {
		return nil, fmt.Errorf("unknown session %s", id)
	}
	return ss, nil
}

// update applies f to a Session and counts the change: its version, its
// updated_at, and its cached JSON, which is encoded again when next read.
func (m *SessionModel) update(id string, at time.Time, f func(*Session)) error {
	ss, err := m.session(id)
	if err != nil {
		return err
	}
	f(ss)
	ss.UpdatedAt = at
	ss.Version++
	ss.json.drop()
	return nil
}

// insertOrdered adds ss to m.order. New IDs are ULIDs, which mostly grow,
// so this is usually an append.
func (m *SessionModel) insertOrdered(ss *Session) {
	if n := len(m.order); n == 0 || m.order[n-1].ID < ss.ID {
		m.order = append(m.order, ss)
		return
	}
	i, _ := slices.BinarySearchFunc(m.order, ss.ID, func(x *Session, id string) int { return compareIDs(x.ID, id) })
	m.order = slices.Insert(m.order, i, ss)
}

// forget removes a Session from the Session indexes.
func (m *SessionModel) forget(ss *Session) {
	if _, ok := m.members[ss.WorkspaceID]; ok {
		m.members[ss.WorkspaceID]--
	}
	delete(m.sessions, ss.ID)
	if i, ok := slices.BinarySearchFunc(m.order, ss.ID, func(x *Session, id string) int { return compareIDs(x.ID, id) }); ok {
		m.order = slices.Delete(m.order, i, i+1)
	}
}

// parkedOf is a Session's parked parts, or nil.
func (m *SessionModel) parkedOf(id string) *parked {
	if ss := m.sessions[id]; ss != nil {
		return ss.parked
	}
	return nil
}

// Workspaces returns every Workspace, oldest first.
func (m *SessionModel) Workspaces() []Workspace {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	out := make([]Workspace, 0, len(m.workspaces))
	for _, w := range m.workspaces {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b Workspace) int { return compareIDs(a.ID, b.ID) })
	return out
}

// Workspace returns one Workspace.
func (m *SessionModel) Workspace(id string) (Workspace, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	if w, ok := m.workspaces[id]; ok {
		return *w, true
	}
	return Workspace{}, false
}

// WorkspaceByPath returns the Workspace registered at a canonical path.
func (m *SessionModel) WorkspaceByPath(path string) (Workspace, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	if id, ok := m.byPath[path]; ok {
		return *m.workspaces[id], true
	}
	return Workspace{}, false
}

// SessionsWhere returns the Sessions that keep accepts, oldest first. keep
// runs under the read lock and must not call the store; only the Sessions
// it keeps are copied, so a scan of a large history for a few is cheap.
func (m *SessionModel) SessionsWhere(keep func(*Session) bool) []Session {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	var out []Session
	for _, ss := range m.order {
		if keep(ss) {
			out = append(out, ss.record())
		}
	}
	return out
}

// Sessions returns every Session, open and closed, oldest first. With a
// workspace ID, only that Workspace's.
func (m *SessionModel) Sessions(workspaceID string) []Session {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	list := m.sorted(workspaceID)
	out := make([]Session, len(list))
	for i, ss := range list {
		out[i] = ss.record()
	}
	return out
}

// sorted returns the Sessions of a Workspace, or all with "", oldest
// first; the read lock is held. The caller must not modify the slice.
func (m *SessionModel) sorted(workspaceID string) []*Session {
	if workspaceID == "" {
		return m.order
	}
	list := make([]*Session, 0, m.members[workspaceID])
	for _, ss := range m.order {
		if ss.WorkspaceID == workspaceID {
			list = append(list, ss)
		}
	}
	return list
}

// SessionCount returns how many Sessions a Workspace has, open or closed.
func (m *SessionModel) SessionCount(workspaceID string) int {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	return m.members[workspaceID]
}

// Session returns one Session.
func (m *SessionModel) Session(id string) (Session, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	if ss, ok := m.sessions[id]; ok {
		return ss.record(), true
	}
	return Session{}, false
}

// transitionsLocked lists the environment boundaries an owner holds, for
// the snapshot; the read lock is held.
func (m *SessionModel) transitionsLocked() []Transition {
	out := make([]Transition, 0, len(m.owned))
	for id, gen := range m.owned {
		out = append(out, Transition{Session: id, Generation: gen})
	}
	slices.SortFunc(out, func(a, b Transition) int { return compareIDs(a.Session, b.Session) })
	return out
}
