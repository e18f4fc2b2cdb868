package projections

import (
	"encoding/json"
	"testing"
	"time"

	"lathe/journal/events"
)

// Whatever a Session holds, AppendJSON writes exactly what encoding/json
// writes.
func TestSessionJSONMatches(t *testing.T) {
	code, zero := -1, 0
	check := "<&> \x00\x1f \xff \u2029 é"
	at := time.Date(2025, 1, 2, 3, 4, 5, 600, time.UTC)
	list := []Session{
		{},
		{ID: "x\"\\\b\f\n\r\t", Name: check, EnabledSkills: []string{"", check}, ExposedPorts: []int{-1, 0, 65535},
			Mode: events.Mode{Kind: events.ModeLattice, AgentID: "coder", Workers: []string{"a", "b\"c"}},
			Environment: Environment{Environment: events.Environment{State: "s", Generation: 7, Image: "i", SetupCommand: check,
				SetupSource: "s", SetupApproved: true, SetupReviewed: true},
				Evidence: &events.Evidence{Error: check, ExitCode: &code, OutputTail: check, Fix: "f"},
				Owner:    "o", SetupRan: true, SetupSkipped: "k", SetupOutput: check, Reason: ReasonReconstructed},
			CheckCommand: &check, Status: StatusClosed, ClosedAt: &at, CreatedAt: at, UpdatedAt: at.Add(time.Hour), Version: 9},
		{ID: "S2", EnabledSkills: []string{}, ExposedPorts: []int{}, Environment: Environment{Evidence: &events.Evidence{ExitCode: &zero}},
			CreatedAt: time.Unix(0, 0).UTC(), UpdatedAt: time.Date(2025, 6, 1, 12, 0, 0, 5000, time.FixedZone("x", -5*3600))},
	}
	for _, ss := range list {
		want, err := json.Marshal(ss)
		if err != nil {
			t.Fatal(err)
		}
		if got := ss.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON:\n got %s\nwant %s", got, want)
		}
	}
}

func TestJSONTimeMatches(t *testing.T) {
	zone := time.FixedZone("x", -5*3600)
	for _, at := range []time.Time{{}, time.Unix(0, 0).UTC(), time.Date(2025, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2025, 1, 2, 3, 4, 5, 120000000, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(2025, 6, 1, 12, 0, 0, 5000, zone), time.Now(), time.Now().UTC()} {
		want, err := json.Marshal(at)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONTime(nil, at); string(got) != string(want) {
			t.Errorf("appendJSONTime(%v) = %s, want %s", at, got, want)
		}
	}
}

func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&</a>", "\x00\x7f\x80\xff", "\u2028\u2029é😀", "\\\"\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}
