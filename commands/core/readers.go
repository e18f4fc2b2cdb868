package core

import (
	"context"

	"lathe/journal/events"
	"lathe/projections"
)

// What the commands read of the projections, one small interface per read
// model, each method named and typed as projections.Store names it, so
// that the Store satisfies every one today and each per-aggregate model
// can be wired in its place. Automations read automationReader
// (commands/automations/automations.go).

// awaiter waits until the projections reflect a seq.
type awaiter interface {
	Await(ctx context.Context, seq uint64) error
}

// sessionReader reads Workspaces, Sessions, their tasks and attachments,
// and a Session's history.
type sessionReader interface {
	Session(id string) (projections.Session, bool)
	Sessions(workspaceID string) []projections.Session
	SessionsWhere(keep func(*projections.Session) bool) []projections.Session
	SessionCount(workspaceID string) int
	Workspace(id string) (projections.Workspace, bool)
	WorkspaceByPath(path string) (projections.Workspace, bool)
	SessionsWithUnexitedTasks() []string
	Task(sessionID, taskID string) (projections.Task, bool)
	Tasks(sessionID string) []projections.Task
	Attachment(sessionID, ref string) (projections.Attachment, bool)
	SessionAudit(ctx context.Context, j projections.AuditJournal, session string, q projections.AuditQuery) ([]projections.AuditEntry, bool, error)
	SessionAt(ctx context.Context, j projections.AuditJournal, id string, seq uint64) (projections.SessionAt, error)
}

// turnReader reads Session turns.
type turnReader interface {
	Turn(session, turn string) (projections.Turn, bool)
	Turns(session string) []projections.Turn
	ActiveTurn(session string) (projections.Turn, bool)
	TurnByKey(session, key string) (projections.Turn, bool)
	TurnTrees(session string) []projections.TurnTrees
	LiveTurns() []projections.Turn
	SearchTurns(q, session string, limit int) []projections.TurnHit
	AwaitLive(ctx context.Context, session, turn string, n uint64) error
}

// waysReader reads the Attempt sets and the Workspaces they own.
type waysReader interface {
	AttemptSet(id string) (projections.AttemptSet, bool)
	CurrentAttemptSet(session string) (projections.AttemptSet, bool)
	WorkspaceOwner(workspace string) (projections.Ownership, bool)
	UnsettledAttemptSets() []projections.AttemptSet
	AttemptSetOf(session, id string) (known, current bool)
}

// approvalReader reads the pending approvals and the saved decisions.
type approvalReader interface {
	SavedDecision(agent, server, tool string) (projections.Permission, bool)
	PendingApprovals() []projections.Approval
	PendingApproval(id string) (projections.Approval, bool)
	CountPermissions(server, agent, tool string) int
}

// chatReader reads the Chats and the shared files.
type chatReader interface {
	Chat(id string) (projections.Chat, bool)
	ChatInfo(id string) (projections.ChatInfo, bool)
	LiveChatTurns() []projections.ChatInfo
	SharedFile(id string) (projections.SharedFile, bool)
}

// a2aReader reads the inbound A2A tasks.
type a2aReader interface {
	A2ATask(id string) (projections.A2ATask, bool)
	LiveA2ATasks() []projections.A2ATask
}

// outsideReader reads the outside Agents' own sessions
// (commands/acprunner).
type outsideReader interface {
	OutsideSession(id string) (projections.OutsideSession, bool)
}

// agentReader reads the Agent patches in force.
type agentReader interface {
	AgentPatched() bool
}

// Reader is every read model the commands decide against: what New takes.
type Reader interface {
	awaiter
	effectReader
	sessionReader
	turnReader
	waysReader
	approvalReader
	chatReader
	agentReader
	outsideReader
	a2aReader
	AutomationReader
}

var _ Reader = (*projections.Store)(nil)

// effectReader is the unsettled effect intents start-up reconciles
// (projections.EffectModel; commands/startup/effects.go).
type effectReader interface {
	OpenEffects() []events.EffectIntended
}

// AttachmentTexts is what turns need from Attachments: the extracted text
// of an attachment a turn refers to.
type AttachmentTexts interface {
	AttachmentText(sessionID, ref string) (text string, ok bool, err error)
}

// AutomationReader is what the Automation commands read: the
// projections' Automation model.
type AutomationReader interface {
	Automation(id string) (projections.AutomationRecord, bool)
	Automations() []projections.AutomationRecord
	AutomationFolders() []projections.AutomationFolder
	AutomationFolderExists(path string) bool
	AutomationRun(runID string) (projections.AutomationRun, bool)
	ActiveAutomationRuns(automationID string) []projections.AutomationRun
}
