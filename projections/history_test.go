package projections

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/journal/journaltest"
	"lathe/runtime/polltest"
	"lathe/runtime/usage"
)

// The fast path of time travel (the chunked decoding, the images of the
// past) answers exactly what the plain full fold answers. A Session with
// a few thousand mixed events (turns with steps, tool calls and
// approvals, environment changes, renames, tasks, attachments, file and
// Git events, rewinds, Ways sets), with another Session's events in
// between, is read at many seqs: in seq order, where each answer must
// equal a store that applied every journal event up to that seq one by
// one through the general decoder; then in a shuffled order, which starts
// from images taken at other seqs, and again from an empty cache.
func TestSessionAtFastPathEqualsThePlainFold(t *testing.T) {
	j, live := fedInternal(t)
	ctx := context.Background()
	mixedHistory(t, j, 3*pastEvery+400)
	if err := live.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}

	// The seqs to check: around each pastEvery-th event of S1, every 61st
	// seq, and the head.
	var all []journal.Record
	err := j.Scan(ctx, 0, 0, func(_ uint64, raw []byte) error {
		env, err := journal.DecodeEnvelope(raw)
		if err != nil {
			return err
		}
		env.Data = append([]byte(nil), env.Data...)
		p, err := events.Decode(env.Type, env.Data)
		all = append(all, journal.Record{Envelope: env, Payload: p})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	check := map[uint64]bool{all[len(all)-1].Seq: true}
	own := 0
	for i, r := range all {
		if r.AggregateID == "S1" {
			if own++; own%pastEvery <= 2 || own%pastEvery >= pastEvery-2 {
				check[r.Seq] = true
				if i+1 < len(all) {
					check[all[i+1].Seq] = true
				}
			}
		}
		if r.Seq%61 == 0 {
			check[r.Seq] = true
		}
	}

	want := map[uint64][32]byte{}
	ref := New()
	own = 0
	for _, r := range all {
		if err := ref.Apply([]journal.Record{r}); err != nil {
			t.Fatal(err)
		}
		if r.AggregateID == "S1" {
			own++
		}
		if !check[r.Seq] || own == 0 {
			continue
		}
		ss, _ := ref.Session("S1")
		exp := SessionAt{Seq: r.Seq, Events: own, Session: ss, Turns: ref.Turns("S1"), Attachments: ref.Attachments("S1", true), Tasks: ref.Tasks("S1")}
		if a, ok := ref.CurrentAttemptSet("S1"); ok {
			exp.AttemptSet = &a
		}
		got, err := live.SessionAt(ctx, j, "S1", r.Seq)
		if err != nil {
			t.Fatalf("seq %d: %v", r.Seq, err)
		}
		if !reflect.DeepEqual(got, exp) {
			t.Fatalf("seq %d (own event %d): the fast path differs from the plain fold:\n%s", r.Seq, own, firstDiff(t, got, exp))
		}
		want[r.Seq] = digest(t, exp)
	}
	images := live.pasts.sessions["S1"]
	if images == nil || len(images.list) != 3 {
		t.Fatalf("images of S1's past: %+v, want one after each of its %d-th events", images, pastEvery)
	}

	seqs := slices.Collect(func(yield func(uint64) bool) {
		for seq := range want {
			if !yield(seq) {
				return
			}
		}
	})
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 2 {
		if round == 1 {
			live.DropPasts()
		}
		rng.Shuffle(len(seqs), func(a, b int) { seqs[a], seqs[b] = seqs[b], seqs[a] })
		for _, seq := range seqs[:len(seqs)/2] {
			got, err := live.SessionAt(ctx, j, "S1", seq)
			if err != nil {
				t.Fatalf("round %d, seq %d: %v", round, seq, err)
			}
			if digest(t, got) != want[seq] {
				t.Fatalf("round %d, seq %d: the answer differs from the plain fold's", round, seq)
			}
		}
	}
}

// An image that does not match the journal is dropped, never used: one
// folded through another event, and one that did not fold an aggregate
// with events before its seq (an approval the store had not related yet).
func TestSessionAtIgnoresImagesThatDoNotMatch(t *testing.T) {
	j, live := fedInternal(t)
	ctx := context.Background()
	mixedHistory(t, j, pastEvery+300)
	if err := live.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	head := j.Last()
	want, err := live.SessionAt(ctx, j, "S1", head)
	if err != nil {
		t.Fatal(err)
	}
	im, ok := live.pasts.at("S1", head)
	if !ok || im.own != pastEvery {
		t.Fatalf("no image after the %d-th event: %+v", pastEvery, im)
	}
	for name, bad := range map[string]func(*pastImage){
		"another event at its seq": func(im *pastImage) { im.id = "01ANOTHER" },
		"an aggregate it missed": func(im *pastImage) {
			im.aggs = slices.DeleteFunc(slices.Clone(im.aggs), func(a string) bool { return a[0] == 'A' })
		},
	} {
		b := im
		bad(&b)
		live.pasts.drop("S1", im.seq)
		live.pasts.put("S1", b)
		got, err := live.SessionAt(ctx, j, "S1", head)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, answer differs: %v", name, err, !reflect.DeepEqual(got, want))
		}
		if cur, ok := live.pasts.at("S1", head); ok && reflect.DeepEqual(cur.aggs, b.aggs) && cur.id == b.id {
			t.Errorf("%s: the image stayed in the cache", name)
		}
	}
}

// A store that keeps the images of the past takes them as a Session grows,
// before any time travel, and what starts from them answers as a fold
// from the beginning does.
func TestKeepPastsAsASessionGrows(t *testing.T) {
	j, live := fedInternal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live.KeepPasts(ctx, j)
	mixedHistory(t, j, 2*pastEvery+100)
	if err := live.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "the images to be taken", live.PastsIdle, polltest.Within(30*time.Second))
	im, ok := live.pasts.at("S1", j.Last())
	if !ok || im.own != 2*pastEvery {
		t.Fatalf("newest image of S1: %v, after its %d-th event; want the %d-th", ok, im.own, 2*pastEvery)
	}
	warm, err := live.SessionAt(ctx, j, "S1", j.Last())
	if err != nil {
		t.Fatal(err)
	}
	live.DropPasts()
	cold, err := live.SessionAt(ctx, j, "S1", j.Last())
	if err != nil || !reflect.DeepEqual(warm, cold) {
		t.Errorf("from the image and from the beginning differ (%v)", err)
	}

	// After a restart, reading the audit trail takes the images a time
	// travel will want.
	live.DropPasts()
	if _, _, err := live.SessionAudit(ctx, j, "S1", AuditQuery{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "the images to be taken", live.PastsIdle, polltest.Within(30*time.Second))
	if im, ok := live.pasts.at("S1", j.Last()); !ok || im.own != 2*pastEvery {
		t.Errorf("after the audit trail was read: image %v after the %d-th event", ok, im.own)
	}
}

// fedInternal is a journal with a store fed by its commit feed.
func fedInternal(t *testing.T) (*journal.Journal, *Store) {
	t.Helper()
	j := journaltest.Open(t)
	live := New()
	j.OnCommit(func(b []journal.Record) {
		if err := live.Apply(b); err != nil {
			t.Error(err)
		}
	})
	return j, live
}

// mixedHistory appends a Session S1 with at least n events of every kind
// its past folds, with another Session's events (S0) in between.
func mixedHistory(t *testing.T, j *journal.Journal, n int) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var batch []journal.Event
	own := 0
	add := func(id string, p events.Payload) {
		batch = append(batch, events.New(id, p))
		if id == "S1" {
			own++
		}
		if len(batch) >= 64 {
			if _, err := j.Append(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	mode := events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}
	add("W1", events.WorkspaceRegistered{Path: "/repo", Name: "repo"})
	add("S0", events.SessionCreated{WorkspaceID: "W1", Name: "other", WorkingDir: "/repo", Mode: mode,
		Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}})
	add("S1", events.SessionCreated{WorkspaceID: "W1", Name: "mixed", WorkingDir: "/repo", Mode: mode, EnabledSkills: []string{"git"},
		Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}})
	var ended, refs []string
	turns, gen, tasks, approvals, sets := 0, uint64(1), 0, 0, 0
	tokens := func(i int) usage.Tokens {
		return usage.Tokens{InputTokens: 10 + i, OutputTokens: i % 7, ReasoningTokens: i % 3, TokenUsageKnown: i%5 != 0}
	}
	for own < n {
		if rng.IntN(5) == 0 { // the other Session, in between
			add("S0", events.SessionRenamed{Name: fmt.Sprintf("other %d", own)})
		}
		switch k := rng.IntN(20); {
		case k < 9: // a turn
			turns++
			tid := fmt.Sprintf("U%d", turns)
			acc := events.TurnAccepted{TurnID: tid, IdempotencyKey: "K" + tid, AgentID: "coder", Input: events.NewText(fmt.Sprintf("do \"%d\"\n\u00e9", turns)), Source: "ws"}
			if len(refs) > 0 && rng.IntN(3) == 0 {
				acc.ReferenceIDs = []string{refs[rng.IntN(len(refs))]}
			}
			add("S1", acc)
			if acc.ReferenceIDs != nil {
				add("S1", events.AttachmentsConsumed{ReferenceIDs: acc.ReferenceIDs, TurnID: tid})
			}
			add("S1", events.TurnStarted{TurnID: tid, Agent: "coder", Model: "m"})
			steps := 1 + rng.IntN(3)
			for step := 1; step <= steps; step++ {
				out := events.TurnOutput{TurnID: tid, Agent: "coder", Step: step, Text: events.NewText(fmt.Sprintf("step %d of %s", step, tid))}
				if step < steps {
					out.ToolCalls = []events.StepCall{{CallID: fmt.Sprintf("c%d", step), Occurrence: 1, Name: "read", Arguments: events.JSON{Inline: json.RawMessage(`{"path":"a.go"}`)}}}
					out.Reasoning = events.NewText("because")
				}
				add("S1", out)
				cost := 0.01 * float64(step)
				u := events.TurnUsage{TurnID: tid, Agent: "coder", Step: step, Model: "m", Tokens: tokens(step)}
				if step%2 == 1 {
					u.CostUSD = &cost
				}
				add("S1", u)
				if step < steps {
					call := fmt.Sprintf("c%d", step)
					add("S1", events.ToolCallStarted{TurnID: tid, Agent: "coder", CallID: call, Occurrence: 1, Name: "read", Arguments: events.JSON{Inline: json.RawMessage(`{"path":"a.go"}`)}})
					if rng.IntN(4) == 0 {
						approvals++
						aid := fmt.Sprintf("A%d", approvals)
						add(aid, events.ApprovalRequested{Session: "S1", TurnID: tid, AgentID: "coder", Server: "fs", Tool: "read", ArgumentsPreview: "{}"})
						add(aid, events.ApprovalResolved{Decision: events.DecisionAllow, Persist: events.PersistOnce})
					}
					add("S1", events.ToolCallFinished{TurnID: tid, Agent: "coder", CallID: call, Occurrence: 1, Name: "read", Result: events.NewText("package a"), IsError: rng.IntN(5) == 0, DurationMS: int64(step)})
				}
			}
			if rng.IntN(3) == 0 {
				add("S1", events.TurnChanges{TurnID: tid, Before: "t" + tid, After: "u" + tid, Paths: []string{"a.go"}, Ref: "refs/lathe/turns/" + tid})
			}
			switch rng.IntN(6) {
			case 0:
				add("S1", events.TurnCancelled{TurnID: tid, Totals: tokens(turns)})
			case 1:
				add("S1", events.TurnFailed{TurnID: tid, Error: "boom", Interrupted: true, Totals: tokens(turns)})
			default:
				add("S1", events.TurnDone{TurnID: tid, Output: events.NewText("done " + tid), Totals: tokens(turns)})
			}
			ended = append(ended, tid)
		case k == 9:
			add("S1", events.SessionRenamed{Name: fmt.Sprintf("mixed %d", own)})
		case k == 10: // the environment
			gen++
			add("S1", events.EnvironmentPlanned{Generation: gen, Image: "img", SetupCommand: "npm ci", SetupSource: events.SourceUser, SetupApproved: true, SetupReviewed: true})
			add("S1", events.EnvironmentChanging{Generation: gen, Owner: events.OwnerChange})
			if rng.IntN(3) == 0 {
				code := 1
				add("S1", events.EnvironmentFailed{Generation: gen, Evidence: events.Evidence{Error: "no", ExitCode: &code, OutputTail: "tail"}})
			} else {
				add("S1", events.EnvironmentReady{Generation: gen, Sandbox: "sb", SetupRan: true, SetupOutput: "ok"})
			}
			add("S1", events.EnvironmentSettled{Generation: gen})
		case k == 11: // a task
			tasks++
			id := fmt.Sprintf("T%d", tasks)
			add("S1", events.TaskStarted{TaskID: id, Command: "go test", Generation: gen})
			add("S1", events.TaskExited{TaskID: id, ExitCode: rng.IntN(2), OutputTail: "ok", DurationMS: 5})
		case k == 12: // attachments
			ref := fmt.Sprintf("R%d", own)
			add("S1", events.AttachmentAdded{ReferenceID: ref, Scope: events.ScopeSession, Name: ref + ".txt", MediaType: "text/plain", Size: 3, SHA256: "ab"})
			refs = append(refs, ref)
			if rng.IntN(2) == 0 {
				add("S1", events.AttachmentScopeChanged{ReferenceID: ref, Scope: events.ScopeThisTurn})
			}
			if len(refs) > 3 {
				add("S1", events.AttachmentDeleted{ReferenceID: refs[0]})
				refs = refs[1:]
			}
		case k == 13: // files and Git
			check := "make check"
			add("S1", events.FileWritten{Path: "a.go", Size: 9, SHA256: "cd"})
			add("S1", events.GitStaged{Paths: []string{"a.go"}})
			add("S1", events.GitCommitted{Commit: fmt.Sprintf("%040d", own), Branch: "main", Subject: "change", Paths: []string{"a.go"}})
			add("S1", events.CheckSet{CheckCommand: &check})
			add("S1", events.CheckRan{Command: check, ExitCode: 0, OutputTail: "ok", DurationMS: 3})
		case k == 14 && len(ended) > 2: // a rewind
			add("S1", events.SessionRewound{KeepThroughTurnID: ended[len(ended)-3], Hidden: ended[len(ended)-2:]})
		case k == 15:
			add("S1", events.SessionClosed{})
			add("S1", events.SessionReopened{})
		case k == 16: // a Ways set, kept or discarded
			sets++
			set := fmt.Sprintf("AS%04d", sets) // sortable, as the ULIDs of sets are
			specs := []events.AttemptSpec{{Index: 0, Run: "r0", TurnID: set + "L0", Model: "m", Agent: "coder", Copy: "/c0"},
				{Index: 1, Run: "r1", TurnID: set + "L1", Model: "m2", Agent: "coder", Copy: "/c1"}}
			add(set, events.AttemptSetStarted{Session: "S1", Workspace: "W1", Input: events.NewText("try"), Snapshot: "s", Tree: "t", Ref: "refs/x", Attempts: specs})
			for i, spec := range specs {
				lane := events.Lane{Index: i, Run: spec.Run}
				add(set, events.LaneStarted{Lane: lane, TurnStarted: events.TurnStarted{TurnID: spec.TurnID, Agent: "coder", Model: spec.Model}})
				add("S0", events.SessionRenamed{Name: "between lanes"})
				add(set, events.LaneOutput{Lane: lane, TurnOutput: events.TurnOutput{TurnID: spec.TurnID, Agent: "coder", Step: 1, Text: events.NewText("lane")}})
				add(set, events.LaneUsage{Lane: lane, TurnUsage: events.TurnUsage{TurnID: spec.TurnID, Agent: "coder", Step: 1, Model: spec.Model, Tokens: tokens(i)}})
				add(set, events.LaneEnded{Lane: lane, State: events.AttemptSucceeded, Output: events.NewText("ok"), Totals: tokens(i), After: "a", Changed: []string{"a.go"}})
				add(set, events.LaneVerified{Lane: lane, Check: "make check", Passed: i == 0, Changed: []string{"a.go"}})
			}
			if rng.IntN(2) == 0 {
				add(set, events.KeepPhase{Index: 0, Phase: events.KeepApplying})
				add(set, events.KeepPhase{Index: 0, Phase: events.KeepApplied})
			} else {
				add(set, events.AttemptSetDiscarded{})
			}
			add(set, events.AttemptSetSettled{Workspace: "W1"})
		}
	}
	if len(batch) > 0 {
		if _, err := j.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
}

func digest(t *testing.T, at SessionAt) [32]byte {
	t.Helper()
	b, err := json.Marshal(at)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// firstDiff names the first part of two answers that differs.
func firstDiff(t *testing.T, got, want SessionAt) string {
	switch {
	case got.Events != want.Events:
		return fmt.Sprintf("events %d, want %d", got.Events, want.Events)
	case !reflect.DeepEqual(got.Session, want.Session):
		return fmt.Sprintf("session\n got %+v\nwant %+v", got.Session, want.Session)
	case len(got.Turns) != len(want.Turns):
		return fmt.Sprintf("%d turns, want %d", len(got.Turns), len(want.Turns))
	}
	for i := range got.Turns {
		if !reflect.DeepEqual(got.Turns[i], want.Turns[i]) {
			return fmt.Sprintf("turn %d\n got %+v\nwant %+v", i, got.Turns[i], want.Turns[i])
		}
	}
	for i := range got.Attachments {
		if i < len(want.Attachments) && !reflect.DeepEqual(got.Attachments[i], want.Attachments[i]) {
			return fmt.Sprintf("attachment %d\n got %#v\nwant %#v", i, got.Attachments[i], want.Attachments[i])
		}
	}
	for i := range got.Tasks {
		if i < len(want.Tasks) && !reflect.DeepEqual(got.Tasks[i], want.Tasks[i]) {
			return fmt.Sprintf("task %d\n got %#v\nwant %#v", i, got.Tasks[i], want.Tasks[i])
		}
	}
	if got.AttemptSet != nil && want.AttemptSet != nil {
		g, w := *got.AttemptSet, *want.AttemptSet
		for i := range g.Attempts {
			if !reflect.DeepEqual(g.Attempts[i], w.Attempts[i]) {
				return fmt.Sprintf("attempt %d\n got %#v\nwant %#v\n turn got %#v\nwant %#v", i, *g.Attempts[i], *w.Attempts[i], *g.Attempts[i].Turn, *w.Attempts[i].Turn)
			}
		}
		return fmt.Sprintf("attempt set\n got %#v\nwant %#v", g, w)
	}
	return fmt.Sprintf("attempt set\n got %#v\nwant %#v", got.AttemptSet, want.AttemptSet)
}

// PastsIdle reports whether KeepPasts has no image due or being taken (for
// the benchmarks, which wait for the images a daemon keeps).
func (s *Store) PastsIdle() bool {
	s.pasts.mu.Lock()
	defer s.pasts.mu.Unlock()
	return s.pasts.pending == 0
}

// DropPasts empties the cache of images of the past, as a restart does.
func (s *Store) DropPasts() {
	s.pasts.mu.Lock()
	defer s.pasts.mu.Unlock()
	s.pasts.sessions, s.pasts.size = nil, 0
	clear(s.pasts.wanted)
}
