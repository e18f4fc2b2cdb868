package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/journal/journaltest"
	"lathe/runtime/usage"
)

// evictionHistory appends ended runs (one with an event after its end, one
// of an Automation deleted later), a run still going, and Chats past
// chatResident messages with tool calls and reasoning, with forks inside
// and past the evicted messages.
func evictionHistory(t *testing.T, j *journal.Journal) {
	t.Helper()
	graph := events.Automation{ID: "fan", Name: "Fan", Trigger: events.Trigger{Kind: events.TriggerManual},
		Nodes: []events.Node{{ID: "a", Kind: events.NodeTool}, {ID: "b", Kind: events.NodeAgent}}, Edges: []events.Edge{{From: "a", To: "b"}}}
	gone := graph
	gone.ID = "gone"
	evs := []journal.Event{
		events.New("fan", events.AutomationSaved{Automation: graph}),
		events.New("gone", events.AutomationSaved{Automation: gone}),
	}
	run := func(id, automation, state string) {
		evs = append(evs,
			events.New(id, events.RunStarted{AutomationID: automation, Graph: graph, Trigger: events.RunTrigger{Kind: events.TriggerManual}, Input: events.NewText("in " + id)}),
			events.New(id, events.NodeStarted{AutomationID: automation, Node: "a"}),
			events.New(id, events.NodeFinished{AutomationID: automation, Node: "a", State: events.StateSucceeded, Output: events.NewText("out a " + id), Usage: &usage.Tokens{InputTokens: 3, TokenUsageKnown: true}}))
		if state != "" {
			evs = append(evs, events.New(id, events.RunFinished{AutomationID: automation, State: state, Output: events.NewText("done " + id), Error: "e " + id,
				Usage: usage.Tokens{InputTokens: 3, TokenUsageKnown: true}}))
		}
	}
	run("R1", "fan", events.StateSucceeded)
	run("R2", "fan", events.StateFailed)
	evs = append(evs, events.New("R2", events.NodeFinished{AutomationID: "fan", Node: "b", State: events.StateCancelled})) // after its end
	run("R3", "gone", events.StateSucceeded)
	run("R4", "fan", "") // still running
	evs = append(evs, events.New("gone", events.AutomationDeleted{}))

	// A one-turn attachment its second turn consumes: a fork that keeps
	// that turn's (evicted) message keeps it consumed, an earlier fork
	// offers it again.
	evs = append(evs, events.New("C1", events.ChatCreated{AgentID: "coder", Name: "long"}),
		events.New("C1", events.ChatFileAttached{FileID: "F1"}))
	for i := range chatResident + 7 {
		turn := fmt.Sprintf("T%d", i)
		var files []string
		if i == 1 {
			files = []string{"F1"}
		}
		evs = append(evs, events.New("C1", events.ChatTurnStarted{TurnID: turn, MessageID: "Q" + turn, Content: events.NewText(fmt.Sprintf("Question %d", i)), Files: files}))
		if i%5 == 0 {
			evs = append(evs, events.New("C1", events.ChatToolCalled{TurnID: turn, CallID: "c" + turn, Name: "echo",
				Arguments: events.NewJSON(json.RawMessage(`{"n":1}`)), Result: events.NewText("echoed")}))
		}
		evs = append(evs, events.New("C1", events.ChatTurnEnded{TurnID: turn, Outcome: events.ChatDone, MessageID: "A" + turn,
			Content: events.NewText(fmt.Sprintf("Answer %d", i)), Reasoning: events.NewText("why"), Tokens: usage.Tokens{OutputTokens: 2, TokenUsageKnown: true}}))
	}
	evs = append(evs,
		events.New("C1", events.ChatMessageAdded{MessageID: "N1", Role: events.RoleUser, Content: events.NewText("a NUL \x00 inside")}),
		events.New("C2", events.ChatCreated{AgentID: "coder", Name: "early fork", ForkOf: &events.ChatFork{ChatID: "C1", TruncateAt: 5}}),
		events.New("C3", events.ChatCreated{AgentID: "coder", Name: "late fork", ForkOf: &events.ChatFork{ChatID: "C1", TruncateAt: 2*chatResident + 3}}),
		events.New("C3", events.ChatMessageAdded{MessageID: "N3", Role: events.RoleUser, Content: events.NewText("after the fork")}),
	)
	for _, e := range evs {
		if _, err := j.Append(context.Background(), []journal.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
}

// evictionReads are the reads of runs and Chats that evicted records
// answer.
func evictionReads(s *Store) map[string]any {
	reads := map[string]any{"chats": s.Chats(""), "search evicted": s.Chats("question 3"), "search nul": s.Chats("nul   inside"),
		"summaries": s.AutomationRunSummaries("fan"), "gone summaries": s.AutomationRunSummaries("gone")}
	runs := s.AutomationRuns("fan")
	for i := range runs {
		runs[i] = s.ResolveRun(runs[i])
	}
	reads["runs"] = runs
	for _, id := range []string{"R1", "R2", "R3", "R4"} {
		r, ok := s.AutomationRun(id)
		reads["run "+id] = []any{s.ResolveRun(r), ok, r.Graph, r.Version}
	}
	for _, id := range []string{"C1", "C2", "C3"} {
		c, ok := s.Chat(id)
		reads["chat "+id] = []any{c, ok, c.Version}
	}
	return reads
}

// A store that evicts ended runs and old Chat messages answers every read
// exactly as one that holds them, through a checkpoint and after a tail
// folds onto it, while it holds only their summaries.
func TestEvictedRecordsReadAsWhole(t *testing.T) {
	j, whole := fedInternal(t) // holds everything: no journal to fold again from
	evictionHistory(t, j)
	ctx := context.Background()
	if err := whole.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	evicting, _, err := Load(ctx, j, "")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "evicting", evictionReads(whole), evictionReads(evicting)) // the cache as the fold left it
	dropCaches(evicting)
	sameJSON(t, "evicting, folded again", evictionReads(whole), evictionReads(evicting))
	sameJSON(t, "evicting, read again", evictionReads(whole), evictionReads(evicting)) // from the cache

	evicting.sh.mu.RLock()
	d, c1 := evicting.AutomationModel.d, evicting.ChatModel.chats["C1"]
	if len(d.Runs) != 1 || d.Runs["R4"] == nil || len(d.Ended) != 2 || d.Ended["R2"] == nil || d.Ended["R3"] != nil {
		t.Errorf("runs held %v, ended %v; want R4 held, R1 and R2 ended", slicesKeys(d.Runs), slicesKeys(d.Ended))
	}
	if c1.Evicted != 2*chatResident || len(c1.Messages) != 2*(chatResident+7)+1-c1.Evicted {
		t.Errorf("chat holds %d messages, %d evicted", len(c1.Messages), c1.Evicted)
	}
	evicting.sh.mu.RUnlock()

	cp := filepath.Join(t.TempDir(), "projections.checkpoint")
	if _, err := evicting.WriteCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	restored, n, err := Load(ctx, j, cp)
	if err != nil || n != 0 {
		t.Fatalf("load: replayed %d, %v; want the checkpoint alone", n, err)
	}
	sameJSON(t, "restored", evictionReads(whole), evictionReads(restored))

	// The tail: more messages on the evicted Chat, its fork, a late event
	// of an ended run, the running one's end.
	appendAll(t, j,
		events.New("C1", events.ChatMessageAdded{MessageID: "N2", Role: events.RoleUser, Content: events.NewText("more")}),
		events.New("C4", events.ChatCreated{AgentID: "coder", ForkOf: &events.ChatFork{ChatID: "C1", TruncateAt: 9}}),
		events.New("R1", events.NodeFinished{AutomationID: "fan", Node: "b", State: events.StateCancelled}),
		events.New("R4", events.RunFinished{AutomationID: "fan", State: events.StateCancelled}),
	)
	if err := whole.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	tailed, n, err := Load(ctx, j, cp)
	if err != nil || n != 4 {
		t.Fatalf("load with a tail: replayed %d, %v", n, err)
	}
	want := evictionReads(whole)
	c4, _ := whole.Chat("C4")
	want["chat C4"] = c4
	got := evictionReads(tailed)
	got["chat C4"], _ = tailed.Chat("C4")
	sameJSON(t, "restored with a tail", want, got)
}

// dropCaches empties the caches of records folded again.
func dropCaches(s *Store) {
	s.AutomationModel.refolded = &refoldCache[*AutomationRun]{max: refoldRuns}
	s.ChatModel.refolded = &refoldCache[[]ChatMessage]{max: refoldChats}
}

// A store without a journal evicts nothing: a time travel's fresh store
// and the tests' stores hold every record.
func TestNoJournalEvictsNothing(t *testing.T) {
	j, whole := fedInternal(t)
	evictionHistory(t, j)
	if err := whole.Await(context.Background(), j.Last()); err != nil {
		t.Fatal(err)
	}
	whole.sh.mu.RLock()
	defer whole.sh.mu.RUnlock()
	if len(whole.AutomationModel.d.Ended) != 0 || whole.ChatModel.chats["C1"].Evicted != 0 {
		t.Errorf("evicted without a journal: %v, %d", slicesKeys(whole.AutomationModel.d.Ended), whole.ChatModel.chats["C1"].Evicted)
	}
}

// BenchmarkAutomationRunsEvicted1000 lists an Automation's 1,000 ended
// runs, each folded again from its five events (the cache holds 256).
func BenchmarkAutomationRunsEvicted1000(b *testing.B) {
	j := journaltest.Open(b)
	graph := events.Automation{ID: "fan", Name: "Fan", Trigger: events.Trigger{Kind: events.TriggerManual}, Nodes: []events.Node{{ID: "a", Kind: events.NodeTool}}}
	evs := []journal.Event{events.New("fan", events.AutomationSaved{Automation: graph})}
	for i := range 1000 {
		id := fmt.Sprintf("R%04d", i)
		evs = append(evs,
			events.New(id, events.RunStarted{AutomationID: "fan", Graph: graph, Trigger: events.RunTrigger{Kind: events.TriggerManual}, Input: events.NewText("in")}),
			events.New(id, events.NodeStarted{AutomationID: "fan", Node: "a"}),
			events.New(id, events.NodeFinished{AutomationID: "fan", Node: "a", State: events.StateSucceeded, Output: events.NewText("out")}),
			events.New(id, events.NodeToolCall{AutomationID: "fan", Node: "a", CallID: "c", Name: "echo"}),
			events.New(id, events.RunFinished{AutomationID: "fan", State: events.StateSucceeded, Output: events.NewText("done")}))
	}
	for len(evs) > 0 {
		n := min(len(evs), 4000)
		if _, err := j.Append(context.Background(), evs[:n]); err != nil {
			b.Fatal(err)
		}
		evs = evs[n:]
	}
	s, _, err := Load(context.Background(), j, "")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if runs := s.AutomationRuns("fan"); len(runs) != 1000 || len(runs[999].Nodes) != 1 {
			b.Fatalf("%d runs", len(runs))
		}
	}
}

// A fork's index is its source's cut after n messages; a NUL in a
// message's text does not end it.
func TestIndexPrefix(t *testing.T) {
	index := appendLower(appendLower(appendLower(nil, "One"), "t\x00wo"), "Three")
	for _, tc := range []struct {
		index []byte
		n     int
		want  string
	}{
		{index, 0, ""},
		{index, 1, "\x00one"},
		{index, 2, "\x00one\x00t wo"},
		{index, 3, "\x00one\x00t wo\x00three"},
		{index, 4, "\x00one\x00t wo\x00three"},
		{nil, 2, ""},
	} {
		if got := string(indexPrefix(tc.index, tc.n)); got != tc.want {
			t.Errorf("indexPrefix(%q, %d) = %q, want %q", tc.index, tc.n, got, tc.want)
		}
	}
}
