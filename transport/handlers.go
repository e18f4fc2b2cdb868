package transport

import (
	"log/slog"

	"lathe/commands/core"
)

// The handler types: one per resource, each holding only the commands and
// readers its routes use. Their methods are the handlers that the route
// table (transport/routes.go) names, in the file named beside each type.

// logged gives a handler type its logger and the /ws frame sender.
type logged struct{ log *slog.Logger }

// workspaceRoutes serves /api/workspaces (transport/sessions.go).
type workspaceRoutes struct {
	read WorkspaceReader
	cmds SessionCommands
}

// sessionRoutes serves /api/sessions and /api/sessions/:id
// (transport/sessions.go).
type sessionRoutes struct {
	read SessionReader
	cmds SessionCommands
	// worktrees merges and deletes worktree Sessions; nil answers 503.
	worktrees WorktreeCommands
}

// environmentRoutes serves a Session's environment and its Preview ports
// (transport/sessions.go, transport/preview.go).
type environmentRoutes struct{ cmds EnvironmentCommands }

// fileRoutes serves a Session's file tree (transport/files.go).
type fileRoutes struct{ cmds FileCommands }

// attachmentRoutes serves a Session's attachments
// (transport/attachments.go).
type attachmentRoutes struct {
	logged
	read AttachmentReader
	cmds AttachmentCommands
}

// gitRoutes serves a Session's Git and Check routes (transport/git.go).
type gitRoutes struct {
	cmds      GitCommands
	sandboxes Sandboxes
}

// taskRoutes serves a Session's tasks (transport/tasks.go).
type taskRoutes struct {
	read      TaskReader
	cmds      TaskCommands
	sandboxes Sandboxes
}

// terminalRoutes serves the terminal WebSockets (transport/terminal.go).
type terminalRoutes struct {
	logged
	cmds      TaskCommands
	sandboxes Sandboxes
	conns     *terminalConns
}

// turnRoutes serves a Session's turn history (transport/turns.go).
type turnRoutes struct {
	read TurnReader
	cmds TurnCommands
}

// turnLiveRoutes serves the session and session-stop /ws commands and the
// Session execute route (transport/turnlive.go).
type turnLiveRoutes struct {
	logged
	cmds    TurnCommands
	accepts *acceptPool
}

// turnCodeRoutes serves a turn's changes, diff, restore and replay
// (transport/turncode.go).
type turnCodeRoutes struct{ cmds TurnCodeCommands }

// auditRoutes serves a Session's audit trail and past states
// (transport/audit.go).
type auditRoutes struct {
	logged
	cmds AuditCommands
}

// healthRoutes serves /health and its probes (transport/misc.go).
type healthRoutes struct {
	read    EventReader
	spawned func() int
	version string
}

// projectRoutes serves the folder picker and the project probe
// (transport/misc.go).
type projectRoutes struct {
	folders Folders
	caps    Capabilities
}

// eventRoutes serves the recent events, the journal feed and its head
// (transport/misc.go).
type eventRoutes struct {
	logged
	read    EventReader
	journal JournalReader
}

// agentRoutes serves the Agent catalog and the live Agent actors
// (transport/agents.go, transport/agentsrt.go).
type agentRoutes struct {
	catalog AgentCatalog
	runtime AgentRuntime
	cmds    AgentCommands
}

// mcpRoutes serves the MCP registry (transport/mcp.go).
type mcpRoutes struct {
	cmds     MCPCommands
	registry MCPRegistry
}

// approvalRoutes serves the saved approval decisions and the mcp-approve
// /ws command (transport/approvals.go).
type approvalRoutes struct {
	logged
	read ApprovalReader
	cmds ApprovalCommands
}

// skillRoutes serves the Skills (transport/skills.go).
type skillRoutes struct {
	skills []core.SkillSpec
	cmds   SkillCommands
}

// latticeRoutes serves the lattice team (transport/lattice.go).
type latticeRoutes struct{ team core.LatticeTeam }

// automationRoutes serves the Automations, their runs, folders and the
// legacy workflow, schedule and proactive views
// (transport/automations.go).
type automationRoutes struct {
	logged
	read AutomationReader
	cmds AutomationCommands
}

// chatRoutes serves the compatibility Chats, their attachments and the
// chat-turn and chat-stop /ws commands (transport/chats.go).
type chatRoutes struct {
	logged
	read  ChatReader
	chats ChatCommands
	files SharedFileCommands
	// routes route the Chat turns' frames (the hub's, transport/chatroutes.go).
	routes *chatRouteTable
}

// sharedFileRoutes serves the shared file store (transport/chats.go).
type sharedFileRoutes struct {
	logged
	read  SharedFileReader
	files SharedFileCommands
}

// a2aRoutes serves inbound A2A through its server (transport/a2a.go).
type a2aRoutes struct{ srv A2AServer }

// waysRoutes serves the Ways (Attempts) routes (transport/ways.go).
type waysRoutes struct {
	read WaysReader
	cmds WaysCommands
}
