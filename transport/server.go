// Package transport is Lathe's HTTP and WebSocket surface: httprouter
// routes behind the security Guard, and the /ws hub. Handlers decode and
// validate input, call commands for every change, and answer from the
// read models through the reader interfaces of transport/readers.go.
// transport never appends to the journal itself.
//
// Every route is an entry of the route table (transport/routes.go), served
// by one handler type per resource (transport/handlers.go); the OpenAPI
// document and the README's API table are generated from that table.
//
// The /ws hub's live frames come from the commit feed's changes
// (Server.Broadcast): one builder per framed event type
// (transport/frames.go, liveFrames), typed by the payload the change
// carries as the projections decoded it, so no frame decodes an event's
// data again; an event type without a frame has no builder. Live deltas
// come the one live path (NATS, the live projection, Server.SendLive): a
// Session turn's token and reasoning frames are broadcast, and a Chat
// turn's frames go only to the connection that issued it, by the hub's
// routes (transport/chatroutes.go).
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"lathe/commands/core"

	"github.com/julienschmidt/httprouter"
)

// Deps are the parts of the daemon the routes serve: commands, and the
// read models behind one reader interface per route group.
type Deps struct {
	Sessions     SessionCommands
	Environments EnvironmentCommands
	Files        FileCommands
	Attachments  AttachmentCommands
	Git          GitCommands
	Tasks        TaskCommands
	Turns        TurnCommands
	// TurnCode reads and restores turns' code and replays them
	// (transport/turncode.go).
	TurnCode TurnCodeCommands
	// Sandboxes reaches Ready Sessions' sandboxes for the Preview; nil
	// serves no Preview.
	Sandboxes Sandboxes

	// The read models, one reader per route group (transport/readers.go).
	WorkspaceReads  WorkspaceReader
	SessionReads    SessionReader
	AttachmentReads AttachmentReader
	TurnReads       TurnReader
	TaskReads       TaskReader
	AutomationReads AutomationReader
	ChatReads       ChatReader
	SharedFileReads SharedFileReader
	ApprovalReads   ApprovalReader
	WaysReads       WaysReader
	EventReads      EventReader
	FrameReads      FrameReader

	Journal JournalReader // read only: the audit feed
	// Audit reads a Session's trail and past states (transport/audit.go).
	Audit AuditCommands
	// Spawned reports how many Agents are spawned (for /health and
	// readiness).
	Spawned func() int
	// Folders lists and probes the host's folders (transport/misc.go);
	// nil serves neither route.
	Folders Folders
	// Capabilities are the sandbox runtime facts the project probe reports.
	Capabilities Capabilities
	// LLM is the provider-neutral Agent and provider catalog behind
	// /api/llm-health and /api/llm/models (transport/agents.go).
	LLM AgentCatalog
	// Runtime is the live Agent actors behind /api/agents (with their
	// in-memory config), the status route and /api/tokens/report
	// (transport/agentsrt.go).
	Runtime AgentRuntime
	// Agents journals and applies the execute, PATCH and restart routes'
	// changes. Without LLM, Runtime and Agents no Agent route is served.
	Agents AgentCommands
	// MCP and MCPRegistry are the MCP registry routes' commands and reads
	// (transport/mcp.go).
	MCP         MCPCommands
	MCPRegistry MCPRegistry
	// Approvals resolves parked MCP calls and revokes saved decisions
	// (transport/approvals.go).
	Approvals ApprovalCommands
	// Skills are the configured Skills, SkillCommands fires them
	// (transport/skills.go).
	Skills        []core.SkillSpec
	SkillCommands SkillCommands
	// Automations runs the Automation routes and the legacy workflow,
	// schedule and proactive views (transport/automations.go).
	Automations AutomationCommands
	// Chats and SharedFiles are the compatibility Chats' and the shared
	// file store's commands (transport/chats.go).
	Chats       ChatCommands
	SharedFiles SharedFileCommands
	// A2A is the inbound A2A receiver (transport/a2a.go); nil serves none.
	A2A A2AServer
	// Ways runs the Ways (Attempts) routes (transport/ways.go); nil
	// serves none.
	Ways WaysCommands
	// Worktrees merges worktree Sessions home and deletes them
	// (transport/sessions.go); nil answers 503 to a merge.
	Worktrees WorktreeCommands
	// Lattice is the lattice Sessions' team (transport/lattice.go).
	Lattice core.LatticeTeam
	// Preview tunes the Preview proxy (transport/preview.go).
	Preview PreviewOptions
	Version string
	Logger  *slog.Logger
	// Metrics serves GET /metrics (projections/metrics); nil serves none.
	Metrics http.Handler
}

// Capabilities are the project probe's runtime capability fields.
type Capabilities struct {
	SupportsSessionImage         bool    `json:"supports_session_image"`
	Template                     *string `json:"template"`
	AutoApproveDevcontainerSetup bool    `json:"auto_approve_devcontainer_setup"`
}

// Server assembles the handler types, the route table, the Guard and the
// /ws hub.
type Server struct {
	log    *slog.Logger
	guard  *Guard
	router *httprouter.Router
	hub    *Hub
	frames *frameSource
	// terminals tracks the terminal WebSockets (transport/terminal.go).
	terminals *terminalConns
	// preview is the Preview origin and legacy proxy (transport/preview.go).
	preview *previewProxy
}

// New builds the handler types, registers the route table and puts the
// Guard in front.
func New(sec SecurityOptions, d Deps) (*Server, error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Skills == nil {
		d.Skills = []core.SkillSpec{}
	}
	if d.Spawned == nil {
		d.Spawned = func() int { return 0 }
	}
	log := logged{d.Logger}
	s := &Server{log: d.Logger, terminals: newTerminalConns()}
	s.frames = &frameSource{read: d.FrameReads}
	s.hub = NewHub(HubOptions{Snapshot: s.frames.snapshot, Logger: d.Logger})
	s.preview = newPreviewProxy(nil, d.Preview, d.Logger)
	if d.Sandboxes != nil {
		s.preview.sandbox = d.Sandboxes.Sandbox
	}
	h := &handlers{
		workspaces:  &workspaceRoutes{read: d.WorkspaceReads, cmds: d.Sessions},
		sessions:    &sessionRoutes{read: d.SessionReads, cmds: d.Sessions, worktrees: d.Worktrees},
		environment: &environmentRoutes{cmds: d.Environments},
		files:       &fileRoutes{cmds: d.Files},
		attachments: &attachmentRoutes{logged: log, read: d.AttachmentReads, cmds: d.Attachments},
		git:         &gitRoutes{cmds: d.Git, sandboxes: d.Sandboxes},
		tasks:       &taskRoutes{read: d.TaskReads, cmds: d.Tasks, sandboxes: d.Sandboxes},
		terminals:   &terminalRoutes{logged: log, cmds: d.Tasks, sandboxes: d.Sandboxes, conns: s.terminals},
		turns:       &turnRoutes{read: d.TurnReads, cmds: d.Turns},
		live:        &turnLiveRoutes{logged: log, cmds: d.Turns, accepts: newAcceptPool()},
		turnCode:    &turnCodeRoutes{cmds: d.TurnCode},
		audit:       &auditRoutes{logged: log, cmds: d.Audit},
		health:      &healthRoutes{read: d.EventReads, spawned: d.Spawned, version: d.Version},
		project:     &projectRoutes{folders: d.Folders, caps: d.Capabilities},
		events:      &eventRoutes{logged: log, read: d.EventReads, journal: d.Journal},
		agents:      &agentRoutes{catalog: d.LLM, runtime: d.Runtime, cmds: d.Agents},
		mcp:         &mcpRoutes{cmds: d.MCP, registry: d.MCPRegistry},
		approvals:   &approvalRoutes{logged: log, read: d.ApprovalReads, cmds: d.Approvals},
		skills:      &skillRoutes{skills: d.Skills, cmds: d.SkillCommands},
		lattice:     &latticeRoutes{team: d.Lattice},
		automations: &automationRoutes{logged: log, read: d.AutomationReads, cmds: d.Automations},
		chats:       &chatRoutes{logged: log, read: d.ChatReads, chats: d.Chats, files: d.SharedFiles, routes: &s.hub.chats},
		sharedFiles: &sharedFileRoutes{logged: log, read: d.SharedFileReads, files: d.SharedFiles},
		a2a:         &a2aRoutes{srv: d.A2A},
		ways:        &waysRoutes{read: d.WaysReads, cmds: d.Ways},
		preview:     s.preview,
		hub:         s.hub,
		docs:        &docRoutes{},
		metrics:     &metricsRoutes{d.Metrics},
	}
	table := h.table()
	for i, rt := range table {
		// A capability the daemon runs without serves no route.
		if (rt.Tag == "ways" && d.Ways == nil) || (rt.Tag == "a2a" && d.A2A == nil) || (rt.Tag == "metrics" && d.Metrics == nil) ||
			(rt.Tag == "agents" && (d.LLM == nil || d.Runtime == nil || d.Agents == nil)) || (rt.Tag == "project" && d.Folders == nil) {
			table[i].Handle = func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) { noRoute(w, r) }
		}
	}
	router := httprouter.New()
	register(router, table, d.Logger)
	s.router = router
	for _, c := range h.wsCommands() {
		s.hub.Handle(c.Name, c.Handle)
	}
	g, err := NewGuard(sec, s.preview.interceptPreview, router)
	if err != nil {
		return nil, err
	}
	g.public = publicPaths(table)
	s.guard = g
	return s, nil
}

// Handler is the whole HTTP surface, Guard first.
func (s *Server) Handler() http.Handler { return s.guard }

// Guard exposes the sign-in link builder.
func (s *Server) Guard() *Guard { return s.guard }

// Hub is the /ws connection manager.
func (s *Server) Hub() *Hub { return s.hub }

// Shutdown drains the /ws clients, closes the terminal WebSockets and ends
// the proxied Preview exchanges.
// http.Server does not wait for hijacked connections, so the daemon calls
// this alongside http.Server.Shutdown.
func (s *Server) Shutdown(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- s.ShutdownTerminals(ctx) }()
	go func() { errc <- s.preview.close(ctx) }()
	return errors.Join(s.hub.Shutdown(ctx), <-errc, <-errc)
}

// errMissing is the error for an unknown record in a path.
func errMissing(kind, id string) error {
	return fmt.Errorf("%w: %s %q", core.ErrNotFound, kind, id)
}

// isClientGone reports errors that only mean the client went away.
func isClientGone(err error) bool {
	return errors.Is(err, context.Canceled)
}
