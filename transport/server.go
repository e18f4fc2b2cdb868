// Package transport is Lathe's HTTP and WebSocket surface: httprouter
// routes behind the security Guard, and the /ws hub. Handlers decode and
// validate input, call commands for every change, and answer from the
// projections. transport never appends to the journal itself.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"lathe/commands"
	"lathe/projections"
)

// Deps are the parts of the daemon the routes serve.
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
	// Store is the read models every route answers from.
	Store   *projections.Store
	Journal JournalReader // read only: the audit feed
	// Audit reads a Session's trail and past states (transport/audit.go).
	Audit AuditCommands
	// Spawned reports how many Agents are spawned (for /health and
	// readiness).
	Spawned func() int
	// Capabilities are the sandbox runtime facts the project probe reports.
	Capabilities Capabilities
	// LLM is the provider-neutral Agent and provider catalog behind
	// /api/agents, /api/llm-health and /api/llm/models (transport/agents.go).
	LLM AgentCatalog
	// Runtime is the live Agent actors behind /api/agents (when set, the
	// source of the in-memory config), the status and execute routes and
	// /api/tokens/report (transport/agentsrt.go).
	Runtime AgentRuntime
	// Agents journals and applies the PATCH and restart routes' changes.
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
	Skills        []commands.SkillSpec
	SkillCommands SkillCommands
	// Automations runs the Automation routes and the legacy workflow,
	// schedule and proactive views (transport/automations.go).
	Automations AutomationCommands
	// Chats and SharedFiles are the compatibility Chats' and the shared
	// file store's commands (transport/chats.go).
	Chats       ChatCommands
	SharedFiles SharedFileCommands
	// A2A is the inbound A2A receiver (transport/a2a.go); nil serves none.
	A2A A2ACommands
	// Ways runs the Ways (Attempts) routes (transport/ways.go); nil
	// serves none.
	Ways WaysCommands
	// Lattice is the lattice Sessions' team (transport/lattice.go).
	Lattice commands.LatticeTeam
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

// Server is the daemon's HTTP handler.
type Server struct {
	deps   Deps
	log    *slog.Logger
	guard  *Guard
	hub    *Hub
	router *httprouter.Router
	frames *frameSource
	// terminals tracks the terminal WebSockets (transport/terminal.go).
	terminals *terminalConns
	// accepts runs /ws session commands off their connection's reader
	// (transport/turnlive.go).
	accepts *acceptPool
	// preview is the Preview origin and legacy proxy (transport/preview.go).
	preview *previewProxy
}

// New builds the routes and middleware.
func New(sec SecurityOptions, deps Deps) (*Server, error) {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Skills == nil {
		deps.Skills = []commands.SkillSpec{}
	}
	if deps.Spawned == nil {
		deps.Spawned = func() int { return 0 }
	}
	s := &Server{deps: deps, log: deps.Logger, router: httprouter.New(), terminals: newTerminalConns(), accepts: newAcceptPool()}
	s.frames = &frameSource{store: deps.Store}
	s.hub = NewHub(HubOptions{Snapshot: s.frames.snapshot, Logger: deps.Logger})
	s.preview = newPreviewProxy(nil, deps.Preview, deps.Logger)
	if deps.Sandboxes != nil {
		s.preview.sandbox = deps.Sandboxes.Sandbox
	}
	s.routes()
	g, err := NewGuard(sec, s.interceptPreview, s.router)
	if err != nil {
		return nil, err
	}
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

func (s *Server) routes() {
	r := s.router
	r.HandleMethodNotAllowed = true
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, w.Header().Get("Allow")))
	})
	r.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v)
		writeError(w, http.StatusInternalServerError, "internal error")
	}

	for _, h := range []struct {
		path string
		fn   httprouter.Handle
	}{{"/health", s.health}, {"/health/ready", s.healthReady}, {"/health/live", s.healthLive}, {"/", s.index}} {
		r.GET(h.path, h.fn)
		r.HEAD(h.path, h.fn) // probes often use HEAD
	}

	if s.deps.Metrics != nil {
		r.Handler(http.MethodGet, "/metrics", s.deps.Metrics) // behind the Guard, as every route
	}

	// Workbench assets: transport/static.go.
	for _, sr := range staticRoutes {
		r.GET(sr.prefix+"*file", serveStatic(sr.dir))
		r.HEAD(sr.prefix+"*file", serveStatic(sr.dir))
	}

	r.GET("/api/workspaces", s.listWorkspaces)
	r.POST("/api/workspaces", s.registerWorkspace)
	r.GET("/api/workspaces/:id", s.getWorkspace)
	r.PATCH("/api/workspaces/:id", s.renameWorkspace)
	r.DELETE("/api/workspaces/:id", s.removeWorkspace)
	r.GET("/api/workspaces/:id/sessions", s.listWorkspaceSessions)
	r.POST("/api/workspaces/:id/sessions", s.createSession)

	r.GET("/api/sessions", s.listSessions)
	r.POST("/api/sessions", s.createSessionAt)
	r.GET("/api/sessions/:id", s.getSession)
	r.PATCH("/api/sessions/:id", s.renameSession)
	r.DELETE("/api/sessions/:id", s.deleteSession)
	r.POST("/api/sessions/:id/reopen", s.reopenSession)
	r.PUT("/api/sessions/:id/environment", s.changeEnvironment)
	r.POST("/api/sessions/:id/environment/rebuild", s.rebuildEnvironment)
	r.POST("/api/sessions/:id/environment/confirm-runtime-cleanup", s.confirmRuntimeCleanup)
	// Session files: transport/files.go.
	r.GET("/api/sessions/:id/tree", s.sessionTree)
	r.GET("/api/sessions/:id/file", s.readSessionFile)
	r.POST("/api/sessions/:id/file", s.writeSessionFile)
	r.POST("/api/sessions/:id/files/create", s.createSessionFile)
	r.POST("/api/sessions/:id/files/rename", s.renameSessionFile)
	r.POST("/api/sessions/:id/files/delete", s.deleteSessionFile)
	// Tasks and terminals: transport/tasks.go, transport/terminal.go.
	r.GET("/api/sessions/:id/tasks", s.listTasks)
	r.POST("/api/sessions/:id/tasks", s.startTask)
	r.POST("/api/sessions/:id/tasks/:tid/kill", s.killTask)
	r.GET("/api/sessions/:id/terminals/:tid/ws", s.terminalWS)
	// Attachments: transport/attachments.go.
	r.GET("/api/sessions/:id/attachments", s.listAttachments)
	r.POST("/api/sessions/:id/attachments", s.uploadAttachment)
	r.GET("/api/sessions/:id/attachments/:ref", s.getAttachment)
	r.PATCH("/api/sessions/:id/attachments/:ref", s.changeAttachmentScope)
	r.DELETE("/api/sessions/:id/attachments/:ref", s.deleteAttachment)
	r.GET("/api/sessions/:id/attachments/:ref/content", s.attachmentContent)
	// Turns: transport/turns.go.
	r.GET("/api/sessions/:id/messages", s.sessionMessages)
	r.GET("/api/sessions/:id/turns", s.listTurns)
	r.GET("/api/sessions/:id/turns/:turn_id", s.getTurn)
	r.GET("/api/sessions/:id/active-turn", s.activeTurn)
	r.GET("/api/sessions/:id/export", s.exportSession)
	r.POST("/api/sessions/:id/rewind", s.rewindSession)
	r.GET("/api/sessions/:id/audit", s.sessionAudit)
	r.GET("/api/sessions/:id/at/:seq", s.sessionAt)
	r.GET("/api/session-turns/search", s.searchTurns)
	s.turnCodeRoutes(r) // changes, diff, restore, replay: transport/turncode.go

	// Preview ports: transport/preview.go.
	r.GET("/api/sessions/:id/preview/ports", s.previewPorts)
	// Legacy path Preview proxy: transport/preview.go.
	for _, m := range legacyMethods {
		r.Handle(m, "/api/sessions/:id/proxy/:port", s.legacyProxy)
		r.Handle(m, "/api/sessions/:id/proxy/:port/*tail", s.legacyProxy)
	}

	// Git and Checks: transport/git.go.
	r.GET("/api/sessions/:id/git/status", s.gitStatus)
	r.GET("/api/sessions/:id/git/diff", s.gitDiff)
	r.GET("/api/sessions/:id/git/branches", s.gitBranches)
	r.GET("/api/sessions/:id/git/identity", s.gitIdentity)
	r.GET("/api/sessions/:id/git/hunks", s.gitHunks)
	r.POST("/api/sessions/:id/git/stage", s.gitStage)
	r.POST("/api/sessions/:id/git/unstage", s.gitUnstage)
	r.POST("/api/sessions/:id/git/hunk", s.gitHunk)
	r.POST("/api/sessions/:id/git/hunk/discard", s.gitDiscardHunk)
	r.POST("/api/sessions/:id/git/discard", s.gitDiscard)
	r.POST("/api/sessions/:id/git/checkout", s.gitCheckout)
	r.POST("/api/sessions/:id/git/commit", s.gitCommit)
	r.PUT("/api/sessions/:id/check", s.setCheck)
	r.POST("/api/sessions/:id/check/run", s.runCheck)
	// Ways: transport/ways.go.
	s.waysRoutes(r)

	r.GET("/api/fs/list", s.fsList)
	r.GET("/api/fs/project", s.fsProject)

	// Agent catalog and model servers: transport/agents.go.
	r.GET("/api/agents", s.listAgents)
	r.GET("/api/llm-health", s.llmHealth)
	r.GET("/api/llm/models", s.llmModels)
	// Live Agent actors: transport/agentsrt.go.
	r.GET("/api/agents/:id/status", s.agentStatus)
	r.POST("/api/agents/:id/execute", s.agentExecute)
	r.POST("/api/agents/:id/restart", s.agentRestart)
	r.PATCH("/api/agents/:id", s.agentPatch)
	r.GET("/api/tokens/report", s.tokenReport)

	// MCP registry: transport/mcp.go.
	r.GET("/api/mcp/catalog", s.mcpCatalog)
	r.POST("/api/mcp/install", s.mcpInstall)
	r.GET("/api/mcp/servers", s.mcpServers)
	r.POST("/api/mcp/servers/:name", s.mcpReconnect)
	r.DELETE("/api/mcp/servers/:name", s.mcpRemove)
	r.GET("/api/mcp/tools", s.mcpTools)
	// Saved approval decisions and mcp-approve: transport/approvals.go.
	r.GET("/api/mcp/permissions", s.listPermissions)
	r.DELETE("/api/mcp/permissions", s.revokePermissions)
	s.hub.Handle("mcp-approve", s.handleApprove)

	// Skills: transport/skills.go.
	r.GET("/api/skills", s.listSkills)
	r.POST("/api/skills/:id/fire", s.fireSkill)
	r.GET("/api/lattice", s.latticeTeam)

	// Automations, interrupts, tools and the legacy views: transport/automations.go.
	s.automationRoutes()

	r.GET("/api/events/recent", s.recentEvents)
	r.GET("/api/events/journal", s.journalFeed)
	r.GET("/api/audit/head", s.auditHead)

	r.Handler(http.MethodGet, "/ws", s.hub)
	// Session turns over /ws and execute: transport/turnlive.go.
	s.hub.Handle("session", s.handleSession)
	s.hub.Handle("session-stop", s.handleSessionStop)
	r.POST("/api/sessions/:id/execute", s.sessionExecute)
	// Chats, their attachments and the shared file store: transport/chats.go.
	s.chatRoutes()
	// Inbound A2A: transport/a2a.go.
	s.a2aRoutes()
}

// errMissing is the error for an unknown record in a path.
func errMissing(kind, id string) error {
	return fmt.Errorf("%w: %s %q", commands.ErrNotFound, kind, id)
}

// isClientGone reports errors that only mean the client went away.
func isClientGone(err error) bool {
	return errors.Is(err, context.Canceled)
}
