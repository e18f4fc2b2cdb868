package projections

import (
	"math"

	"lathe/journal/events"
	"lathe/runtime/usage"
)

// The Attempt sets go in the checkpoint by hand, as the turns do: gob,
// which the other small read models use, keeps no difference between a
// nil and an empty slice, so a restored lane's turn would read "null"
// where the fold made "[]" (and an image of the past, history.go, would
// not answer what the fold does).

func (w *cpWriter) attemptSets(sets []*AttemptSet) {
	w.uint(uint64(len(sets)))
	for _, a := range sets {
		w.str(a.ID)
		w.str(a.Session)
		w.str(a.Workspace)
		w.text(a.Input)
		w.str(a.Task)
		w.str(a.Snapshot)
		w.str(a.Tree)
		w.str(a.Ref)
		n(w, a.Attempts)
		for _, at := range a.Attempts {
			w.attempt(at)
		}
		optW(w, a.Judgment, func(j events.AttemptSetJudged) {
			w.str(j.Agent)
			w.str(j.Model)
			n(w, j.Ranking)
			for _, r := range j.Ranking {
				w.int(int64(r.Index))
				w.int(int64(r.Rank))
				w.str(r.Reason)
			}
			w.tokens(j.Usage)
			optW(w, j.USD, func(f float64) { w.uint(math.Float64bits(f)) })
		})
		optW(w, a.Keep, func(k events.KeepPhase) {
			w.int(int64(k.Index))
			w.str(k.Phase)
		})
		w.bool(a.Discarded)
		w.bool(a.Settled)
		w.time(a.StartedAt)
		w.uint(a.Version)
	}
}

func (w *cpWriter) attempt(at *Attempt) {
	s := at.AttemptSpec
	w.int(int64(s.Index))
	w.str(s.Run)
	w.str(s.TurnID)
	w.str(s.Model)
	w.str(s.Agent)
	w.str(s.Copy)
	w.str(at.State)
	w.bool(at.Turn != nil)
	if at.Turn != nil {
		w.turn(at.Turn)
	}
	w.bool(at.Interrupted)
	w.str(at.After)
	w.strs(at.Changed)
	w.text(at.Patch)
	optW(w, at.Verdict, func(v events.LaneVerified) {
		w.int(int64(v.Index))
		w.str(v.Run)
		w.str(v.Check)
		w.bool(v.Passed)
		w.int(int64(v.ExitCode))
		w.str(v.OutputTail)
		w.strs(v.Changed)
		w.strs(v.TouchedTests)
	})
}

func (w *cpWriter) tokens(t usage.Tokens) {
	w.int(int64(t.InputTokens))
	w.int(int64(t.OutputTokens))
	w.int(int64(t.ReasoningTokens))
	w.bool(t.TokenUsageKnown)
}

func (r *cpReader) attemptSets() []*AttemptSet {
	sets := make([]*AttemptSet, r.count())
	for i := range sets {
		a := &AttemptSet{ID: r.str(), Session: r.str(), Workspace: r.str(), Input: r.text(), Task: r.str(), Snapshot: r.str(), Tree: r.str(), Ref: r.str()}
		if l := r.len(); l >= 0 {
			a.Attempts = make([]*Attempt, l)
			for i := range a.Attempts {
				a.Attempts[i] = r.attempt()
			}
		}
		a.Judgment = opt(r, func() events.AttemptSetJudged {
			j := events.AttemptSetJudged{Agent: r.str(), Model: r.str()}
			if l := r.len(); l >= 0 {
				j.Ranking = make([]events.Ranking, l)
				for i := range j.Ranking {
					j.Ranking[i] = events.Ranking{Index: int(r.int()), Rank: int(r.int()), Reason: r.str()}
				}
			}
			j.Usage = r.tokens()
			j.USD = opt(r, func() float64 { return math.Float64frombits(r.uint()) })
			return j
		})
		a.Keep = opt(r, func() events.KeepPhase { return events.KeepPhase{Index: int(r.int()), Phase: r.str()} })
		a.Discarded, a.Settled, a.StartedAt, a.Version = r.bool(), r.bool(), r.time(), r.uint()
		sets[i] = a
	}
	return sets
}

func (r *cpReader) attempt() *Attempt {
	at := &Attempt{AttemptSpec: events.AttemptSpec{Index: int(r.int()), Run: r.str(), TurnID: r.str(), Model: r.str(), Agent: r.str(), Copy: r.str()}}
	at.State = r.str()
	if r.bool() {
		at.Turn = &Turn{}
		r.turn(at.Turn)
	}
	at.Interrupted, at.After, at.Changed, at.Patch = r.bool(), r.str(), r.strs(), r.text()
	at.Verdict = opt(r, func() events.LaneVerified {
		return events.LaneVerified{Lane: events.Lane{Index: int(r.int()), Run: r.str()}, Check: r.str(), Passed: r.bool(),
			ExitCode: int(r.int()), OutputTail: r.str(), Changed: r.strs(), TouchedTests: r.strs()}
	})
	return at
}

func (r *cpReader) tokens() usage.Tokens {
	return usage.Tokens{InputTokens: int(r.int()), OutputTokens: int(r.int()), ReasoningTokens: int(r.int()), TokenUsageKnown: r.bool()}
}
