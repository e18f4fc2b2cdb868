package transport

import "lathe/projections"

// What the routes read: one small interface per route group, named with
// the read models' own method names, so the projections' read models (and
// projections.Store, which embeds them) meet them as they are. Route tests
// meet them with a projections.Store or fakes; no route depends on the
// concrete store.

// WorkspaceReader is the Workspace routes' reads (transport/sessions.go).
type WorkspaceReader interface {
	Workspaces() []projections.Workspace
	Workspace(id string) (projections.Workspace, bool)
	SessionList(workspaceID string) projections.SessionList
}

// SessionReader is the Session routes' reads (transport/sessions.go).
type SessionReader interface {
	Session(id string) (projections.Session, bool)
	SessionList(workspaceID string) projections.SessionList
	SessionPage(after string, limit int) projections.SessionList
}

// AttachmentReader is the attachment routes' reads
// (transport/attachments.go).
type AttachmentReader interface {
	Session(id string) (projections.Session, bool)
	Attachments(sessionID string, all bool) []projections.Attachment
	Attachment(sessionID, ref string) (projections.Attachment, bool)
}

// TurnReader is the turn history routes' reads (transport/turns.go).
type TurnReader interface {
	Session(id string) (projections.Session, bool)
	Workspace(id string) (projections.Workspace, bool)
	Turns(session string) []projections.Turn
	Turn(session, turn string) (projections.Turn, bool)
	ActiveTurn(session string) (projections.Turn, bool)
	SearchTurns(q, session string, limit int) []projections.TurnHit
}

// TaskReader is the task routes' reads (transport/tasks.go).
type TaskReader interface {
	Tasks(sessionID string) []projections.Task
}

// AutomationReader is the Automation routes' reads
// (transport/automations.go).
type AutomationReader interface {
	Automations() []projections.AutomationRecord
	Automation(id string) (projections.AutomationRecord, bool)
	AutomationFolders() []projections.AutomationFolder
	AutomationRuns(automationID string) []projections.AutomationRun
	AutomationRunSummaries(automationID string) []projections.RunSummary
	AutomationRun(runID string) (projections.AutomationRun, bool)
	ResolveRun(run projections.AutomationRun) projections.AutomationRun
	Interrupts() []projections.Interrupt
}

// ChatReader is the Chat routes' reads (transport/chats.go): the Chats and
// the shared files their attachments name.
type ChatReader interface {
	Chats(q string) []projections.ChatInfo
	Chat(id string) (projections.Chat, bool)
	SharedFile(id string) (projections.SharedFile, bool)
}

// SharedFileReader is the shared file store routes' reads
// (transport/chats.go).
type SharedFileReader interface {
	SharedFiles(q, tag string) []projections.SharedFile
	SharedFile(id string) (projections.SharedFile, bool)
}

// ApprovalReader is the saved approval decisions' reads
// (transport/approvals.go).
type ApprovalReader interface {
	Permissions() []projections.Permission
}

// WaysReader is the Ways routes' reads (transport/ways.go).
type WaysReader interface {
	Session(id string) (projections.Session, bool)
	AttemptSet(id string) (projections.AttemptSet, bool)
}

// EventReader is the health and recent-events routes' reads
// (transport/misc.go): the applied seq and the recent notices.
type EventReader interface {
	Seq() uint64
	Recent() []projections.Notice
}

// FrameReader is what the /ws frames are derived from (transport/frames.go):
// the snapshot a client hydrates from, and the Attempt sets that key the
// Ways frames.
type FrameReader interface {
	Snapshot() projections.Snapshot
	AttemptSet(id string) (projections.AttemptSet, bool)
}
