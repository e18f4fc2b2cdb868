package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"lathe/commands/core"
	"lathe/commands/ways"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/usage"
)

// fakeWays records the Ways command a route ran and answers err.
type fakeWays struct {
	err  error
	call string
	args []any
}

func (f *fakeWays) set() projections.AttemptSet {
	return projections.AttemptSet{ID: "A", Session: "S", Input: events.NewText("task"), Attempts: []*projections.Attempt{{
		AttemptSpec: events.AttemptSpec{Index: 0, Run: "S:way0", TurnID: "A-0", Model: "m1", Agent: "coder"},
		State:       events.AttemptSucceeded, Changed: []string{"a.txt"},
		Turn: &projections.Turn{Output: events.NewText("done"), Usage: projections.Usage{View: usage.Tokens{InputTokens: 3, TokenUsageKnown: true}.View()}},
	}}}
}

func (f *fakeWays) record(call string, args ...any) (projections.AttemptSet, error) {
	f.call, f.args = call, args
	return f.set(), f.err
}

func (f *fakeWays) Start(_ context.Context, req ways.WaysRequest) (projections.AttemptSet, error) {
	var n any
	if req.N != nil {
		n = *req.N
	}
	return f.record("Start", req.SessionID, req.Input, n, len(req.Lanes))
}
func (f *fakeWays) Results(session string) (projections.AttemptSet, error) {
	return f.record("Results", session)
}
func (f *fakeWays) Status(_ context.Context, session, setID string) ([]ways.AttemptStatus, error) {
	f.call, f.args = "Status", []any{session, setID}
	return []ways.AttemptStatus{{Index: 0, State: "succeeded", ChangedFiles: []string{"a.txt"}}}, f.err
}
func (f *fakeWays) Diff(_ context.Context, session, setID string, index int, path string) (ways.FileDiff, error) {
	f.call, f.args = "Diff", []any{session, setID, index, path}
	return ways.FileDiff{Path: path}, f.err
}
func (f *fakeWays) Verify(_ context.Context, session, setID string, check *string) (projections.AttemptSet, error) {
	c := "<nil>"
	if check != nil {
		c = *check
	}
	return f.record("Verify", session, setID, c)
}
func (f *fakeWays) Keep(_ context.Context, session, setID string, index int) (projections.AttemptSet, error) {
	return f.record("Keep", session, setID, index)
}
func (f *fakeWays) Judge(_ context.Context, session, setID, agentID string) (projections.AttemptSet, ways.AttemptUsage, error) {
	a, err := f.record("Judge", session, setID, agentID)
	u := ways.AttemptUsage{View: usage.Tokens{InputTokens: 9, TokenUsageKnown: true}.View()}
	if err != nil {
		err = &ways.ControlError{Err: err, Usage: u}
	}
	return a, u, err
}
func (f *fakeWays) Plan(_ context.Context, session, task, agentID string) (ways.Plan, error) {
	f.call, f.args = "Plan", []any{session, task, agentID}
	return ways.Plan{Plan: []string{"step"}, Instruction: task}, f.err
}
func (f *fakeWays) Probe(_ context.Context, provider string, models []string) ([]ways.ProbeResult, error) {
	f.call, f.args = "Probe", []any{provider, models}
	return []ways.ProbeResult{}, f.err
}
func (f *fakeWays) Cost(session, setID string, baseline int, baselineProvider string) (ways.CostReport, error) {
	f.call, f.args = "Cost", []any{session, setID, baseline, baselineProvider}
	return ways.CostReport{}, f.err
}
func (f *fakeWays) Trajectories(session, setID string, baseline int) ([]ways.Trajectory, error) {
	f.call, f.args = "Trajectories", []any{session, setID, baseline}
	return []ways.Trajectory{}, f.err
}
func (f *fakeWays) Discard(_ context.Context, session, setID string) (projections.AttemptSet, error) {
	return f.record("Discard", session, setID)
}

// TestWaysRoutes: request decoding, statuses and error bodies of the Ways
// routes, against a fake.
func TestWaysRoutes(t *testing.T) {
	stale := fmt.Errorf("%w: Ways set %q is stale", core.ErrConflict, "OLD")
	for _, rt := range []route{
		{name: "start", method: "POST", path: "/api/sessions/S/variants", body: `{"input":"do it","n":3}`, status: 202, call: "Start", args: []any{"S", "do it", 3, 0}},
		{name: "start with lanes", method: "POST", path: "/api/sessions/S/variants", body: `{"input":"x","lanes":[{"model":"m2"},{"agent_id":"coder"}]}`, status: 202, call: "Start", args: []any{"S", "x", nil, 2}},
		{name: "start without input", method: "POST", path: "/api/sessions/S/variants", body: `{"n":2}`, status: 400, errText: "input is required"},
		{name: "start with n a string", method: "POST", path: "/api/sessions/S/variants", body: `{"input":"x","n":"2"}`, status: 400},
		{name: "start with n a fraction", method: "POST", path: "/api/sessions/S/variants", body: `{"input":"x","n":1.5}`, status: 400},
		{name: "start unknown lane field", method: "POST", path: "/api/sessions/S/variants", body: `{"input":"x","lanes":[{"temp":1}]}`, status: 400, errText: `unknown field "lanes[0].temp"`},
		{name: "start refused", method: "POST", path: "/api/sessions/S/variants", body: `{"input":"x"}`, err: errNotReady, status: 409, errText: "not ready", call: "Start"},
		{name: "start unknown session", method: "POST", path: "/api/sessions/S/variants", body: `{"input":"x"}`, err: errMissingSession, status: 404, call: "Start"},
		{name: "results", method: "GET", path: "/api/sessions/S/variants/results", status: 200, call: "Results", args: []any{"S"}},
		{name: "results optional of an unknown session", method: "GET", path: "/api/sessions/S/variants/results?optional=true", err: errMissingSession, status: 404, call: "Results"},
		{name: "status", method: "GET", path: "/api/sessions/S/variants/status?attempt_set_id=A", status: 200, call: "Status", args: []any{"S", "A"}},
		{name: "status stale", method: "GET", path: "/api/sessions/S/variants/status?attempt_set_id=OLD", err: stale, status: 409, errText: "stale", call: "Status"},
		{name: "diff", method: "GET", path: "/api/sessions/S/variants/diff?attempt_set_id=A&index=1&path=a.txt", status: 200, call: "Diff", args: []any{"S", "A", 1, "a.txt"}},
		{name: "diff index not a number", method: "GET", path: "/api/sessions/S/variants/diff?attempt_set_id=A&index=x&path=a.txt", status: 400, errText: "index"},
		{name: "verify", method: "POST", path: "/api/sessions/S/variants/verify", body: `{"attempt_set_id":"A","check":"make test"}`, status: 200, call: "Verify", args: []any{"S", "A", "make test"}},
		{name: "verify without check", method: "POST", path: "/api/sessions/S/variants/verify", body: `{"attempt_set_id":"A"}`, status: 200, call: "Verify", args: []any{"S", "A", "<nil>"}},
		{name: "adopt", method: "POST", path: "/api/sessions/S/variants/adopt", body: `{"attempt_set_id":"A","index":0}`, status: 200, call: "Keep", args: []any{"S", "A", 0}},
		{name: "adopt without index", method: "POST", path: "/api/sessions/S/variants/adopt", body: `{"attempt_set_id":"A"}`, status: 400, errText: "index is required"},
		{name: "adopt refused", method: "POST", path: "/api/sessions/S/variants/adopt", body: `{"attempt_set_id":"A","index":1}`, err: fmt.Errorf("%w: Keep of Attempt 0 already began", core.ErrConflict), status: 409, call: "Keep"},
		{name: "discard", method: "POST", path: "/api/sessions/S/variants/discard", body: `{"attempt_set_id":"A"}`, status: 200, call: "Discard", args: []any{"S", "A"}},
		{name: "discard no body", method: "POST", path: "/api/sessions/S/variants/discard", status: 400},
		{name: "judge", method: "POST", path: "/api/sessions/S/variants/judge", body: `{"attempt_set_id":"A","agent_id":"coder"}`, status: 200, call: "Judge", args: []any{"S", "A", "coder"}},
		{name: "judge fails with usage", method: "POST", path: "/api/sessions/S/variants/judge", body: `{"attempt_set_id":"A","agent_id":"coder"}`, err: fmt.Errorf("%w: judge broke", core.ErrUnavailable), status: 503, errText: "judge broke", call: "Judge"},
		{name: "plan", method: "POST", path: "/api/sessions/S/variants/plan", body: `{"task":"t","agent_id":"coder"}`, status: 200, call: "Plan", args: []any{"S", "t", "coder"}},
		{name: "probe", method: "GET", path: "/api/variants/probe?provider=p&models=a,b", status: 200, call: "Probe", args: []any{"p", []string{"a", "b"}}},
		{name: "cost", method: "GET", path: "/api/sessions/S/variants/cost?attempt_set_id=A&baseline=1&baseline_provider=p", status: 200, call: "Cost", args: []any{"S", "A", 1, "p"}},
		{name: "cost bad baseline", method: "GET", path: "/api/sessions/S/variants/cost?attempt_set_id=A&baseline=x", status: 400, errText: "baseline"},
		{name: "trajectories", method: "GET", path: "/api/sessions/S/variants/trajectories?attempt_set_id=A", status: 200, call: "Trajectories", args: []any{"S", "A", 0}},
	} {
		t.Run(rt.name, func(t *testing.T) {
			f := &fakeWays{err: rt.err}
			srv, err := New(SecurityOptions{APIKeys: []string{testKey}, CookieSecret: testSecret}, withStore(projections.New(), Deps{Ways: f}))
			if err != nil {
				t.Fatal(err)
			}
			var body *strings.Reader
			if rt.body != "" {
				body = strings.NewReader(rt.body)
			}
			var r *http.Request
			if body != nil {
				r = httptest.NewRequest(rt.method, rt.path, body)
				r.Header.Set("Content-Type", "application/json")
			} else {
				r = httptest.NewRequest(rt.method, rt.path, nil)
			}
			r.Host = "localhost:8080"
			r.Header.Set("x-api-key", testKey)
			w := httptest.NewRecorder()
			checkedHandler(t, srv.Handler()).ServeHTTP(w, r)
			if w.Code != rt.status {
				t.Fatalf("%s %s = %d %s, want %d", rt.method, rt.path, w.Code, w.Body, rt.status)
			}
			if rt.errText != "" {
				var eb errorBody
				if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || !strings.Contains(eb.Error, rt.errText) {
					t.Errorf("error body %s, want {error} containing %q", w.Body, rt.errText)
				}
			}
			if f.call != rt.call {
				t.Errorf("command call %q, want %q", f.call, rt.call)
			}
			if rt.args != nil && fmt.Sprint(f.args) != fmt.Sprint(rt.args) {
				t.Errorf("command args %v, want %v", f.args, rt.args)
			}
			if rt.call == "Judge" && rt.status != 200 && !strings.Contains(w.Body.String(), `"control_usage":{"input_tokens":9`) {
				t.Errorf("a failed judge's body lacks its control_usage: %s", w.Body)
			}
			if rt.status == 200 && slices.Contains([]string{"Results", "Verify", "Keep", "Discard", "Judge"}, rt.call) {
				var res resultsView
				if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || res.AttemptSetID != "A" || len(res.Attempts) != 1 ||
					res.Attempts[0].Usage.InputTokens != 3 || res.Attempts[0].Output != "done" {
					t.Errorf("results body %s", w.Body)
				}
			}
		})
	}
}

// TestWaysRoutesAbsentWithoutCommands: without Ways commands the routes do
// not exist (rather than answer without doing the work).
func TestWaysRoutesAbsentWithoutCommands(t *testing.T) {
	srv, err := New(SecurityOptions{APIKeys: []string{testKey}, CookieSecret: testSecret}, withStore(projections.New(), Deps{}))
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/api/sessions/S/variants/results", nil)
	r.Host = "localhost:8080"
	r.Header.Set("x-api-key", testKey)
	w := httptest.NewRecorder()
	checkedHandler(t, srv.Handler()).ServeHTTP(w, r)
	if w.Code != 404 {
		t.Errorf("results without Ways: %d", w.Code)
	}
}
