package projections

import (
	"cmp"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/usage"
)

// edgeHistory appends, after richHistory, events that leave every small
// read model (cpSmall) holding edge values: empty slices, maps and
// strings, zero numbers, false flags, pointers to zero values.
func edgeHistory(t *testing.T, j *journal.Journal) {
	t.Helper()
	empty, none, no := "", []string{}, false
	graph := func(id string) events.Automation {
		return events.Automation{ID: id, Name: id, Trigger: events.Trigger{Kind: events.TriggerManual},
			Nodes: []events.Node{{ID: "gate", Kind: events.NodeInterrupt, Branches: []events.Branch{}, Position: &events.Position{}}}, Edges: []events.Edge{}}
	}
	appendAll(t, j,
		events.New("W2", events.WorkspaceRegistered{Path: "/blank"}),
		events.New(events.OutsideSessionID("S1"), events.OutsideSessionOpened{Agent: "claude", ACPSession: "acp-1"}),
		events.New(events.OutsideSessionID("S9"), events.OutsideSessionOpened{}),
		// An overlay that set every field to its zero value, and one that
		// only restarted.
		events.New("blank", events.AgentPatched{Name: &empty, Model: &empty, Prompt: &empty, Dependencies: &none, Budget: &events.AgentBudget{}}),
		events.New("plain", events.AgentRestarted{}),
		events.New("A4", events.ApprovalRequested{AgentID: "coder", Server: "gh", Tool: "t", ArgumentsPreview: "{}"}),
		events.New("A5", events.ApprovalRequested{}),
		events.New("A6", events.ApprovalRequested{AgentID: "blank", Server: "x"}),
		events.New("A6", events.ApprovalResolved{Decision: events.DecisionAllow, Persist: events.PersistAgentServer}),
		// An Automation with no edges (what a save of one node makes), a
		// run waiting on an empty prompt with empty inputs, and a run that
		// ended with nothing and no usage.
		events.New("bare", events.AutomationSaved{Automation: graph("bare")}),
		events.New("bare", events.AutomationTriggerSkipped{Trigger: events.TriggerSchedule}),
		events.New("rooted", events.AutomationSaved{Automation: events.Automation{ID: "rooted", Folder: &empty, Nodes: []events.Node{{ID: "n", Kind: events.NodeTool}}}}),
		events.New("rooted", events.AutomationMoved{Folder: &empty}),
		events.New("R3", events.RunStarted{AutomationID: "bare", Graph: graph("bare"), Trigger: events.RunTrigger{Kind: events.TriggerManual}, Inputs: map[string]string{}}),
		events.New("R3", events.NodeWaiting{Node: "gate"}),
		events.New("R3", events.RunWaiting{}),
		events.New("R4", events.RunStarted{AutomationID: "bare", Graph: graph("bare"), Trigger: events.RunTrigger{Kind: events.TriggerSchedule}}),
		events.New("R4", events.NodeStarted{AutomationID: "bare", Node: "gate"}),
		events.New("R4", events.NodeFinished{AutomationID: "bare", Node: "gate", State: events.StateSucceeded, Usage: &usage.Tokens{}}),
		events.New("R4", events.RunFinished{AutomationID: "bare", State: events.StateSucceeded}),
		// Chats with no messages, with overrides set to empty and a star
		// taken off, and a turn whose tool call (arguments {}) is still
		// its own when the checkpoint is written.
		events.New("C4", events.ChatCreated{AgentID: "coder"}),
		events.New("C5", events.ChatCreated{AgentID: "coder", Name: "blank"}),
		events.New("C5", events.ChatPatched{Starred: &no, SystemOverride: &events.Override{Value: &empty}}),
		events.New("C5", events.ChatTurnStarted{TurnID: "CT5", MessageID: "M50", Files: []string{}}),
		events.New("C5", events.ChatToolCalled{TurnID: "CT5", CallID: "c5", Arguments: events.NewJSON(json.RawMessage(`{}`))}),
		events.New("C6", events.ChatCreated{AgentID: "coder", ForkOf: &events.ChatFork{ChatID: "C4"}}),
		events.New("C6", events.ChatTurnStarted{TurnID: "CT6", MessageID: "M60"}),
		events.New("C6", events.ChatTurnEnded{TurnID: "CT6", Outcome: events.ChatError, MessageID: "M61", Error: "x"}),
		// Shared files with no tags, one stored so and one patched so.
		events.New("F4", events.SharedFileStored{Name: "empty", Tags: []string{}}),
		events.New("F5", events.SharedFileStored{Name: "tagged", SHA256: "05", Tags: []string{"t"}}),
		events.New("F5", events.SharedFilePatched{Tags: &none}),
		// A2A tasks with empty parts: one ended with nothing, one working.
		events.New("T3", events.A2ATaskReceived{ReceiverID: "helper", AgentID: "coder", Message: events.NewJSON(json.RawMessage(`{"role":"user","parts":[]}`))}),
		events.New("T3", events.A2ATaskEnded{State: "completed"}),
		events.New("T4", events.A2ATaskReceived{ReceiverID: "helper", AgentID: "coder", Message: events.NewJSON(json.RawMessage(`{"parts":[]}`))}),
	)
}

// edgeTail appends the events a restart replays after the checkpoint: each
// folds onto a restored edge value.
func edgeTail(t *testing.T, j *journal.Journal) {
	t.Helper()
	appendAll(t, j,
		events.New("blank", events.AgentPatched{Restarted: true}),
		events.New("R3", events.NodeFinished{AutomationID: "bare", Node: "gate", State: events.StateSucceeded, Resumed: events.ResumedValue}),
		events.New("R3", events.RunFinished{AutomationID: "bare", State: events.StateSucceeded}),
		events.New("bare", events.AutomationMoved{}),
		events.New("C5", events.ChatTurnEnded{TurnID: "CT5", Outcome: events.ChatDone, MessageID: "M51"}),
		events.New("C4", events.ChatFileAttached{FileID: "F4"}),
		events.New("F4", events.SharedFilePatched{Name: &[]string{"renamed"}[0]}),
		events.New("T4", events.A2ATaskEnded{State: "failed"}),
		events.New("A5", events.ApprovalResolved{Decision: events.DecisionDeny, Persist: events.PersistAnyAgentServer}),
	)
}

func appendAll(t *testing.T, j *journal.Journal, evs ...journal.Event) {
	t.Helper()
	for _, e := range evs {
		if _, err := j.Append(context.Background(), []journal.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
}

// smallReads is what the routes and frames serve of the small read models,
// by name, and what later folds and commands read of them though no JSON
// shows it (versions, a run's graph, a Chat turn's calls so far).
func smallReads(s *Store) map[string]any {
	byID := func(out []string) []string { slices.Sort(out); return out }
	reads := map[string]any{
		"workspaces": s.Workspaces(), "approvals": s.PendingApprovals(), "permissions": s.Permissions(),
		"recent": s.Recent(), "snapshot": s.Snapshot(), "automations": s.Automations(), "folders": s.AutomationFolders(),
		"active runs": s.ActiveAutomationRuns(""), "interrupts": s.Interrupts(), "chats": s.Chats(""), "files": s.SharedFiles("", ""),
		"related": s.AuditAggregates("S1"), "agent patched": s.AgentPatched(),
	}
	for _, id := range []string{"S1", "S9"} {
		o, ok := s.OutsideSession(id)
		reads["outside "+id] = []any{o, ok}
	}
	live := s.LiveChatTurns()
	slices.SortFunc(live, func(a, b ChatInfo) int { return cmp.Compare(a.ID, b.ID) })
	tasks := s.LiveA2ATasks()
	slices.SortFunc(tasks, func(a, b A2ATask) int { return cmp.Compare(a.ID, b.ID) })
	reads["live chat turns"], reads["live a2a tasks"] = live, tasks
	s.sh.mu.RLock()
	agents, approvals := byID(slicesKeys(s.AgentModel.agents)), byID(slicesKeys(s.ApprovalModel.approvals))
	autos := byID(slicesKeys(s.AutomationModel.d.Records))
	runs := byID(append(slicesKeys(s.AutomationModel.d.Runs), slicesKeys(s.AutomationModel.d.Ended)...)) // whole or evicted
	chats, files, a2a := byID(slicesKeys(s.ChatModel.chats)), byID(slicesKeys(s.ChatModel.files)), byID(slicesKeys(s.ChatModel.a2a))
	s.sh.mu.RUnlock()
	for _, id := range agents {
		reads["agent "+id], _ = s.AgentOverlay(id)
	}
	for _, id := range approvals {
		a, _ := s.PendingApproval(id)
		reads["approval "+id] = []any{a, a.Version}
	}
	for _, id := range autos {
		a, _ := s.Automation(id)
		reads["automation "+id] = []any{a, a.HandledSeq(), a.Version}
		reads["runs of "+id] = s.AutomationRuns(id)
	}
	for _, id := range runs {
		r, _ := s.AutomationRun(id)
		reads["run "+id] = []any{s.ResolveRun(r), r.Graph, r.Version}
	}
	for _, id := range chats {
		c, _ := s.Chat(id)
		info, _ := s.ChatInfo(id)
		s.sh.mu.RLock()
		calls := s.ChatModel.chats[id].Calls
		s.sh.mu.RUnlock()
		reads["chat "+id] = []any{c, info, info.Version, calls}
	}
	for _, id := range files {
		f, _ := s.SharedFile(id)
		reads["file "+id] = []any{f, f.Version}
	}
	for _, id := range a2a {
		a, _ := s.A2ATask(id)
		reads["a2a "+id] = []any{a, a.Version}
	}
	return reads
}

// around is a's text around its first difference from b.
func around(a, b []byte) []byte {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return a[max(0, i-160):min(len(a), i+80)]
}

func slicesKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// sameJSON compares the JSON of every read of want and got.
func sameJSON(t *testing.T, what string, want, got map[string]any) {
	t.Helper()
	for name, w := range want {
		wj, err := json.Marshal(w)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		gj, _ := json.Marshal(got[name])
		if string(wj) != string(gj) {
			t.Errorf("%s: %s differs from the full replay:\n got …%s…\nwant …%s…", what, name, around(gj, wj), around(wj, gj))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %s is there only after the restart", what, name)
		}
	}
}

// A restart serves exactly what a full replay serves of every small read
// model (cpSmall), edge values included: the JSON the routes answer is the
// same bytes, straight from the checkpoint and after the journal's tail
// folds onto what it restored.
func TestCheckpointServesEverySmallReadModelAsReplayed(t *testing.T) {
	j, live := richHistory(t)
	edgeHistory(t, j)
	ctx := context.Background()
	if err := live.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "projections.checkpoint")
	if _, err := live.WriteCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	replayed, _, err := Load(ctx, j, "")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "live against replay", smallReads(replayed), smallReads(live))
	got, n, err := Load(ctx, j, cp)
	if err != nil || n != 0 {
		t.Fatalf("load: replayed %d, %v; want the checkpoint alone", n, err)
	}
	sameJSON(t, "restored", smallReads(replayed), smallReads(got))

	// Twice through the checkpoint changes nothing either.
	cp2 := filepath.Join(t.TempDir(), "again.checkpoint")
	if _, err := got.WriteCheckpoint(cp2); err != nil {
		t.Fatal(err)
	}
	again, _, err := Load(ctx, j, cp2)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "restored twice", smallReads(replayed), smallReads(again))

	// The tail folds onto the restored values as onto the replayed ones.
	edgeTail(t, j)
	replayed, _, err = Load(ctx, j, "")
	if err != nil {
		t.Fatal(err)
	}
	got, n, err = Load(ctx, j, cp)
	if err != nil || n == 0 {
		t.Fatalf("load with a tail: replayed %d, %v", n, err)
	}
	sameJSON(t, "restored with a tail", smallReads(replayed), smallReads(got))
}
