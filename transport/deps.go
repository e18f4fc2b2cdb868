package transport

import (
	"context"
	"io"
	"net"
	"time"

	"lathe/commands/agents"
	"lathe/commands/attachments"
	"lathe/commands/environments"
	"lathe/commands/files"
	"lathe/commands/scm"
	"lathe/commands/sessions"
	"lathe/commands/tasks"
	"lathe/commands/turns"
	"lathe/commands/worktrees"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/terminal"
)

// What the routes depend on: one small interface per route group, each
// defined here by its consumer and met by a capability of package commands
// (or the runtime). Route tests meet them with fakes, so request decoding,
// statuses and error bodies are tested without a daemon or containerd.

// SessionCommands are the Workspace and Session routes' commands
// (commands.Sessions).
type SessionCommands interface {
	RegisterWorkspace(ctx context.Context, path string, name *string) (w projections.Workspace, created bool, err error)
	RenameWorkspace(ctx context.Context, id, name string) (projections.Workspace, error)
	RemoveWorkspace(ctx context.Context, id string) error
	CreateSession(ctx context.Context, workspaceID string, spec sessions.SessionSpec) (projections.Session, error)
	CreateSessionAt(ctx context.Context, workingDir string, spec sessions.SessionSpec) (projections.Session, error)
	RenameSession(ctx context.Context, id, name string) (projections.Session, error)
	CloseSession(ctx context.Context, id string) (projections.Session, error)
	DeleteSession(ctx context.Context, id string) error
	ReopenSession(ctx context.Context, id string) (projections.Session, error)
	// DeleteSessionConfirmed is the forced delete: DELETE
	// /api/sessions/:id?force=true {discard_files?} → 200 commands.Deletion;
	// 409 {error, files} for a worktree Session's uncommitted work not named
	// in discard_files.
	DeleteSessionConfirmed(ctx context.Context, id string, discard []string) (sessions.Deletion, error)
}

// WorktreeCommands are a worktree Session's way home (commands.Worktrees;
// transport/sessions.go):
//
//	POST   /api/sessions/:id/merge {strategy, message?} → 200 commands.MergeResult;
//	       409 {error, files} when it refuses (nothing changed)
type WorktreeCommands interface {
	Merge(ctx context.Context, id string, req worktrees.MergeRequest) (worktrees.MergeResult, error)
}

// EnvironmentCommands are the environment routes' commands
// (commands.Environments).
type EnvironmentCommands interface {
	ChangeEnvironment(ctx context.Context, id string, plan environments.EnvironmentPlan) (projections.Session, error)
	RebuildEnvironment(ctx context.Context, id string) (projections.Session, error)
	ConfirmRuntimeCleanup(ctx context.Context, id string, c environments.CleanupConfirmation) (projections.Session, error)
	// Sync fetches a remote Session's committed work into the Workspace
	// repository: POST /api/sessions/:id/sync → 200 commands.SyncResult.
	Sync(ctx context.Context, id string) (environments.SyncResult, error)
	// PreviewPorts lists the TCP ports listening in a Ready Session's
	// sandbox: GET /api/sessions/:id/preview/ports → 200 [{port}].
	PreviewPorts(ctx context.Context, id string) ([]environments.PreviewPort, error)
}

// FileCommands are the Session file routes' commands (commands.Files):
// confinement, limits and the journaled write live there.
//
//	GET  /api/sessions/:id/tree?path=  → 200 commands.TreeListing
//	GET  /api/sessions/:id/file?path=  → 200 commands.FileContent
//	POST /api/sessions/:id/file?path=  body {content, expected_sha256?}
//	                                    → 200 commands.FileWritten
//	POST /api/sessions/:id/files/create body {path, kind: file|dir}
//	                                    → 201 commands.TreeEntry
//	POST /api/sessions/:id/files/rename body {from, to}
//	                                    → 200 commands.FileRenamed
//	POST /api/sessions/:id/files/delete body {path, recursive?}
//	                                    → 200 events.FileDeleted
type FileCommands interface {
	Tree(ctx context.Context, id, path string) (files.TreeListing, error)
	Read(ctx context.Context, id, path string) (files.FileContent, error)
	Write(ctx context.Context, id string, w files.FileWrite) (files.FileWritten, error)
	Create(ctx context.Context, id, path, kind string) (files.TreeEntry, error)
	Rename(ctx context.Context, id, from, to string) (files.FileRenamed, error)
	Delete(ctx context.Context, id, path string, recursive bool) (events.FileDeleted, error)
}

// AttachmentCommands are the attachment routes' commands
// (commands.Attachments; transport/attachments.go).
type AttachmentCommands interface {
	AddAttachment(ctx context.Context, sessionID string, up attachments.AttachmentUpload) (projections.Attachment, error)
	ChangeAttachmentScope(ctx context.Context, sessionID, ref, scope string) (projections.Attachment, error)
	DeleteAttachment(ctx context.Context, sessionID, ref string) error
	OpenAttachment(sessionID, ref string) (projections.Attachment, io.ReadCloser, error)
}

// GitCommands are the Git and Check routes' commands (commands.Git;
// transport/git.go).
type GitCommands interface {
	GitStatus(ctx context.Context, id string) (scm.GitStatus, error)
	GitDiff(ctx context.Context, id, p string, staged bool) (scm.GitDiff, error)
	GitHunks(ctx context.Context, id, p string, staged bool) (scm.GitHunks, error)
	GitBranches(ctx context.Context, id string) (scm.GitBranches, error)
	GitIdentity(ctx context.Context, id string) (scm.GitIdentity, error)
	GitStage(ctx context.Context, id string, paths []string) (events.GitStaged, error)
	GitUnstage(ctx context.Context, id string, paths []string) (events.GitUnstaged, error)
	GitHunk(ctx context.Context, id string, req scm.GitHunkRequest) (events.GitHunk, error)
	GitDiscardHunk(ctx context.Context, id string, req scm.GitHunkRequest) (events.GitHunk, error)
	GitDiscard(ctx context.Context, id, p string) (events.GitDiscarded, error)
	GitCheckout(ctx context.Context, id, ref string) (events.GitCheckedOut, error)
	GitCommit(ctx context.Context, id string, req scm.GitCommitRequest) (events.GitCommitted, error)
	SetCheck(ctx context.Context, id string, command *string) (projections.Session, error)
	RunCheck(ctx context.Context, id string, timeout time.Duration) (scm.CheckResult, error)
}

// TaskCommands are the task and terminal routes' commands (commands.Tasks;
// transport/tasks.go, transport/terminal.go).
type TaskCommands interface {
	StartTask(ctx context.Context, sessionID string, req tasks.TaskRequest) (projections.Task, error)
	Terminal(sessionID, taskID string) (*terminal.Terminal, error)
	KillTask(ctx context.Context, sessionID, taskID string) (projections.Task, error)
}

// TurnCommands are the turn routes' and /ws turn commands' commands
// (commands.Turns; transport/turns.go, transport/turnlive.go).
type TurnCommands interface {
	SubmitTurn(ctx context.Context, req turns.TurnRequest) (t projections.Turn, reattached bool, err error)
	StopTurn(sessionID, turnID string) error
	WaitTurn(ctx context.Context, sessionID, turnID string) (projections.Turn, error)
	Rewind(ctx context.Context, sessionID string, keepThrough *string, keep *int) (hidden []string, err error)
}

// Sandboxes finds the live sandbox of a Ready Session, for the Preview
// (commands.Environments; transport/preview.go): 404 for a missing
// Session, 409 for one that is not Ready. The git, task and terminal
// routes ask it first, for the same answers.
type Sandboxes interface {
	Sandbox(id string) (PreviewSandbox, projections.Session, error)
}

// PreviewSandbox is what the Preview needs of a live sandbox (a
// runtime/sandbox.Sandbox): its Session and generation, which key the
// proxy's connection pools, and a dial to a port on its own loopback.
type PreviewSandbox interface {
	SessionID() string
	Generation() uint64
	Dial(ctx context.Context, port int) (net.Conn, error)
}

// Folders are the host's folders for the folder picker and the project
// probe (runtime/project; transport/misc.go). Their errors are of the
// classes NotFound and Invalid.
type Folders interface {
	ListDirs(path string, hidden bool) (DirListing, error)
	Probe(path string) (Project, error)
}

// JournalReader is the read-only journal behind the audit feed and head
// (transport/misc.go): envelopes as published, with their hashes.
type JournalReader interface {
	ScanSealed(ctx context.Context, after uint64, limit int, fn func(seq uint64, raw []byte) error) error
	ScanAggregateSealed(ctx context.Context, aggregateID string, after uint64, limit int, fn func(seq uint64, raw []byte) error) error
	HeadHash() (seq uint64, hash string)
}

// AgentCatalog is the Agent, provider and model-server view behind
// /api/llm-health and /api/llm/models (transport/agents.go), over the
// runtime's catalog (runtime/llm/catalog).
type AgentCatalog interface {
	Health(ctx context.Context) LLMHealth
	ModelsFor(ctx context.Context, agentID, model string) (ModelList, error)
}

// AgentRuntime is the live Agent actors' reads (transport/agentsrt.go),
// over the runtime's actors (runtime/agent): the Agents with their
// in-memory patches, one actor's status, the token report.
type AgentRuntime interface {
	Agents() []AgentView
	Agent(id string) (AgentView, error)
	Status(id string) (AgentStatus, error)
	TokenReport() TokenReport
}

// AgentCommands journal and apply the Agent execute, PATCH and restart
// routes' changes (commands.Agents; transport/agentsrt.go). Execute
// journals the execute and runs the Agent's tool loop (a stateless one is
// one inference with no tools); its result carries the usage even when it
// fails.
type AgentCommands interface {
	Execute(ctx context.Context, id string, req agents.ExecuteRequest) (ExecuteResult, error)
	Patch(ctx context.Context, id string, p agents.AgentPatch, restart bool) (AgentView, error)
	Restart(ctx context.Context, id string) (AgentStatus, error)
}

// MCPCommands journal and apply the MCP registry routes' changes
// (commands.MCP; transport/mcp.go).
type MCPCommands interface {
	Install(ctx context.Context, slug, name string, values map[string]string) (MCPServer, error)
	Reconnect(ctx context.Context, name string) (MCPServer, error)
	Remove(ctx context.Context, name string) error
}

// MCPRegistry is the live MCP registry's reads and the bundled catalog
// (runtime/mcp; transport/mcp.go).
type MCPRegistry interface {
	Servers() []MCPServer
	Tools() []MCPTool
	Catalog() []MCPEntry
}

// ApprovalCommands resolve parked MCP calls and revoke saved decisions
// (commands.Approvals; transport/approvals.go).
type ApprovalCommands interface {
	Resolve(ctx context.Context, id, decision, persist string) error
	Revoke(ctx context.Context, server, agentID, tool string) (int, error)
}

// SkillCommands fire the configured Skills (commands.Skills;
// transport/skills.go).
type SkillCommands interface {
	Fire(ctx context.Context, id string) (agents.SkillFiring, error)
}
