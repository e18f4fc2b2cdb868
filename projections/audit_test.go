package projections

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"lathe/journal"
	"lathe/journal/events"
)

// Time travel folds the Session's own events (and its Workspace's and
// related aggregates') up to a seq with the live code: at every seq of its
// history it equals a store that applied the whole journal up to there.
func TestSessionAtEqualsTheJournalUpToThatSeq(t *testing.T) {
	j, live := richHistory(t)
	ctx := context.Background()
	var all []journal.Record
	_ = j.Scan(ctx, 0, 0, func(seq uint64, raw []byte) error {
		env, err := journal.DecodeEnvelope(raw)
		if err != nil {
			t.Fatal(err)
		}
		env.Data = append([]byte(nil), env.Data...)
		all = append(all, journal.Record{Envelope: env})
		return nil
	})
	checked := 0
	for i, r := range all {
		at, err := live.SessionAt(ctx, j, "S1", r.Seq)
		ref := New()
		if aerr := ref.Apply(all[:i+1]); aerr != nil {
			t.Fatal(aerr)
		}
		want, ok := ref.Session("S1")
		if !ok {
			var rangeErr *SeqRangeError
			if !errors.As(err, &rangeErr) || rangeErr.From != 2 {
				t.Errorf("seq %d, before S1: %v", r.Seq, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("seq %d: %v", r.Seq, err)
		}
		if !reflect.DeepEqual(at.Session, want) || !reflect.DeepEqual(at.Turns, ref.Turns("S1")) ||
			!reflect.DeepEqual(at.Attachments, ref.Attachments("S1", true)) || !reflect.DeepEqual(at.Tasks, ref.Tasks("S1")) {
			t.Errorf("seq %d: the past differs from the journal's fold:\n got %+v\nwant %+v", r.Seq, at.Session, want)
		}
		checked++
	}
	if checked < 20 {
		t.Fatalf("only %d seqs checked", checked)
	}
	if _, err := live.SessionAt(ctx, j, "S1", j.Last()+1); !strings.Contains(errString(err), "beyond the journal's head") {
		t.Errorf("beyond the head: %v", err)
	}
	if _, err := live.SessionAt(ctx, j, "W1", 3); !errors.Is(err, ErrNoHistory) {
		t.Errorf("a Workspace's ID: %v", err)
	}
	if _, err := live.SessionAt(ctx, j, "nope", 3); !errors.Is(err, ErrNoHistory) {
		t.Errorf("an unknown ID: %v", err)
	}
}

// A deleted Session's past stays readable up to its deletion, and a seq
// after it says when it was deleted.
func TestSessionAtAfterDeletion(t *testing.T) {
	j, live := richHistory(t)
	ctx := context.Background()
	recs, err := j.Append(ctx, []journal.Event{events.New("S2", events.SessionDeleted{}), events.New("W1", events.WorkspaceRenamed{Name: "later"})})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Await(ctx, j.Last()); err != nil {
		t.Fatal(err)
	}
	if at, err := live.SessionAt(ctx, j, "S2", recs[0].Seq-1); err != nil || at.Session.Name != "closed" {
		t.Errorf("before its deletion: %+v, %v", at.Session, err)
	}
	_, err = live.SessionAt(ctx, j, "S2", j.Last())
	var rangeErr *SeqRangeError
	if !errors.As(err, &rangeErr) || !rangeErr.Deleted || rangeErr.Until != recs[0].Seq {
		t.Errorf("after its deletion: %v", err)
	}
	entries, _, err := live.SessionAudit(ctx, j, "S2", AuditQuery{})
	if err != nil || entries[len(entries)-1].Type != "session-deleted" {
		t.Errorf("the deleted Session's trail: %v", err)
	}
}

// The trail merges the Session's events with the approvals raised in its
// turns, in seq order, pages by seq, filters by kind, and says in words
// what each did.
func TestSessionAuditTrail(t *testing.T) {
	j, live := richHistory(t)
	ctx := context.Background()
	all, more, err := live.SessionAudit(ctx, j, "S1", AuditQuery{})
	if err != nil || more {
		t.Fatal(err, more)
	}
	seqs := make([]uint64, len(all))
	kinds := map[string]bool{}
	for i, e := range all {
		seqs[i] = e.Seq
		kinds[e.Kind] = true
		if e.Action == "" || e.Actor != journal.System {
			t.Errorf("seq %d: action %q, actor %+v", e.Seq, e.Action, e.Actor)
		}
	}
	if !slices.IsSorted(seqs) || all[0].Type != "session-created" {
		t.Errorf("not in seq order from creation: %v", seqs)
	}
	for _, k := range []string{"session", "environment", "task", "turn", "approval", "attachment", "git"} {
		if !kinds[k] {
			t.Errorf("no %s entries in %v", k, kinds)
		}
	}
	approvals := 0
	for _, e := range all {
		if e.Kind == "approval" {
			approvals++
			if e.Action != "asked to call `mcp__gh__issues` for coder" || e.TurnID != "U1" {
				t.Errorf("approval entry: %q turn %q", e.Action, e.TurnID)
			}
		}
	}
	if approvals != 1 {
		t.Errorf("%d approval entries, want the one raised in S1's turn", approvals)
	}
	// Pages of 5 give the same trail.
	var paged []uint64
	for after, more := uint64(0), true; more; {
		page, m, err := live.SessionAudit(ctx, j, "S1", AuditQuery{After: after, Limit: 5})
		if err != nil || len(page) > 5 {
			t.Fatal(err, len(page))
		}
		for _, e := range page {
			paged = append(paged, e.Seq)
		}
		if len(page) > 0 {
			after = page[len(page)-1].Seq
		}
		more = m
	}
	if !slices.Equal(paged, seqs) {
		t.Errorf("paged %v, whole %v", paged, seqs)
	}
	turns, _, err := live.SessionAudit(ctx, j, "S1", AuditQuery{Kinds: map[string]bool{"turn": true, "git": true}})
	if err != nil || len(turns) == 0 {
		t.Fatal(err)
	}
	for _, e := range turns {
		if e.Kind != "turn" && e.Kind != "git" {
			t.Errorf("filtered trail holds %s", e.Kind)
		}
	}
	for _, after := range []uint64{0, 3} {
		if _, _, err := live.SessionAudit(ctx, j, "nope", AuditQuery{After: after}); !errors.Is(err, ErrNoHistory) {
			t.Errorf("unknown Session after %d: %v", after, err)
		}
	}
	if page, more, err := live.SessionAudit(ctx, j, "S1", AuditQuery{After: j.Last()}); err != nil || len(page) != 0 || more {
		t.Errorf("past the end: %d, %v, %v", len(page), more, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
