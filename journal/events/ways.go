package events

import "lathe/runtime/usage"

func init() {
	register[AttemptSetStarted]()
	register[LaneStarted]()
	register[LaneOutput]()
	register[LaneUsage]()
	register[LaneToolStarted]()
	register[LaneToolFinished]()
	register[LaneEnded]()
	register[LaneVerified]()
	register[AttemptSetJudged]()
	register[KeepPhase]()
	register[AttemptSetDiscarded]()
	register[AttemptSetSettled]()
}

// AttemptSet is the aggregate of one Ways set, by its attempt_set_id. Its
// events hold the whole set: the snapshot it started from, each lane's turn
// (the same turn events a Session turn journals, each wrapped with its
// lane's index and run key), each lane's end and change, the Check results,
// the Keep phases and the settlement that releases the Workspace.
const AttemptSet = "attempt_set"

// Attempt run states.
const (
	AttemptQueued    = "queued"
	AttemptRunning   = "running"
	AttemptSucceeded = "succeeded"
	AttemptFailed    = "failed"
	AttemptCancelled = "cancelled"
)

// Keep phases, in order.
const (
	KeepApplying           = "applying"
	KeepApplied            = "applied"
	KeepTranscriptRecorded = "transcript_recorded"
)

// AttemptSpec is one lane of a set as it was started.
type AttemptSpec struct {
	Index int `json:"index"`
	// Run is the lane's run key (the workflow of its frames): the same
	// for the same Session and index in every set.
	Run string `json:"run"`
	// TurnID names the lane's turn; it becomes the Session's turn ID when
	// the lane is kept.
	TurnID string `json:"turn_id"`
	Model  string `json:"model"`
	Agent  string `json:"agent"`
	// Copy is the host directory of the lane's own copy of the snapshot.
	Copy string `json:"copy"`
}

// AttemptSetStarted: a Ways set took exclusive ownership of its
// Workspace, or, when Worktree is set, of its worktree Session's own
// checkout only. Snapshot is the hidden commit of the Session's worktree
// (tracked and untracked changes) that Ref protects; Tree is its tree.
type AttemptSetStarted struct {
	Session   string        `json:"session"`
	Workspace string        `json:"workspace"`
	Worktree  bool          `json:"worktree,omitempty"`
	Input     Text          `json:"input"`
	Task      string        `json:"task,omitempty"`
	Snapshot  string        `json:"snapshot"`
	Tree      string        `json:"tree"`
	Ref       string        `json:"ref"`
	Attempts  []AttemptSpec `json:"attempts"`
}

// Lane names one lane in a lane event: its index and run key.
type Lane struct {
	Index int    `json:"index"`
	Run   string `json:"run"`
}

// LaneOf is a lane event: the turn event it wraps and its lane.
type LaneOf interface {
	Payload
	LaneRef() Lane
	TurnPayload() Payload
}

// LaneStarted: a lane's sandbox is up and its turn runs (lane-started).
type LaneStarted struct {
	Lane
	TurnStarted
}

// LaneOutput, LaneUsage, LaneToolStarted, LaneToolFinished: a lane's turn
// progress, as a Session turn's.
type LaneOutput struct {
	Lane
	TurnOutput
}

type LaneUsage struct {
	Lane
	TurnUsage
}

type LaneToolStarted struct {
	Lane
	ToolCallStarted
}

type LaneToolFinished struct {
	Lane
	ToolCallFinished
}

// LaneEnded: a lane's one terminal event. State is succeeded, failed or
// cancelled. After is the tree of the lane's worktree at its end, Changed
// the paths that differ from the set's snapshot, and Patch the binary diff
// from the snapshot to After, which Keep applies to the primary checkout.
type LaneEnded struct {
	Lane
	State       string       `json:"state"`
	Output      Text         `json:"output"`
	Error       string       `json:"error,omitempty"`
	Interrupted bool         `json:"interrupted,omitempty"`
	Budget      string       `json:"budget,omitempty"`
	Totals      usage.Tokens `json:"totals"`
	After       string       `json:"after,omitempty"`
	Changed     []string     `json:"changed_files"`
	Patch       Text         `json:"patch,omitzero"`
}

// LaneVerified: a Check ran in a lane (lane-verified).
type LaneVerified struct {
	Lane
	Check        string   `json:"check"`
	Passed       bool     `json:"passed"`
	ExitCode     int      `json:"exit_code"`
	OutputTail   string   `json:"output_tail"`
	Changed      []string `json:"changed_files"`
	TouchedTests []string `json:"touched_tests"`
}

// Ranking is one survivor's place in a judgment: rank 1 is the best.
type Ranking struct {
	Index  int    `json:"index"`
	Rank   int    `json:"rank"`
	Reason string `json:"reason"`
}

// AttemptSetJudged: a judge Agent ranked the passing, non-empty
// survivors. Usage and USD are its control usage, outside the Attempts'
// totals (USD nil: the price is unknown).
type AttemptSetJudged struct {
	Agent   string       `json:"agent"`
	Model   string       `json:"model"`
	Ranking []Ranking    `json:"ranking"`
	Usage   usage.Tokens `json:"usage"`
	USD     *float64     `json:"usd"`
}

// KeepPhase: Keep of Index reached Phase. applying is the point after
// which Discard and another index are refused.
type KeepPhase struct {
	Index int    `json:"index"`
	Phase string `json:"phase"`
}

// AttemptSetDiscarded: the set is being discarded: its lanes are
// cancelled and everything it made is removed before it settles.
type AttemptSetDiscarded struct{}

// AttemptSetSettled: Keep or Discard completed; the durable pointer that
// owned the Workspace is gone (workspace-attempt-settled).
type AttemptSetSettled struct {
	Workspace string `json:"workspace"`
}

func (AttemptSetStarted) EventType() string   { return "attempt-set-started" }
func (LaneStarted) EventType() string         { return "attempt-lane-started" }
func (LaneOutput) EventType() string          { return "attempt-lane-output" }
func (LaneUsage) EventType() string           { return "attempt-lane-usage" }
func (LaneToolStarted) EventType() string     { return "attempt-lane-tool-started" }
func (LaneToolFinished) EventType() string    { return "attempt-lane-tool-finished" }
func (LaneEnded) EventType() string           { return "attempt-lane-ended" }
func (LaneVerified) EventType() string        { return "attempt-lane-verified" }
func (KeepPhase) EventType() string           { return "attempt-keep-phase" }
func (AttemptSetJudged) EventType() string    { return "attempt-set-judged" }
func (AttemptSetDiscarded) EventType() string { return "attempt-set-discarded" }
func (AttemptSetSettled) EventType() string   { return "attempt-set-settled" }

func (AttemptSetStarted) Aggregate() string   { return AttemptSet }
func (LaneStarted) Aggregate() string         { return AttemptSet }
func (LaneOutput) Aggregate() string          { return AttemptSet }
func (LaneUsage) Aggregate() string           { return AttemptSet }
func (LaneToolStarted) Aggregate() string     { return AttemptSet }
func (LaneToolFinished) Aggregate() string    { return AttemptSet }
func (LaneEnded) Aggregate() string           { return AttemptSet }
func (LaneVerified) Aggregate() string        { return AttemptSet }
func (KeepPhase) Aggregate() string           { return AttemptSet }
func (AttemptSetJudged) Aggregate() string    { return AttemptSet }
func (AttemptSetDiscarded) Aggregate() string { return AttemptSet }
func (AttemptSetSettled) Aggregate() string   { return AttemptSet }

func (e LaneStarted) LaneRef() Lane      { return e.Lane }
func (e LaneOutput) LaneRef() Lane       { return e.Lane }
func (e LaneUsage) LaneRef() Lane        { return e.Lane }
func (e LaneToolStarted) LaneRef() Lane  { return e.Lane }
func (e LaneToolFinished) LaneRef() Lane { return e.Lane }

func (e LaneStarted) TurnPayload() Payload      { return e.TurnStarted }
func (e LaneOutput) TurnPayload() Payload       { return e.TurnOutput }
func (e LaneUsage) TurnPayload() Payload        { return e.TurnUsage }
func (e LaneToolStarted) TurnPayload() Payload  { return e.ToolCallStarted }
func (e LaneToolFinished) TurnPayload() Payload { return e.ToolCallFinished }

// WrapLane wraps a turn event of a lane's turn as its lane event; ok is
// false for a turn event a lane journals otherwise (its end is LaneEnded).
func WrapLane(l Lane, p Payload) (Payload, bool) {
	switch e := p.(type) {
	case TurnStarted:
		return LaneStarted{l, e}, true
	case TurnOutput:
		return LaneOutput{l, e}, true
	case TurnUsage:
		return LaneUsage{l, e}, true
	case ToolCallStarted:
		return LaneToolStarted{l, e}, true
	case ToolCallFinished:
		return LaneToolFinished{l, e}, true
	case TurnPlanned:
		return LanePlanned{l, e}, true
	}
	return nil, false
}

// The content fields of lane events are offloaded as the turn events'
// are; each wraps the offloaded copy of its turn event again.

func (e AttemptSetStarted) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Input)
}

func (e LaneOutput) offload(w BlobWriter, limit int) (Payload, error) {
	p, err := e.TurnOutput.offload(w, limit)
	if err != nil {
		return nil, err
	}
	return LaneOutput{e.Lane, p.(TurnOutput)}, nil
}

func (e LaneToolStarted) offload(w BlobWriter, limit int) (Payload, error) {
	p, err := e.ToolCallStarted.offload(w, limit)
	if err != nil {
		return nil, err
	}
	return LaneToolStarted{e.Lane, p.(ToolCallStarted)}, nil
}

func (e LaneToolFinished) offload(w BlobWriter, limit int) (Payload, error) {
	p, err := e.ToolCallFinished.offload(w, limit)
	if err != nil {
		return nil, err
	}
	return LaneToolFinished{e.Lane, p.(ToolCallFinished)}, nil
}

func (e LaneEnded) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Output, &e.Patch)
}
