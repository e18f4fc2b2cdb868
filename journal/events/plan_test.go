package events_test

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"lathe/journal/events"
)

// An agent's plan is untrusted: ClipPlan bounds it before the journal.
func TestClipPlan(t *testing.T) {
	long := strings.Repeat("é", events.MaxPlanEntry) // 2 bytes a rune: twice the bound
	many := make([]events.PlanEntry, events.MaxPlanEntries+10)
	for i := range many {
		many[i] = events.PlanEntry{Content: "x", Status: events.PlanPending}
	}
	big := make([]events.PlanEntry, 10)
	for i := range big {
		big[i] = events.PlanEntry{Content: strings.Repeat("y", events.MaxPlanEntry), Status: events.PlanPending}
	}
	for _, c := range []struct {
		name string
		in   []events.PlanEntry
		want []events.PlanEntry
	}{
		{"none", nil, []events.PlanEntry{}},
		{"kept as it came", []events.PlanEntry{{Content: "read", Status: events.PlanCompleted, Priority: "high"}, {Content: "write", Status: events.PlanInProgress, Priority: "low"}},
			[]events.PlanEntry{{Content: "read", Status: events.PlanCompleted, Priority: "high"}, {Content: "write", Status: events.PlanInProgress, Priority: "low"}}},
		{"unknown status is pending", []events.PlanEntry{{Content: "a", Status: "done!"}, {Content: "b"}},
			[]events.PlanEntry{{Content: "a", Status: events.PlanPending}, {Content: "b", Status: events.PlanPending}}},
		{"unknown priority dropped", []events.PlanEntry{{Content: "a", Status: events.PlanPending, Priority: "urgent"}},
			[]events.PlanEntry{{Content: "a", Status: events.PlanPending}}},
		{"content cut at a rune boundary", []events.PlanEntry{{Content: long, Status: events.PlanPending}},
			[]events.PlanEntry{{Content: long[:events.MaxPlanEntry], Status: events.PlanPending}}},
		{"invalid UTF-8 dropped", []events.PlanEntry{{Content: "a\xffb", Status: events.PlanPending}},
			[]events.PlanEntry{{Content: "ab", Status: events.PlanPending}}},
		{"at most MaxPlanEntries", many, many[:events.MaxPlanEntries]},
		{"at most MaxPlanBytes in all", big, big[:events.MaxPlanBytes/events.MaxPlanEntry]},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := events.ClipPlan(c.in)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ClipPlan = %q, want %q", got, c.want)
			}
			for _, e := range got {
				if len(e.Content) > events.MaxPlanEntry {
					t.Fatalf("an entry of %d bytes", len(e.Content))
				}
			}
		})
	}
}

func TestClipReported(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0.23.1", "0.23.1"},
		{strings.Repeat("v", 200), strings.Repeat("v", events.MaxReported)},
		{strings.Repeat("v", events.MaxReported-1) + "é", strings.Repeat("v", events.MaxReported-1)},
		{"bad\xfe", "bad"},
	} {
		if got := events.ClipReported(c.in, events.MaxReported); got != c.want {
			t.Errorf("ClipReported(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Whatever an agent sends, a clipped plan is within its bounds (entries,
// bytes each and in all), valid
// UTF-8, of known statuses, and clipping it again changes nothing.
func FuzzClipPlan(f *testing.F) {
	f.Add("read the task", "in_progress", "high", 3)
	f.Add(strings.Repeat("é", events.MaxPlanEntry), "done", "urgent", events.MaxPlanEntries+1)
	f.Add("a\xffb", "", "", 0)
	f.Fuzz(func(t *testing.T, content, status, priority string, n int) {
		n = min(max(n, 0), 2*events.MaxPlanEntries)
		in := make([]events.PlanEntry, n)
		for i := range in {
			in[i] = events.PlanEntry{Content: content, Status: status, Priority: priority}
		}
		got := events.ClipPlan(in)
		if len(got) > min(n, events.MaxPlanEntries) || n > 0 && len(got) == 0 {
			t.Fatalf("%d entries of %d", len(got), n)
		}
		total := 0
		for _, e := range got {
			total += len(e.Content)
			if len(e.Content) > events.MaxPlanEntry || !utf8.ValidString(e.Content) {
				t.Fatalf("entry content of %d bytes, valid %v", len(e.Content), utf8.ValidString(e.Content))
			}
			switch e.Status {
			case events.PlanPending, events.PlanInProgress, events.PlanCompleted:
			default:
				t.Fatalf("status %q", e.Status)
			}
		}
		if total > events.MaxPlanBytes {
			t.Fatalf("%d bytes of contents", total)
		}
		if again := events.ClipPlan(got); !reflect.DeepEqual(again, got) {
			t.Fatalf("clipping twice changed it: %q then %q", got, again)
		}
	})
}
