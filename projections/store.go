// Package projections builds Lathe's read models from journal events, and
// from nothing else: Workspaces, Sessions and the live state the /ws snapshot
// needs. Only Apply writes them. Replaying the journal rebuilds them exactly.
package projections

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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
	Status        string      `json:"status"` // "open" or "closed"
	ClosedAt      *time.Time  `json:"closed_at,omitempty"`
	CreatedAt     time.Time   `json:"created_at"`
	UpdatedAt     time.Time   `json:"updated_at"`
	Version       uint64      `json:"-"`
	// parked holds the Session's parts as a checkpoint kept them, until an
	// event or a reader needs them decoded (checkpoint.go); nil otherwise.
	parked *parked
}

// record is a copy of the Session for a reader, without the store's
// bookkeeping.
func (ss *Session) record() Session {
	c := *ss
	c.parked = nil
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

// Task is a command run in a Session's sandbox.
type Task struct {
	ID          string     `json:"id"`
	Command     string     `json:"command"`
	Interactive bool       `json:"interactive"`
	Generation  uint64     `json:"generation"`
	Status      string     `json:"status"` // "running", "detached" or "exited"
	ExitCode    *int       `json:"exit_code"`
	OutputTail  string     `json:"output_tail,omitempty"`
	Error       string     `json:"error,omitempty"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	DurationMS  int64      `json:"duration_ms,omitempty"`
}

// Task statuses.
const (
	TaskRunning = "running"
	// TaskDetached: the daemon restarted while the task ran; the process
	// may still run in the sandbox, but its output no longer reaches the
	// daemon. Error explains it; a kill ends it.
	TaskDetached = "detached"
	TaskExited   = "exited"
)

// Session statuses.
const (
	StatusOpen   = "open"
	StatusClosed = "closed"
)

// Closed reports whether the Session is soft-closed.
func (s Session) Closed() bool { return s.Status == StatusClosed }

// Notice is one entry of the in-memory recent typed-event log.
// It is a typed event (kind "event", projections/typed.go), or the notice
// of a committed journal event (kind "journal", with its aggregate).
type Notice struct {
	TypedEvent
	Aggregate   string `json:"aggregate,omitempty"`
	AggregateID string `json:"aggregate_id,omitempty"`
}

// recentSize bounds the recent typed-event log.
const recentSize = 256

// Store holds every read model. It is safe for concurrent use: readers take
// copies under a read lock; Apply is the only writer.
type Store struct {
	mu         sync.RWMutex
	seq        uint64 // last applied journal seq
	seqID      string // the envelope ID at seq: ties a checkpoint to its journal
	workspaces map[string]*Workspace
	byPath     map[string]string // canonical path → workspace id
	sessions   map[string]*Session
	order      []*Session         // every Session, sorted by ID (oldest first)
	members    map[string]int     // workspace id → how many Sessions it has
	tasks      map[string][]*Task // session id → tasks, oldest first
	owned      map[string]uint64  // session id → generation whose boundary an owner holds
	// attachments: session id → reference id → relation (attachments.go)
	attachments map[string]map[string]*Attachment
	recent      []Notice // ring, recentSize
	recentNext  int
	// turns: session id → its turns (turns.go); runs: the live turns'
	// streamed state, by runKey; live: the last live-delta sequence number.
	turns map[string]*sessionTurns
	runs  map[string]*liveRun
	live  uint64
	// liveIn queues the deltas DeliverLive received (live.go).
	liveIn liveQueue
	// agents: Agent id → its operator overlay since the daemon started
	// (agents.go).
	agents map[string]*AgentOverlay
	// approvals: pending MCP approvals by ID; permissions: saved decisions
	// (approvals.go).
	approvals   map[string]*Approval
	permissions map[string]*Permission
	// related: session id → the other aggregates of its audit trail
	// (audit.go), kept after the Session is deleted.
	related map[string][]string
	// auto: the Automations, their folders and runs (automations.go).
	auto *AutomationModel
	// chats and files: the compatibility Chats and the shared file store
	// (chats.go).
	chats map[string]*Chat
	files map[string]*SharedFile
	// a2a: inbound A2A tasks by ID (chats.go).
	a2a map[string]*A2ATask
	// checkpointSize is the last checkpoint's, to size the next one's buffer.
	checkpointSize atomic.Int64
	// blobs reads the turn content events reference (content.go).
	blobs events.BlobReader
	// ways: the Attempt sets and the Workspaces they own (ways.go).
	ways waysIndex
	// pasts: images of Sessions' pasts for SessionAt (history.go), a
	// cache the checkpoint does not hold.
	pasts pastCache

	// delivered is the seq whose changes went out (frames and NATS); Await
	// waits on it. applied is signalled when it moves; it uses mu.RLocker().
	delivered uint64
	applied   *sync.Cond

	// liveMu guards the runs' delivery marks; liveCond wakes AwaitLive.
	liveMu      sync.Mutex
	liveCond    *sync.Cond
	liveWaiters int
}

// New returns an empty store.
func New() *Store {
	s := &Store{
		workspaces: map[string]*Workspace{},
		byPath:     map[string]string{},
		sessions:   map[string]*Session{},
		members:    map[string]int{},
		tasks:      map[string][]*Task{},
		owned:      map[string]uint64{},

		attachments: map[string]map[string]*Attachment{},
		turns:       map[string]*sessionTurns{},
		runs:        map[string]*liveRun{},
		related:     map[string][]string{},
		agents:      map[string]*AgentOverlay{},
		approvals:   map[string]*Approval{},
		permissions: map[string]*Permission{},
		auto:        newAutomationModel(),
		chats:       map[string]*Chat{},
		files:       map[string]*SharedFile{},
		a2a:         map[string]*A2ATask{},
		ways:        newWaysIndex(),
	}
	s.applied = sync.NewCond(s.mu.RLocker())
	s.liveCond = sync.NewCond(&s.liveMu)
	return s
}

// Seq returns the journal seq the read models reflect.
func (s *Store) Seq() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.seq
}

// Await blocks until the store has applied seq and its changes were
// delivered (see ApplyChanges), or ctx ends.
func (s *Store) Await(ctx context.Context, seq uint64) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.delivered >= seq {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.applied.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	for s.delivered < seq {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.applied.Wait()
	}
	return nil
}

// Change is one applied event with the record it changed as of that event
// (nil when the event deleted it). Live /ws frames are built from changes,
// so a frame never shows a later state than its event.
type Change struct {
	journal.Envelope
	Workspace *Workspace
	Session   *Session
	// Typed are the typed events the event caused (TypedEventsOf).
	Typed []TypedEvent
}

// Apply folds committed records into the read models, in order. Records at
// or below the applied seq are skipped, so replaying an overlap is harmless.
func (s *Store) Apply(recs []journal.Record) error {
	_, err := s.apply(recs, false)
	s.markDelivered()
	return err
}

// ApplyChanges is Apply for the live commit feed: it hands deliver, for each
// applied record, the changed record as of that event, and only then lets
// Await return for those records. So a command that appended an event
// returns after the event's frames and NATS messages went out, and what it
// does next (a turn's next delta, say) can never overtake them.
func (s *Store) ApplyChanges(recs []journal.Record, deliver func([]Change)) error {
	changes, err := s.apply(recs, true)
	if deliver != nil {
		deliver(changes)
	}
	s.markDelivered()
	return err
}

func (s *Store) markDelivered() {
	s.mu.Lock()
	s.delivered = s.seq
	s.mu.Unlock()
	s.applied.Broadcast()
}

func (s *Store) apply(recs []journal.Record, capture bool) (changes []Change, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		if r.Seq <= s.seq {
			continue
		}
		p, ok := r.Payload.(events.Payload)
		if !ok {
			if p, err = events.Decode(r.Type, r.Data); err != nil {
				return changes, fmt.Errorf("projections: seq %d: %w", r.Seq, err)
			}
		}
		if err := s.fold(r.Envelope, p); err != nil {
			return changes, fmt.Errorf("projections: seq %d (%s): %w", r.Seq, r.Type, err)
		}
		s.seq, s.seqID = r.Seq, r.ID
		s.pasts.grew(r.Envelope) // history.go
		typed := TypedEventsOf(r.Envelope, p)
		for _, te := range typed {
			s.noteTyped(te)
		}
		if capture {
			c := s.change(r.Envelope)
			c.Typed = typed
			changes = append(changes, c)
		}
	}
	return changes, nil
}

// change copies the record env changed, as it stands now.
func (s *Store) change(env journal.Envelope) Change {
	c := Change{Envelope: env}
	switch env.Aggregate {
	case events.Workspace:
		if w, ok := s.workspaces[env.AggregateID]; ok {
			cp := *w
			c.Workspace = &cp
		}
	case events.Session:
		if ss, ok := s.sessions[env.AggregateID]; ok {
			cp := ss.record()
			c.Session = &cp
		}
	}
	return c
}

// fold applies one event. It fails only on an event that contradicts the
// model (which replay of a verified journal never produces).
func (s *Store) fold(env journal.Envelope, p events.Payload) error {
	id, at := env.AggregateID, env.At
	if ss := s.sessions[id]; ss != nil && env.Aggregate == events.Session {
		if err := s.unpark(ss); err != nil {
			return err
		}
	}
	s.note(env)
	if env.Aggregate == events.AttemptSet {
		return s.foldWays(env, p)
	}
	switch e := p.(type) {
	case events.TurnEvent, events.SessionRewound:
		if a, ok := e.(events.TurnAccepted); ok {
			s.noteCitations(a) // projections/chats.go
		}
		return s.foldTurn(id, at, env.Seq, e)
	case events.WorkspaceRegistered:
		s.workspaces[id] = &Workspace{ID: id, Name: e.Name, Path: e.Path, CreatedAt: at, UpdatedAt: at, Version: 1}
		s.byPath[e.Path] = id
		s.members[id] = 0
	case events.WorkspaceRenamed:
		w, err := s.workspace(id)
		if err != nil {
			return err
		}
		w.Name, w.UpdatedAt = e.Name, at
		w.Version++
	case events.WorkspaceRemoved:
		w, err := s.workspace(id)
		if err != nil {
			return err
		}
		delete(s.byPath, w.Path)
		delete(s.members, id)
		delete(s.workspaces, id)
	case events.SessionCreated:
		if _, ok := s.members[e.WorkspaceID]; !ok {
			return fmt.Errorf("session %s names unknown workspace %s", id, e.WorkspaceID)
		}
		ss := &Session{
			ID: id, WorkspaceID: e.WorkspaceID, Name: e.Name, WorkingDir: e.WorkingDir, Mode: e.Mode,
			EnabledSkills: nonNil(e.EnabledSkills), ExposedPorts: nonNil(e.ExposedPorts), Environment: Environment{Environment: e.Environment},
			Status: StatusOpen, CreatedAt: at, UpdatedAt: at, Version: 1,
		}
		if old, ok := s.sessions[id]; ok {
			s.forget(old)
		}
		s.members[e.WorkspaceID]++
		s.sessions[id] = ss
		s.insertOrdered(ss)
	case events.SessionRenamed:
		return s.updateSession(id, at, func(ss *Session) { ss.Name = e.Name })
	case events.SessionClosed:
		return s.updateSession(id, at, func(ss *Session) {
			ss.Status = StatusClosed
			ss.ClosedAt = &at
		})
	case events.SessionReopened:
		return s.updateSession(id, at, func(ss *Session) {
			ss.Status = StatusOpen
			ss.ClosedAt = nil
			ss.Environment.Reason = ReasonReopened
		})
	case events.SessionDeleted:
		ss, err := s.session(id)
		if err != nil {
			return err
		}
		s.forget(ss)
		delete(s.tasks, id)
		delete(s.owned, id)
		delete(s.attachments, id)
		if st := s.turns[id]; st != nil && st.active != nil {
			return fmt.Errorf("session %s deleted during live turn %s", id, st.active.TurnID)
		}
		delete(s.turns, id)
	case events.AgentPatched, events.AgentRestarted, events.DaemonStarted:
		s.foldAgent(id, e)
	case events.ApprovalRequested, events.ApprovalResolved, events.PermissionsRevoked:
		s.foldApproval(id, at, e)
	case events.AutomationSaved, events.AutomationDeleted, events.AutomationMoved, events.AutomationTriggerSkipped,
		events.AutomationFolderCreated, events.AutomationFolderRenamed, events.AutomationFolderDeleted:
		s.foldAutomation(id, env.Seq, at, e) // projections/automations.go
	case events.RunStarted, events.NodeStarted, events.NodeWaiting, events.NodeFinished, events.NodeToolCall, events.RunWaiting, events.RunFinished:
		s.foldRun(id, at, e)
	case events.ChatCreated, events.ChatPatched, events.ChatDeleted, events.ChatMessageAdded, events.ChatTurnStarted,
		events.ChatToolCalled, events.ChatTurnEnded, events.ChatFileAttached, events.ChatFilePinned, events.ChatFileDetached:
		return s.foldChat(id, at, e) // projections/chats.go
	case events.SharedFileStored, events.SharedFilePatched, events.SharedFileDeleted:
		return s.foldSharedFile(id, at, e)
	case events.A2ATaskReceived, events.A2ATaskEnded:
		return s.foldA2A(id, at, e)
	case events.SkillFired:
		// Its typed events are noted as it is applied (TypedEventsOf).
	case events.MCPServerInstalled, events.MCPServerReconnected, events.MCPServerRemoved,
		events.EffectIntended, events.EffectSettled, events.AgentExecuted:
		// Audit only: the live MCP registry is runtime state.
	case events.FileWritten, events.FileCreated, events.FolderCreated, events.FileRenamed, events.FileDeleted:
		return s.updateSession(id, at, func(*Session) {})
	case events.TurnRestored:
		return s.updateSession(id, at, func(*Session) {}) // audit only: the files are the worktree's
	case events.AttachmentAdded, events.AttachmentScopeChanged, events.AttachmentDeleted, events.AttachmentsConsumed:
		return s.foldAttachment(id, at, e)
	case events.GitStaged, events.GitUnstaged, events.GitHunkStaged, events.GitHunkUnstaged, events.GitHunkDiscarded,
		events.GitDiscarded, events.GitCheckedOut, events.GitCommitted, events.CheckSet, events.CheckRan:
		return s.foldGit(id, at, e) // projections/git.go
	case events.EnvironmentPlanned:
		return s.updateSession(id, at, func(ss *Session) {
			ss.Environment = Environment{Environment: events.Environment{
				State: events.PlannedState(e.SetupCommand, e.SetupApproved, e.SetupReviewed), Generation: e.Generation, Image: e.Image,
				SetupCommand: e.SetupCommand, SetupSource: e.SetupSource, SetupApproved: e.SetupApproved, SetupReviewed: e.SetupReviewed,
			}, Owner: ss.Environment.Owner}
		})
	case events.EnvironmentChanging:
		return s.updateSession(id, at, func(ss *Session) {
			ss.Environment.Owner = e.Owner
			s.owned[id] = e.Generation
			if reason := reasonFor(e.Owner, ss.Environment.Reason); reason != "" {
				ss.Environment.State = events.EnvPreparing
				ss.Environment.Reason, ss.Environment.SetupOutput = reason, ""
			}
		})
	case events.EnvironmentReady:
		return s.updateSession(id, at, func(ss *Session) {
			ss.Environment.State, ss.Environment.Evidence = events.EnvReady, nil
			ss.Environment.SetupRan, ss.Environment.SetupSkipped, ss.Environment.SetupOutput = e.SetupRan, e.SetupSkipped, e.SetupOutput
		})
	case events.EnvironmentFailed:
		return s.updateSession(id, at, func(ss *Session) {
			ev := e.Evidence
			ss.Environment.State, ss.Environment.Evidence, ss.Environment.SetupOutput = events.EnvFailed, &ev, e.Evidence.OutputTail
		})
	case events.EnvironmentStopped:
		return s.updateSession(id, at, func(ss *Session) {
			ss.Environment.State = events.PlannedState(ss.Environment.SetupCommand, ss.Environment.SetupApproved, ss.Environment.SetupReviewed)
			ss.Environment.SetupRan = false
		})
	case events.EnvironmentSettled:
		return s.updateSession(id, at, func(ss *Session) {
			ss.Environment.Owner = ""
			delete(s.owned, id)
		})
	case events.TaskStarted:
		return s.updateSession(id, at, func(ss *Session) {
			s.tasks[id] = append(s.tasks[id], &Task{ID: e.TaskID, Command: e.Command, Interactive: e.Interactive,
				Generation: e.Generation, Status: TaskRunning, StartedAt: at})
		})
	case events.TaskDetached:
		return s.updateSession(id, at, func(ss *Session) {
			for _, t := range s.tasks[id] {
				if t.ID == e.TaskID && t.Status == TaskRunning {
					t.Status, t.Error = TaskDetached, e.Reason
				}
			}
		})
	case events.TaskKilled:
		return s.updateSession(id, at, func(*Session) {})
	case events.TaskExited:
		return s.updateSession(id, at, func(ss *Session) {
			for _, t := range s.tasks[id] {
				if t.ID == e.TaskID {
					code := e.ExitCode
					t.Status, t.ExitCode, t.OutputTail, t.Error = TaskExited, &code, e.OutputTail, e.Error
					t.EndedAt, t.DurationMS = &at, e.DurationMS
				}
			}
		})
	default:
		return fmt.Errorf("no projection for %T", p)
	}
	return nil
}

func (s *Store) note(env journal.Envelope) {
	s.remember(Notice{TypedEvent: TypedEvent{Kind: "journal", Type: env.Type, Seq: env.Seq, At: env.At},
		Aggregate: env.Aggregate, AggregateID: env.AggregateID})
}

func (s *Store) noteTyped(te TypedEvent) { s.remember(Notice{TypedEvent: te}) }

func (s *Store) remember(n Notice) {
	if len(s.recent) < recentSize {
		s.recent = append(s.recent, n)
		return
	}
	s.recent[s.recentNext] = n
	s.recentNext = (s.recentNext + 1) % recentSize
}

func (s *Store) workspace(id string) (*Workspace, error) {
	w, ok := s.workspaces[id]
	if !ok {
		return nil, fmt.Errorf("unknown workspace %s", id)
	}
	return w, nil
}

func (s *Store) session(id string) (*Session, error) {
	ss, ok := s.sessions[id]
	if !ok {
		return nil, fmt.Errorf("unknown session %s", id)
	}
	return ss, nil
}

func (s *Store) updateSession(id string, at time.Time, f func(*Session)) error {
	ss, err := s.session(id)
	if err != nil {
		return err
	}
	f(ss)
	ss.UpdatedAt = at
	ss.Version++
	return nil
}

// insertOrdered adds ss to s.order. New IDs are ULIDs, which mostly grow,
// so this is usually an append.
func (s *Store) insertOrdered(ss *Session) {
	if n := len(s.order); n == 0 || s.order[n-1].ID < ss.ID {
		s.order = append(s.order, ss)
		return
	}
	i, _ := slices.BinarySearchFunc(s.order, ss.ID, func(x *Session, id string) int { return compareIDs(x.ID, id) })
	s.order = slices.Insert(s.order, i, ss)
}

// forget removes a Session from the Session indexes.
func (s *Store) forget(ss *Session) {
	if _, ok := s.members[ss.WorkspaceID]; ok {
		s.members[ss.WorkspaceID]--
	}
	delete(s.sessions, ss.ID)
	s.removeOrdered(ss.ID)
}

func (s *Store) removeOrdered(id string) {
	if i, ok := slices.BinarySearchFunc(s.order, id, func(x *Session, id string) int { return compareIDs(x.ID, id) }); ok {
		s.order = slices.Delete(s.order, i, i+1)
	}
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// Workspaces returns every Workspace, oldest first.
func (s *Store) Workspaces() []Workspace {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Workspace, 0, len(s.workspaces))
	for _, w := range s.workspaces {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b Workspace) int { return compareIDs(a.ID, b.ID) })
	return out
}

// Workspace returns one Workspace.
func (s *Store) Workspace(id string) (Workspace, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if w, ok := s.workspaces[id]; ok {
		return *w, true
	}
	return Workspace{}, false
}

// WorkspaceByPath returns the Workspace registered at a canonical path.
func (s *Store) WorkspaceByPath(path string) (Workspace, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if id, ok := s.byPath[path]; ok {
		return *s.workspaces[id], true
	}
	return Workspace{}, false
}

// SessionsWhere returns the Sessions that keep accepts, oldest first. keep
// runs under the read lock and must not call the store; only the Sessions
// it keeps are copied, so a scan of a large history for a few is cheap.
func (s *Store) SessionsWhere(keep func(*Session) bool) []Session {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Session
	for _, ss := range s.order {
		if keep(ss) {
			out = append(out, ss.record())
		}
	}
	return out
}

// SessionsWithUnexitedTasks returns the IDs of the Sessions that have a
// task that has not exited (running or detached), oldest first, without
// decoding the parked ones' tasks.
func (s *Store) SessionsWithUnexitedTasks() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ids []string
	for _, ss := range s.order {
		if ss.parked != nil {
			if ss.parked.unexited {
				ids = append(ids, ss.ID)
			}
			continue
		}
		if unexited(s.tasks[ss.ID]) {
			ids = append(ids, ss.ID)
		}
	}
	return ids
}

// unexited tells whether any of tasks has not exited.
func unexited(tasks []*Task) bool {
	return slices.ContainsFunc(tasks, func(t *Task) bool { return t.Status != TaskExited })
}

// Sessions returns every Session, open and closed, oldest first. With a
// workspace ID, only that Workspace's.
func (s *Store) Sessions(workspaceID string) []Session {
	s.mu.RLock()
	defer s.mu.RUnlock()
	list := s.sorted(workspaceID)
	out := make([]Session, len(list))
	for i, ss := range list {
		out[i] = ss.record()
	}
	return out
}

// sorted returns the Sessions of a Workspace, or all with "", oldest
// first; the read lock is held. The caller must not modify the slice.
func (s *Store) sorted(workspaceID string) []*Session {
	if workspaceID == "" {
		return s.order
	}
	list := make([]*Session, 0, s.members[workspaceID])
	for _, ss := range s.order {
		if ss.WorkspaceID == workspaceID {
			list = append(list, ss)
		}
	}
	return list
}

// SessionCount returns how many Sessions a Workspace has, open or closed.
func (s *Store) SessionCount(workspaceID string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.members[workspaceID]
}

// Session returns one Session.
func (s *Store) Session(id string) (Session, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ss, ok := s.sessions[id]; ok {
		return ss.record(), true
	}
	return Session{}, false
}

// Tasks returns a Session's tasks, oldest first.
func (s *Store) Tasks(sessionID string) []Task {
	s.mu.RLock()
	defer s.mu.RUnlock()
	tasks := s.tasksOf(sessionID)
	out := make([]Task, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, *t)
	}
	return out
}

// Task returns one task of a Session.
func (s *Store) Task(sessionID, taskID string) (Task, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, t := range s.tasksOf(sessionID) {
		if t.ID == taskID {
			return *t, true
		}
	}
	return Task{}, false
}

// Recent returns the recent typed-event log, oldest first.
func (s *Store) Recent() []Notice {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Notice, 0, len(s.recent))
	out = append(out, s.recent[s.recentNext:]...)
	return append(out, s.recent[:s.recentNext]...)
}

// compareIDs orders ULIDs by creation time (their text sorts that way).
func compareIDs(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
