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
	"lathe/commands/turns"

	"github.com/oklog/ulid/v2"

	"lathe/commands"
	"lathe/journal"
	"lathe/journal/events"
	"lathe/journal/journaltest"
	"lathe/projections"
	"lathe/runtime/usage"
)

// turnsEnv is a Server on a real journal and projection store, with one
// Workspace. Its Sessions' environments are never prepared: the turn
// history routes answer whatever the environment state.
type turnsEnv struct {
	t       *testing.T
	j       *journal.Journal
	store   *projections.Store
	handler http.Handler
	ws      string
}

func newTurnsEnv(t *testing.T) *turnsEnv {
	t.Helper()
	j := journaltest.Open(t)
	store := projections.New()
	j.OnCommit(func(recs []journal.Record) {
		if err := store.Apply(recs); err != nil {
			t.Errorf("apply: %v", err)
		}
	})
	cmds := commands.New(j, store, core.Options{Agents: []string{"coder"}})
	srv, err := New(SecurityOptions{APIKeys: []string{testKey}, CookieSecret: testSecret}, withStore(store, Deps{
		Sessions: cmds.Sessions, Turns: cmds.Turns,
		Journal: j,
	}))
	if err != nil {
		t.Fatal(err)
	}
	e := &turnsEnv{t: t, j: j, store: store, handler: srv.Handler(), ws: ulid.Make().String()}
	e.append(e.ws, events.WorkspaceRegistered{Path: "/home/dev/project", Name: "project"})
	return e
}

// append journals payloads on one aggregate and waits for their projection.
func (e *turnsEnv) append(id string, ps ...events.Payload) {
	e.t.Helper()
	evs := make([]journal.Event, len(ps))
	for i, p := range ps {
		evs[i] = events.New(id, p)
	}
	recs, err := e.j.Append(context.Background(), evs)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.Await(context.Background(), recs[len(recs)-1].Seq); err != nil {
		e.t.Fatal(err)
	}
}

func (e *turnsEnv) session(name string, mode events.Mode) string {
	e.t.Helper()
	id := ulid.Make().String()
	e.append(id, events.SessionCreated{WorkspaceID: e.ws, Name: name, WorkingDir: "/home/dev/project", Mode: mode,
		EnabledSkills: []string{}, ExposedPorts: []int{}, Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}})
	return id
}

// turn journals a turn from its accept: started, one answer, done.
func (e *turnsEnv) turn(session, id, input, output string) {
	e.t.Helper()
	e.append(session, accepted(id, input), events.TurnStarted{TurnID: id, Agent: "coder", Model: "m1"},
		events.TurnOutput{TurnID: id, Agent: "coder", Step: 1, Text: events.NewText(output)},
		events.TurnUsage{TurnID: id, Agent: "coder", Step: 1, Model: "m1", CostUSD: ptrTo(0.5),
			Tokens: usage.Tokens{InputTokens: 100, OutputTokens: 10, TokenUsageKnown: true}},
		events.TurnDone{TurnID: id, Output: events.NewText(output), Totals: usage.Tokens{InputTokens: 100, OutputTokens: 10, TokenUsageKnown: true}})
}

func accepted(id, input string) events.TurnAccepted {
	return events.TurnAccepted{TurnID: id, IdempotencyKey: "k-" + id, AgentID: "coder", Input: events.NewText(input), Source: "ws"}
}

func ptrTo[T any](v T) *T { return &v }

// do sends an authenticated request and returns the status and body.
func (e *turnsEnv) do(method, path, body string) (int, http.Header, []byte) {
	e.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Host = "localhost:8080"
	r.Header.Set("x-api-key", testKey)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, r)
	return w.Code, w.Header(), w.Body.Bytes()
}

// get decodes a 200 JSON answer into v.
func (e *turnsEnv) get(path string, v any) {
	e.t.Helper()
	code, _, body := e.do(http.MethodGet, path, "")
	if code != http.StatusOK {
		e.t.Fatalf("GET %s = %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		e.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// wantError checks a JSON error answer.
func (e *turnsEnv) wantError(method, path, body string, status int, sub string) {
	e.t.Helper()
	code, _, got := e.do(method, path, body)
	var eb errorBody
	if code != status || json.Unmarshal(got, &eb) != nil || !strings.Contains(eb.Error, sub) {
		e.t.Errorf("%s %s %s = %d %s; want %d with %q", method, path, body, code, got, status, sub)
	}
}

func turnIDs(ts []projections.Turn) []string {
	ids := []string{}
	for _, t := range ts {
		ids = append(ids, t.TurnID)
	}
	return ids
}

var singleAgent = events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}

func TestTurnRoutes(t *testing.T) {
	e := newTurnsEnv(t)
	s := e.session("history", singleAgent)
	base := "/api/sessions/" + s
	e.turn(s, "t1", "Explain the Parser", "It parses.")
	e.append(s, events.TurnAccepted{TurnID: "t2", IdempotencyKey: "k-t2", AgentID: "coder", Input: events.NewText("expanded input"),
		DisplayInput: events.TextPtr(ptrTo("what about the lexer?")), Source: "execute"},
		events.TurnStarted{TurnID: "t2", Agent: "coder", Model: "m1"},
		events.TurnOutput{TurnID: "t2", Agent: "coder", Step: 1, ToolCalls: []events.StepCall{{CallID: "c1", Occurrence: 1, Name: "shell", Arguments: events.NewJSON(json.RawMessage(`{"command":"ls"}`))}}},
		events.ToolCallStarted{TurnID: "t2", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "shell", Arguments: events.NewJSON(json.RawMessage(`{"command":"ls"}`))},
		events.TurnCancelled{TurnID: "t2", Totals: usage.Tokens{InputTokens: 5, TokenUsageKnown: false}})

	t.Run("turns", func(t *testing.T) {
		var got struct{ Turns []projections.Turn }
		e.get(base+"/turns", &got)
		if ids := turnIDs(got.Turns); !slices.Equal(ids, []string{"t1", "t2"}) {
			t.Fatalf("turns = %v", ids)
		}
		if got.Turns[0].Status != projections.TurnDone || got.Turns[0].Output.String() != "It parses." || got.Turns[1].Status != projections.TurnCancelled {
			t.Errorf("turns = %+v", got.Turns)
		}
		var one projections.Turn
		e.get(base+"/turns/t2", &one)
		if one.TurnID != "t2" || one.DisplayInput.String() != "what about the lexer?" || len(one.ToolCalls) != 1 || one.Rewound {
			t.Errorf("turn t2 = %+v", one)
		}
	})

	t.Run("messages", func(t *testing.T) {
		var got struct {
			SessionID string `json:"session_id"`
			Messages  []map[string]any
		}
		e.get(base+"/messages", &got)
		roles := []string{}
		for _, m := range got.Messages {
			roles = append(roles, fmt.Sprint(m["role"], ":", m["content"]))
		}
		want := []string{"user:Explain the Parser", "assistant:It parses.", "user:what about the lexer?", "assistant:",
			"tool:" + turns.NotRunResult}
		if got.SessionID != s || !slices.Equal(roles, want) {
			t.Fatalf("messages of %s = %q, want %q", got.SessionID, roles, want)
		}
		if m := got.Messages[4]; m["call_id"] != "c1" || m["occurrence"] != 1.0 || m["is_error"] != true || m["turn_id"] != "t2" {
			t.Errorf("tool message = %v", m)
		}
	})

	t.Run("active turn", func(t *testing.T) {
		code, _, body := e.do(http.MethodGet, base+"/active-turn", "")
		if code != http.StatusOK || strings.TrimSpace(string(body)) != `{"turn":null,"run":null}` {
			t.Fatalf("idle active-turn = %d %s", code, body)
		}
		e.append(s, accepted("t3", "more"), events.TurnStarted{TurnID: "t3", Agent: "coder", Model: "m1"})
		var got struct {
			Turn *projections.Turn
			Run  *activeRun
		}
		e.get(base+"/active-turn", &got)
		if got.Turn == nil || got.Turn.TurnID != "t3" || got.Run == nil ||
			*got.Run != (activeRun{Workflow: s, TurnID: "t3", AgentID: "coder", Status: projections.TurnRunning}) {
			t.Fatalf("live active-turn = %+v run %+v", got.Turn, got.Run)
		}
		var msgs struct{ Messages []turns.Message }
		if e.get(base+"/messages", &msgs); len(msgs.Messages) != 5 {
			t.Errorf("a live turn is in the transcript: %d messages", len(msgs.Messages))
		}
		e.wantError(http.MethodPost, base+"/rewind", `{"keep":0}`, http.StatusConflict, `turn "t3" is running`)
		e.append(s, events.TurnFailed{TurnID: "t3", Error: "boom"})
		e.get(base+"/active-turn", &got)
		if got.Turn != nil || got.Run != nil {
			t.Errorf("ended active-turn = %+v %+v", got.Turn, got.Run)
		}
	})

	t.Run("unknown", func(t *testing.T) {
		missing := "/api/sessions/" + ulid.Make().String()
		for _, path := range []string{"/turns", "/turns/t1", "/messages", "/active-turn", "/export"} {
			e.wantError(http.MethodGet, missing+path, "", http.StatusNotFound, "session")
		}
		e.wantError(http.MethodPost, missing+"/rewind", `{"keep":0}`, http.StatusNotFound, "session")
		e.wantError(http.MethodGet, base+"/turns/nope", "", http.StatusNotFound, `turn "nope"`)
		e.wantError(http.MethodGet, "/api/session-turns/search?q=x&session_id="+ulid.Make().String(), "", http.StatusNotFound, "session")
	})

	t.Run("auth", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, base+"/turns", nil)
		r.Host = "localhost:8080"
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("unauthenticated GET turns = %d", w.Code)
		}
	})
}

func TestTurnSearch(t *testing.T) {
	e := newTurnsEnv(t)
	a, b := e.session("a", singleAgent), e.session("b", singleAgent)
	e.turn(a, "a1", "Where is the PARSER?", "in parse.go")
	e.turn(a, "a2", "and the lexer", "the parser calls it")
	e.turn(b, "b1", "parser again", "yes")
	e.turn(b, "b2", "unrelated", "no")
	for i := range 3 {
		e.turn(b, fmt.Sprintf("n%d", i), "the 100% case: a.b*", "ok")
	}

	type hits struct {
		Hits []projections.TurnHit `json:"hits"`
	}
	ids := func(h hits) []string {
		out := []string{}
		for _, x := range h.Hits {
			out = append(out, x.TurnID+":"+x.Field)
		}
		return out
	}
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"all Sessions, newest first, any case", "q=parser", []string{"b1:input", "a2:output", "a1:input"}},
		{"one Session", "q=Parser&session_id=" + a, []string{"a2:output", "a1:input"}},
		{"limit", "q=parser&limit=2", []string{"b1:input", "a2:output"}},
		{"literal, not a pattern", "q=a.b%2A", []string{"n2:input", "n1:input", "n0:input"}},
		{"percent", "q=100%25+case", []string{"n2:input", "n1:input", "n0:input"}},
		{"no hit", "q=zebra", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got hits
			e.get("/api/session-turns/search?"+tc.query, &got)
			if !slices.Equal(ids(got), tc.want) {
				t.Errorf("hits = %v, want %v", ids(got), tc.want)
			}
		})
	}
	for _, tc := range []struct{ query, sub string }{
		{"", "q is required"},
		{"q=", "q is required"},
		{"q=" + strings.Repeat("x", maxSearchQuery+1), "longer than 1000"},
		{"q=%FF", "UTF-8"},
		{"q=x&limit=0", "limit must be"},
		{"q=x&limit=501", "limit must be"},
		{"q=x&limit=-1", "limit must be"},
		{"q=x&limit=ten", "limit must be"},
		{"q=x&session_id=", "session_id must not be empty"},
	} {
		e.wantError(http.MethodGet, "/api/session-turns/search?"+tc.query, "", http.StatusBadRequest, tc.sub)
	}
	var got hits
	if e.get("/api/session-turns/search?q="+strings.Repeat("x", maxSearchQuery)+"&limit=500", &got); len(got.Hits) != 0 {
		t.Errorf("a 1000-byte query: %v", got.Hits)
	}
}

func TestTurnExport(t *testing.T) {
	e := newTurnsEnv(t)
	s := e.session("export me", singleAgent)
	e.turn(s, "t1", "first question", "first answer")
	e.turn(s, "t2", "second question", "```go\nfunc main() {}\n```")
	base := "/api/sessions/" + s + "/export"

	for _, q := range []string{"", "?format=markdown", "?format=md"} {
		code, h, body := e.do(http.MethodGet, base+q, "")
		if code != http.StatusOK || h.Get("Content-Type") != "text/markdown; charset=utf-8" ||
			h.Get("Content-Disposition") != `attachment; filename=`+s+`.md` {
			t.Fatalf("export%s = %d %v", q, code, h)
		}
		for _, want := range []string{"# export me\n", "- Workspace: `/home/dev/project`", "- Agent: `coder`",
			"### User\n\nfirst question", "### Answer\n\n```go\nfunc main() {}\n```", "**Session total** (2 turns): 220 tokens"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("markdown export lacks %q:\n%s", want, body)
			}
		}
	}

	code, h, body := e.do(http.MethodGet, base+"?format=json", "")
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" || h.Get("Content-Disposition") != `attachment; filename=`+s+`.json` {
		t.Fatalf("json export = %d %v", code, h)
	}
	var exp struct {
		Session projections.Session
		Turns   []projections.Turn
		Totals  turns.ExportTotals
	}
	if err := json.Unmarshal(body, &exp); err != nil {
		t.Fatal(err)
	}
	if exp.Session.ID != s || !slices.Equal(turnIDs(exp.Turns), []string{"t1", "t2"}) ||
		exp.Totals.Turns != 2 || exp.Totals.TotalTokens != 220 || exp.Totals.CostUSD != 1 || !exp.Totals.CostKnown || !exp.Totals.TokenUsageKnown {
		t.Errorf("json export = %s", body)
	}
	e.wantError(http.MethodGet, base+"?format=pdf", "", http.StatusBadRequest, `format must be markdown, md or json, not "pdf"`)
}

func TestTurnRewind(t *testing.T) {
	e := newTurnsEnv(t)
	s := e.session("rewind", singleAgent)
	path := "/api/sessions/" + s + "/rewind"
	for _, id := range []string{"t1", "t2", "t3", "t4"} {
		e.turn(s, id, "q "+id, "a "+id) // two transcript messages each
	}
	type answer struct {
		SessionID string             `json:"session_id"`
		Hidden    []string           `json:"hidden"`
		Turns     []projections.Turn `json:"turns"`
	}
	rewind := func(body string) answer {
		t.Helper()
		code, _, out := e.do(http.MethodPost, path, body)
		var a answer
		if code != http.StatusOK || json.Unmarshal(out, &a) != nil || a.SessionID != s || a.Hidden == nil {
			t.Fatalf("rewind %s = %d %s", body, code, out)
		}
		return a
	}
	version := func() uint64 { v, _ := e.j.Version(s); return v }

	before := version()
	if a := rewind(`{"keep":8}`); len(a.Hidden) != 0 || len(a.Turns) != 4 || version() != before {
		t.Fatalf("a keep of every message hid %v, appended %d", a.Hidden, version()-before)
	}
	if a := rewind(`{"keep":5}`); !slices.Equal(a.Hidden, []string{"t3", "t4"}) || !slices.Equal(turnIDs(a.Turns), []string{"t1", "t2"}) {
		t.Fatalf("keep 5 = %+v", a)
	}
	var t4 projections.Turn
	if e.get("/api/sessions/"+s+"/turns/t4", &t4); !t4.Rewound {
		t.Errorf("rewound turn t4 = %+v", t4)
	}
	if a := rewind(`{"keep_through_turn_id":"t1"}`); !slices.Equal(a.Hidden, []string{"t2"}) || !slices.Equal(turnIDs(a.Turns), []string{"t1"}) {
		t.Fatalf("keep through t1 = %+v", a)
	}
	before = version()
	if a := rewind(`{"keep_through_turn_id":"t1"}`); len(a.Hidden) != 0 || version() != before {
		t.Errorf("a second rewind to the head hid %v", a.Hidden)
	}
	e.turn(s, "t5", "q t5", "a t5")
	var listed struct{ Turns []projections.Turn }
	if e.get("/api/sessions/"+s+"/turns", &listed); !slices.Equal(turnIDs(listed.Turns), []string{"t1", "t5"}) {
		t.Errorf("turns after rewind and a new turn = %v", turnIDs(listed.Turns))
	}

	before = version()
	for _, tc := range []struct {
		body   string
		status int
		sub    string
	}{
		{``, http.StatusBadRequest, "empty"},
		{`{}`, http.StatusBadRequest, "exactly one"},
		{`{"keep":1,"keep_through_turn_id":"t1"}`, http.StatusBadRequest, "exactly one"},
		{`{"keep":-1}`, http.StatusBadRequest, "keep must be"},
		{`{"keep":"2"}`, http.StatusBadRequest, `field "keep" must be an integer`},
		{`{"keep":1.5}`, http.StatusBadRequest, `field "keep"`},
		{`{"keep_through_turn_id":""}`, http.StatusBadRequest, "must name a turn"},
		{`{"keep_through_turn_id":"t3"}`, http.StatusBadRequest, "already rewound"},
		{`{"keep_through_turn_id":"nope"}`, http.StatusNotFound, `no turn "nope"`},
		{`{"keep":1,"extra":true}`, http.StatusBadRequest, "unknown field"},
	} {
		e.wantError(http.MethodPost, path, tc.body, tc.status, tc.sub)
	}
	lattice := e.session("lattice", events.Mode{Kind: events.ModeLattice})
	e.turn(lattice, "l1", "q", "a")
	e.wantError(http.MethodPost, "/api/sessions/"+lattice+"/rewind", `{"keep":0}`, http.StatusConflict, "single-Agent")
	if version() != before {
		t.Errorf("refused rewinds appended %d events", version()-before)
	}
}
