package events

import "encoding/json"

func init() {
	register[EnvironmentPlanned]()
	register[EnvironmentChanging]()
	register[EnvironmentReady]()
	register[EnvironmentFailed]()
	register[EnvironmentStopped]()
	register[EnvironmentSettled]()
	register[TaskStarted]()
	register[TaskExited]()
	register[TaskDetached]()
	register[TaskKilled]()
}

// Reasons a lifecycle owner takes a Session's runtime boundary.
const (
	OwnerPrepare     = "prepare"     // first preparation, or after reopen
	OwnerChange      = "change"      // PUT /environment
	OwnerRebuild     = "rebuild"     // POST /environment/rebuild
	OwnerClose       = "close"       // soft close tears the runtime down
	OwnerDelete      = "delete"      // force delete
	OwnerReconstruct = "reconstruct" // daemon start: reattach or recreate
)

// EnvironmentPlanned: a reviewed environment plan became the Session's next
// generation. The approval binds to exactly this SetupCommand text.
type EnvironmentPlanned struct {
	Generation    uint64 `json:"generation"`
	Image         string `json:"image"`
	SetupCommand  string `json:"setup_command"`
	SetupSource   string `json:"setup_source,omitempty"`
	SetupApproved bool   `json:"setup_approved"`
	SetupReviewed bool   `json:"setup_reviewed"`
}

// EnvironmentChanging: a lifecycle owner took the runtime boundary of a
// generation; the runtime tools are unavailable until EnvironmentSettled.
type EnvironmentChanging struct {
	Generation uint64 `json:"generation"`
	Owner      string `json:"owner"`
}

// EnvironmentReady: the generation's sandbox runs and its approved setup, if
// any, succeeded.
type EnvironmentReady struct {
	Generation   uint64 `json:"generation"`
	Sandbox      string `json:"sandbox"`
	SetupRan     bool   `json:"setup_ran"`
	SetupSkipped string `json:"setup_skipped,omitempty"` // why an existing command did not run
	// SetupOutput is the end of the setup command's combined stdout and
	// stderr (the same bound as a failure's OutputTail), when it ran.
	SetupOutput string `json:"setup_output,omitempty"`
}

// Evidence is what a failure leaves behind for the operator.
type Evidence struct {
	Error      string `json:"error"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	OutputTail string `json:"output_tail,omitempty"`
	Fix        string `json:"fix,omitempty"`
}

// GobEncode keeps a zero ExitCode through projection checkpoints (gob
// would drop a pointer to 0); the JSON form is the event's own.
func (e Evidence) GobEncode() ([]byte, error) { return json.Marshal(e) }

// GobDecode is GobEncode's inverse.
func (e *Evidence) GobDecode(b []byte) error { return json.Unmarshal(b, e) }

// EnvironmentFailed: preparing or running the generation failed.
type EnvironmentFailed struct {
	Generation uint64   `json:"generation"`
	Evidence   Evidence `json:"evidence"`
}

// EnvironmentStopped: the generation's runtime was torn down on purpose
// (close or delete); the plan stays and a reopen prepares it again.
type EnvironmentStopped struct {
	Generation uint64 `json:"generation"`
}

// EnvironmentSettled: the lifecycle owner released the boundary, whatever
// the outcome.
type EnvironmentSettled struct {
	Generation uint64 `json:"generation"`
}

// TaskStarted: a command started in the Session's sandbox.
type TaskStarted struct {
	TaskID      string `json:"task_id"`
	Command     string `json:"command"`
	Interactive bool   `json:"interactive"`
	Generation  uint64 `json:"generation"`
}

// TaskExited: a task's process ended.
type TaskExited struct {
	TaskID     string `json:"task_id"`
	ExitCode   int    `json:"exit_code"`
	OutputTail string `json:"output_tail"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"` // set when the exit code is not the process's own
}

// TaskDetached: the daemon restarted while the task ran in a sandbox it
// reattached: its daemon-side end (output stream, PTY) is lost, but the
// process may still run there. Reason says so in words; a kill ends it.
type TaskDetached struct {
	TaskID string `json:"task_id"`
	Reason string `json:"reason"`
}

// TaskKilled: an operator killed the task: Processes were sent SIGKILL in
// the sandbox (every process carrying the task's LATHE_TASK_ID). Its exit
// follows as TaskExited.
type TaskKilled struct {
	TaskID    string `json:"task_id"`
	Processes int    `json:"processes"`
	Detached  bool   `json:"detached,omitempty"`
}

func (TaskDetached) EventType() string { return "session-task-detached" }
func (TaskKilled) EventType() string   { return "session-task-killed" }
func (TaskDetached) Aggregate() string { return Session }
func (TaskKilled) Aggregate() string   { return Session }

func (EnvironmentPlanned) EventType() string  { return "session-environment-planned" }
func (EnvironmentChanging) EventType() string { return "session-environment-changing" }
func (EnvironmentReady) EventType() string    { return "session-environment-ready" }
func (EnvironmentFailed) EventType() string   { return "session-environment-failed" }
func (EnvironmentStopped) EventType() string  { return "session-environment-stopped" }
func (EnvironmentSettled) EventType() string  { return "session-environment-settled" }
func (TaskStarted) EventType() string         { return "session-task-started" }
func (TaskExited) EventType() string          { return "session-task-exited" }

func (EnvironmentPlanned) Aggregate() string  { return Session }
func (EnvironmentChanging) Aggregate() string { return Session }
func (EnvironmentReady) Aggregate() string    { return Session }
func (EnvironmentFailed) Aggregate() string   { return Session }
func (EnvironmentStopped) Aggregate() string  { return Session }
func (EnvironmentSettled) Aggregate() string  { return Session }
func (TaskStarted) Aggregate() string         { return Session }
func (TaskExited) Aggregate() string          { return Session }
