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
	evicting := caughtUp(t, j, whole)
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

	cp, restored := checkpointed(t, j, evicting)
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

// caughtUp waits until whole applied the journal, and loads an evicting
// store from it.
func caughtUp(t *testing.T, j *journal.Journal, whole *Store) *Store {
	t.Helper()
	if err := whole.Await(context.Background(), j.Last()); err != nil {
		t.Fatal(err)
	}
	evicting, _, err := Load(context.Background(), j, "")
	if err != nil {
		t.Fatal(err)
	}
	return evicting
}

// checkpointed writes s's checkpoint and loads it again (with no tail).
func checkpointed(t *testing.T, j *journal.Journal, s *Store) (string, *Store) {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "projections.checkpoint")
	if _, err := s.WriteCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	restored, n, err := Load(context.Background(), j, cp)
	if err != nil || n != 0 {
		t.Fatalf("load: replayed %d, %v; want the checkpoint alone", n, err)
	}
	return cp, restored
}

// dropCaches empties the caches of records folded again.
func dropCaches(s *Store) {
	s.AutomationModel.refolded = &refoldCache[*AutomationRun]{max: refoldRuns}
	s.ChatModel.refolded = &refoldCache[[]ChatMessage]{max: refoldChats}
	s.WaysModel.refolded = &refoldCache[*AttemptSet]{max: refoldSets}
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

// waysHistory appends three Attempt sets of Session S: W1 discarded and
// settled, W2 kept and settled (it evicts W1 when it starts), W3 still
// running (it evicts W2); then a late event of the evicted W1.
func waysHistory(t *testing.T, j *journal.Journal) {
	t.Helper()
	set := func(id string, keep bool) []journal.Event {
		specs := []events.AttemptSpec{{Index: 0, Run: "run0", TurnID: id + "-t0", Agent: "coder", Model: "m"},
			{Index: 1, Run: "run1", TurnID: id + "-t1", Agent: "coder", Model: "m"}}
		evs := []journal.Event{events.New(id, events.AttemptSetStarted{Session: "S", Workspace: "WS", Input: events.NewText("try " + id),
			Snapshot: "snap", Tree: "tree", Ref: "ref", Attempts: specs})}
		for _, sp := range specs {
			l := events.Lane{Index: sp.Index, Run: sp.Run}
			evs = append(evs,
				events.New(id, events.LaneStarted{Lane: l, TurnStarted: events.TurnStarted{TurnID: sp.TurnID, Agent: "coder", Model: "m"}}),
				events.New(id, events.LaneOutput{Lane: l, TurnOutput: events.TurnOutput{TurnID: sp.TurnID, Agent: "coder", Step: 1, Text: events.NewText("lane " + sp.TurnID)}}))
			if id != "W3" {
				evs = append(evs, events.New(id, events.LaneEnded{Lane: l, State: events.AttemptSucceeded, Output: events.NewText("done " + sp.TurnID),
					Totals: usage.Tokens{OutputTokens: 4, TokenUsageKnown: true}, After: "after", Changed: []string{"f.txt"}, Patch: events.NewText("+x")}))
			}
		}
		if id == "W3" {
			return evs
		}
		if keep {
			evs = append(evs, events.New(id, events.KeepPhase{Index: 1, Phase: events.KeepTranscriptRecorded}))
		} else {
			evs = append(evs, events.New(id, events.AttemptSetDiscarded{}))
		}
		return append(evs, events.New(id, events.AttemptSetSettled{Workspace: "WS"}))
	}
	var evs []journal.Event
	evs = append(evs, set("W1", false)...)
	evs = append(evs, set("W2", true)...)
	evs = append(evs, set("W3", false)...)
	evs = append(evs, events.New("W1", events.LaneVerified{Lane: events.Lane{Index: 0, Run: "run0"}, Check: "late", Passed: true}))
	appendAll(t, j, evs...)
}

func waysReads(s *Store) map[string]any {
	reads := map[string]any{}
	for _, id := range []string{"W1", "W2", "W3", "W4"} {
		a, ok := s.AttemptSet(id)
		known, current := s.AttemptSetOf("S", id)
		reads["set "+id] = []any{a, ok, a.Version, a.Seq, a.Settled, a.Discarded, known, current}
	}
	cur, ok := s.CurrentAttemptSet("S")
	reads["current"] = []any{cur, ok}
	reads["unsettled"] = s.UnsettledAttemptSets()
	return reads
}

// A store that evicts settled Attempt sets behind the current one answers
// every read of them exactly as one that holds them, folded again, from
// the cache, through a checkpoint and with a tail, while it holds only
// their stubs.
func TestEvictedAttemptSetsReadAsWhole(t *testing.T) {
	j, whole := fedInternal(t)
	waysHistory(t, j)
	ctx := context.Background()
	evicting := caughtUp(t, j, whole)
	sameJSON(t, "evicting", waysReads(whole), waysReads(evicting))
	sameJSON(t, "evicting, from the cache", waysReads(whole), waysReads(evicting))
	dropCaches(evicting)
	sameJSON(t, "evicting, folded again", waysReads(whole), waysReads(evicting))

	evicting.sh.mu.RLock()
	for id, want := range map[string]bool{"W1": true, "W2": true, "W3": false} {
		a := evicting.WaysModel.sets[id]
		if a.Evicted != want || (want && (a.Attempts != nil || a.Input.String() != "")) {
			t.Errorf("set %s: evicted %v, %d lanes held, want evicted %v", id, a.Evicted, len(a.Attempts), want)
		}
	}
	if whole.WaysModel.sets["W1"].Evicted {
		t.Error("a store without a journal evicted W1")
	}
	evicting.sh.mu.RUnlock()

	cp, restored := checkpointed(t, j, evicting)
	sameJSON(t, "restored", waysReads(whole), waysReads(restored))

	// The tail: W3 ends and settles, W4 starts (evicting W3), and a late
	// event of the evicted W2.
	l := events.Lane{Index: 0, Run: "run0"}
	appendAll(t, j,
		events.New("W3", events.LaneEnded{Lane: l, State: events.AttemptFailed, Error: "boom"}),
		events.New("W3", events.LaneEnded{Lane: events.Lane{Index: 1, Run: "run1"}, State: events.AttemptCancelled}),
		events.New("W3", events.AttemptSetDiscarded{}),
		events.New("W3", events.AttemptSetSettled{Workspace: "WS"}),
		events.New("W4", events.AttemptSetStarted{Session: "S", Workspace: "WS", Input: events.NewText("again"),
			Attempts: []events.AttemptSpec{{Index: 0, Run: "run0", TurnID: "W4-t0", Agent: "coder"}}}),
		events.New("W2", events.LaneVerified{Lane: l, Check: "later", Passed: false}),
	)
	if err := whole.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	tailed, n, err := Load(ctx, j, cp)
	if err != nil || n != 6 {
		t.Fatalf("load with a tail: replayed %d, %v", n, err)
	}
	sameJSON(t, "restored with a tail", waysReads(whole), waysReads(tailed))
	tailed.sh.mu.RLock()
	defer tailed.sh.mu.RUnlock()
	if a := tailed.WaysModel.sets["W3"]; !a.Evicted {
		t.Error("W3 not evicted after W4 started")
	}
}
