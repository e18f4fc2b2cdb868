package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"lathe/transport/a2aserve"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"lathe/commands/agents"
	"lathe/commands/attachments"
	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/files"
	"lathe/commands/scm"
	"lathe/commands/sessions"
	"lathe/commands/tasks"
	"lathe/commands/turns"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/mcp"
	"lathe/runtime/terminal"
)

// fake meets every command interface transport defines: it records the
// last call (name and arguments) and answers err. Route tests run against it
// with no journal, daemon or containerd.
type fake struct {
	err  error
	call string
	args []any
}

func (f *fake) record(name string, args ...any) error {
	f.call, f.args = name, args
	return f.err
}

func (f *fake) RegisterWorkspace(_ context.Context, path string, name *string) (projections.Workspace, bool, error) {
	return projections.Workspace{ID: "W", Path: path}, true, f.record("RegisterWorkspace", path, name)
}
func (f *fake) RenameWorkspace(_ context.Context, id, name string) (projections.Workspace, error) {
	return projections.Workspace{ID: id, Name: name}, f.record("RenameWorkspace", id, name)
}
func (f *fake) RemoveWorkspace(_ context.Context, id string) error {
	return f.record("RemoveWorkspace", id)
}
func (f *fake) CreateSession(_ context.Context, ws string, spec sessions.SessionSpec) (projections.Session, error) {
	return projections.Session{ID: "S", WorkspaceID: ws, Name: spec.Name}, f.record("CreateSession", ws, spec.Name)
}
func (f *fake) CreateSessionAt(_ context.Context, dir string, spec sessions.SessionSpec) (projections.Session, error) {
	return projections.Session{ID: "S", WorkingDir: dir}, f.record("CreateSessionAt", dir, spec.Name)
}
func (f *fake) RenameSession(_ context.Context, id, name string) (projections.Session, error) {
	return projections.Session{ID: id, Name: name}, f.record("RenameSession", id, name)
}
func (f *fake) CloseSession(_ context.Context, id string) (projections.Session, error) {
	return projections.Session{ID: id}, f.record("CloseSession", id)
}
func (f *fake) DeleteSession(_ context.Context, id string) error {
	return f.record("DeleteSession", id)
}
func (f *fake) DeleteSessionConfirmed(_ context.Context, id string, _ []string) (sessions.Deletion, error) {
	return sessions.Deletion{ID: id, Deleted: true}, f.record("DeleteSession", id)
}
func (f *fake) ReopenSession(_ context.Context, id string) (projections.Session, error) {
	return projections.Session{ID: id}, f.record("ReopenSession", id)
}
func (f *fake) ChangeEnvironment(_ context.Context, id string, plan environments.EnvironmentPlan) (projections.Session, error) {
	return projections.Session{ID: id}, f.record("ChangeEnvironment", id)
}
func (f *fake) RebuildEnvironment(_ context.Context, id string) (projections.Session, error) {
	return projections.Session{ID: id}, f.record("RebuildEnvironment", id)
}
func (f *fake) ConfirmRuntimeCleanup(_ context.Context, id string, _ environments.CleanupConfirmation) (projections.Session, error) {
	return projections.Session{ID: id}, f.record("ConfirmRuntimeCleanup", id)
}
func (f *fake) Sync(_ context.Context, id string) (environments.SyncResult, error) {
	return environments.SyncResult{Branch: "lathe/" + id}, f.record("Sync", id)
}
func (f *fake) PreviewPorts(_ context.Context, id string) ([]environments.PreviewPort, error) {
	return []environments.PreviewPort{{Port: 3000}}, f.record("PreviewPorts", id)
}
func (f *fake) Tree(_ context.Context, id, p string) (files.TreeListing, error) {
	return files.TreeListing{Path: p}, f.record("Tree", id, p)
}
func (f *fake) Read(_ context.Context, id, p string) (files.FileContent, error) {
	return files.FileContent{Path: p}, f.record("Read", id, p)
}
func (f *fake) Write(_ context.Context, id string, w files.FileWrite) (files.FileWritten, error) {
	content := ""
	if w.Content != nil {
		content = *w.Content
	}
	return files.FileWritten{Path: w.Path}, f.record("Write", id, w.Path, content)
}
func (f *fake) Create(_ context.Context, id, p, kind string) (files.TreeEntry, error) {
	return files.TreeEntry{Path: p}, f.record("Create", id, p, kind)
}
func (f *fake) Rename(_ context.Context, id, from, to string) (files.FileRenamed, error) {
	return files.FileRenamed{}, f.record("Rename", id, from, to)
}
func (f *fake) Delete(_ context.Context, id, p string, recursive bool) (events.FileDeleted, error) {
	return events.FileDeleted{Path: p}, f.record("Delete", id, p, recursive)
}
func (f *fake) AddAttachment(_ context.Context, id string, up attachments.AttachmentUpload) (projections.Attachment, error) {
	b, _ := io.ReadAll(up.Body)
	if up.Finish != nil {
		if err := up.Finish(); err != nil {
			return projections.Attachment{}, err
		}
	}
	return projections.Attachment{}, f.record("AddAttachment", id, up.Scope, up.Name, string(b))
}
func (f *fake) ChangeAttachmentScope(_ context.Context, id, ref, scope string) (projections.Attachment, error) {
	return projections.Attachment{}, f.record("ChangeAttachmentScope", id, ref, scope)
}
func (f *fake) DeleteAttachment(_ context.Context, id, ref string) error {
	return f.record("DeleteAttachment", id, ref)
}
func (f *fake) OpenAttachment(id, ref string) (projections.Attachment, io.ReadCloser, error) {
	return projections.Attachment{}, io.NopCloser(strings.NewReader("")), f.record("OpenAttachment", id, ref)
}
func (f *fake) GitStatus(_ context.Context, id string) (scm.GitStatus, error) {
	return scm.GitStatus{}, f.record("GitStatus", id)
}
func (f *fake) GitDiff(_ context.Context, id, p string, staged bool) (scm.GitDiff, error) {
	return scm.GitDiff{}, f.record("GitDiff", id, p, staged)
}
func (f *fake) GitHunks(_ context.Context, id, p string, staged bool) (scm.GitHunks, error) {
	return scm.GitHunks{}, f.record("GitHunks", id, p, staged)
}
func (f *fake) GitBranches(_ context.Context, id string) (scm.GitBranches, error) {
	return scm.GitBranches{}, f.record("GitBranches", id)
}
func (f *fake) GitIdentity(_ context.Context, id string) (scm.GitIdentity, error) {
	return scm.GitIdentity{}, f.record("GitIdentity", id)
}
func (f *fake) GitStage(_ context.Context, id string, paths []string) (events.GitStaged, error) {
	return events.GitStaged{Paths: paths}, f.record("GitStage", id, fmt.Sprint(paths))
}
func (f *fake) GitUnstage(_ context.Context, id string, paths []string) (events.GitUnstaged, error) {
	return events.GitUnstaged{Paths: paths}, f.record("GitUnstage", id, fmt.Sprint(paths))
}
func (f *fake) GitHunk(_ context.Context, id string, req scm.GitHunkRequest) (events.GitHunk, error) {
	return events.GitHunk{}, f.record("GitHunk", id, req.Path)
}
func (f *fake) GitDiscardHunk(_ context.Context, id string, req scm.GitHunkRequest) (events.GitHunk, error) {
	return events.GitHunk{}, f.record("GitDiscardHunk", id, req.Path)
}
func (f *fake) GitDiscard(_ context.Context, id, p string) (events.GitDiscarded, error) {
	return events.GitDiscarded{}, f.record("GitDiscard", id, p)
}
func (f *fake) GitCheckout(_ context.Context, id, ref string) (events.GitCheckedOut, error) {
	return events.GitCheckedOut{}, f.record("GitCheckout", id, ref)
}
func (f *fake) GitCommit(_ context.Context, id string, req scm.GitCommitRequest) (events.GitCommitted, error) {
	return events.GitCommitted{}, f.record("GitCommit", id, req.Message, req.StatusToken)
}
func (f *fake) SetCheck(_ context.Context, id string, cmd *string) (projections.Session, error) {
	return projections.Session{ID: id}, f.record("SetCheck", id, cmd)
}
func (f *fake) RunCheck(_ context.Context, id string, timeout time.Duration) (scm.CheckResult, error) {
	return scm.CheckResult{}, f.record("RunCheck", id, timeout)
}
func (f *fake) StartTask(_ context.Context, id string, req tasks.TaskRequest) (projections.Task, error) {
	return projections.Task{ID: "T"}, f.record("StartTask", id, req.Command)
}
func (f *fake) Terminal(id, tid string) (*terminal.Terminal, error) {
	return nil, f.record("Terminal", id, tid)
}
func (f *fake) KillTask(_ context.Context, id, tid string) (projections.Task, error) {
	return projections.Task{ID: tid, Status: projections.TaskExited}, f.record("KillTask", id, tid)
}
func (f *fake) SubmitTurn(_ context.Context, req turns.TurnRequest) (projections.Turn, bool, error) {
	return projections.Turn{}, false, f.record("SubmitTurn", req.SessionID)
}
func (f *fake) StopTurn(id, turn string) error { return f.record("StopTurn", id, turn) }
func (f *fake) WaitTurn(_ context.Context, id, turn string) (projections.Turn, error) {
	return projections.Turn{}, f.record("WaitTurn", id, turn)
}
func (f *fake) Rewind(_ context.Context, id string, through *string, keep *int) ([]string, error) {
	return []string{}, f.record("Rewind", id, through, keep)
}
func (f *fake) Sandbox(id string) (PreviewSandbox, projections.Session, error) {
	return nil, projections.Session{ID: id}, f.record("Sandbox", id)
}
func (f *fake) Agents() []AgentView { return []AgentView{} }
func (f *fake) Agent(id string) (AgentView, error) {
	return AgentView{}, f.record("Agent", id)
}
func (f *fake) Health(context.Context) LLMHealth { return LLMHealth{} }
func (f *fake) ModelsFor(_ context.Context, id, _ string) (ModelList, error) {
	return ModelList{}, f.record("ModelsFor", id)
}
func (f *fake) Status(id string) (AgentStatus, error) { return AgentStatus{State: "idle"}, nil }
func (f *fake) Execute(_ context.Context, id string, req agents.ExecuteRequest) (ExecuteResult, error) {
	r, _ := json.Marshal(req) // the request commands receive, pointers followed
	return ExecuteResult{}, f.record("Execute", id, string(r))
}
func (f *fake) TokenReport() TokenReport { return TokenReport{} }
func (f *fake) Patch(_ context.Context, id string, p agents.AgentPatch, restart bool) (AgentView, error) {
	patch, _ := json.Marshal(p) // the patch commands receive, pointers followed
	return AgentView{}, f.record("Patch", id, restart, string(patch))
}
func (f *fake) Restart(_ context.Context, id string) (AgentStatus, error) {
	return AgentStatus{State: "idle"}, f.record("Restart", id)
}

func (f *fake) Install(_ context.Context, slug, name string, values map[string]string) (MCPServer, error) {
	return MCPServer{Name: name, Transport: "stdio", Status: "connected", Approval: "always"}, f.record("Install", slug, name, fmt.Sprint(values))
}
func (f *fake) Reconnect(_ context.Context, name string) (MCPServer, error) {
	return MCPServer{Name: name, Transport: "stdio", Status: "connected", Approval: "always"}, f.record("Reconnect", name)
}
func (f *fake) Remove(_ context.Context, name string) error { return f.record("Remove", name) }
func (f *fake) Servers() []MCPServer                        { return []MCPServer{} }
func (f *fake) Tools() []MCPTool                            { return []MCPTool{} }
func (f *fake) Catalog() []MCPEntry                         { return []MCPEntry{} }

func (f *fake) ListDirs(path string, hidden bool) (DirListing, error) {
	return DirListing{Path: path, Entries: []DirEntry{}}, f.record("ListDirs", path, hidden)
}
func (f *fake) Probe(path string) (Project, error) {
	return Project{Path: path, Guidance: []Guidance{}, DetectedSetup: []SetupCandidate{}}, f.record("Probe", path)
}

func (f *fake) Resolve(_ context.Context, id, decision, persist string) error {
	return f.record("Resolve", id, decision, persist)
}
func (f *fake) Revoke(_ context.Context, server, agent, tool string) (int, error) {
	return 2, f.record("Revoke", server, agent, tool)
}

func (f *fake) Fire(_ context.Context, id string) (agents.SkillFiring, error) {
	return agents.SkillFiring{Skill: id}, f.record("Fire", id)
}

// fakeServer is a Server whose every command group is f; every JSON
// response it writes is validated against the OpenAPI document
// (checkedHandler, transport/openapi_check_test.go).
func fakeServer(t testing.TB, f *fake) http.Handler {
	t.Helper()
	srv, err := New(SecurityOptions{APIKeys: []string{testKey}, CookieSecret: testSecret}, withStore(projections.New(), Deps{
		Sessions: f, Environments: f, Files: f, Attachments: f, Git: f, Tasks: f, Turns: f, TurnCode: f, Sandboxes: f,
		LLM: f, Runtime: f, Agents: f, MCP: f, MCPRegistry: f, Approvals: f, SkillCommands: f, Audit: f, Folders: f,
		Chats: f, SharedFiles: f, A2A: a2aserve.New(f, "test", true, false), // transport/chats_routes_test.go
	}))
	if err != nil {
		t.Fatal(err)
	}
	return checkedHandler(t, srv.Handler())
}

// route is one row of a route table: a request, what the fake answers,
// and the status, error text and command call expected.
type route struct {
	name         string
	method, path string
	body         string
	err          error  // the command's answer
	status       int    // the expected status
	errText      string // a substring of {error}; "" when the status is a success
	call         string // the command expected to run; "" for none
	args         []any  // its arguments, when given
}

func runRoutes(t *testing.T, rows []route) {
	t.Helper()
	for _, rt := range rows {
		t.Run(rt.name, func(t *testing.T) {
			f := &fake{err: rt.err}
			var body io.Reader // nil, as a server sees a request without one
			if rt.body != "" {
				body = strings.NewReader(rt.body)
			}
			r := httptest.NewRequest(rt.method, rt.path, body)
			r.Host = "localhost:8080"
			r.Header.Set("x-api-key", testKey)
			if rt.body != "" && rt.status != http.StatusUnsupportedMediaType {
				r.Header.Set("Content-Type", "application/json")
			}
			w := httptest.NewRecorder()
			fakeServer(t, f).ServeHTTP(w, r)
			if w.Code != rt.status {
				t.Fatalf("%s %s = %d %s, want %d", rt.method, rt.path, w.Code, w.Body, rt.status)
			}
			if rt.errText != "" {
				var eb errorBody
				if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || !strings.Contains(eb.Error, rt.errText) {
					t.Errorf("error body %s, want {error} containing %q", w.Body, rt.errText)
				}
				for _, class := range []string{"invalid request: ", "not found: ", "conflict: ", "forbidden: "} {
					if strings.HasPrefix(eb.Error, class) {
						t.Errorf("error body %q repeats its class", eb.Error)
					}
				}
			}
			if f.call != rt.call {
				t.Errorf("command call %q, want %q", f.call, rt.call)
			}
			if rt.args != nil && fmt.Sprint(f.args) != fmt.Sprint(rt.args) {
				t.Errorf("command args %v, want %v", f.args, rt.args)
			}
		})
	}
}

var (
	errMissingSession = fmt.Errorf("%w: session %q", core.ErrNotFound, "S")
	errNotReady       = fmt.Errorf("%w: session %q is not ready", core.ErrConflict, "S")
)

func TestWorkspaceRoutes(t *testing.T) {
	runRoutes(t, []route{
		{name: "register", method: "POST", path: "/api/workspaces", body: `{"path":"/src/app"}`, status: 201, call: "RegisterWorkspace"},
		{name: "register without path", method: "POST", path: "/api/workspaces", body: `{}`, status: 400, errText: "path is required"},
		{name: "register unknown field", method: "POST", path: "/api/workspaces", body: `{"path":"/a","x":1}`, status: 400, errText: `unknown field "x"`},
		{name: "register not an object", method: "POST", path: "/api/workspaces", body: `[1]`, status: 400, errText: "must be a JSON object"},
		{name: "register refused", method: "POST", path: "/api/workspaces", body: `{"path":"rel"}`, err: fmt.Errorf("%w: path must be absolute", core.ErrInvalid), status: 400, errText: "path must be absolute", call: "RegisterWorkspace"},
		{name: "rename", method: "PATCH", path: "/api/workspaces/W", body: `{"name":"n"}`, status: 200, call: "RenameWorkspace", args: []any{"W", "n"}},
		{name: "rename without name", method: "PATCH", path: "/api/workspaces/W", body: `{}`, status: 400, errText: "name is required"},
		{name: "remove missing", method: "DELETE", path: "/api/workspaces/W", err: fmt.Errorf("%w: workspace %q", core.ErrNotFound, "W"), status: 404, errText: `workspace "W"`, call: "RemoveWorkspace"},
		{name: "remove with sessions", method: "DELETE", path: "/api/workspaces/W", err: fmt.Errorf("%w: it has sessions", core.ErrConflict), status: 409, errText: "it has sessions", call: "RemoveWorkspace"},
	})
}

func TestSessionRoutes(t *testing.T) {
	runRoutes(t, []route{
		{name: "create", method: "POST", path: "/api/workspaces/W/sessions", body: `{"name":"s"}`, status: 201, call: "CreateSession", args: []any{"W", "s"}},
		{name: "create wrong type", method: "POST", path: "/api/workspaces/W/sessions", body: `{"name":3}`, status: 400, errText: `"name" must be a string`},
		{name: "create truncated", method: "POST", path: "/api/workspaces/W/sessions", body: `{"name":`, status: 400, errText: "truncated"},
		{name: "list", method: "GET", path: "/api/sessions", status: 200},
		{name: "list a page", method: "GET", path: "/api/sessions?limit=200", status: 200},
		{name: "list a page after", method: "GET", path: "/api/sessions?limit=2&after=S", status: 200},
		{name: "list a page of none", method: "GET", path: "/api/sessions?limit=0", status: 400, errText: "limit must be an integer from 1 to 5000"},
		{name: "list a page too large", method: "GET", path: "/api/sessions?limit=5001", status: 400, errText: "limit must be an integer"},
		{name: "list a page of words", method: "GET", path: "/api/sessions?limit=ten", status: 400, errText: "limit must be an integer"},
		{name: "list after without a limit", method: "GET", path: "/api/sessions?after=S", status: 400, errText: "after needs a limit"},
		{name: "create at", method: "POST", path: "/api/sessions", body: `{"working_dir":"/src/app"}`, status: 201, call: "CreateSessionAt"},
		{name: "create at without dir", method: "POST", path: "/api/sessions", body: `{}`, status: 400, errText: "working_dir is required"},
		{name: "rename", method: "PATCH", path: "/api/sessions/S", body: `{"name":"x"}`, status: 200, call: "RenameSession", args: []any{"S", "x"}},
		{name: "close", method: "DELETE", path: "/api/sessions/S", status: 200, call: "CloseSession"},
		{name: "delete", method: "DELETE", path: "/api/sessions/S?force=true", status: 200, call: "DeleteSession"},
		{name: "delete bad force", method: "DELETE", path: "/api/sessions/S?force=maybe", status: 400, errText: "force must be true or false"},
		{name: "delete during a turn", method: "DELETE", path: "/api/sessions/S?force=1", err: fmt.Errorf("%w: turn T is live", core.ErrConflict), status: 409, errText: "turn T is live", call: "DeleteSession"},
		{name: "reopen missing", method: "POST", path: "/api/sessions/S/reopen", err: errMissingSession, status: 404, errText: `session "S"`, call: "ReopenSession"},
		{name: "environment", method: "PUT", path: "/api/sessions/S/environment", body: `{}`, status: 200, call: "ChangeEnvironment"},
		{name: "environment failed is an answer", method: "PUT", path: "/api/sessions/S/environment", body: `{}`, err: core.ErrEnvironmentFailed, status: 200, call: "ChangeEnvironment"},
		{name: "environment refused", method: "PUT", path: "/api/sessions/S/environment", body: `{}`, err: errNotReady, status: 409, errText: "not ready", call: "ChangeEnvironment"},
		{name: "rebuild", method: "POST", path: "/api/sessions/S/environment/rebuild", status: 200, call: "RebuildEnvironment"},
		{name: "confirm cleanup", method: "POST", path: "/api/sessions/S/environment/confirm-runtime-cleanup", body: `{"runtime_id":"c1","confirmed":true}`, status: 200, call: "ConfirmRuntimeCleanup"},
		{name: "confirm cleanup unmatched", method: "POST", path: "/api/sessions/S/environment/confirm-runtime-cleanup", body: `{"runtime_id":"c1","confirmed":true}`, err: fmt.Errorf("%w: no retained runtime matches", core.ErrConflict), status: 409, errText: "no retained runtime", call: "ConfirmRuntimeCleanup"},
		{name: "sync", method: "POST", path: "/api/sessions/S/sync", status: 200, call: "Sync", args: []any{"S"}},
		{name: "sync dirty", method: "POST", path: "/api/sessions/S/sync", err: fmt.Errorf("%w: the clone has uncommitted changes", core.ErrConflict), status: 409, errText: "uncommitted", call: "Sync"},
		{name: "preview ports", method: "GET", path: "/api/sessions/S/preview/ports", status: 200, call: "PreviewPorts", args: []any{"S"}},
		{name: "preview ports not ready", method: "GET", path: "/api/sessions/S/preview/ports", err: errNotReady, status: 409, errText: "not ready", call: "PreviewPorts"},
		{name: "preview ports sandbox down", method: "GET", path: "/api/sessions/S/preview/ports", err: fmt.Errorf("%w: containerd is down", core.ErrUnavailable), status: 503, errText: "containerd is down", call: "PreviewPorts"},
		{name: "preview ports by POST", method: "POST", path: "/api/sessions/S/preview/ports", status: 405, errText: "POST is not allowed"},
		{name: "get missing", method: "GET", path: "/api/sessions/S", status: 404, errText: `session "S"`},
		{name: "unknown route", method: "GET", path: "/api/nope", status: 404, errText: "no route for GET /api/nope"},
		{name: "wrong method", method: "PUT", path: "/api/sessions/S/reopen", status: 405, errText: "PUT is not allowed"},
	})
}

func TestFileRoutes(t *testing.T) {
	runRoutes(t, []route{
		{name: "tree root", method: "GET", path: "/api/sessions/S/tree", status: 200, call: "Tree", args: []any{"S", ""}},
		{name: "tree path", method: "GET", path: "/api/sessions/S/tree?path=a/b", status: 200, call: "Tree", args: []any{"S", "a/b"}},
		{name: "tree bad query", method: "GET", path: "/api/sessions/S/tree?path=%zz", status: 400, errText: "malformed query"},
		{name: "read", method: "GET", path: "/api/sessions/S/file?path=a.txt", status: 200, call: "Read", args: []any{"S", "a.txt"}},
		{name: "read escape", method: "GET", path: "/api/sessions/S/file?path=link", err: fmt.Errorf("%w: path %q resolves outside the session root", core.ErrForbidden, "link"), status: 403, errText: "resolves outside", call: "Read"},
		{name: "read too large", method: "GET", path: "/api/sessions/S/file?path=big", err: fmt.Errorf("%w: too big", core.ErrTooLarge), status: 413, errText: "too big", call: "Read"},
		{name: "read not ready", method: "GET", path: "/api/sessions/S/file?path=a", err: errNotReady, status: 409, errText: "not ready", call: "Read"},
		{name: "write", method: "POST", path: "/api/sessions/S/file?path=a.txt", body: `{"content":"hi"}`, status: 200, call: "Write", args: []any{"S", "a.txt", "hi"}},
		{name: "write unknown field", method: "POST", path: "/api/sessions/S/file?path=a.txt", body: `{"content":"hi","mode":1}`, status: 400, errText: `unknown field "mode"`},
		{name: "write conflict", method: "POST", path: "/api/sessions/S/file?path=a.txt", body: `{"content":"hi","expected_sha256":"00"}`, err: fmt.Errorf("%w: changed since it was read", core.ErrConflict), status: 409, errText: "changed since", call: "Write"},
		{name: "create a file", method: "POST", path: "/api/sessions/S/files/create", body: `{"path":"a/new.txt","kind":"file"}`, status: 201, call: "Create", args: []any{"S", "a/new.txt", "file"}},
		{name: "create a folder", method: "POST", path: "/api/sessions/S/files/create", body: `{"path":"a/b","kind":"dir"}`, status: 201, call: "Create", args: []any{"S", "a/b", "dir"}},
		{name: "create over an entry", method: "POST", path: "/api/sessions/S/files/create", body: `{"path":"a","kind":"dir"}`, err: fmt.Errorf("%w: %q already exists", core.ErrConflict, "a"), status: 409, errText: "already exists", call: "Create"},
		{name: "create in .git", method: "POST", path: "/api/sessions/S/files/create", body: `{"path":".git/x","kind":"file"}`, err: fmt.Errorf("%w: path is inside .git", core.ErrForbidden), status: 403, errText: "inside .git", call: "Create"},
		{name: "create without a body", method: "POST", path: "/api/sessions/S/files/create", status: 400, errText: "request body is empty"},
		{name: "create with an unknown field", method: "POST", path: "/api/sessions/S/files/create", body: `{"path":"a","kind":"file","mode":1}`, status: 400, errText: `unknown field "mode"`},
		{name: "rename", method: "POST", path: "/api/sessions/S/files/rename", body: `{"from":"a.txt","to":"b/a.txt"}`, status: 200, call: "Rename", args: []any{"S", "a.txt", "b/a.txt"}},
		{name: "rename missing", method: "POST", path: "/api/sessions/S/files/rename", body: `{"from":"a.txt","to":"b"}`, err: fmt.Errorf("%w: %q does not exist", core.ErrNotFound, "a.txt"), status: 404, errText: "does not exist", call: "Rename"},
		{name: "rename of the wrong type", method: "POST", path: "/api/sessions/S/files/rename", body: `{"from":1}`, status: 400, errText: `"from" must be a string`},
		{name: "delete", method: "POST", path: "/api/sessions/S/files/delete", body: `{"path":"a.txt"}`, status: 200, call: "Delete", args: []any{"S", "a.txt", false}},
		{name: "delete recursive", method: "POST", path: "/api/sessions/S/files/delete", body: `{"path":"d","recursive":true}`, status: 200, call: "Delete", args: []any{"S", "d", true}},
		{name: "delete a full folder", method: "POST", path: "/api/sessions/S/files/delete", body: `{"path":"d"}`, err: fmt.Errorf("%w: the folder is not empty", core.ErrConflict), status: 409, errText: "not empty", call: "Delete"},
		{name: "delete not ready", method: "POST", path: "/api/sessions/S/files/delete", body: `{"path":"d"}`, err: errNotReady, status: 409, errText: "not ready", call: "Delete"},
		{name: "delete by GET", method: "GET", path: "/api/sessions/S/files/delete", status: 405, errText: "GET is not allowed"},
		{name: "internal error", method: "GET", path: "/api/sessions/S/tree", err: errors.New("disk on fire"), status: 500, errText: "disk on fire", call: "Tree"},
	})
}

func TestGitRoutes(t *testing.T) {
	runRoutes(t, []route{
		{name: "status", method: "GET", path: "/api/sessions/S/git/status", status: 200, call: "GitStatus"},
		{name: "diff", method: "GET", path: "/api/sessions/S/git/diff?path=a.go&staged=true", status: 200, call: "GitDiff", args: []any{"S", "a.go", true}},
		{name: "diff without path", method: "GET", path: "/api/sessions/S/git/diff", status: 400, errText: "path query parameter is required", call: "Sandbox"},
		{name: "diff bad staged", method: "GET", path: "/api/sessions/S/git/diff?path=a&staged=x", status: 400, errText: "staged must be true or false", call: "Sandbox"},
		{name: "diff not ready first", method: "GET", path: "/api/sessions/S/git/diff", err: errNotReady, status: 409, errText: "not ready", call: "Sandbox"},
		{name: "stage all", method: "POST", path: "/api/sessions/S/git/stage", body: `{"paths":[]}`, status: 200, call: "GitStage", args: []any{"S", "[]"}},
		{name: "stage without paths", method: "POST", path: "/api/sessions/S/git/stage", body: `{}`, status: 400, errText: "paths is required", call: "Sandbox"},
		{name: "stage without content type", method: "POST", path: "/api/sessions/S/git/stage", body: "-", status: 415, call: "Sandbox"},
		{name: "stage paths", method: "POST", path: "/api/sessions/S/git/stage", body: `{"paths":["a","b/c"]}`, status: 200, call: "GitStage", args: []any{"S", "[a b/c]"}},
		{name: "stage empty path", method: "POST", path: "/api/sessions/S/git/stage", body: `{"paths":[""]}`, status: 400, errText: "must not hold an empty path", call: "Sandbox"},
		{name: "hunk", method: "POST", path: "/api/sessions/S/git/hunk", body: `{"path":"a","index":0}`, status: 200, call: "GitHunk", args: []any{"S", "a"}},
		{name: "hunk without path", method: "POST", path: "/api/sessions/S/git/hunk", body: `{"index":0}`, status: 400, errText: "path is required", call: "Sandbox"},
		{name: "discard all", method: "POST", path: "/api/sessions/S/git/discard", status: 200, call: "GitDiscard", args: []any{"S", ""}},
		{name: "discard empty path", method: "POST", path: "/api/sessions/S/git/discard", body: `{"path":""}`, status: 400, errText: "must not be empty", call: "Sandbox"},
		{name: "identity", method: "GET", path: "/api/sessions/S/git/identity", status: 200, call: "GitIdentity", args: []any{"S"}},
		{name: "identity not ready", method: "GET", path: "/api/sessions/S/git/identity", err: errNotReady, status: 409, errText: "not ready", call: "GitIdentity"},
		{name: "commit", method: "POST", path: "/api/sessions/S/git/commit", body: `{"message":"m"}`, status: 200, call: "GitCommit", args: []any{"S", "m", ""}},
		{name: "commit with a status token", method: "POST", path: "/api/sessions/S/git/commit", body: `{"stage_all":true,"status_token":"abc"}`, status: 200, call: "GitCommit", args: []any{"S", "", "abc"}},
		{name: "commit with a token of the wrong type", method: "POST", path: "/api/sessions/S/git/commit", body: `{"status_token":1}`, status: 400, errText: `"status_token" must be a string`, call: "Sandbox"},
		{name: "check clear", method: "PUT", path: "/api/sessions/S/check", body: `{"check_command":null}`, status: 200, call: "SetCheck"},
		{name: "check missing", method: "PUT", path: "/api/sessions/S/check", body: `{}`, status: 400, errText: "check_command is required"},
		{name: "check run bad timeout", method: "POST", path: "/api/sessions/S/check/run", body: `{"timeout_seconds":0}`, status: 400, errText: "timeout_seconds must be between", call: "Sandbox"},
	})
}

func TestTaskAndTurnRoutes(t *testing.T) {
	runRoutes(t, []route{
		{name: "task", method: "POST", path: "/api/sessions/S/tasks", body: `{"command":"make"}`, status: 201, call: "StartTask", args: []any{"S", "make"}},
		{name: "task missing session", method: "POST", path: "/api/sessions/S/tasks", body: `{"command":"make"}`, err: errMissingSession, status: 404, errText: `session "S"`, call: "StartTask"},
		{name: "kill", method: "POST", path: "/api/sessions/S/tasks/T/kill", status: 200, call: "KillTask", args: []any{"S", "T"}},
		{name: "kill an exited task", method: "POST", path: "/api/sessions/S/tasks/T/kill", err: fmt.Errorf("%w: task %q already exited", core.ErrConflict, "T"), status: 409, errText: "already exited", call: "KillTask"},
		{name: "kill an unknown task", method: "POST", path: "/api/sessions/S/tasks/T/kill", err: fmt.Errorf("%w: task %q", core.ErrNotFound, "T"), status: 404, errText: `task "T"`, call: "KillTask"},
		{name: "kill by GET", method: "GET", path: "/api/sessions/S/tasks/T/kill", status: 405, errText: "GET is not allowed"},
		{name: "rewind unknown session", method: "POST", path: "/api/sessions/S/rewind", body: `{"keep":1}`, status: 404, errText: `session "S"`},
	})
}

func TestFolderRoutes(t *testing.T) {
	runRoutes(t, []route{
		{name: "list", method: "GET", path: "/api/fs/list?path=/srv", status: 200, call: "ListDirs", args: []any{"/srv", false}},
		{name: "list hidden", method: "GET", path: "/api/fs/list?path=/srv&hidden=true", status: 200, call: "ListDirs", args: []any{"/srv", true}},
		{name: "list bad hidden", method: "GET", path: "/api/fs/list?hidden=maybe", status: 400, errText: "hidden must be true or false"},
		{name: "list missing", method: "GET", path: "/api/fs/list?path=/nope", err: fmt.Errorf("%w: /nope", core.ErrNotFound), status: 404, errText: "/nope", call: "ListDirs"},
		{name: "list a file", method: "GET", path: "/api/fs/list?path=/etc/hosts", err: fmt.Errorf("%w: not a directory", core.ErrInvalid), status: 400, errText: "not a directory", call: "ListDirs"},
		{name: "project", method: "GET", path: "/api/fs/project?path=/srv", status: 200, call: "Probe", args: []any{"/srv"}},
		{name: "project without path", method: "GET", path: "/api/fs/project", status: 400, errText: "path is required"},
		{name: "project missing", method: "GET", path: "/api/fs/project?path=/nope", err: fmt.Errorf("%w: /nope", core.ErrNotFound), status: 404, errText: "/nope", call: "Probe"},
	})
}

func TestAgentRoutes(t *testing.T) {
	runRoutes(t, []route{
		{name: "patch", method: "PATCH", path: "/api/agents/coder", body: `{"model":"m2"}`, status: 200, call: "Patch",
			args: []any{"coder", true, `{"Name":null,"Model":"m2","Prompt":null,"Dependencies":null,"Budget":null}`}},
		{name: "patch no restart", method: "PATCH", path: "/api/agents/coder?restart=false", body: `{"model":"m2"}`, status: 200, call: "Patch",
			args: []any{"coder", false, `{"Name":null,"Model":"m2","Prompt":null,"Dependencies":null,"Budget":null}`}},
		{name: "patch every field", method: "PATCH", path: "/api/agents/coder",
			body:   `{"name":"N","model":"m2","prompt":"p","dependencies":["helper"],"budget":{"max_output_tokens":5,"max_usd":0.5}}`,
			status: 200, call: "Patch",
			args: []any{"coder", true, `{"Name":"N","Model":"m2","Prompt":"p","Dependencies":["helper"],"Budget":{"MaxOutputTokens":5,"MaxUSD":0.5}}`}},
		{name: "patch a budget of one limit", method: "PATCH", path: "/api/agents/coder", body: `{"budget":{"max_usd":2}}`, status: 200, call: "Patch",
			args: []any{"coder", true, `{"Name":null,"Model":null,"Prompt":null,"Dependencies":null,"Budget":{"MaxOutputTokens":0,"MaxUSD":2}}`}},
		{name: "patch an unknown budget field", method: "PATCH", path: "/api/agents/coder", body: `{"budget":{"max_tokens":5}}`, status: 400, errText: "max_tokens"},
		{name: "patch an unknown field", method: "PATCH", path: "/api/agents/coder", body: `{"temperature":1}`, status: 400, errText: "temperature"},
		{name: "patch bad restart", method: "PATCH", path: "/api/agents/coder?restart=x", body: `{}`, status: 400, errText: "restart must be true or false"},
		{name: "patch invalid", method: "PATCH", path: "/api/agents/coder", body: `{"model":""}`, err: fmt.Errorf("%w: model must not be empty", agent.ErrInvalid), status: 400, errText: "model must not be empty", call: "Patch"},
		{name: "patch unknown", method: "PATCH", path: "/api/agents/nope", body: `{}`, err: agent.ErrUnknownAgent, status: 404, call: "Patch"},
		{name: "restart", method: "POST", path: "/api/agents/coder/restart", status: 200, call: "Restart", args: []any{"coder"}},
		{name: "execute", method: "POST", path: "/api/agents/coder/execute", body: `{"input":"hi","system_override":"s","model_override":"m","stateless":true}`,
			status: 200, call: "Execute", args: []any{"coder", `{"Input":"hi","SystemOverride":"s","ModelOverride":"m","Stateless":true}`}},
		{name: "execute over budget", method: "POST", path: "/api/agents/coder/execute", body: `{"input":"hi"}`, err: fmt.Errorf("%w: max_usd", agent.ErrBudget), status: 402, errText: "max_usd", call: "Execute"},
		{name: "execute provider down", method: "POST", path: "/api/agents/coder/execute", body: `{"input":"hi"}`, err: fmt.Errorf("%w: refused", agent.ErrProvider), status: 502, errText: "refused", call: "Execute"},
		{name: "models without agent", method: "GET", path: "/api/llm/models", status: 400, errText: "query parameter agent is required"},
	})
}

func TestMCPRoutes(t *testing.T) {
	runRoutes(t, []route{
		{name: "catalog", method: "GET", path: "/api/mcp/catalog", status: 200},
		{name: "install", method: "POST", path: "/api/mcp/install", body: `{"slug":"filesystem","values":{"root":"/srv"},"name":"fs"}`, status: 201, call: "Install", args: []any{"filesystem", "fs", "map[root:/srv]"}},
		{name: "install without slug", method: "POST", path: "/api/mcp/install", body: `{"name":"fs"}`, status: 400, errText: "slug is required"},
		{name: "install values not strings", method: "POST", path: "/api/mcp/install", body: `{"slug":"git","values":{"repository":1}}`, status: 400, errText: "must be a string"},
		{name: "install unknown slug", method: "POST", path: "/api/mcp/install", body: `{"slug":"nope"}`, err: fmt.Errorf("%w: %q", mcp.ErrUnknownSlug, "nope"), status: 404, errText: `"nope"`, call: "Install"},
		{name: "install missing value", method: "POST", path: "/api/mcp/install", body: `{"slug":"git"}`, err: fmt.Errorf("%w: git needs the value %q", mcp.ErrInvalid, "repository"), status: 400, errText: "needs the value", call: "Install"},
		{name: "install duplicate", method: "POST", path: "/api/mcp/install", body: `{"slug":"memory"}`, err: fmt.Errorf("%w: %q is already in the registry", mcp.ErrDuplicate, "memory"), status: 409, errText: "already in the registry", call: "Install"},
		{name: "servers", method: "GET", path: "/api/mcp/servers", status: 200},
		{name: "tools", method: "GET", path: "/api/mcp/tools", status: 200},
		{name: "reconnect", method: "POST", path: "/api/mcp/servers/fs", status: 200, call: "Reconnect", args: []any{"fs"}},
		{name: "reconnect unknown", method: "POST", path: "/api/mcp/servers/nope", err: fmt.Errorf("%w: %q", mcp.ErrUnknownServer, "nope"), status: 404, errText: `"nope"`, call: "Reconnect"},
		{name: "remove", method: "DELETE", path: "/api/mcp/servers/fs", status: 200, call: "Remove", args: []any{"fs"}},
		{name: "permissions", method: "GET", path: "/api/mcp/permissions", status: 200},
		{name: "revoke", method: "DELETE", path: "/api/mcp/permissions?server=fs&agent_id=coder", status: 200, call: "Revoke", args: []any{"fs", "coder", ""}},
		{name: "skills", method: "GET", path: "/api/skills", status: 200},
		{name: "fire", method: "POST", path: "/api/skills/triage/fire", status: 200, call: "Fire", args: []any{"triage"}},
		{name: "fire unknown", method: "POST", path: "/api/skills/nope/fire", err: fmt.Errorf("%w: skill %q", core.ErrNotFound, "nope"), status: 404, errText: `skill "nope"`, call: "Fire"},
		{name: "revoke without server", method: "DELETE", path: "/api/mcp/permissions", err: fmt.Errorf("%w: server is required", core.ErrInvalid), status: 400, errText: "server is required", call: "Revoke"},
	})
}
