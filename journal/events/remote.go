package events

func init() {
	register[RuntimeProvisioning]()
	register[RuntimeBound]()
	register[RuntimeReleased]()
	register[RuntimeRetained]()
	register[RuntimeCleanupConfirmed]()
	register[SessionSynced]()
	register[WorkRescued]()
}

// The remote sandbox provider's runtime records (CONTRACT.md "The remote
// sandbox provider"). Each provisioning attempt draws a fresh creation
// token and records it before it asks the engine (record-then-act), so a
// container an interrupted attempt left behind can be found by its label
// service_creation_token; the engine's container ID follows once it exists.

// RuntimeProvisioning: a provisioning attempt of a generation is about to
// ask the engine at Host for a container labelled with CreationToken.
type RuntimeProvisioning struct {
	Generation    uint64 `json:"generation"`
	CreationToken string `json:"creation_token"`
	Host          string `json:"host,omitempty"`
}

// RuntimeBound: the engine made the container RuntimeID for the attempt
// of CreationToken; it is the Session's runtime until released or
// retained.
type RuntimeBound struct {
	Generation    uint64 `json:"generation"`
	RuntimeID     string `json:"runtime_id"`
	CreationToken string `json:"creation_token"`
}

// RuntimeReleased: the Session's bound runtime was removed from the
// engine (or never came to exist).
type RuntimeReleased struct {
	Generation uint64 `json:"generation"`
}

// RuntimeRetained: Lathe could not remove the bound runtime (the engine
// was unreachable, or its work could not be brought home first); it stays
// on the engine until the operator confirms its cleanup by hand.
type RuntimeRetained struct {
	Generation    uint64   `json:"generation"`
	RuntimeID     string   `json:"runtime_id,omitempty"`
	CreationToken string   `json:"creation_token"`
	Evidence      Evidence `json:"evidence"`
}

// RuntimeCleanupConfirmed: the operator confirmed that the retained runtime
// (by RuntimeID, or every sandbox labelled CreationToken) was deleted by
// hand.
type RuntimeCleanupConfirmed struct {
	RuntimeID     string `json:"runtime_id,omitempty"`
	CreationToken string `json:"creation_token"`
}

// SessionSynced: the clone's work was fetched into the Workspace repository
// as Branch at Commit. Uncommitted is set when the clone's uncommitted
// changes came along as one more commit (before a runtime was removed);
// Reason is the lifecycle owner that brought it home, empty for POST /sync.
type SessionSynced struct {
	Branch      string `json:"branch"`
	Commit      string `json:"commit"`
	Uncommitted bool   `json:"uncommitted,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// WorkRescued: the clone's work could not be brought home although the
// engine answered (a host fault: host git refusing the bundle, an unsafe
// repository, a full disk), so before the runtime of Generation was
// removed its WorkingDir, .git included, was streamed out as one tar
// archive into the blob store: SHA256 names the blob, Size its bytes,
// Path the file on the daemon's host; Evidence tells why the work did not
// come home and how to get it back.
type WorkRescued struct {
	Generation uint64   `json:"generation"`
	SHA256     string   `json:"sha256"`
	Size       int64    `json:"size"`
	Path       string   `json:"path"`
	Evidence   Evidence `json:"evidence"`
}

func (RuntimeProvisioning) EventType() string     { return "session-runtime-provisioning" }
func (RuntimeBound) EventType() string            { return "session-runtime-bound" }
func (RuntimeReleased) EventType() string         { return "session-runtime-released" }
func (RuntimeRetained) EventType() string         { return "session-runtime-retained" }
func (RuntimeCleanupConfirmed) EventType() string { return "session-runtime-cleanup-confirmed" }
func (SessionSynced) EventType() string           { return "session-synced" }
func (WorkRescued) EventType() string             { return "session-work-rescued" }

func (RuntimeProvisioning) Aggregate() string     { return Session }
func (RuntimeBound) Aggregate() string            { return Session }
func (RuntimeReleased) Aggregate() string         { return Session }
func (RuntimeRetained) Aggregate() string         { return Session }
func (RuntimeCleanupConfirmed) Aggregate() string { return Session }
func (SessionSynced) Aggregate() string           { return Session }
func (WorkRescued) Aggregate() string             { return Session }
