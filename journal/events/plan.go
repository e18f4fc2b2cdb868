package events

import (
	"strings"
	"unicode/utf8"
)

func init() {
	register[TurnPlanned]()
	register[LanePlanned]()
}

// An outside agent's plan (ACP's `plan` session update: Claude Code sends
// one from its TodoWrite tool) is the turn's: each update is the whole
// plan, journaled as it came, clipped (ClipPlan), and the latest one is the
// turn's plan. The agent is untrusted code in a sandbox, so every part of
// it is bounded here, before it reaches the journal.

// Bounds of an outside agent's plan and of what it reports of itself.
const (
	// MaxPlanEntries bounds the entries of one plan; later ones are dropped.
	MaxPlanEntries = 64
	// MaxPlanEntry bounds an entry's content in bytes.
	MaxPlanEntry = 2 << 10
	// MaxPlanBytes bounds the contents of one plan together, so that its
	// event stays small; the entries past it are dropped.
	MaxPlanBytes = 16 << 10
	// MaxReported bounds an agent's reported name and version in bytes.
	MaxReported = 128
)

// Plan entry statuses (ACP's PlanEntryStatus).
const (
	PlanPending    = "pending"
	PlanInProgress = "in_progress"
	PlanCompleted  = "completed"
)

// PlanEntry is one item of an agent's plan. Priority is ACP's (high,
// medium, low), or empty when the agent gave none Lathe knows.
type PlanEntry struct {
	Content  string `json:"content"`
	Status   string `json:"status"`
	Priority string `json:"priority,omitempty"`
}

// TurnPlanned: an outside agent stated its plan for the turn (the whole
// plan; it replaces any before it).
type TurnPlanned struct {
	TurnID  string      `json:"turn_id"`
	Agent   string      `json:"agent"`
	Entries []PlanEntry `json:"entries"`
}

// LanePlanned: a Ways lane's agent stated its plan.
type LanePlanned struct {
	Lane
	TurnPlanned
}

func (TurnPlanned) EventType() string { return "turn-planned" }
func (LanePlanned) EventType() string { return "attempt-lane-planned" }

func (TurnPlanned) Aggregate() string { return Session }
func (LanePlanned) Aggregate() string { return AttemptSet }

func (e TurnPlanned) Turn() string { return e.TurnID }

func (e LanePlanned) LaneRef() Lane        { return e.Lane }
func (e LanePlanned) TurnPayload() Payload { return e.TurnPlanned }

// ClipPlan bounds a plan an agent sent: at most MaxPlanEntries entries,
// each content at most MaxPlanEntry bytes of valid UTF-8, MaxPlanBytes of
// contents in all (the entry that crosses it is cut), a status Lathe
// does not know read as pending, a priority it does not know dropped. It
// never returns nil.
func ClipPlan(entries []PlanEntry) []PlanEntry {
	out := make([]PlanEntry, 0, min(len(entries), MaxPlanEntries))
	left := MaxPlanBytes
	for _, e := range entries {
		if len(out) == MaxPlanEntries || left == 0 {
			break
		}
		switch e.Status {
		case PlanPending, PlanInProgress, PlanCompleted:
		default:
			e.Status = PlanPending
		}
		switch e.Priority {
		case "high", "medium", "low":
		default:
			e.Priority = ""
		}
		e.Content = ClipReported(e.Content, min(MaxPlanEntry, left))
		left -= len(e.Content)
		out = append(out, e)
	}
	return out
}

// ClipReported bounds a string an agent sent to max bytes of valid UTF-8,
// cut at a rune boundary.
func ClipReported(s string, max int) string {
	if len(s) > max {
		n := max
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
