package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/commands/core"
	"lathe/commands/sessions"
	"lathe/commands/ways"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/polltest"
)

func TestWaysRequestValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		req  ways.WaysRequest
		n    int
		err  string
	}{
		{"defaults", ways.WaysRequest{Input: "do it"}, ways.DefaultLanes, ""},
		{"n", ways.WaysRequest{Input: "do it", N: new(2)}, 2, ""},
		{"lanes give n", ways.WaysRequest{Input: "do it", Lanes: []ways.LaneRequest{{}, {Model: new("m2")}}}, 2, ""},
		{"empty input", ways.WaysRequest{Input: "  "}, 0, "input must not be empty"},
		{"n zero", ways.WaysRequest{Input: "x", N: new(0)}, 0, "n must be an integer"},
		{"n too large", ways.WaysRequest{Input: "x", N: new(ways.MaxLanes + 1)}, 0, "n must be an integer"},
		{"lanes disagree with n", ways.WaysRequest{Input: "x", N: new(3), Lanes: []ways.LaneRequest{{}}}, 0, "give one per Attempt"},
		{"blank model", ways.WaysRequest{Input: "x", Lanes: []ways.LaneRequest{{Model: new(" ")}}}, 0, "lanes[0].model"},
		{"blank agent", ways.WaysRequest{Input: "x", Lanes: []ways.LaneRequest{{AgentID: new("")}}}, 0, "lanes[0].agent_id"},
		{"bad task", ways.WaysRequest{Input: "x", Task: new("\xff")}, 0, "task must be valid UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := c.req.Validate()
			if c.err == "" {
				if err != nil || n != c.n {
					t.Fatalf("= %d, %v; want %d", n, err, c.n)
				}
				return
			}
			if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("= %v, want ErrInvalid naming %q", err, c.err)
			}
		})
	}
}

// Start refuses, before anything is journaled, what cannot run Ways.
func TestWaysStartRefusals(t *testing.T) {
	s, store, ss := readySession(t)
	ctx := context.Background()
	other, err := s.Sessions.CreateSession(ctx, ss.WorkspaceID, sessions.SessionSpec{Name: "lattice", Mode: &events.Mode{Kind: events.ModeLattice}})
	if err != nil && !errors.Is(err, core.ErrInvalid) {
		t.Fatal(err)
	}
	before := s.Ways.Journal.Last()
	cases := []struct {
		name    string
		session string
		want    error
	}{
		{"missing session", "01ARZ3NDEKTSV4RRFFQ69G5FAV", core.ErrNotFound},
		// This Service has no Agent runtime and no Ways directory.
		{"no runtime", ss.ID, core.ErrUnavailable},
	}
	if err == nil {
		cases = append(cases, struct {
			name    string
			session string
			want    error
		}{"a lattice Session", other.ID, core.ErrConflict})
	}
	for _, c := range cases {
		if _, err := s.Ways.Start(ctx, ways.WaysRequest{SessionID: c.session, Input: "go"}); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := s.Ways.Results(ss.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Results without a set: %v", err)
	}
	if got := s.Ways.Journal.Last(); got != before {
		t.Errorf("refused starts appended %d events", got-before)
	}
	_ = store
}

// A set the journal holds owns its Workspace: the primary surfaces answer
// 409 until it is discarded; its lanes that no runner owns are ended
// interrupted at start, once; Keep refuses a lane that did not succeed;
// Discard settles the set and frees the Workspace.
func TestWaysSetLifecycleWithoutLanes(t *testing.T) {
	s, store, ss := readySession(t)
	ctx := context.Background()
	const set = "01WAYSSET0000000000000000A"
	specs := []events.AttemptSpec{
		{Index: 0, Run: ways.LaneRun(ss.ID, 0), TurnID: ways.LaneID(set, 0), Model: "m1", Agent: "coder", Copy: filepath.Join(t.TempDir(), "0")},
		{Index: 1, Run: ways.LaneRun(ss.ID, 1), TurnID: ways.LaneID(set, 1), Model: "m1", Agent: "coder", Copy: filepath.Join(t.TempDir(), "1")},
	}
	started := events.AttemptSetStarted{Session: ss.ID, Workspace: ss.WorkspaceID, Input: events.NewText("go"), Snapshot: "abc", Tree: "def",
		Ref: ways.WaysRef(set), Attempts: specs}
	if err := s.Ways.Append(ctx, []journal.Event{events.New(set, started)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Files.Tree(ctx, ss.ID, "."); !errors.Is(err, core.ErrConflict) || !strings.Contains(err.Error(), "owns workspace") {
		t.Errorf("Files of an owned Workspace: %v, want 409 naming the set", err)
	}
	a, err := s.Ways.Results(ss.ID)
	if err != nil || a.ID != set || len(a.Attempts) != 2 {
		t.Fatalf("Results: %+v %v", a, err)
	}
	for range 2 {
		if err := s.Ways.ReconcileLanes(ctx); err != nil {
			t.Fatal(err)
		}
	}
	a, _ = store.AttemptSet(set)
	for _, l := range a.Attempts {
		if !projections.AttemptTerminal(l.State) || l.State != events.AttemptFailed {
			t.Errorf("lane %d after reconciliation: %s", l.Index, l.State)
		}
	}
	if v, _ := s.Ways.Journal.Version(set); v != 3 {
		t.Errorf("the set has %d events, want 3 (started, two lanes ended once)", v)
	}
	if _, err := s.Ways.Keep(ctx, ss.ID, set, 0); !errors.Is(err, core.ErrConflict) {
		t.Errorf("Keep of a failed lane: %v, want ErrConflict", err)
	}
	if _, err := s.Ways.Keep(ctx, ss.ID, set, 7); err == nil {
		t.Errorf("Keep of a lane the set does not have succeeded")
	}
	if _, err := s.Ways.Discard(ctx, ss.ID, "01NOSUCHSET"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Discard of an unknown set: %v", err)
	}
	a, err = s.Ways.Discard(ctx, ss.ID, set)
	if err != nil || !a.Discarded {
		t.Fatalf("Discard: %+v %v", a, err)
	}
	polltest.Check(t, func() error {
		if a, _ = store.AttemptSet(set); !a.Settled {
			return fmt.Errorf("the discarded set did not settle: %+v", a)
		}
		return nil
	}, polltest.Within(10*time.Second))
	if _, err := s.Files.Tree(ctx, ss.ID, "."); err != nil {
		t.Errorf("Files after the discard: %v", err)
	}
	for _, l := range specs {
		if _, err := os.Stat(l.Copy); !os.IsNotExist(err) {
			t.Errorf("lane copy %s left behind: %v", l.Copy, err)
		}
	}
}
