package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/journal/journaltest"
	"lathe/projections"
	"lathe/runtime/usage"
)

var updateLiveFrames = flag.Bool("update-live-frames", false, "rewrite transport/testdata/live_frames.golden")

// liveFrameEvents is a history with every event type that has a live frame
// (and some without), each on the aggregate it belongs to.
func liveFrameEvents() []journal.Event {
	tokens := usage.Tokens{InputTokens: 120, OutputTokens: 30, ReasoningTokens: 5, TokenUsageKnown: true}
	display := events.NewText("fix <the> bug & more")
	spec := events.AttemptSpec{Index: 0, Run: "S1-lane-0", TurnID: "L0", Model: "m2", Agent: "coder", Copy: "/lanes/0"}
	lane := events.Lane{Index: 0, Run: "S1-lane-0"}
	return []journal.Event{
		events.New("W1", events.WorkspaceRegistered{Path: "/home/dev/project", Name: "project"}),
		events.New("S1", events.SessionCreated{WorkspaceID: "W1", Name: "s", WorkingDir: "/home/dev/project",
			Mode: events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}, Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}}),
		events.New("S1", events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare}),
		events.New("S1", events.EnvironmentReady{Generation: 1}),
		events.New("S1", events.EnvironmentSettled{Generation: 1}),
		// A turn with tool calls, done.
		events.New("S1", events.TurnAccepted{TurnID: "T1", IdempotencyKey: "k1", AgentID: "coder", Input: events.NewText("fix"), DisplayInput: &display, Source: "ws"}),
		events.New("S1", events.TurnStarted{TurnID: "T1", Agent: "coder", Model: "m1", AgentName: "@zed-industries/claude-agent-acp", AgentVersion: "0.23.1"}),
		events.New("S1", events.TurnPlanned{TurnID: "T1", Agent: "coder", Entries: []events.PlanEntry{
			{Content: "read <a.go>", Status: events.PlanCompleted, Priority: "high"}, {Content: "fix it", Status: events.PlanInProgress}}}),
		events.New("S1", events.ToolCallStarted{TurnID: "T1", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "read_file",
			Arguments: events.NewJSON(json.RawMessage(`{"path": "a.go", "note": "<x>"}`))}),
		events.New("S1", events.ToolCallFinished{TurnID: "T1", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "read_file",
			Result: events.NewText("package a\n"), DurationMS: 12}),
		events.New("S1", events.ToolCallStarted{TurnID: "T1", Agent: "coder", CallID: "c2", Occurrence: 1, Name: "shell"}),
		events.New("S1", events.ToolCallFinished{TurnID: "T1", Agent: "coder", CallID: "c2", Occurrence: 1, Name: "shell",
			Result: events.NewText("exit 1"), IsError: true}),
		// Content the events only reference is framed as its preview.
		events.New("S1", events.ToolCallStarted{TurnID: "T1", Agent: "coder", CallID: "c3", Occurrence: 2, Name: "write_file",
			Arguments: events.JSON{Blob: &events.Blob{SHA256: strings.Repeat("ab", 32), Size: 90_000, Preview: `{"path":"big`}}}),
		events.New("S1", events.ToolCallFinished{TurnID: "T1", Agent: "coder", CallID: "c3", Occurrence: 2, Name: "write_file",
			Result: events.Text{Blob: &events.Blob{SHA256: strings.Repeat("cd", 32), Size: 70_000, Preview: "wrote 70000"}}}),
		events.New("S1", events.TurnOutput{TurnID: "T1", Agent: "coder", Step: 1, Text: events.NewText("done")}),
		events.New("S1", events.TurnUsage{TurnID: "T1", Agent: "coder", Step: 1, Model: "m1", Tokens: tokens}),
		events.New("S1", events.TurnDone{TurnID: "T1", Output: events.NewText("done"), Totals: tokens}),
		// A planned lattice turn that fails.
		events.New("S1", events.TurnAccepted{TurnID: "T2", IdempotencyKey: "k2", AgentID: "coder", Input: events.NewText("plan it"), Source: "api"}),
		events.New("S1", events.TurnStarted{TurnID: "T2", Agent: "planner", Model: "m1"}),
		events.New("S1", events.LatticePlanned{TurnID: "T2", Coordinator: "planner", Goal: "build",
			Subtasks: []events.LatticeSubtask{{ID: "a", Title: "A", Instruction: "write a", Worker: "w1"}, {ID: "b", Title: "B", Instruction: "sum", DependsOn: []string{"a"}, Worker: "w2"}}}),
		events.New("S1", events.LatticeTask{TurnID: "T2", Subtask: "a", Agent: "w1", State: events.TaskActivated}),
		events.New("S1", events.LatticeTask{TurnID: "T2", Subtask: "a", Agent: "w1", State: events.TaskCompleted, Output: events.NewText("wrote a"), Tokens: &tokens}),
		events.New("S1", events.TurnFailed{TurnID: "T2", Error: "budget spent", Interrupted: true, Budget: "tokens", Totals: tokens}),
		// A turn cancelled before it started.
		events.New("S1", events.TurnAccepted{TurnID: "T3", IdempotencyKey: "k3", AgentID: "coder", Input: events.NewText("stop"), Source: "ws"}),
		events.New("S1", events.TurnCancelled{TurnID: "T3"}),
		// An Attempt set of one lane, kept and settled.
		events.New("A1", events.AttemptSetStarted{Session: "S1", Workspace: "W1", Input: events.NewText("try"), Snapshot: "snap", Tree: "tree", Ref: "ref",
			Attempts: []events.AttemptSpec{spec}}),
		events.New("A1", events.LaneStarted{Lane: lane, TurnStarted: events.TurnStarted{TurnID: "L0", Agent: "coder", Model: "m2", AgentName: "opencode", AgentVersion: "1.18.33"}}),
		events.New("A1", events.LanePlanned{Lane: lane, TurnPlanned: events.TurnPlanned{TurnID: "L0", Agent: "coder", Entries: []events.PlanEntry{{Content: "write b.go", Status: events.PlanPending}}}}),
		events.New("A1", events.LaneToolStarted{Lane: lane, ToolCallStarted: events.ToolCallStarted{TurnID: "L0", Agent: "coder", CallID: "c1", Occurrence: 1,
			Name: "write_file", Arguments: events.NewJSON(json.RawMessage(`{"path":"b.go"}`))}}),
		events.New("A1", events.LaneToolFinished{Lane: lane, ToolCallFinished: events.ToolCallFinished{TurnID: "L0", Agent: "coder",
			CallID: "c1", Occurrence: 1, Name: "write_file", Result: events.NewText("wrote b.go"), DurationMS: 3}}),
		events.New("A1", events.LaneEnded{Lane: lane, State: events.AttemptSucceeded, Output: events.NewText("ok"), Totals: tokens, After: "after", Changed: []string{"b.go"}}),
		events.New("A1", events.LaneVerified{Lane: lane, Check: "go test", Passed: true, Changed: []string{"b.go"}, TouchedTests: []string{}}),
		events.New("A1", events.AttemptSetSettled{Workspace: "W1"}),
		// An approval asked and decided.
		events.New("P1", events.ApprovalRequested{Session: "S1", TurnID: "T9", AgentID: "coder", Server: "fs", Tool: "delete", ToolDisplay: "fs: delete",
			ArgumentsPreview: `{"path":"/"}`}),
		events.New("P1", events.ApprovalResolved{Decision: events.DecisionDeny}),
		// An Automation run whose agent node calls a tool.
		events.New("R1", events.RunStarted{AutomationID: "flow", Input: events.NewText("go")}),
		events.New("R1", events.NodeStarted{AutomationID: "flow", Node: "agent"}),
		events.New("R1", events.NodeToolCall{AutomationID: "flow", Node: "agent", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "search", Phase: "start",
			Arguments: events.NewJSON(json.RawMessage(`{"q":"x"}`))}),
		events.New("R1", events.NodeToolCall{AutomationID: "flow", Node: "agent", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "search", Phase: "result",
			Result: events.NewText("3 hits"), DurationMS: 40}),
		events.New("R1", events.NodeFinished{AutomationID: "flow", Node: "agent", State: events.StateSucceeded, Output: events.NewText("found"), Usage: &tokens}),
		events.New("R1", events.RunFinished{AutomationID: "flow", State: events.StateSucceeded, Output: events.NewText("found"), Usage: tokens}),
		// A Skill fire: typed events only.
		events.New("review", events.SkillFired{Name: "review", Emits: []string{"ReviewAsked"}}),
		events.New("S1", events.SessionDeleted{}),
	}
}

// Every committed event goes out on /ws as its type's frame (if it has
// one), its typed events and its `event` frame, in that order and with the
// exact bytes in testdata/live_frames.golden.
func TestLiveFramesOfEachFramedEvent(t *testing.T) {
	j := journaltest.Open(t)
	store := projections.New()
	srv, err := New(SecurityOptions{APIKeys: []string{testKey}, CookieSecret: testSecret}, withStore(store, Deps{Journal: j}))
	if err != nil {
		t.Fatal(err)
	}
	j.OnCommit(func(b []journal.Record) {
		if err := store.ApplyChanges(b, srv.Broadcast); err != nil {
			t.Errorf("apply: %v", err)
		}
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"X-Api-Key": {testKey}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	wsHydrate(t, ctx, conn)

	evs := liveFrameEvents()
	for typ := range liveFrames {
		if !slices.ContainsFunc(evs, func(ev journal.Event) bool { return ev.Type == typ }) {
			t.Errorf("event type %s has a live frame: add an event of it to liveFrameEvents, then run with -update-live-frames", typ)
		}
	}
	for _, ev := range evs { // one commit each: no batch merges their frames
		if _, err := j.Append(ctx, []journal.Event{ev}); err != nil {
			t.Fatalf("%s: %v", ev.Type, err)
		}
	}
	var got bytes.Buffer
	for seen := 0; seen < len(evs); {
		h, data := wsMustRead(t, ctx, conn)
		got.Write(data)
		got.WriteByte('\n')
		if h.Kind == "event" && bytes.Contains(data, []byte(`"aggregate_id"`)) {
			seen++
		}
	}
	out := stamps.ReplaceAll(got.Bytes(), []byte(`"<TIME>"`))
	golden := filepath.Join("testdata", "live_frames.golden")
	if *updateLiveFrames {
		if err := os.WriteFile(golden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update-live-frames)", err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("live frames differ from %s:\n%s", golden, out)
	}
}

// stamps are the frames' timestamps, which the golden file normalises.
var stamps = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"`)
