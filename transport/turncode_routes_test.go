package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/commands/core"
	"lathe/commands/turns"

	"lathe/journal/events"
	"lathe/runtime/usage"
)

var updateGolden = flag.Bool("update-turncode", false, "rewrite transport/testdata/turn_replay.golden")

// The fake's TurnCodeCommands.

func (f *fake) TurnChanges(_ context.Context, id, turnID string) (turns.TurnChangeList, error) {
	return turns.TurnChangeList{TurnID: turnID}, f.record("TurnChanges", id, turnID)
}
func (f *fake) TurnFileDiff(_ context.Context, id, turnID, p string) (turns.TurnDiff, error) {
	return turns.TurnDiff{TurnID: turnID, Path: p}, f.record("TurnFileDiff", id, turnID, p)
}
func (f *fake) RestoreTurn(_ context.Context, id, turnID string, req turns.RestoreRequest) (events.TurnRestored, error) {
	return events.TurnRestored{TurnID: turnID, Side: req.Side, Paths: req.Paths}, f.record("RestoreTurn", id, turnID, req.Side, req.Paths, req.Force)
}
func (f *fake) TurnEvents(_ context.Context, id, turnID string) (turns.TurnEvents, error) {
	return turns.TurnEvents{SessionID: id, TurnID: turnID}, f.record("TurnEvents", id, turnID)
}

var (
	errUnknownTurn = fmt.Errorf("%w: session %q has no turn %q", core.ErrNotFound, "S", "T")
	errLiveTurn    = fmt.Errorf("%w: turn %q is running in session %q; stop it first", core.ErrConflict, "T", "S")
	errNoRecord    = fmt.Errorf("%w: turn %q has no code record", core.ErrNotFound, "T")
	errNotChanged  = fmt.Errorf("%w: turn %q did not change %q", core.ErrInvalid, "T", "x")
	errAttemptSet  = fmt.Errorf("%w: an Attempt set owns the Workspace", core.ErrConflict)
)

func TestTurnCodeRoutes(t *testing.T) {
	const base = "/api/sessions/S/turns/T"
	runRoutes(t, []route{
		{name: "changes", method: "GET", path: base + "/changes", status: 200, call: "TurnChanges", args: []any{"S", "T"}},
		{name: "changes of a missing session", method: "GET", path: base + "/changes", err: errMissingSession, status: 404, errText: "session", call: "TurnChanges"},
		{name: "changes of an unknown turn", method: "GET", path: base + "/changes", err: errUnknownTurn, status: 404, errText: "no turn", call: "TurnChanges"},
		{name: "changes without a record", method: "GET", path: base + "/changes", err: errNoRecord, status: 404, errText: "no code record", call: "TurnChanges"},
		{name: "changes not ready", method: "GET", path: base + "/changes", err: errNotReady, status: 409, errText: "not ready", call: "TurnChanges"},
		{name: "diff", method: "GET", path: base + "/changes/diff?path=src/a.go", status: 200, call: "TurnFileDiff", args: []any{"S", "T", "src/a.go"}},
		{name: "diff without path", method: "GET", path: base + "/changes/diff", status: 400, errText: "path query parameter is required"},
		{name: "diff bad query", method: "GET", path: base + "/changes/diff?path=%zz", status: 400, errText: "malformed query"},
		{name: "diff of an unchanged path", method: "GET", path: base + "/changes/diff?path=x", err: fmt.Errorf("%w: turn %q did not change %q", core.ErrNotFound, "T", "x"), status: 404, errText: "did not change", call: "TurnFileDiff"},
		{name: "restore all", method: "POST", path: base + "/restore", body: `{"side":"before"}`, status: 200, call: "RestoreTurn", args: []any{"S", "T", "before", []string(nil), false}},
		{name: "restore paths forced", method: "POST", path: base + "/restore", body: `{"side":"after","paths":["a.go"],"force":true}`, status: 200, call: "RestoreTurn", args: []any{"S", "T", "after", []string{"a.go"}, true}},
		{name: "restore without body", method: "POST", path: base + "/restore", status: 400},
		{name: "restore unknown field", method: "POST", path: base + "/restore", body: `{"side":"before","x":1}`, status: 400, errText: `unknown field "x"`},
		{name: "restore bad side", method: "POST", path: base + "/restore", body: `{"side":"middle"}`, err: fmt.Errorf("%w: side must be \"before\" or \"after\"", core.ErrInvalid), status: 400, errText: "side", call: "RestoreTurn"},
		{name: "restore unchanged path", method: "POST", path: base + "/restore", body: `{"side":"before","paths":["x"]}`, err: errNotChanged, status: 400, errText: "did not change", call: "RestoreTurn"},
		{name: "restore during a live turn", method: "POST", path: base + "/restore", body: `{"side":"before"}`, err: errLiveTurn, status: 409, errText: "stop it first", call: "RestoreTurn"},
		{name: "restore under an Attempt set", method: "POST", path: base + "/restore", body: `{"side":"before"}`, err: errAttemptSet, status: 409, errText: "Attempt set", call: "RestoreTurn"},
		{name: "restore unknown turn", method: "POST", path: base + "/restore", body: `{"side":"before"}`, err: errUnknownTurn, status: 404, call: "RestoreTurn"},
		{name: "replay", method: "GET", path: base + "/replay", status: 200, call: "TurnEvents", args: []any{"S", "T"}},
		{name: "replay unknown turn", method: "GET", path: base + "/replay", err: errUnknownTurn, status: 404, errText: "no turn", call: "TurnEvents"},
	})
}

// TestRestoreConflictBody: a restore over files changed since the turn is
// 409 with the conflicting paths listed beside the error.
func TestRestoreConflictBody(t *testing.T) {
	f := &fake{err: &turns.RestoreConflict{TurnID: "T", Paths: []string{"a.go", "b/c.go"}}}
	r := httptest.NewRequest("POST", "/api/sessions/S/turns/T/restore", strings.NewReader(`{"side":"before"}`))
	r.Host = "localhost:8080"
	r.Header.Set("x-api-key", testKey)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	fakeServer(t, f).ServeHTTP(w, r)
	var body struct {
		Error     string   `json:"error"`
		Conflicts []string `json:"conflicts"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusConflict {
		t.Fatalf("restore = %d %s", w.Code, w.Body)
	}
	if strings.HasPrefix(body.Error, "conflict: ") || !strings.Contains(body.Error, "force") || fmt.Sprint(body.Conflicts) != "[a.go b/c.go]" {
		t.Errorf("conflict body %s", w.Body)
	}
}

// replayFake answers a turn's events: two steps, a tool call between them,
// the change record, the terminal event.
type replayFake struct{ fake }

func (f *replayFake) TurnEvents(_ context.Context, id, turnID string) (turns.TurnEvents, error) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	evs := []turns.ReplayEvent{
		{Seq: 10, At: at(0), Payload: events.TurnAccepted{TurnID: turnID, AgentID: "coder", Input: events.NewText("fix it")}},
		{Seq: 11, At: at(12), Payload: events.TurnStarted{TurnID: turnID, Agent: "coder", Model: "m"}},
		{Seq: 12, At: at(250), Payload: events.TurnOutput{TurnID: turnID, Agent: "coder", Step: 1, Reasoning: events.NewText("look first"),
			Text: events.NewText("Reading the file."), ToolCalls: []events.StepCall{{CallID: "c1", Name: "read_file", Arguments: events.NewJSON(json.RawMessage(`{"path":"a.go"}`))}}}},
		{Seq: 13, At: at(250), Payload: events.TurnUsage{TurnID: turnID, Agent: "coder", Step: 1, Tokens: usage.Tokens{InputTokens: 10, OutputTokens: 5, TokenUsageKnown: true}}},
		{Seq: 14, At: at(251), Payload: events.ToolCallStarted{TurnID: turnID, Agent: "coder", CallID: "c1", Name: "read_file", Arguments: events.NewJSON(json.RawMessage(`{"path":"a.go"}`))}},
		{Seq: 15, At: at(400), Payload: events.ToolCallFinished{TurnID: turnID, Agent: "coder", CallID: "c1", Name: "read_file", Result: events.NewText("package a\n"), DurationMS: 149}},
		{Seq: 16, At: at(900), Payload: events.TurnOutput{TurnID: turnID, Agent: "coder", Step: 2, Text: events.NewText("Done.")}},
		{Seq: 17, At: at(900), Payload: events.TurnUsage{TurnID: turnID, Agent: "coder", Step: 2, Tokens: usage.Tokens{InputTokens: 20, OutputTokens: 2, TokenUsageKnown: true}}},
		{Seq: 18, At: at(950), Payload: events.TurnChanges{TurnID: turnID, Before: "b", After: "a", Paths: []string{"a.go"}}},
		{Seq: 19, At: at(960), Payload: events.TurnDone{TurnID: turnID, Output: events.NewText("Done."), Totals: usage.Tokens{InputTokens: 30, OutputTokens: 7, TokenUsageKnown: true}}},
	}
	return turns.TurnEvents{SessionID: id, TurnID: turnID, Status: "done", Complete: true, Events: evs}, f.record("TurnEvents", id, turnID)
}

// TestTurnReplayGolden: a replayed turn's frames, in the live stream's
// shapes and order with their offsets, against a golden file.
func TestTurnReplayGolden(t *testing.T) {
	f := &replayFake{}
	srv, err := New(SecurityOptions{APIKeys: []string{testKey}, CookieSecret: testSecret}, Deps{TurnCode: f})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/api/sessions/S/turns/T/replay", nil)
	r.Host = "localhost:8080"
	r.Header.Set("x-api-key", testKey)
	w := httptest.NewRecorder()
	checkedHandler(t, srv.Handler()).ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("replay = %d %s", w.Code, w.Body)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, w.Body.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "turn_replay.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Errorf("replay:\n%s\nwant (%s):\n%s", pretty.Bytes(), golden, want)
	}
}
