package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/journal/journaltest"
	"lathe/runtime/usage"
)

// The checkpoint's hand codec names every field of the types it stores. A
// field added to one of them must be added to the codec (and
// checkpointSchema bumped); this test counts the fields so that the
// omission fails here rather than vanishing from the read models after a
// restart (TestCheckpointCodecKeepsEveryField then checks the values). The
// small read models go by gob with their shape (cpSmall, shape.go), which
// covers a new field by itself; but a read model added to the Store must be
// added to the checkpoint, cpSmall or beside the Sessions, so the Store's
// and cpSmall's fields are counted too.
func TestCheckpointCoversEveryField(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields int
	}{
		{Session{}, 18}, {Environment{}, 8}, {RemoteRuntime{}, 6}, {RetainedRuntime{}, 4}, {RescuedWork{}, 6}, {events.Environment{}, 7}, {events.Evidence{}, 4},
		{events.Mode{}, 3}, {Task{}, 11}, {Attachment{}, 15}, {Turn{}, 37}, {Step{}, 6}, {events.PlanEntry{}, 3}, {events.StepCall{}, 4},
		{ToolCall{}, 9}, {Usage{}, 3}, {usage.View{}, 2}, {usage.Tokens{}, 4}, {events.Text{}, 2}, {events.JSON{}, 2}, {events.Blob{}, 3},
		{cpSmall{}, 14}, {Store{}, 20},
	} {
		typ := reflect.TypeOf(c.v)
		if typ.NumField() != c.fields {
			t.Errorf("%s has %d fields; the checkpoint codec (checkpoint.go) stores %d: update it, checkpointSchema and this count",
				typ, typ.NumField(), c.fields)
		}
	}
}

// richHistory appends events that set every field the codec stores,
// pointers and nil-versus-empty slices included, and returns the journal
// with a store fed by its commit feed.
func richHistory(t *testing.T) (*journal.Journal, *Store) {
	t.Helper()
	j, live := fedInternal(t)
	app := func(evs ...journal.Event) {
		t.Helper()
		if _, err := j.Append(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
	}
	code, zero, cost := 3, 0, 0.25
	check, display, model := "make check", "shown <input>", "big-model"
	app(events.New("W1", events.WorkspaceRegistered{Path: "/repo", Name: "repo"}))
	app(events.New("S1", events.SessionCreated{WorkspaceID: "W1", Name: "a \"quoted\" name\n\u2028", WorkingDir: "/repo",
		Mode: events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}, EnabledSkills: []string{"git"}, ExposedPorts: []int{3000, 5173},
		Environment: events.Environment{State: events.EnvAwaitingApproval, Generation: 1, Image: "img", SetupCommand: "npm ci", SetupSource: events.SourceUser}}),
		events.New("S1", events.EnvironmentPlanned{Generation: 2, Image: "img2", SetupCommand: "npm ci", SetupSource: events.SourceUser, SetupApproved: true, SetupReviewed: true}),
		events.New("S1", events.EnvironmentChanging{Generation: 2, Owner: events.OwnerChange}),
		events.New("S1", events.EnvironmentFailed{Generation: 2, Evidence: events.Evidence{Error: "boom", ExitCode: &code, OutputTail: "tail", Fix: "fix it"}}),
		events.New("S1", events.EnvironmentSettled{Generation: 2}),
		events.New("S1", events.CheckSet{CheckCommand: &check}),
		events.New("S1", events.TaskStarted{TaskID: "T1", Command: "go test", Interactive: true, Generation: 2}),
		events.New("S1", events.TaskExited{TaskID: "T1", ExitCode: 0, OutputTail: "ok", DurationMS: 12, Error: "lost"}),
		events.New("S1", events.TaskStarted{TaskID: "T2", Command: "sleep 1", Generation: 2}),
		events.New("S1", events.AttachmentAdded{ReferenceID: "R1", Scope: events.ScopeThisTurn, Name: "a.txt", MediaType: "text/plain", Size: 5, SHA256: "ab", TextExtracted: true}),
		events.New("S1", events.AttachmentAdded{ReferenceID: "R2", Scope: events.ScopeSession, Name: "b.pdf", MediaType: "application/pdf", Size: 7, SHA256: "cd"}),
		events.New("S1", events.AttachmentDeleted{ReferenceID: "R2"}),
		events.New("S1", events.TurnAccepted{TurnID: "U1", IdempotencyKey: "K1", AgentID: "coder", Input: events.NewText("hi"), DisplayInput: events.TextPtr(&display),
			ContextReferences: []events.JSON{{Inline: json.RawMessage(`{"kind":"file"}`)}}, ReferenceIDs: []string{"R1"}, ModelOverride: &model, Source: "ws"}),
		events.New("S1", events.AttachmentsConsumed{ReferenceIDs: []string{"R1"}, TurnID: "U1"}),
		events.New("S1", events.TurnStarted{TurnID: "U1", Agent: "coder", Model: model, AgentName: "@zed-industries/claude-agent-acp", AgentVersion: "0.23.1"}),
		events.New("S1", events.TurnPlanned{TurnID: "U1", Agent: "coder", Entries: []events.PlanEntry{{Content: "read a", Status: events.PlanCompleted, Priority: "high"}, {Content: "write b", Status: events.PlanPending}}}),
		events.New("S1", events.TurnOutput{TurnID: "U1", Agent: "coder", Step: 1, Text: events.NewText("thinking"), Reasoning: events.NewText("why"),
			ToolCalls: []events.StepCall{{CallID: "c1", Occurrence: 1, Name: "read", Arguments: events.JSON{Inline: json.RawMessage(`{"path":"a"}`)}}}}),
		events.New("S1", events.TurnUsage{TurnID: "U1", Agent: "coder", Step: 1, Model: model, CostUSD: &cost, Tokens: usage.Tokens{InputTokens: 10, OutputTokens: 4, ReasoningTokens: 1, TokenUsageKnown: true}}),
		events.New("S1", events.ToolCallStarted{TurnID: "U1", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "read", Arguments: events.JSON{Inline: json.RawMessage(`{"path":"a"}`)}}),
		events.New("S1", events.ToolCallFinished{TurnID: "U1", Agent: "coder", CallID: "c1", Occurrence: 1, Name: "read", Result: events.NewText("text"), IsError: true, DurationMS: 3}),
		events.New("S1", events.TurnChanges{TurnID: "U1", Before: "t1", After: "t2", Paths: []string{"a.go"}, Truncated: true, Ref: "refs/lathe/turns/U1"}),
		events.New("S1", events.TurnDone{TurnID: "U1", Output: events.NewText("done"), Totals: usage.Tokens{InputTokens: 10, OutputTokens: 4, TokenUsageKnown: true}}),
		events.New("S1", events.TurnAccepted{TurnID: "U2", IdempotencyKey: "K2", AgentID: "coder", Input: events.NewText("again"), Source: "execute"}),
		events.New("S1", events.TurnStarted{TurnID: "U2", Agent: "coder", Model: model}),
		events.New("S1", events.TurnUsage{TurnID: "U2", Agent: "coder", Step: 1, Model: model, Tokens: usage.Tokens{InputTokens: 1}}),
		events.New("S1", events.LatticePlanned{TurnID: "U2", Coordinator: "coder", Goal: "g", Subtasks: []events.LatticeSubtask{
			{ID: "a", Title: "A", Instruction: "do a", NeedsTools: []string{"shell"}, Worker: "w1"},
			{ID: "b", Title: "B", Instruction: "do b", DependsOn: []string{"a"}, Worker: "w2"}}}),
		events.New("S1", events.LatticeTask{TurnID: "U2", Subtask: "a", Agent: "w1", State: events.TaskCompleted, Output: events.NewText("out"),
			Tokens: &usage.Tokens{InputTokens: 2, TokenUsageKnown: true}}),
		events.New("S1", events.TurnFailed{TurnID: "U2", Error: "interrupted", Interrupted: true, Budget: "b", Refused: true, Totals: usage.Tokens{InputTokens: 1}}),
		events.New("S1", events.SessionRewound{KeepThroughTurnID: "U1", Hidden: []string{"U2"}}),
		events.New("S1", events.TurnAccepted{TurnID: "U3", IdempotencyKey: "K3", AgentID: "coder", Input: events.NewText("deploy"), Source: "ws"}),
		events.New("S1", events.TurnStarted{TurnID: "U3", Agent: "coder", Model: model}),
		events.New("S1", events.TurnCancelled{TurnID: "U3", StopReason: "stopped by hook `halt`: later"}),
	)
	app(events.New("S2", events.SessionCreated{WorkspaceID: "W1", Name: "closed", WorkingDir: "/repo", Mode: events.Mode{Kind: events.ModeLattice, Workers: []string{"w1", "w2"}},
		Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}}),
		events.New("S2", events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare}),
		events.New("S2", events.EnvironmentFailed{Generation: 1, Evidence: events.Evidence{Error: "zero", ExitCode: &zero}}),
		events.New("S2", events.EnvironmentSettled{Generation: 1}),
		events.New("S2", events.SessionClosed{}),
		events.New("S3", events.SessionCreated{WorkspaceID: "W1", Name: "preparing", WorkingDir: "/repo", Mode: events.Mode{Kind: events.ModeLattice},
			EnabledSkills: []string{}, ExposedPorts: []int{}, Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}}),
		events.New("S3", events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare}),
		events.New("S3", events.TurnAccepted{TurnID: "U3", IdempotencyKey: "U3", AgentID: "coder", Input: events.NewText("live"), Source: "ws"}),
		events.New("S3", events.TurnStarted{TurnID: "U3", Agent: "coder", Model: model}),
		events.New("W1", events.WorkspaceRenamed{Name: "renamed"}),
		events.New("S2", events.SessionReopened{}),
		events.New("S2", events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare}),
		events.New("S2", events.EnvironmentReady{Generation: 1, SetupRan: true, SetupOutput: "installed"}),
		events.New("S2", events.SessionClosed{}),
		events.New("S1", events.TaskStarted{TaskID: "T3", Command: "vite", Generation: 2}),
		events.New("S1", events.TaskDetached{TaskID: "T3", Reason: "the daemon restarted"}),
	)
	name, deps := "Coder 2", []string{"reviewer"}
	app(events.New("D1", events.DaemonStarted{Version: "v1"}),
		events.New("coder", events.AgentPatched{Name: &name, Dependencies: &deps, Budget: &events.AgentBudget{MaxUSD: 1}, Restarted: true}),
		events.New("A1", events.ApprovalRequested{Session: "S1", TurnID: "U1", AgentID: "coder", Server: "gh", Tool: "issues", ToolDisplay: "GitHub issues", ArgumentsPreview: "{}"}),
		events.New("A2", events.ApprovalRequested{AgentID: "coder", Server: "gh", Tool: "pulls"}),
		events.New("A2", events.ApprovalResolved{Decision: events.DecisionAllow, Persist: events.PersistAgentTool}),
		events.New("A3", events.ApprovalRequested{AgentID: "coder", Server: "fs", Tool: "read"}),
		events.New("A3", events.ApprovalResolved{Decision: events.DecisionDeny, Persist: events.PersistAnyAgentServer}),
	)
	folder := "ops/daily"
	graph := events.Automation{ID: "nightly", Name: "Nightly", Enabled: true, Folder: &folder, Trigger: events.Trigger{Kind: events.TriggerManual},
		Nodes: []events.Node{{ID: "gate", Kind: events.NodeInterrupt, Input: "ok?", ResumeStrategy: "replace"}, {ID: "t", Kind: events.NodeTool, ToolID: "lathe__echo", Input: "{}"}},
		Edges: []events.Edge{{From: "gate", To: "t"}}}
	used := usage.Tokens{InputTokens: 3, TokenUsageKnown: true}
	app(events.New(events.AutomationFoldersID, events.AutomationFolderCreated{Path: "ops", Name: "Operations"}),
		events.New("nightly", events.AutomationSaved{Automation: graph}),
		events.New("R1", events.RunStarted{AutomationID: "nightly", Graph: graph, Trigger: events.RunTrigger{Kind: events.TriggerManual}, Input: events.NewText("go"), Inputs: map[string]string{"x": "y"}}),
		events.New("R1", events.NodeStarted{Node: "gate"}),
		events.New("R1", events.NodeWaiting{Node: "gate", Prompt: events.NewText("ok?")}),
		events.New("R1", events.RunWaiting{}),
		events.New("R2", events.RunStarted{AutomationID: "nightly", Graph: graph, Trigger: events.RunTrigger{Kind: events.TriggerSchedule}}),
		events.New("R2", events.NodeFinished{Node: "gate", State: events.StateSucceeded, Output: events.NewText("yes"), Resumed: events.ResumedValue, Usage: &used}),
		events.New("R2", events.RunFinished{State: events.StateSucceeded, Output: events.NewText("yes"), Usage: used}),
	)
	sys, starred := "be brief", true
	app(events.New("F1", events.SharedFileStored{Name: "notes.txt", ContentType: "text/plain", Size: 5, SHA256: "ef", Tags: []string{"a"}, TextExtracted: true}),
		events.New("F2", events.SharedFileStored{Name: "b.bin", ContentType: "application/octet-stream", Size: 2, SHA256: "01"}),
		events.New("C1", events.ChatCreated{AgentID: "coder", Name: "first"}),
		events.New("C1", events.ChatPatched{Starred: &starred, SystemOverride: &events.Override{Value: &sys}, ModelOverride: &events.Override{Value: &model}}),
		events.New("C1", events.ChatFileAttached{FileID: "F1"}),
		events.New("C1", events.ChatFileAttached{FileID: "F2", Pinned: true}),
		events.New("C1", events.ChatTurnStarted{TurnID: "CT1", MessageID: "M1", Content: events.NewText("Hello"), Agent: "coder", Model: model, Files: []string{"F1", "F2"}}),
		events.New("C1", events.ChatToolCalled{TurnID: "CT1", CallID: "c1", Name: "mcp__fs__read", Arguments: events.NewJSON(json.RawMessage(`{}`)), Result: events.NewText("r")}),
		events.New("C1", events.ChatTurnEnded{TurnID: "CT1", Outcome: events.ChatDone, MessageID: "M2", Content: events.NewText("Hi"), Reasoning: events.NewText("hmm"),
			Tokens: usage.Tokens{InputTokens: 3, TokenUsageKnown: true}}),
		events.New("C1", events.ChatTurnStarted{TurnID: "CTR", MessageID: "MR", Content: events.NewText("a secret"), Agent: "coder", Model: model}),
		events.New("C1", events.ChatTurnEnded{TurnID: "CTR", Outcome: events.ChatError, Error: "blocked by hook `guard`: no", Refused: true}),
		events.New("C1", events.ChatTurnStarted{TurnID: "CT2", MessageID: "M3", Content: events.NewText("live"), Agent: "coder", Model: model}),
		events.New("C1", events.ChatToolCalled{TurnID: "CT2", CallID: "c2", Name: "mcp__fs__list", Arguments: events.NewJSON(json.RawMessage(`{"a":1}`)), Result: events.NewText("x"), IsError: true}),
		events.New("C2", events.ChatCreated{AgentID: "coder", Name: "fork", ForkOf: &events.ChatFork{ChatID: "C1", TruncateAt: 1}}),
		events.New("C2", events.ChatMessageAdded{MessageID: "M9", Role: events.RoleAssistant, Content: events.NewText("instead")}),
		events.New("F2", events.SharedFilePatched{Name: &name, Tags: &deps}),
		events.New("C3", events.ChatCreated{AgentID: "coder", Name: "gone"}),
		events.New("C3", events.ChatFileAttached{FileID: "F1"}),
		events.New("C3", events.ChatDeleted{}),
		events.New("F3", events.SharedFileStored{Name: "c", SHA256: "02"}),
		events.New("C2", events.ChatFileAttached{FileID: "F3"}),
		events.New("F3", events.SharedFileDeleted{}),
		events.New("T1", events.A2ATaskReceived{ReceiverID: "helper", AgentID: "coder", ContextID: "ctx", Message: events.NewJSON(json.RawMessage(`{"role":"user"}`)), Text: events.NewText("q")}),
		events.New("T1", events.A2ATaskEnded{State: "completed", Output: events.NewText("a"), Tokens: usage.Tokens{InputTokens: 1, TokenUsageKnown: true}}),
		events.New("T2", events.A2ATaskReceived{ReceiverID: "helper", AgentID: "coder", Text: events.NewText("live")}),
	)
	if err := live.Await(context.Background(), j.Last()); err != nil {
		t.Fatal(err)
	}
	return j, live
}

// A checkpoint restores every read model exactly: what the live feed built
// equals what a restart from the checkpoint holds, field by field, whether
// a Session's parts are still parked (read through a decoded copy, written
// back as they are) or unparked by an event or at once (a live turn).
func TestCheckpointRoundTripsEveryReadModel(t *testing.T) {
	j, live := richHistory(t)
	dir := t.TempDir()
	cp := filepath.Join(dir, "projections.checkpoint")
	if _, err := live.WriteCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	got, n, err := Load(context.Background(), j, cp)
	if err != nil || n != 0 {
		t.Fatalf("load: replayed %d, %v; want the checkpoint alone", n, err)
	}
	if got.SessionModel.sessions["S1"].parked == nil {
		t.Fatalf("S1's parts are not parked after the restart")
	}
	if got.SessionModel.sessions["S3"].parked != nil {
		t.Fatalf("S3's parts are parked though it has a live turn")
	}
	sameReads(t, "restored", live, got)

	// A checkpoint of a store with parked parts writes them back as they are.
	cp2 := filepath.Join(dir, "again.checkpoint")
	if _, err := got.WriteCheckpoint(cp2); err != nil {
		t.Fatal(err)
	}
	again, _, err := Load(context.Background(), j, cp2)
	if err != nil {
		t.Fatal(err)
	}
	sameReads(t, "restored twice", live, again)

	// Unparked, the read models are the live ones, map for map.
	got.sh.mu.Lock()
	for _, ss := range got.SessionModel.sessions {
		if err := got.unpark(ss); err != nil {
			t.Fatal(err)
		}
	}
	got.sh.mu.Unlock()
	records := func(s *Store) (out []Session) { // without the JSON caches
		for _, ss := range s.SessionModel.order {
			out = append(out, ss.record())
		}
		return out
	}
	for name, pair := range map[string][2]any{
		"sessions": {records(live), records(got)}, "tasks": {live.TaskModel.tasks, got.TaskModel.tasks},
		"agents": {live.AgentModel.agents, got.AgentModel.agents}, "approvals": {live.ApprovalModel.approvals, got.ApprovalModel.approvals},
		"permissions": {live.ApprovalModel.permissions, got.ApprovalModel.permissions},
		"owned":       {live.SessionModel.owned, got.SessionModel.owned}, "attachments": {live.AttachmentModel.attachments, got.AttachmentModel.attachments},
		"related": {live.AuditModel.related, got.AuditModel.related}, "automations": {live.AutomationModel.d, got.AutomationModel.d},
		"chats": {live.ChatModel.chats, got.ChatModel.chats}, "files": {live.ChatModel.files, got.ChatModel.files}, "a2a": {live.ChatModel.a2a, got.ChatModel.a2a},
		"ways": {live.WaysModel.sets, got.WaysModel.sets}, "ways by session": {live.WaysModel.bySession, got.WaysModel.bySession},
		"turns": {live.TurnModel.turns, got.TurnModel.turns},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("unparked %s differ:\n got %#v\nwant %#v", name, pair[1], pair[0])
		}
	}
	if !reflect.DeepEqual(live.SessionModel.workspaces, got.SessionModel.workspaces) || !reflect.DeepEqual(live.SessionModel.byPath, got.SessionModel.byPath) ||
		!reflect.DeepEqual(live.SessionModel.members, got.SessionModel.members) {
		t.Errorf("workspaces differ")
	}
	if got.seq != live.seq || got.seqID != live.seqID || got.delivered != live.seq {
		t.Errorf("seq %d/%s delivered %d, want %d/%s", got.seq, got.seqID, got.delivered, live.seq, live.seqID)
	}
	// An event of a parked Session folds onto its unparked parts.
	rec := journal.Record{Envelope: journal.Envelope{Seq: live.seq + 1, ID: "E", Type: "session-task-exited", Aggregate: events.Session,
		AggregateID: "S1", At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, Payload: events.TaskExited{TaskID: "T2", ExitCode: 1}}
	if err := again.Apply([]journal.Record{rec}); err != nil {
		t.Fatal(err)
	}
	if task, _ := again.Task("S1", "T2"); task.Status != TaskExited {
		t.Errorf("after an event of a parked Session: task %+v", task)
	}
	if want, _ := json.Marshal(again.Sessions("")); string(again.SessionsJSON("")) != string(want) || again.SessionList("").Len() != len(want) {
		t.Errorf("the session list after an event of a parked Session:\n got %s\nwant %s", again.SessionsJSON(""), want)
	}
}

func agentOf(s *Store) AgentOverlay {
	o, _ := s.AgentOverlay("coder")
	return o
}

// Content offloaded to the blob store stays a reference through the
// checkpoint codec, and inline JSON keeps nil apart from empty.
func TestCheckpointKeepsContentReferences(t *testing.T) {
	blob := &events.Blob{SHA256: "ab", Size: 1 << 20, Preview: "pre"}
	text := events.Text{Blob: blob}
	in := Turn{TurnID: "U", Input: text, DisplayInput: &text, ContextReferences: []events.JSON{{Blob: blob}, {Inline: json.RawMessage{}}},
		Output: text, Steps: []Step{{Text: text, Reasoning: text, ToolCalls: []events.StepCall{{Arguments: events.JSON{Blob: blob}}}}},
		ToolCalls: []ToolCall{{Arguments: events.JSON{Blob: blob}, Result: text}}, AcceptedAt: time.Unix(5, 6).UTC()}
	var w cpWriter
	w.turn(&in)
	r := cpReader{s: string(w.b)}
	var out Turn
	r.turn(&out)
	if r.err != nil || r.i != len(r.s) || !reflect.DeepEqual(in, out) {
		t.Errorf("turn through the codec:\n got %#v\nwant %#v (%v)", out, in, r.err)
	}
}

// sameReads compares what the read accessors answer.
func sameReads(t *testing.T, what string, want, got *Store) {
	t.Helper()
	for name, pair := range map[string][2]any{
		"sessions": {want.Sessions(""), got.Sessions("")}, "workspaces": {want.Workspaces(), got.Workspaces()},
		"live turns": {want.LiveTurns(), got.LiveTurns()}, "approvals": {want.PendingApprovals(), got.PendingApprovals()},
		"permissions": {want.Permissions(), got.Permissions()}, "agent": {agentOf(want), agentOf(got)},
		"snapshot": {want.Snapshot(), got.Snapshot()}, "recent": {want.Recent(), got.Recent()},
		"search":       {want.SearchTurns("i", "", 10), got.SearchTurns("i", "", 10)},
		"session list": {string(want.SessionsJSON("")), string(got.SessionsJSON(""))},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s: %s differ:\n got %#v\nwant %#v", what, name, pair[1], pair[0])
		}
	}
	for _, id := range []string{"S1", "S2", "S3"} {
		for name, pair := range map[string][2]any{
			"tasks": {want.Tasks(id), got.Tasks(id)}, "attachments": {want.Attachments(id, true), got.Attachments(id, true)},
			"turns": {want.Turns(id), got.Turns(id)},
		} {
			if !reflect.DeepEqual(pair[0], pair[1]) {
				t.Errorf("%s: %s of %s differ:\n got %#v\nwant %#v", what, name, id, pair[1], pair[0])
			}
		}
		w, _ := want.Turn(id, "U1")
		g, _ := got.Turn(id, "U1")
		wk, _ := want.TurnByKey(id, "K1")
		gk, _ := got.TurnByKey(id, "K1")
		wa, _ := want.Attachment(id, "R1")
		ga, _ := got.Attachment(id, "R1")
		if !reflect.DeepEqual(w, g) || !reflect.DeepEqual(wk, gk) || !reflect.DeepEqual(wa, ga) {
			t.Errorf("%s: single reads of %s differ", what, id)
		}
	}
}

// A damaged checkpoint, wherever the damage is, is never applied: the
// store is rebuilt from the journal.
func TestDamagedCheckpointIsRebuilt(t *testing.T) {
	j, live := richHistory(t)
	cp := filepath.Join(t.TempDir(), "projections.checkpoint")
	if _, err := live.WriteCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(cp)
	if err != nil {
		t.Fatal(err)
	}
	want := live.Sessions("")
	for _, damage := range []struct {
		name string
		data []byte
	}{
		{"truncated", good[:len(good)/2]},
		{"empty", nil},
		{"flipped byte", flip(good, len(good)/3)},
		{"flipped byte in the head", flip(good, len(checkpointMagic)+3)},
		{"flipped byte in the last chunk", flip(good, len(good)-9)},
		{"flipped checksum", flip(good, len(good)-1)},
		{"trailing garbage", append(append([]byte(nil), good...), 0)},
	} {
		if err := os.WriteFile(cp, damage.data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, n, err := Load(context.Background(), j, cp)
		if err != nil || n != int(j.Last()) {
			t.Errorf("%s: replayed %d of %d: %v", damage.name, n, j.Last(), err)
			continue
		}
		if !reflect.DeepEqual(got.Sessions(""), want) {
			t.Errorf("%s: sessions differ after the rebuild", damage.name)
		}
	}
}

// flip returns a copy of b with one bit of b[i] flipped.
func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}

// The list of a history that sets every Session field is encoding/json's.
func TestSessionsJSONOfRichHistory(t *testing.T) {
	_, live := richHistory(t)
	for _, ws := range []string{"", "W1"} {
		want, _ := json.Marshal(live.Sessions(ws))
		if got := live.SessionsJSON(ws); string(got) != string(want) {
			t.Errorf("SessionsJSON(%q):\n got %s\nwant %s", ws, got, want)
		}
	}
}

// Sessions span several checkpoint chunks, decoded concurrently.
func TestCheckpointOfManyChunks(t *testing.T) {
	j := journaltest.Open(t)
	live := New()
	j.OnCommit(func(b []journal.Record) {
		if err := live.Apply(b); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	if _, err := j.Append(ctx, []journal.Event{events.New("W1", events.WorkspaceRegistered{Path: "/repo", Name: "repo"})}); err != nil {
		t.Fatal(err)
	}
	const sessions = 2*sessionChunk + 7
	for from := 0; from < sessions; from += 1000 {
		var evs []journal.Event
		for i := from; i < min(from+1000, sessions); i++ {
			evs = append(evs, events.New(fmt.Sprintf("S%06d", i), events.SessionCreated{WorkspaceID: "W1", Name: fmt.Sprint(i), WorkingDir: "/repo",
				Mode: events.Mode{Kind: events.ModeLattice}, Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}}))
		}
		if _, err := j.Append(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	if err := live.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "projections.checkpoint")
	if _, err := live.WriteCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	got, n, err := Load(ctx, j, cp)
	if err != nil || n != 0 {
		t.Fatalf("load: replayed %d, %v; want the checkpoint alone", n, err)
	}
	if w, g := live.Sessions(""), got.Sessions(""); len(g) != sessions || !reflect.DeepEqual(w, g) {
		t.Errorf("%d sessions after the checkpoint, want %d equal to live", len(g), len(w))
	}
	if string(live.SessionsJSON("W1")) != string(got.SessionsJSON("W1")) {
		t.Errorf("the session list differs after the checkpoint")
	}
}
