package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"lathe/commands/automationrunner"
	"lathe/commands/automations"
	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/usage"
)

// autoFake meets AutomationCommands, recording the call and answering err.
type autoFake struct {
	err  error
	call string
	args []any
	ex   automationrunner.Execution
}

func (f *autoFake) record(name string, args ...any) error {
	f.call, f.args = name, args
	return f.err
}

func (f *autoFake) CreateAutomation(_ context.Context, a events.Automation) (projections.AutomationRecord, error) {
	return projections.AutomationRecord{Automation: a}, f.record("CreateAutomation", a.ID, a.Enabled)
}
func (f *autoFake) PutAutomation(_ context.Context, id string, a events.Automation) (projections.AutomationRecord, error) {
	return projections.AutomationRecord{Automation: a}, f.record("PutAutomation", id, a.ID)
}
func (f *autoFake) DeleteAutomation(_ context.Context, id string) error {
	return f.record("DeleteAutomation", id)
}
func (f *autoFake) MoveAutomation(_ context.Context, id string, folder *string) (projections.AutomationRecord, error) {
	fl := "<root>"
	if folder != nil {
		fl = *folder
	}
	return projections.AutomationRecord{}, f.record("MoveAutomation", id, fl)
}
func (f *autoFake) CreateFolder(_ context.Context, path, name string) (projections.AutomationFolder, error) {
	return projections.AutomationFolder{Path: path}, f.record("CreateFolder", path, name)
}
func (f *autoFake) RenameFolder(_ context.Context, o, n, name string) error {
	return f.record("RenameFolder", o, n, name)
}
func (f *autoFake) DeleteFolder(_ context.Context, path string, keep bool) error {
	return f.record("DeleteFolder", path, keep)
}
func (f *autoFake) ToolIDs() []string { f.call = "ToolIDs"; return []string{"lathe__echo"} }
func (f *autoFake) Run(_ context.Context, id string, req automationrunner.RunRequest) (string, error) {
	in := "<none>"
	if req.Input != nil {
		in = *req.Input
	}
	return "R1", f.record("Run", id, in, len(req.Inputs))
}
func (f *autoFake) Fork(_ context.Context, id, runID string, input *string) (string, error) {
	return "R2", f.record("Fork", id, runID, input != nil)
}
func (f *autoFake) ResumeNode(_ context.Context, id, runID, nodeID, value string, cancel bool) error {
	return f.record("ResumeNode", id, runID, nodeID, value, cancel)
}
func (f *autoFake) Execute(_ context.Context, id string, req automationrunner.RunRequest) (automationrunner.Execution, error) {
	return f.ex, f.record("Execute", id)
}
func (f *autoFake) PatchSchedule(_ context.Context, id string, p automationrunner.SchedulePatch) (projections.AutomationRecord, error) {
	return projections.AutomationRecord{}, f.record("PatchSchedule", id, p.Every != nil)
}
func (f *autoFake) NextRun(string) *string { return nil }

// autoStore is a store holding a manual Automation "m" with a waiting run
// R1 and a schedule "s".
func autoStore(t *testing.T) *projections.Store {
	t.Helper()
	st := projections.New()
	graph := events.Automation{ID: "m", Name: "M", Enabled: true, Trigger: events.Trigger{Kind: events.TriggerManual},
		Nodes: []events.Node{{ID: "gate", Kind: events.NodeInterrupt, Input: "ok?", ResumeStrategy: "replace"}}}
	sched := events.Automation{ID: "s", Name: "S", Enabled: true, Trigger: events.Trigger{Kind: events.TriggerSchedule, Every: "1h"},
		Nodes: []events.Node{{ID: "t", Kind: events.NodeTool, ToolID: "lathe__echo"}}}
	var recs []journal.Record
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, ev := range []journal.Event{
		events.New("m", events.AutomationSaved{Automation: graph}),
		events.New("s", events.AutomationSaved{Automation: sched}),
		events.New("R1", events.RunStarted{AutomationID: "m", Graph: graph, Trigger: events.RunTrigger{Kind: events.TriggerManual}}),
		events.New("R1", events.NodeStarted{AutomationID: "m", Node: "gate"}),
		events.New("R1", events.NodeWaiting{Node: "gate", Prompt: events.NewText("ok?"), Strategy: "replace"}),
	} {
		recs = append(recs, journal.Record{Envelope: journal.Envelope{Seq: uint64(i + 1), ID: fmt.Sprint(i), Type: ev.Type,
			Aggregate: ev.Aggregate, AggregateID: ev.AggregateID, At: at}, Payload: ev.Data})
	}
	if err := st.Apply(recs); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestAutomationRoutes(t *testing.T) {
	invalid := &automations.InvalidAutomation{Node: "ask"}
	for _, rt := range []struct {
		name, method, path, body string
		err                      error
		ex                       automationrunner.Execution
		status                   int
		want                     string // a substring of the body
		call                     string
		args                     []any
	}{
		{name: "list", method: "GET", path: "/api/automations", status: 200, want: `"id":"m"`},
		{name: "get", method: "GET", path: "/api/automations/m", status: 200, want: `"trigger":{"kind":"manual"}`},
		{name: "get missing", method: "GET", path: "/api/automations/zz", status: 404, want: "zz"},
		{name: "create", method: "POST", path: "/api/automations", body: `{"id":"a","name":"A","nodes":[],"edges":[],"trigger":{"kind":"manual"}}`, status: 201, call: "CreateAutomation", args: []any{"a", true}},
		{name: "create unknown field", method: "POST", path: "/api/automations", body: `{"id":"a","x":1}`, status: 400, want: `unknown field`},
		{name: "create invalid names the node", method: "POST", path: "/api/automations", body: `{"id":"a"}`, err: invalid, status: 400, want: `"node":"ask"`, call: "CreateAutomation"},
		{name: "put", method: "PUT", path: "/api/automations/a", body: `{"id":"a","name":"A"}`, status: 200, call: "PutAutomation", args: []any{"a", "a"}},
		{name: "patch is put", method: "PATCH", path: "/api/automations/a", body: `{"id":"b","name":"A"}`, status: 200, call: "PutAutomation", args: []any{"a", "b"}},
		{name: "delete", method: "DELETE", path: "/api/automations/a", status: 200, call: "DeleteAutomation"},
		{name: "delete missing", method: "DELETE", path: "/api/automations/a", err: fmt.Errorf("%w: x", core.ErrNotFound), status: 404, call: "DeleteAutomation"},
		{name: "move to root", method: "POST", path: "/api/automations/a/move", body: `{"folder":null}`, status: 200, call: "MoveAutomation", args: []any{"a", "<root>"}},
		{name: "move", method: "POST", path: "/api/automations/a/move", body: `{"folder":"ops"}`, status: 200, call: "MoveAutomation", args: []any{"a", "ops"}},
		{name: "run", method: "POST", path: "/api/automations/a/run", body: `{"input":"go","inputs":{"x":"y"}}`, status: 200, want: `{"ok":true,"id":"a","run_id":"R1"}`, call: "Run", args: []any{"a", "go", 1}},
		{name: "run without body", method: "POST", path: "/api/automations/a/run", status: 200, call: "Run", args: []any{"a", "<none>", 0}},
		{name: "run disabled", method: "POST", path: "/api/automations/a/run", err: fmt.Errorf("%w: disabled", core.ErrConflict), status: 409, call: "Run"},
		{name: "runs", method: "GET", path: "/api/automations/m/runs", status: 200, want: `"run_id":"R1"`},
		{name: "runs of missing", method: "GET", path: "/api/automations/zz/runs", status: 404},
		{name: "run get", method: "GET", path: "/api/automations/m/runs/R1", status: 200, want: `"gate":{"state":"waiting"`},
		{name: "run of another Automation", method: "GET", path: "/api/automations/s/runs/R1", status: 404},
		{name: "fork", method: "POST", path: "/api/automations/m/runs/R1/fork", body: `{"input":"again"}`, status: 200, want: `"run_id":"R2"`, call: "Fork", args: []any{"m", "R1", true}},
		{name: "resume", method: "POST", path: "/api/automations/m/runs/R1/nodes/gate/resume", body: `{"value":"yes"}`, status: 200, call: "ResumeNode", args: []any{"m", "R1", "gate", "yes", false}},
		{name: "resume not waiting", method: "POST", path: "/api/automations/m/runs/R1/nodes/gate/resume", err: fmt.Errorf("%w: not waiting", core.ErrConflict), status: 409, call: "ResumeNode"},
		{name: "cancel node", method: "POST", path: "/api/automations/m/runs/R1/nodes/gate/cancel", status: 200, call: "ResumeNode", args: []any{"m", "R1", "gate", "", true}},
		{name: "interrupts", method: "GET", path: "/api/interrupts", status: 200, want: `"node_id":"gate","prompt":"ok?"`},
		{name: "folders", method: "GET", path: "/api/automation-folders", status: 200},
		{name: "folder create", method: "POST", path: "/api/automation-folders", body: `{"path":"ops","name":"Ops"}`, status: 201, call: "CreateFolder", args: []any{"ops", "Ops"}},
		{name: "folder rename", method: "PATCH", path: "/api/automation-folders", body: `{"old_path":"ops","new_path":"team"}`, status: 200, call: "RenameFolder", args: []any{"ops", "team", ""}},
		{name: "folder delete keeps by default", method: "DELETE", path: "/api/automation-folders?path=ops", status: 200, call: "DeleteFolder", args: []any{"ops", true}},
		{name: "folder delete recursive", method: "DELETE", path: "/api/automation-folders?path=ops&keep_contents=false", status: 200, call: "DeleteFolder", args: []any{"ops", false}},
		{name: "folder delete bad flag", method: "DELETE", path: "/api/automation-folders?path=ops&keep_contents=maybe", status: 400},
		{name: "tools", method: "GET", path: "/api/tools", status: 200, want: `["lathe__echo"]`, call: "ToolIDs"},
		{name: "workflows are manual ones", method: "GET", path: "/api/workflows", status: 200, want: `"id":"m"`},
		{name: "execute", method: "POST", path: "/api/workflows/m/execute", body: `{"input":"x"}`, ex: automationrunner.Execution{State: "succeeded", Output: "done", Usage: usage.Tokens{InputTokens: 3, TokenUsageKnown: true}}, status: 200, want: `"output":"done","completed":true,"input_tokens":3`, call: "Execute"},
		{name: "execute failed keeps usage", method: "POST", path: "/api/workflows/m/execute", body: `{"input":"x"}`, ex: automationrunner.Execution{State: "failed", Error: "boom", Usage: usage.Tokens{OutputTokens: 5}}, status: 502, want: `"error":"boom","input_tokens":0,"output_tokens":5,"reasoning_tokens":0,"token_usage_known":false`, call: "Execute"},
		{name: "execute of a schedule", method: "POST", path: "/api/workflows/s/execute", body: `{"input":"x"}`, status: 404, want: `token_usage_known`},
		{name: "schedules", method: "GET", path: "/api/schedules", status: 200, want: `"id":"s"`},
		{name: "schedule patch", method: "PATCH", path: "/api/schedules/s", body: `{"every":"2h"}`, status: 200, call: "PatchSchedule", args: []any{"s", true}},
		{name: "schedule run", method: "POST", path: "/api/schedules/s/run", ex: automationrunner.Execution{State: "succeeded"}, status: 200, call: "Execute"},
		{name: "schedule run of manual", method: "POST", path: "/api/schedules/m/run", status: 404},
		{name: "proactive", method: "GET", path: "/api/proactive", status: 200, want: `"id":"s"`},
	} {
		t.Run(rt.name, func(t *testing.T) {
			f := &autoFake{err: rt.err, ex: rt.ex}
			srv, err := New(SecurityOptions{APIKeys: []string{testKey}, CookieSecret: testSecret}, withStore(autoStore(t), Deps{Automations: f}))
			if err != nil {
				t.Fatal(err)
			}
			var body *strings.Reader
			r := httptest.NewRequest(rt.method, rt.path, nil)
			if rt.body != "" {
				body = strings.NewReader(rt.body)
				r = httptest.NewRequest(rt.method, rt.path, body)
				r.Header.Set("Content-Type", "application/json")
			}
			r.Host = "localhost:8080"
			r.Header.Set("x-api-key", testKey)
			w := httptest.NewRecorder()
			checkedHandler(t, srv.Handler()).ServeHTTP(w, r)
			if w.Code != rt.status || !strings.Contains(w.Body.String(), rt.want) {
				t.Fatalf("%s %s = %d %s, want %d with %s", rt.method, rt.path, w.Code, w.Body, rt.status, rt.want)
			}
			if w.Code >= 400 && !json.Valid(w.Body.Bytes()) {
				t.Errorf("error body is not JSON: %s", w.Body)
			}
			if f.call != rt.call {
				t.Errorf("call %q, want %q", f.call, rt.call)
			}
			if rt.args != nil && fmt.Sprint(f.args) != fmt.Sprint(rt.args) {
				t.Errorf("args %v, want %v", f.args, rt.args)
			}
		})
	}
	_ = http.StatusOK
}
