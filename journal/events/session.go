package events

func init() {
	register[SessionCreated]()
	register[SessionRenamed]()
	register[SessionClosed]()
	register[SessionReopened]()
	register[SessionDeleted]()
}

// Mode is a Session's tagged mode: {kind:"single_agent", agent_id} or
// {kind:"lattice", workers?}. Workers narrows a lattice Session's team to
// some of the configured Workers; empty: all of them.
type Mode struct {
	Kind    string   `json:"kind"`
	AgentID string   `json:"agent_id,omitempty"`
	Workers []string `json:"workers,omitempty"`
}

// Mode kinds.
const (
	ModeSingleAgent = "single_agent"
	ModeLattice     = "lattice"
)

// Environment states.
const (
	EnvUnprepared       = "unprepared"
	EnvAwaitingApproval = "awaiting_approval"
	EnvPreparing        = "preparing"
	EnvReady            = "ready"
	EnvFailed           = "failed"
)

// Setup command sources.
const (
	SourceUser         = "user"
	SourceDevcontainer = "devcontainer"
	SourceLockfile     = "lockfile"
)

// Environment is a Session's durable environment plan and its state. The
// command that decides the plan also decides the state; projections copy it.
type Environment struct {
	State         string `json:"state"`
	Generation    uint64 `json:"generation"`
	Image         string `json:"image"`
	SetupCommand  string `json:"setup_command"`
	SetupSource   string `json:"setup_source,omitempty"`
	SetupApproved bool   `json:"setup_approved"`
	SetupReviewed bool   `json:"setup_reviewed"`
}

// PlannedState is the state a plan starts in: a setup command waits for a
// decision unless it is approved or a review vetoed it (a reviewed veto is
// authoritative: the environment prepares without running the command).
func PlannedState(setupCommand string, approved, reviewed bool) string {
	if setupCommand != "" && !approved && !reviewed {
		return EnvAwaitingApproval
	}
	return EnvUnprepared
}

// SessionCreated: a Session was created in a Workspace.
type SessionCreated struct {
	WorkspaceID   string      `json:"workspace_id"`
	Name          string      `json:"name"`
	WorkingDir    string      `json:"working_dir"`
	Mode          Mode        `json:"mode"`
	EnabledSkills []string    `json:"enabled_skills"`
	ExposedPorts  []int       `json:"exposed_ports"`
	Environment   Environment `json:"environment"`
	// Isolation is IsolationShared (also when empty: older records) or
	// IsolationWorktree; Branch is a worktree Session's branch,
	// lathe/<session_id>, and WorkingDir then its worktree.
	Isolation string `json:"isolation,omitempty"`
	Branch    string `json:"branch,omitempty"`
}

// SessionRenamed: the display name changed.
type SessionRenamed struct {
	Name string `json:"name"`
}

// SessionClosed: a soft close; the record stays listed.
type SessionClosed struct{}

// SessionReopened: a closed Session became active again.
type SessionReopened struct{}

// SessionDeleted: the record was deleted (DELETE with force=true).
type SessionDeleted struct{}

func (SessionCreated) EventType() string  { return "session-created" }
func (SessionRenamed) EventType() string  { return "session-renamed" }
func (SessionClosed) EventType() string   { return "session-closed" }
func (SessionReopened) EventType() string { return "session-reopened" }
func (SessionDeleted) EventType() string  { return "session-deleted" }

func (SessionCreated) Aggregate() string  { return Session }
func (SessionRenamed) Aggregate() string  { return Session }
func (SessionClosed) Aggregate() string   { return Session }
func (SessionReopened) Aggregate() string { return Session }
func (SessionDeleted) Aggregate() string  { return Session }
