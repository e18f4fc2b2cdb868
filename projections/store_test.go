package projections_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/journal/journaltest"
	"lathe/projections"
)

// fedStore opens a journal with a store fed by its commit feed.
func fedStore(t testing.TB) (*journal.Journal, *projections.Store) {
	t.Helper()
	j := journaltest.Open(t)
	live := projections.New()
	j.OnCommit(func(b []journal.Record) {
		if err := live.Apply(b); err != nil {
			t.Error(err)
		}
	})
	return j, live
}

// fixture appends a small history through a store fed by the commit feed.
func fixture(t *testing.T, sessions int) (*journal.Journal, *projections.Store) {
	t.Helper()
	j, live := fedStore(t)
	ctx := context.Background()
	mustAppend(t, j, events.New("W1", events.WorkspaceRegistered{Path: "/repo", Name: "repo"}))
	for i := range sessions {
		id := fmt.Sprintf("S%03d", i)
		mustAppend(t, j, events.New(id, events.SessionCreated{WorkspaceID: "W1", Name: id, WorkingDir: "/repo",
			Mode: events.Mode{Kind: events.ModeLattice}, Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}}))
		switch i % 4 {
		case 1:
			mustAppend(t, j, events.New(id, events.SessionRenamed{Name: "renamed " + id}))
		case 2:
			mustAppend(t, j, events.New(id, events.SessionClosed{}))
		case 3:
			mustAppend(t, j, events.New(id, events.SessionDeleted{}))
		}
	}
	if err := live.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	return j, live
}

// reloaded is live's journal j loaded again: replayed from its start
// ("replay") and from a checkpoint of live ("checkpoint").
func reloaded(t *testing.T, j *journal.Journal, live *projections.Store) map[string]*projections.Store {
	t.Helper()
	ctx := context.Background()
	replayed, _, err := projections.Load(ctx, j, "")
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "cp")
	if _, err := live.WriteCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	restored, _, err := projections.Load(ctx, j, cp)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*projections.Store{"replay": replayed, "checkpoint": restored}
}

func mustAppend(t *testing.T, j *journal.Journal, e journal.Event) {
	t.Helper()
	if _, err := j.Append(context.Background(), []journal.Event{e}); err != nil {
		t.Fatal(err)
	}
}

func TestReplayEqualsLiveWithAndWithoutCheckpoint(t *testing.T) {
	j, live := fixture(t, 40)
	ctx := context.Background()
	replayed, n, err := projections.Load(ctx, j, "")
	if err != nil || n != int(j.Last()) {
		t.Fatalf("replay: %d events, %v", n, err)
	}
	assertSameModels(t, live, replayed)

	cp := filepath.Join(t.TempDir(), "cp")
	if _, err := live.WriteCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, j, events.New("S000", events.SessionRenamed{Name: "after checkpoint"}))
	if err := live.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	restored, n, err := projections.Load(ctx, j, cp)
	if err != nil || n != 1 {
		t.Fatalf("load from checkpoint replayed %d events: %v", n, err)
	}
	assertSameModels(t, live, restored)
}

func TestUnusableCheckpointFallsBackToFullReplay(t *testing.T) {
	j, live := fixture(t, 8)
	cp := filepath.Join(t.TempDir(), "cp")
	if err := os.WriteFile(cp, []byte("not a checkpoint"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, n, err := projections.Load(context.Background(), j, cp)
	if err != nil || n != int(j.Last()) {
		t.Fatalf("replayed %d: %v", n, err)
	}
	assertSameModels(t, live, got)
}

func assertSameModels(t *testing.T, want, got *projections.Store) {
	t.Helper()
	if want.Seq() != got.Seq() {
		t.Fatalf("seq %d vs %d", want.Seq(), got.Seq())
	}
	if !reflect.DeepEqual(want.Workspaces(), got.Workspaces()) {
		t.Fatalf("workspaces differ:\n%+v\n%+v", want.Workspaces(), got.Workspaces())
	}
	normal := func(ss []projections.Session) []projections.Session {
		for i := range ss {
			if ss[i].ClosedAt != nil { // compare instants, not monotonic clock readings
				at := ss[i].ClosedAt.UTC()
				ss[i].ClosedAt = &at
			}
		}
		return ss
	}
	if !reflect.DeepEqual(normal(want.Sessions("")), normal(got.Sessions(""))) {
		t.Fatalf("sessions differ:\n%#v\n%#v", want.Sessions(""), got.Sessions(""))
	}
	if !reflect.DeepEqual(want.Recent(), got.Recent()) {
		t.Fatalf("recent logs differ")
	}
}

func TestAwaitHonoursContext(t *testing.T) {
	s := projections.New()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Await(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("await: %v", err)
	}
}

func TestRecentKeepsTheNewestInOrder(t *testing.T) {
	j, live := fixture(t, 200)
	recent := live.Recent()
	if len(recent) != 256 || recent[len(recent)-1].Seq != j.Last() {
		t.Fatalf("recent has %d, last %d (journal %d)", len(recent), recent[len(recent)-1].Seq, j.Last())
	}
	for i := 1; i < len(recent); i++ {
		if recent[i].Seq != recent[i-1].Seq+1 {
			t.Fatalf("recent out of order at %d", i)
		}
	}
}

func TestApplyRejectsContradictions(t *testing.T) {
	s := projections.New()
	err := s.Apply([]journal.Record{{Envelope: journal.Envelope{Seq: 1, Type: "session-renamed", Aggregate: "session", AggregateID: "nope", Data: []byte(`{"name":"x"}`)}}})
	if err == nil {
		t.Fatal("renaming an unknown session applied")
	}
}

// strayEvent is an event type that no read model claims, as a type added
// to journal/events without its claim would be.
type strayEvent struct {
	Note string `json:"note"`
}

func (strayEvent) EventType() string { return "stray-event" }
func (strayEvent) Aggregate() string { return events.Session }

// An event of a type no read model claims folds into nothing and the feed
// goes on: the rest of its batch applies, its change goes out with its
// payload, and Await returns for it. (The type switch before sent it to the
// Session fold, which failed, and the batch's changes never went out.)
func TestUnclaimedEventKeepsTheFeedGoing(t *testing.T) {
	s := projections.New()
	rec := func(seq uint64, id string, p events.Payload) journal.Record {
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return journal.Record{Envelope: journal.Envelope{Seq: seq, ID: fmt.Sprint("E", seq), Type: p.EventType(), Aggregate: p.Aggregate(),
			AggregateID: id, At: time.Unix(int64(seq), 0).UTC(), Data: data}, Payload: p}
	}
	err := s.Apply([]journal.Record{rec(1, "W1", events.WorkspaceRegistered{Path: "/repo", Name: "repo"}),
		rec(2, "S1", events.SessionCreated{WorkspaceID: "W1", Name: "before", WorkingDir: "/repo"})})
	if err != nil {
		t.Fatal(err)
	}
	var changes []projections.Change
	err = s.ApplyChanges([]journal.Record{rec(3, "S1", strayEvent{Note: "x"}), rec(4, "S1", events.SessionRenamed{Name: "after"})},
		func(c []projections.Change) { changes = c })
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if len(changes) != 2 || changes[0].Payload != (strayEvent{Note: "x"}) || changes[1].Payload != (events.SessionRenamed{Name: "after"}) {
		t.Fatalf("changes: %+v", changes)
	}
	if changes[1].Session == nil || changes[1].Session.Name != "after" {
		t.Fatalf("the rename after the stray event: %+v", changes[1].Session)
	}
	if s.Seq() != 4 {
		t.Fatalf("seq %d, want 4", s.Seq())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Await(ctx, 4); err != nil {
		t.Fatalf("await the stray event's batch: %v", err)
	}
}

// A checkpoint taken from one journal is never applied to another, even
// one that has at least as many events.
func TestCheckpointFromAnotherJournalIsIgnored(t *testing.T) {
	_, live := fixture(t, 8)
	cp := filepath.Join(t.TempDir(), "cp")
	if _, err := live.WriteCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	other, _ := fixture(t, 8) // same shape, different event IDs
	got, n, err := projections.Load(context.Background(), other, cp)
	if err != nil || n != int(other.Last()) {
		t.Fatalf("replayed %d of %d: %v", n, other.Last(), err)
	}
	if got.Seq() != other.Last() {
		t.Fatalf("seq %d", got.Seq())
	}
}

// Failure evidence with exit code 0 survives a checkpoint (gob drops a
// pointer to zero unless Evidence encodes itself).
func TestCheckpointKeepsZeroExitCode(t *testing.T) {
	j, live := fixture(t, 1)
	zero := 0
	mustAppend(t, j, events.New("S000", events.EnvironmentFailed{Generation: 1, Evidence: events.Evidence{Error: "setup printed an error", ExitCode: &zero}}))
	if err := live.Await(context.Background(), j.Last()); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "cp")
	if _, err := live.WriteCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	got, n, err := projections.Load(context.Background(), j, cp)
	if err != nil || n != 0 {
		t.Fatalf("load replayed %d: %v", n, err)
	}
	ss, _ := got.Session("S000")
	if ev := ss.Environment.Evidence; ev == nil || ev.ExitCode == nil || *ev.ExitCode != 0 {
		t.Fatalf("evidence after checkpoint: %+v", ev)
	}
}

// TestEnvironmentReasonAndSetupOutput: each preparing bracket names why
// in words, from its owner; the setup output is kept on success and on
// failure, and a new preparation starts without the last one's.
func TestEnvironmentReasonAndSetupOutput(t *testing.T) {
	code := 2
	for _, tc := range []struct {
		name   string
		events []events.Payload
		reason string
		output string
		state  string
	}{
		{name: "prepared after create", events: []events.Payload{
			events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare},
			events.EnvironmentReady{Generation: 1, SetupRan: true, SetupOutput: "installed\n"}, events.EnvironmentSettled{Generation: 1},
		}, reason: projections.ReasonCreated, output: "installed\n", state: events.EnvReady},
		{name: "a failed setup keeps its output", events: []events.Payload{
			events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare},
			events.EnvironmentFailed{Generation: 1, Evidence: events.Evidence{Error: "exit 2", ExitCode: &code, OutputTail: "boom\n"}}, events.EnvironmentSettled{Generation: 1},
		}, reason: projections.ReasonCreated, output: "boom\n", state: events.EnvFailed},
		{name: "plan changed", events: []events.Payload{
			events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare},
			events.EnvironmentReady{Generation: 1, SetupRan: true, SetupOutput: "old\n"}, events.EnvironmentSettled{Generation: 1},
			events.EnvironmentPlanned{Generation: 2, Image: "img"}, events.EnvironmentChanging{Generation: 2, Owner: events.OwnerChange},
			events.EnvironmentReady{Generation: 2}, events.EnvironmentSettled{Generation: 2},
		}, reason: projections.ReasonPlanChanged, output: "", state: events.EnvReady},
		{name: "rebuild requested", events: []events.Payload{
			events.EnvironmentChanging{Generation: 1, Owner: events.OwnerRebuild},
		}, reason: projections.ReasonRebuilt, state: events.EnvPreparing},
		{name: "reopened", events: []events.Payload{
			events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare},
			events.EnvironmentReady{Generation: 1}, events.EnvironmentSettled{Generation: 1},
			events.EnvironmentChanging{Generation: 1, Owner: events.OwnerClose},
			events.EnvironmentStopped{Generation: 1}, events.EnvironmentSettled{Generation: 1}, events.SessionClosed{},
			events.SessionReopened{}, events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare},
			events.EnvironmentReady{Generation: 1}, events.EnvironmentSettled{Generation: 1},
		}, reason: projections.ReasonReopened, state: events.EnvReady},
		{name: "a close keeps the last reason", events: []events.Payload{
			events.EnvironmentChanging{Generation: 1, Owner: events.OwnerReconstruct},
			events.EnvironmentReady{Generation: 1}, events.EnvironmentSettled{Generation: 1},
			events.EnvironmentChanging{Generation: 1, Owner: events.OwnerClose},
		}, reason: projections.ReasonReconstructed, state: events.EnvReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := journaltest.Open(t)
			live := projections.New()
			j.OnCommit(func(b []journal.Record) {
				if err := live.Apply(b); err != nil {
					t.Error(err)
				}
			})
			mustAppend(t, j, events.New("W1", events.WorkspaceRegistered{Path: "/repo", Name: "repo"}))
			mustAppend(t, j, events.New("S1", events.SessionCreated{WorkspaceID: "W1", Name: "s", WorkingDir: "/repo",
				Mode: events.Mode{Kind: events.ModeLattice}, Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}}))
			for _, p := range tc.events {
				mustAppend(t, j, events.New("S1", p))
			}
			if err := live.Await(context.Background(), j.Last()); err != nil {
				t.Fatal(err)
			}
			ss, _ := live.Session("S1")
			if env := ss.Environment; env.Reason != tc.reason || env.SetupOutput != tc.output || env.State != tc.state {
				t.Errorf("reason %q, setup_output %q, state %s; want %q, %q, %s", env.Reason, env.SetupOutput, env.State, tc.reason, tc.output, tc.state)
			}
		})
	}
}

// The Session list's JSON is encoding/json's, all Sessions or one
// Workspace's, live and after a restart from a checkpoint.
func TestSessionsJSONMatchesEncodingJSON(t *testing.T) {
	j, live := fixture(t, 40)
	ctx := context.Background()
	mustAppend(t, j, events.New("W2", events.WorkspaceRegistered{Path: "/other", Name: "other"}))
	mustAppend(t, j, events.New("S100", events.SessionCreated{WorkspaceID: "W2", Name: "<&>", WorkingDir: "/other",
		Mode: events.Mode{Kind: events.ModeLattice}, Environment: events.Environment{State: events.EnvUnprepared, Generation: 1}}))
	mustAppend(t, j, events.New("S001", events.EnvironmentChanging{Generation: 1, Owner: events.OwnerPrepare}))
	mustAppend(t, j, events.New("S001", events.EnvironmentReady{SetupRan: true, SetupOutput: "ok\n"}))
	if err := live.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "checkpoint")
	if _, err := live.WriteCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	restored, _, err := projections.Load(ctx, j, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*projections.Store{live, restored} {
		for _, ws := range []string{"", "W1", "W2", "W9"} {
			want, err := json.Marshal(s.Sessions(ws))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.SessionsJSON(ws); string(got) != string(want) {
				t.Errorf("SessionsJSON(%q):\n got %s\nwant %s", ws, got, want)
			}
			if l := s.SessionList(ws); l.Len() != len(want) {
				t.Errorf("SessionList(%q).Len() = %d, want %d", ws, l.Len(), len(want))
			}
		}
	}
}
