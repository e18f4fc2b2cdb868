package transport

import (
	"fmt"
	"net/http"

	"lathe/commands/agents"
	"lathe/commands/automationrunner"
	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/files"
	"lathe/commands/scm"
	"lathe/commands/sessions"
	"lathe/commands/tasks"
	"lathe/commands/turns"
	"lathe/commands/ways"
	"lathe/commands/worktrees"

	"github.com/julienschmidt/httprouter"

	"lathe/journal/events"
	"lathe/projections"
)

// The route table: every HTTP route of the daemon, as data, in one place.
// The router registers exactly these entries (register), the Guard takes
// its public paths from them (publicPaths), GET /api/openapi.json and the
// README's API table are generated from them (transport/openapi.go), and
// routes_table_test.go fails when a route is registered any other way.
//
// To find a route's handler, look its path up below: the entry names the
// handler type's method (h.sessions.getSession is getSession of
// sessionRoutes, transport/handlers.go says which file holds it).

// Auth is a route's authentication class.
type Auth string

const (
	// AuthPublic routes need no credential and are not rate limited: the
	// health probes.
	AuthPublic Auth = "public"
	// AuthOperator routes need an operator credential: an x-api-key, a
	// bearer token or the sign-in cookie (in unauthenticated loopback mode,
	// a loopback Host).
	AuthOperator Auth = "operator"
	// AuthPage is the workbench page and its assets: an operator
	// credential; a browser without one gets the sign-in page.
	AuthPage Auth = "page"
	// AuthA2A routes serve A2A peers: an operator credential, JSON-RPC 2.0
	// bodies (transport/a2a.go).
	AuthA2A Auth = "a2a"
	// AuthPreview routes forward to a port in a Session's sandbox: an
	// operator credential; the bodies are the sandbox's, served under a
	// sandboxing CSP (transport/preview.go).
	AuthPreview Auth = "preview"
)

// Route is one entry of the route table.
type Route struct {
	Method  string
	Path    string // httprouter syntax: :name and *name
	Handle  httprouter.Handle
	Auth    Auth
	Tag     string // the resource: its handler type without "Routes"
	Summary string // one line
	// Request is a zero value of the JSON body's type; nil takes no JSON
	// body. Form marks a multipart/form-data upload of one file part.
	Request any
	Form    bool
	// Query names the query parameters the route reads.
	Query []string
	// Status and Response are the success status and a zero value of its
	// body's type (nil: any JSON value); Content is its media types when
	// not only application/json.
	Status   int
	Also     []int // further success statuses with the same body
	Response any
	Content  []string
	// Errors are the route's own error statuses; every one answers
	// {error}. The statuses every route of its class may answer (400 for a
	// JSON body, 401, 403, 404 for a path parameter, 413, 415, 429) are
	// added by errorStatuses.
	Errors []int
	// Failure is a zero value of the body of the route's own Errors when
	// it is not {error} alone (the usage a failed run paid for), as
	// orError[F]{}: F, or {error} alone (transport/openapi.go).
	Failure any
	// WebSocket marks a route that upgrades to a WebSocket.
	WebSocket bool
}

// Media types of non-JSON bodies.
const (
	mediaJSON     = "application/json"
	mediaNDJSON   = "application/x-ndjson"
	mediaMarkdown = "text/markdown"
	mediaHTML     = "text/html"
	mediaBytes    = "application/octet-stream"
	// mediaPrometheus is the Prometheus text exposition format.
	mediaPrometheus = "text/plain; version=0.0.4"
)

func entry(method, path, tag string, h httprouter.Handle, summary string) Route {
	return Route{Method: method, Path: path, Handle: h, Auth: AuthOperator, Tag: tag, Summary: summary, Status: http.StatusOK}
}

// in sets the JSON request body's type.
func (r Route) in(body any) Route { r.Request = body; return r }

// out sets the success status and its body's type.
func (r Route) out(status int, body any) Route { r.Status, r.Response = status, body; return r }

// alsoOK adds a success status with the same body.
func (r Route) alsoOK(status int) Route { r.Also = append(r.Also, status); return r }

// as sets the success body's media types.
func (r Route) as(media ...string) Route { r.Content = media; return r }

// errs adds the route's own error statuses.
func (r Route) errs(statuses ...int) Route { r.Errors = statuses; return r }

// failing sets the body of the route's own error statuses.
func (r Route) failing(body any) Route { r.Failure = body; return r }

// query names the query parameters.
func (r Route) query(names ...string) Route { r.Query = names; return r }

// auth sets the authentication class.
func (r Route) auth(a Auth) Route { r.Auth = a; return r }

// form marks a multipart/form-data upload.
func (r Route) form() Route { r.Form = true; return r }

// ws marks a WebSocket upgrade.
func (r Route) ws() Route { r.WebSocket = true; r.Status = http.StatusSwitchingProtocols; return r }

// object is a JSON object whose fields the route's summary names.
type object = map[string]any

// okBody, removed and deleted are the small acknowledgements.
type removedBody struct {
	ID      string `json:"id"`
	Removed bool   `json:"removed"`
}

type deletedBody struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

// handlers are the handler types the table names. Any may be nil when
// only the table's data is needed (the documents, the Guard's classes):
// a method value of a nil pointer is never called then.
type handlers struct {
	workspaces  *workspaceRoutes
	sessions    *sessionRoutes
	environment *environmentRoutes
	files       *fileRoutes
	attachments *attachmentRoutes
	git         *gitRoutes
	tasks       *taskRoutes
	terminals   *terminalRoutes
	turns       *turnRoutes
	live        *turnLiveRoutes
	turnCode    *turnCodeRoutes
	audit       *auditRoutes
	health      *healthRoutes
	project     *projectRoutes
	events      *eventRoutes
	agents      *agentRoutes
	mcp         *mcpRoutes
	approvals   *approvalRoutes
	skills      *skillRoutes
	lattice     *latticeRoutes
	automations *automationRoutes
	chats       *chatRoutes
	sharedFiles *sharedFileRoutes
	a2a         *a2aRoutes
	ways        *waysRoutes
	preview     *previewProxy
	hub         *Hub
	docs        *docRoutes
	metrics     *metricsRoutes
}

// table is the route table.
func (h *handlers) table() []Route {
	const (
		GET, POST, PUT, PATCH, DELETE, HEAD = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead
		ok, created, accepted               = http.StatusOK, http.StatusCreated, http.StatusAccepted
		conflict, unavailable, badGateway   = http.StatusConflict, http.StatusServiceUnavailable, http.StatusBadGateway
		notFound, tooLarge                  = http.StatusNotFound, http.StatusRequestEntityTooLarge
	)
	var t []Route
	add := func(rs ...Route) { t = append(t, rs...) }

	// Health probes: public, GET and HEAD (probes often use HEAD).
	for _, p := range []struct {
		path, summary string
		fn            httprouter.Handle
		body          any
	}{
		{"/health", "Daemon health: status, spawned Agents, version and applied seq", h.health.health, healthBody{}},
		{"/health/ready", "Readiness: 200 once an Agent is spawned, 503 before", h.health.healthReady, probeBody{}},
		{"/health/live", "Liveness", h.health.healthLive, probeBody{}},
	} {
		for _, m := range []string{GET, HEAD} {
			r := entry(m, p.path, "health", p.fn, p.summary).auth(AuthPublic).out(ok, p.body)
			if p.path == "/health/ready" {
				r = r.errs(unavailable)
			}
			add(r)
		}
	}
	// The workbench: transport/static.go.
	for _, m := range []string{GET, HEAD} {
		add(entry(m, "/", "workbench", serveIndex, "The workbench page; ?token= signs a browser in").auth(AuthPage).as(mediaHTML).query("token"))
		for _, sr := range staticRoutes {
			add(entry(m, sr.prefix+"*file", "workbench", serveStatic(sr.dir), "Workbench assets under "+sr.prefix).auth(AuthPage).as(mediaBytes))
		}
	}
	add(entry(GET, "/api/openapi.json", "docs", h.docs.openAPI, "This document: the OpenAPI 3.1 description of every route and /ws frame").out(ok, object{}))
	add(entry(GET, "/ws", "ws", h.hub.handle, "The /ws WebSocket: snapshot, event frames and session, chat and approval commands").ws())

	// Workspaces and Sessions: transport/sessions.go.
	ws, ss, env := h.workspaces, h.sessions, h.environment
	add(
		entry(GET, "/api/workspaces", "workspaces", ws.listWorkspaces, "List the Workspaces").out(ok, []projections.Workspace{}),
		entry(POST, "/api/workspaces", "workspaces", ws.registerWorkspace, "Register a folder as a Workspace (200 when it already is one)").in(registerWorkspaceBody{}).out(created, projections.Workspace{}).alsoOK(ok),
		entry(GET, "/api/workspaces/:id", "workspaces", ws.getWorkspace, "Get a Workspace").out(ok, projections.Workspace{}),
		entry(PATCH, "/api/workspaces/:id", "workspaces", ws.renameWorkspace, "Rename a Workspace").in(nameBody{}).out(ok, projections.Workspace{}),
		entry(DELETE, "/api/workspaces/:id", "workspaces", ws.removeWorkspace, "Remove a Workspace with no open Session").out(ok, removedBody{}).errs(conflict),
		entry(GET, "/api/workspaces/:id/sessions", "workspaces", ws.listWorkspaceSessions, "List a Workspace's Sessions").out(ok, []projections.Session{}),
		entry(POST, "/api/workspaces/:id/sessions", "workspaces", ws.createSession, "Create a Session in a Workspace").in(sessions.SessionSpec{}).out(created, projections.Session{}).errs(conflict),

		entry(GET, "/api/sessions", "sessions", ss.listSessions, "List every Session; with limit, a page of them by ID, after the ID named by after").query("limit", "after").out(ok, []projections.Session{}),
		entry(POST, "/api/sessions", "sessions", ss.createSessionAt, "Create a Session in the Workspace at working_dir").in(createSessionAtBody{}).out(created, projections.Session{}).errs(conflict),
		entry(GET, "/api/sessions/:id", "sessions", ss.getSession, "Get a Session").out(ok, projections.Session{}),
		entry(PATCH, "/api/sessions/:id", "sessions", ss.renameSession, "Rename a Session").in(nameBody{}).out(ok, projections.Session{}),
		entry(DELETE, "/api/sessions/:id", "sessions", ss.deleteSession, "Close a Session, or with force=true delete its record ({id, deleted, kept_branch?}); a worktree Session's uncommitted files go only when discard_files names them").query("force").in(deleteSessionBody{}).out(ok, closedOrDeleted{}).errs(conflict).failing(orError[filesErrorBody]{}),
		entry(POST, "/api/sessions/:id/merge", "sessions", ss.mergeSession, "Merge a worktree Session's branch into the Workspace's current branch; 409 {error, files} when it refuses, nothing changed").in(worktrees.MergeRequest{}).out(ok, worktrees.MergeResult{}).errs(conflict).failing(orError[filesErrorBody]{}),
		entry(POST, "/api/sessions/:id/reopen", "sessions", ss.reopenSession, "Reopen a closed Session").out(ok, projections.Session{}).errs(conflict),

		entry(PUT, "/api/sessions/:id/environment", "environment", env.changeEnvironment, "Make a reviewed plan the next environment generation; answers once prepared (Ready, or failed with evidence)").in(environments.EnvironmentPlan{}).out(ok, projections.Session{}).errs(conflict, unavailable),
		entry(POST, "/api/sessions/:id/environment/rebuild", "environment", env.rebuildEnvironment, "Rebuild the current environment generation").out(ok, projections.Session{}).errs(conflict, unavailable),
		entry(POST, "/api/sessions/:id/environment/confirm-runtime-cleanup", "environment", env.confirmRuntimeCleanup, "Confirm that a retained remote runtime was deleted by hand; answers the Session").in(environments.CleanupConfirmation{}).out(ok, projections.Session{}).errs(conflict),
		entry(POST, "/api/sessions/:id/sync", "environment", env.syncSession, "Fetch a remote Session's committed work into the Workspace repository as branch lathe/{id}").out(ok, environments.SyncResult{}).errs(conflict, unavailable),
		entry(GET, "/api/sessions/:id/preview/ports", "environment", env.previewPorts, "The TCP ports listening in a Ready Session's sandbox").out(ok, []environments.PreviewPort{}).errs(conflict),
	)

	// Session files: transport/files.go.
	fl := h.files
	add(
		entry(GET, "/api/sessions/:id/tree", "files", fl.sessionTree, "List one folder of the Session's checkout").query("path").out(ok, files.TreeListing{}).errs(conflict),
		entry(GET, "/api/sessions/:id/file", "files", fl.readSessionFile, "Read a file of the Session's checkout").query("path").out(ok, files.FileContent{}).errs(conflict, tooLarge),
		entry(POST, "/api/sessions/:id/file", "files", fl.writeSessionFile, "Write a file, optionally only over an expected_sha256").query("path").in(writeSessionFileBody{}).out(ok, files.FileWritten{}).errs(conflict),
		entry(POST, "/api/sessions/:id/files/create", "files", fl.createSessionFile, "Create a file or folder").in(createSessionFileBody{}).out(created, files.TreeEntry{}).errs(conflict),
		entry(POST, "/api/sessions/:id/files/rename", "files", fl.renameSessionFile, "Rename or move a file or folder").in(renameSessionFileBody{}).out(ok, files.FileRenamed{}).errs(conflict),
		entry(POST, "/api/sessions/:id/files/delete", "files", fl.deleteSessionFile, "Delete a file, or a folder with recursive").in(deleteSessionFileBody{}).out(ok, events.FileDeleted{}).errs(conflict),
	)

	// Tasks and terminals: transport/tasks.go, transport/terminal.go.
	add(
		entry(GET, "/api/sessions/:id/tasks", "tasks", h.tasks.listTasks, "List the Session's tasks, oldest first").out(ok, []taskView{}).errs(conflict),
		entry(POST, "/api/sessions/:id/tasks", "tasks", h.tasks.startTask, "Run a command in the Session's Ready sandbox").in(tasks.TaskRequest{}).out(created, taskView{}).errs(conflict),
		entry(POST, "/api/sessions/:id/tasks/:tid/kill", "tasks", h.tasks.killTask, "End a running or detached task").out(ok, taskView{}).errs(conflict),
		entry(GET, "/api/sessions/:id/terminals/:tid/ws", "terminal", h.terminals.terminalWS, "Attach to an interactive task's terminal (WebSocket)").ws().errs(conflict, unavailable),
	)

	// Attachments: transport/attachments.go.
	at := h.attachments
	add(
		entry(GET, "/api/sessions/:id/attachments", "attachments", at.listAttachments, "List the composer's active attachments, oldest first").out(ok, []projections.Attachment{}),
		entry(POST, "/api/sessions/:id/attachments", "attachments", at.uploadAttachment, "Upload one file (multipart/form-data) as this_turn or session; scope as ?scope= or a form field").query("scope").form().out(created, projections.Attachment{}).errs(tooLarge),
		entry(GET, "/api/sessions/:id/attachments/:ref", "attachments", at.getAttachment, "Get an attachment's metadata").out(ok, projections.Attachment{}),
		entry(PATCH, "/api/sessions/:id/attachments/:ref", "attachments", at.changeAttachmentScope, "Change an attachment's scope").in(changeAttachmentScopeBody{}).out(ok, projections.Attachment{}).errs(conflict),
		entry(DELETE, "/api/sessions/:id/attachments/:ref", "attachments", at.deleteAttachment, "Remove an attachment from future selection").out(ok, projections.Attachment{}).errs(conflict),
		entry(GET, "/api/sessions/:id/attachments/:ref/content", "attachments", at.attachmentContent, "Download an attachment's bytes, hash-verified").as(mediaBytes),
	)

	// Turns: transport/turns.go, transport/turnlive.go, transport/turncode.go.
	tu, tc := h.turns, h.turnCode
	add(
		entry(GET, "/api/sessions/:id/messages", "turns", tu.sessionMessages, "The transcript: visible ended turns as the model sees them").out(ok, transcriptBody{}),
		entry(GET, "/api/sessions/:id/turns", "turns", tu.listTurns, "List the visible turns in accept order").out(ok, turnList{}),
		entry(GET, "/api/sessions/:id/turns/:turn_id", "turns", tu.getTurn, "Get one turn, a rewound one too").out(ok, projections.Turn{}),
		entry(GET, "/api/sessions/:id/active-turn", "turns", tu.activeTurn, "The live turn and its run, both null when none").out(ok, activeTurnBody{}),
		entry(GET, "/api/sessions/:id/export", "turns", tu.exportSession, "Download the visible turns as Markdown or JSON").query("format").out(ok, turns.Export{}).as(mediaMarkdown, mediaJSON),
		entry(POST, "/api/sessions/:id/rewind", "turns", tu.rewindSession, "Hide the turns after keep_through_turn_id (or the legacy keep count)").in(rewindSessionBody{}).out(ok, rewound{}).errs(conflict),
		entry(GET, "/api/session-turns/search", "turns", tu.searchTurns, "Find text in visible turns, newest first").query("q", "session_id", "limit").out(ok, turnHits{}),
		entry(POST, "/api/sessions/:id/execute", "turns", h.live.sessionExecute, "Run one turn synchronously and answer its outcome").in(sessionExecuteBody{}).out(ok, executeResponse{}).errs(conflict, badGateway).failing(orError[executeResponse]{}),
		entry(GET, "/api/sessions/:id/turns/:turn_id/changes", "turncode", tc.turnChanges, "The files a turn changed").out(ok, turns.TurnChangeList{}).errs(conflict),
		entry(GET, "/api/sessions/:id/turns/:turn_id/changes/diff", "turncode", tc.turnDiff, "One file's diff in a turn").query("path").out(ok, turns.TurnDiff{}).errs(conflict),
		entry(POST, "/api/sessions/:id/turns/:turn_id/restore", "turncode", tc.restoreTurn, "Restore the checkout's files to before a turn").in(turns.RestoreRequest{}).out(ok, events.TurnRestored{}).errs(conflict),
		entry(GET, "/api/sessions/:id/turns/:turn_id/replay", "turncode", tc.replayTurn, "A turn's frames, for replay").out(ok, turnReplay{}),
		entry(GET, "/api/sessions/:id/audit", "audit", h.audit.sessionAudit, "A Session's audit trail, paged, or as NDJSON").query("after", "limit", "format", "type", "actor").out(ok, auditPage{}).as(mediaJSON, mediaNDJSON),
		entry(GET, "/api/sessions/:id/at/:seq", "audit", h.audit.sessionAt, "A Session as it was right after a journal seq").out(ok, projections.SessionAt{}),
	)

	// The legacy path Preview proxy: transport/preview.go.
	for _, m := range legacyMethods {
		add(
			entry(m, "/api/sessions/:id/proxy/:port", "preview", h.preview.legacyProxy, "Forward to a port in the Session's sandbox").auth(AuthPreview).as(mediaBytes).errs(badGateway, unavailable, conflict),
			entry(m, "/api/sessions/:id/proxy/:port/*tail", "preview", h.preview.legacyProxy, "Forward to a path on a port in the Session's sandbox").auth(AuthPreview).as(mediaBytes).errs(badGateway, unavailable, conflict),
		)
	}

	// Git and Checks: transport/git.go.
	g := h.git
	add(
		entry(GET, "/api/sessions/:id/git/status", "git", g.gitStatus, "The checkout's Git status").out(ok, scm.GitStatus{}).errs(conflict),
		entry(GET, "/api/sessions/:id/git/diff", "git", g.gitDiff, "One path's diff, staged or not").query("path", "staged").out(ok, scm.GitDiff{}).errs(conflict),
		entry(GET, "/api/sessions/:id/git/branches", "git", g.gitBranches, "The branches").out(ok, scm.GitBranches{}).errs(conflict),
		entry(GET, "/api/sessions/:id/git/identity", "git", g.gitIdentity, "The commit identity").out(ok, scm.GitIdentity{}).errs(conflict),
		entry(GET, "/api/sessions/:id/git/hunks", "git", g.gitHunks, "One path's hunks, staged or not").query("path", "staged").out(ok, scm.GitHunks{}).errs(conflict),
		entry(POST, "/api/sessions/:id/git/stage", "git", g.gitStage, "Stage paths").in(gitPathsBody{}).out(ok, events.GitStaged{}).errs(conflict),
		entry(POST, "/api/sessions/:id/git/unstage", "git", g.gitUnstage, "Unstage paths").in(gitPathsBody{}).out(ok, events.GitUnstaged{}).errs(conflict),
		entry(POST, "/api/sessions/:id/git/hunk", "git", g.gitHunk, "Stage or unstage one hunk").in(scm.GitHunkRequest{}).out(ok, events.GitHunk{}).errs(conflict),
		entry(POST, "/api/sessions/:id/git/hunk/discard", "git", g.gitDiscardHunk, "Discard one unstaged hunk").in(scm.GitHunkRequest{}).out(ok, events.GitHunk{}).errs(conflict),
		entry(POST, "/api/sessions/:id/git/discard", "git", g.gitDiscard, "Discard a path's unstaged changes").in(gitDiscardBody{}).out(ok, events.GitDiscarded{}).errs(conflict),
		entry(POST, "/api/sessions/:id/git/checkout", "git", g.gitCheckout, "Check out a branch or ref").in(gitCheckoutBody{}).out(ok, events.GitCheckedOut{}).errs(conflict),
		entry(POST, "/api/sessions/:id/git/commit", "git", g.gitCommit, "Commit, optionally staging everything").in(scm.GitCommitRequest{}).out(ok, events.GitCommitted{}).errs(conflict),
		entry(PUT, "/api/sessions/:id/check", "git", g.setCheck, "Set or clear the Session's check command").in(setCheckBody{}).out(ok, projections.Session{}),
		entry(POST, "/api/sessions/:id/check/run", "git", g.runCheck, "Run the check command").in(runCheckBody{}).out(ok, scm.CheckResult{}).errs(conflict),
	)

	// Ways (Attempts): transport/ways.go.
	wy := h.ways
	add(
		entry(POST, "/api/sessions/:id/variants", "ways", wy.startWays, "Start an Attempt set: one task, several lanes").in(startWaysBody{}).out(accepted, waysStarted{}).errs(conflict),
		entry(GET, "/api/sessions/:id/variants/results", "ways", wy.waysResults, "The Session's latest Attempt set and its lanes; with optional=true, 204 when it has none").query("optional").out(ok, resultsView{}).alsoOK(http.StatusNoContent),
		entry(GET, "/api/sessions/:id/variants/status", "ways", wy.waysStatus, "The lanes' live status").query("attempt_set_id").out(ok, waysStatusView{}),
		entry(GET, "/api/sessions/:id/variants/diff", "ways", wy.waysDiff, "A lane's diff").query("attempt_set_id", "index", "path").out(ok, ways.FileDiff{}).errs(conflict),
		entry(POST, "/api/sessions/:id/variants/verify", "ways", wy.waysVerify, "Run the check in every lane").in(waysVerifyBody{}).out(ok, resultsView{}).errs(conflict),
		entry(POST, "/api/sessions/:id/variants/adopt", "ways", wy.waysKeep, "Keep one lane's work in the Session").in(waysKeepBody{}).out(ok, resultsView{}).errs(conflict),
		entry(POST, "/api/sessions/:id/variants/discard", "ways", wy.waysDiscard, "Discard the Attempt set").in(waysDiscardBody{}).out(ok, resultsView{}).errs(conflict),
		entry(POST, "/api/sessions/:id/variants/judge", "ways", wy.waysJudge, "Ask an Agent to judge the lanes").in(waysJudgeBody{}).out(ok, judgedView{}).errs(conflict, badGateway),
		entry(POST, "/api/sessions/:id/variants/plan", "ways", wy.waysPlan, "Ask an Agent to plan lanes for a task").in(waysPlanBody{}).out(ok, ways.Plan{}).errs(badGateway),
		entry(GET, "/api/sessions/:id/variants/cost", "ways", wy.waysCost, "The lanes' cost against a baseline").query("attempt_set_id", "baseline", "baseline_provider").out(ok, ways.CostReport{}),
		entry(GET, "/api/sessions/:id/variants/trajectories", "ways", wy.waysTrajectories, "The lanes' trajectories").query("attempt_set_id", "baseline").out(ok, trajectoriesView{}),
		entry(GET, "/api/variants/probe", "ways", wy.waysProbe, "Probe a provider's models for lanes").query("provider", "models").out(ok, probeView{}),
	)

	// Folders and projects: transport/misc.go.
	add(
		entry(GET, "/api/fs/list", "project", h.project.fsList, "List the folders under a path, for the folder picker").query("path", "hidden").out(ok, DirListing{}),
		entry(GET, "/api/fs/project", "project", h.project.fsProject, "Probe a folder as a project, with the runtime's capabilities").query("path").out(ok, projectBody{}),
	)

	// Agents: transport/agents.go, transport/agentsrt.go.
	ag := h.agents
	add(
		entry(GET, "/api/agents", "agents", ag.listAgents, "The configured Agents").out(ok, []AgentView{}),
		entry(GET, "/api/llm-health", "agents", ag.llmHealth, "The model servers' health report").out(ok, LLMHealth{}),
		entry(GET, "/api/llm/models", "agents", ag.llmModels, "An Agent's model list").query("agent").out(ok, ModelList{}).errs(badGateway).failing(orError[modelsFailure]{}),
		entry(GET, "/api/agents/:id/status", "agents", ag.agentStatus, "A live Agent actor's status").out(ok, AgentStatus{}),
		entry(POST, "/api/agents/:id/execute", "agents", ag.agentExecute, "Run an Agent on one input (journaled, with its tool loop; stateless: one inference)").in(executeBody{}).out(ok, ExecuteResult{}).errs(http.StatusPaymentRequired, badGateway, unavailable).failing(orError[executeFailure]{}),
		entry(POST, "/api/agents/:id/restart", "agents", ag.agentRestart, "Restart an Agent actor").out(ok, AgentStatus{}).errs(unavailable),
		entry(PATCH, "/api/agents/:id", "agents", ag.agentPatch, "Patch an Agent in memory, restarting it unless restart=false").query("restart").in(agentPatchBody{}).out(ok, AgentView{}),
		entry(GET, "/api/tokens/report", "agents", ag.tokenReport, "Token use per Agent and in total").out(ok, TokenReport{}),
	)

	// MCP registry and approvals: transport/mcp.go, transport/approvals.go.
	add(
		entry(GET, "/api/mcp/catalog", "mcp", h.mcp.mcpCatalog, "The installable MCP servers").out(ok, []MCPEntry{}),
		entry(POST, "/api/mcp/install", "mcp", h.mcp.mcpInstall, "Install an MCP server from the catalog").in(mcpInstallBody{}).out(created, MCPServer{}).errs(conflict, unavailable),
		entry(GET, "/api/mcp/servers", "mcp", h.mcp.mcpServers, "The MCP servers and their state").out(ok, []MCPServer{}),
		entry(POST, "/api/mcp/servers/:name", "mcp", h.mcp.mcpReconnect, "Reconnect an MCP server").out(ok, MCPServer{}).errs(unavailable),
		entry(DELETE, "/api/mcp/servers/:name", "mcp", h.mcp.mcpRemove, "Remove an MCP server").out(ok, mcpRemovedBody{}),
		entry(GET, "/api/mcp/tools", "mcp", h.mcp.mcpTools, "The MCP servers' tools").out(ok, []MCPTool{}),
		entry(GET, "/api/mcp/permissions", "approvals", h.approvals.listPermissions, "The saved approval decisions").out(ok, []projections.Permission{}),
		entry(DELETE, "/api/mcp/permissions", "approvals", h.approvals.revokePermissions, "Revoke saved decisions by server, Agent and tool").query("server", "agent_id", "tool").out(ok, revokedBody{}),
	)

	// Skills and the lattice team: transport/skills.go, transport/lattice.go.
	add(
		entry(GET, "/api/skills", "skills", h.skills.listSkills, "The configured Skills").out(ok, []core.SkillSpec{}),
		entry(POST, "/api/skills/:id/fire", "skills", h.skills.fireSkill, "Fire a Skill: emit its event types").out(ok, agents.SkillFiring{}),
		entry(GET, "/api/lattice", "lattice", h.lattice.latticeTeam, "The lattice team: coordinator and workers").out(ok, latticeTeamBody{}),
	)

	// Automations: transport/automations.go.
	au := h.automations
	add(
		entry(GET, "/api/automations", "automations", au.listAutomations, "List the Automations").out(ok, []projections.AutomationRecord{}),
		entry(POST, "/api/automations", "automations", au.createAutomation, "Create an Automation (400 names the invalid node or edge)").in(events.Automation{}).out(created, projections.AutomationRecord{}).errs(conflict),
		entry(GET, "/api/automations/:id", "automations", au.getAutomation, "Get an Automation").out(ok, projections.AutomationRecord{}),
		entry(PUT, "/api/automations/:id", "automations", au.putAutomation, "Replace an Automation").in(events.Automation{}).out(ok, projections.AutomationRecord{}).errs(conflict),
		entry(PATCH, "/api/automations/:id", "automations", au.putAutomation, "Replace an Automation (as PUT)").in(events.Automation{}).out(ok, projections.AutomationRecord{}).errs(conflict),
		entry(DELETE, "/api/automations/:id", "automations", au.deleteAutomation, "Delete an Automation").out(ok, okBody{}),
		entry(POST, "/api/automations/:id/move", "automations", au.moveAutomation, "Move an Automation to a folder").in(moveAutomationBody{}).out(ok, projections.AutomationRecord{}),
		entry(POST, "/api/automations/:id/run", "automations", au.runAutomation, "Start a run").in(automationrunner.RunRequest{}).out(ok, runStarted{}).errs(conflict),
		entry(GET, "/api/automations/:id/runs", "automations", au.listRuns, "List an Automation's runs").out(ok, []projections.AutomationRun{}),
		entry(GET, "/api/automations/:id/runs/:run_id", "automations", au.getRun, "Get a run").out(ok, projections.AutomationRun{}),
		entry(POST, "/api/automations/:id/runs/:run_id/fork", "automations", au.forkRun, "Fork a run with a new input").in(forkRunBody{}).out(ok, runStarted{}).errs(conflict),
		entry(POST, "/api/automations/:id/runs/:run_id/nodes/:node_id/resume", "automations", au.resumeNode, "Resume a waiting node with a value").in(resumeNodeBody{}).out(ok, okBody{}).errs(conflict),
		entry(POST, "/api/automations/:id/runs/:run_id/nodes/:node_id/cancel", "automations", au.cancelNode, "Cancel a waiting node").out(ok, okBody{}).errs(conflict),
		entry(GET, "/api/interrupts", "automations", au.listInterrupts, "The nodes waiting for a person").out(ok, []projections.Interrupt{}),
		entry(GET, "/api/automation-folders", "automations", au.listFolders, "List the Automation folders").out(ok, []projections.AutomationFolder{}),
		entry(POST, "/api/automation-folders", "automations", au.createFolder, "Create a folder").in(createFolderBody{}).out(created, projections.AutomationFolder{}).errs(conflict),
		entry(PATCH, "/api/automation-folders", "automations", au.renameFolder, "Rename or move a folder").in(renameFolderBody{}).out(ok, okBody{}).errs(conflict),
		entry(DELETE, "/api/automation-folders", "automations", au.deleteFolder, "Delete a folder, keeping its contents or not").query("path", "keep_contents").out(ok, okBody{}).errs(conflict),
		entry(GET, "/api/tools", "automations", au.listTools, "The tool IDs an Automation node may call").out(ok, []string{}),
		entry(GET, "/api/workflows", "automations", au.listWorkflows, "The Automations as legacy workflows").out(ok, []workflowView{}),
		entry(POST, "/api/workflows/:id/execute", "automations", au.executeWorkflow, "Run a workflow to its end and answer its output").in(executeWorkflowBody{}).out(ok, workflowResult{}).errs(conflict, badGateway).failing(orError[workflowResult]{}),
		entry(GET, "/api/schedules", "automations", au.listSchedules, "The scheduled Automations").out(ok, []scheduleView{}),
		entry(PATCH, "/api/schedules/:id", "automations", au.patchSchedule, "Change a schedule").in(automationrunner.SchedulePatch{}).out(ok, scheduleView{}),
		entry(POST, "/api/schedules/:id/run", "automations", au.runSchedule, "Run a scheduled Automation now and answer its output").out(ok, workflowResult{}).errs(conflict, badGateway).failing(orError[workflowResult]{}),
		entry(GET, "/api/proactive", "automations", au.listProactive, "The event-triggered Automations").out(ok, []scheduleView{}),
	)

	// Audit feed: transport/misc.go.
	ev := h.events
	add(
		entry(GET, "/api/events/recent", "events", ev.recentEvents, "The recent notices").out(ok, []projections.Notice{}),
		entry(GET, "/api/events/journal", "events", ev.journalFeed, "Committed envelopes after a seq as NDJSON, optionally of one aggregate").query("after", "limit", "aggregate").as(mediaNDJSON),
		entry(GET, "/api/audit/head", "events", ev.auditHead, "The journal's newest seq and hash").out(ok, auditHeadBody{}),
		entry(GET, "/metrics", "metrics", h.metrics.serve, "Prometheus metrics in the text format (projections/metrics)").as(mediaPrometheus),
	)

	// Chats and the shared file store: transport/chats.go.
	ch, sf := h.chats, h.sharedFiles
	add(
		entry(GET, "/api/chat", "chats", ch.listChats, "List the Chats").query("q").out(ok, []projections.ChatInfo{}),
		entry(POST, "/api/chat", "chats", ch.createChat, "Create a Chat with an Agent").in(createChatBody{}).out(created, chatView{}),
		entry(GET, "/api/chat/:id", "chats", ch.getChat, "Get a Chat with its messages").out(ok, chatView{}),
		entry(PATCH, "/api/chat/:id", "chats", ch.patchChat, "Rename, pin or retag a Chat").in(patchChatBody{}).out(ok, chatView{}),
		entry(DELETE, "/api/chat/:id", "chats", ch.deleteChat, "Delete a Chat").out(ok, deletedBody{}),
		entry(POST, "/api/chat/:id/fork", "chats", ch.forkChat, "Fork a Chat at a message").in(forkChatBody{}).out(created, chatView{}),
		entry(GET, "/api/chat/:id/export", "chats", ch.exportChat, "Download a Chat as Markdown or JSON").query("format").out(ok, chatView{}).as(mediaMarkdown, mediaJSON),
		entry(POST, "/api/chat/:id/attach", "chats", ch.attachUpload, "Upload a file (multipart/form-data) and attach it").query("pinned").form().out(created, chatAttachmentView{}).errs(tooLarge),
		entry(PUT, "/api/chat/:id/attach", "chats", ch.attachFile, "Attach a stored file").in(attachFileBody{}).out(ok, chatAttachmentView{}),
		entry(GET, "/api/chat/:id/attach/:file_id", "chats", ch.chatFileBytes, "Download an attached file's bytes").as(mediaBytes),
		entry(PATCH, "/api/chat/:id/attach/:file_id", "chats", ch.pinChatFile, "Pin or unpin an attached file").in(pinChatFileBody{}).out(ok, chatAttachmentView{}),
		entry(DELETE, "/api/chat/:id/attach/:file_id", "chats", ch.detachChatFile, "Detach a file").out(ok, detachedBody{}),
		entry(GET, "/api/files", "sharedfiles", sf.listFiles, "List the shared files").query("q", "tag").out(ok, []projections.SharedFile{}),
		entry(POST, "/api/files", "sharedfiles", sf.uploadFile, "Upload a shared file (multipart/form-data)").form().out(created, projections.SharedFile{}).errs(tooLarge),
		entry(GET, "/api/files/:id", "sharedfiles", sf.getFile, "Get a shared file's metadata").out(ok, projections.SharedFile{}),
		entry(PATCH, "/api/files/:id", "sharedfiles", sf.patchFile, "Rename or retag a shared file").in(patchFileBody{}).out(ok, projections.SharedFile{}),
		entry(DELETE, "/api/files/:id", "sharedfiles", sf.deleteFile, "Delete a shared file").out(ok, deletedBody{}),
		entry(GET, "/api/files/:id/bytes", "sharedfiles", sf.fileBytes, "Download a shared file's bytes").as(mediaBytes),
	)

	// Inbound A2A: transport/a2a.go, served by transport/a2aserve.
	add(
		entry(GET, "/.well-known/agent-card.json", "a2a", h.a2a.agentCard, "The A2A agent card, for A2A 1.0 and 0.3 at once: one skill per receiver").auth(AuthA2A).out(ok, object{}),
		entry(GET, "/.well-known/agent.json", "a2a", h.a2a.agentCard, "The A2A agent card (the older name)").auth(AuthA2A).out(ok, object{}),
		entry(POST, "/a2a/tasks", "a2a", h.a2a.tasks, "A2A JSON-RPC 2.0, in the version A2A-Version names (none is 0.3): SendMessage and GetTask (1.0), message/send and tasks/get (0.3)").auth(AuthA2A).query("receiver_id").in(object{}).out(ok, object{}),
	)
	return t
}

// register adds every route of the table to r, and answers the paths and
// methods no route serves with {error}.
func register(r *httprouter.Router, table []Route, log interface {
	Error(msg string, args ...any)
}) {
	r.HandleMethodNotAllowed = true
	r.NotFound = http.HandlerFunc(noRoute)
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, w.Header().Get("Allow")))
	})
	r.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v)
		writeError(w, http.StatusInternalServerError, "internal error")
	}
	for _, rt := range table {
		r.Handle(rt.Method, rt.Path, rt.Handle)
	}
}

// noRoute is the 404 of a path no route serves (and of a route whose
// capability the daemon runs without).
func noRoute(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
}

// publicPaths are the paths of the table's AuthPublic routes: the Guard
// asks no credential for them.
func publicPaths(table []Route) map[string]bool {
	out := map[string]bool{}
	for _, rt := range table {
		if rt.Auth == AuthPublic {
			out[rt.Path] = true
		}
	}
	return out
}

// Routes is the route table's data (no handlers run): for the documents
// and the tests.
func Routes() []Route {
	return (&handlers{}).table()
}

// WSCommand is one /ws client command: {"cmd": Name, …Request's fields}.
type WSCommand struct {
	Name    string
	Handle  CommandFunc
	Summary string
	Request any // a zero value of the command's JSON type
}

// wsCommands is the /ws command table.
func (h *handlers) wsCommands() []WSCommand {
	return []WSCommand{
		{"session", h.live.handleSession, "Accept a turn in a Session (a repeat of a known identity reattaches)", sessionCommand{}},
		{"session-stop", h.live.handleSessionStop, "Stop a Session's running turn", stopCommand{}},
		{"mcp-approve", h.approvals.handleApprove, "Resolve a parked MCP tool call", approveCommand{}},
		{"run-workflow", h.automations.handleRunWorkflow, "Run an Automation and stream its frames", runWorkflowCommand{}},
		{"chat-turn", h.chats.handleChatTurn, "Send a message to a Chat and stream the reply", chatTurnCommand{}},
		{"chat-stop", h.chats.handleChatStop, "Stop a Chat's reply", chatStopCommand{}},
	}
}
