package transport

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"lathe/commands/core"
	"lathe/commands/ways"

	"github.com/julienschmidt/httprouter"

	"lathe/journal/events"
	"lathe/projections"
)

// Ways (Attempts): the routes (commands.Ways) and the frames of the
// Attempt set events.
//
//	POST /api/sessions/:id/variants          {input, task?, n?, lanes?: [{model?, agent_id?}]}
//	                                          → 202 {attempt_set_id, attempts: [{index, run, model, agent}]}
//	GET  /api/sessions/:id/variants/results  → 200 resultsView (the durable current set)
//	                                          ?optional=true: 204 when the Session has none yet
//	GET  /api/sessions/:id/variants/status?attempt_set_id=
//	                                          → 200 {attempt_set_id, attempts: [commands.AttemptStatus…]}
//	GET  /api/sessions/:id/variants/diff?attempt_set_id=&index=&path=
//	                                          → 200 commands.FileDiff
//	POST /api/sessions/:id/variants/verify   {attempt_set_id, check?} → 200 resultsView
//	POST /api/sessions/:id/variants/adopt    {attempt_set_id, index}  → 200 resultsView
//	POST /api/sessions/:id/variants/discard  {attempt_set_id}         → 200 resultsView
//	POST /api/sessions/:id/variants/judge    {attempt_set_id, agent_id}
//	                                          → 200 resultsView + control_usage; errors carry control_usage
//	POST /api/sessions/:id/variants/plan     {task, agent_id} → 200 commands.Plan; errors carry control_usage
//	GET  /api/sessions/:id/variants/cost?attempt_set_id=&baseline=&baseline_provider=
//	                                          → 200 commands.CostReport
//	GET  /api/sessions/:id/variants/trajectories?attempt_set_id=&baseline=
//	                                          → 200 {attempt_set_id, baseline, lanes: [commands.Trajectory…]}
//	GET  /api/variants/probe?provider=&models=a,b
//	                                          → 200 {provider, results: [commands.ProbeResult…]}

// WaysCommands are the Ways routes' commands (commands.Ways).
type WaysCommands interface {
	Start(ctx context.Context, req ways.WaysRequest) (projections.AttemptSet, error)
	Results(session string) (projections.AttemptSet, error)
	Status(ctx context.Context, session, setID string) ([]ways.AttemptStatus, error)
	Diff(ctx context.Context, session, setID string, index int, path string) (ways.FileDiff, error)
	Verify(ctx context.Context, session, setID string, check *string) (projections.AttemptSet, error)
	Keep(ctx context.Context, session, setID string, index int) (projections.AttemptSet, error)
	Discard(ctx context.Context, session, setID string) (projections.AttemptSet, error)
	Judge(ctx context.Context, session, setID, agentID string) (projections.AttemptSet, ways.AttemptUsage, error)
	Plan(ctx context.Context, session, task, agentID string) (ways.Plan, error)
	Probe(ctx context.Context, provider string, models []string) ([]ways.ProbeResult, error)
	Cost(session, setID string, baseline int, baselineProvider string) (ways.CostReport, error)
	Trajectories(session, setID string, baseline int) ([]ways.Trajectory, error)
}

type startedAttempt struct {
	Index int    `json:"index"`
	Run   string `json:"run"`
	Model string `json:"model"`
	Agent string `json:"agent"`
}

// startWaysBody is the body of startWays.
type startWaysBody struct {
	Input *string `json:"input" required:"true"`
	Task  *string `json:"task"`
	N     *int    `json:"n"`
	Lanes []struct {
		Model   *string `json:"model"`
		AgentID *string `json:"agent_id"`
	} `json:"lanes"`
}

func (s *waysRoutes) startWays(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var body startWaysBody
	if err := decodeJSON(r, &body); err != nil {
		fail(w, err)
		return
	}
	if body.Input == nil {
		writeError(w, http.StatusBadRequest, "input is required")
		return
	}
	req := ways.WaysRequest{SessionID: ps.ByName("id"), Input: *body.Input, Task: body.Task, N: body.N}
	if body.Lanes != nil {
		req.Lanes = make([]ways.LaneRequest, len(body.Lanes))
		for i, l := range body.Lanes {
			req.Lanes[i] = ways.LaneRequest{Model: l.Model, AgentID: l.AgentID}
		}
	}
	a, err := s.cmds.Start(r.Context(), req)
	if err != nil {
		fail(w, err)
		return
	}
	out := waysStarted{AttemptSetID: a.ID, Attempts: make([]startedAttempt, len(a.Attempts))}
	for i, l := range a.Attempts {
		out.Attempts[i] = startedAttempt{Index: l.Index, Run: l.Run, Model: l.Model, Agent: l.Agent}
	}
	writeJSON(w, http.StatusAccepted, out)
}

// resultsView is a set as Results, Verify, Keep and Discard answer it.
type resultsView struct {
	AttemptSetID string `json:"attempt_set_id"`
	Session      string `json:"session"`
	State        string `json:"state"`
	Input        string `json:"input"`
	Task         string `json:"task,omitempty"`
	// CheckConfigured false means Keep takes an unverified Attempt: the
	// Session has no Check.
	CheckConfigured bool                     `json:"check_configured"`
	Attempts        []attemptView            `json:"attempts"`
	Judgment        *events.AttemptSetJudged `json:"judgment,omitempty"`
	Keep            *events.KeepPhase        `json:"keep,omitempty"`
	Settled         bool                     `json:"settled"`
	Usage           ways.AttemptUsage        `json:"usage"`
}

type attemptView struct {
	Index int    `json:"index"`
	Run   string `json:"run"`
	State string `json:"state"`
	Model string `json:"model"`
	Agent string `json:"agent"`
	// AgentName and AgentVersion are what an outside agent reported of
	// itself when its lane started.
	AgentName    string            `json:"agent_name,omitempty"`
	AgentVersion string            `json:"agent_version,omitempty"`
	Output       string            `json:"output"`
	Error        string            `json:"error,omitempty"`
	Interrupted  bool              `json:"interrupted,omitempty"`
	ChangedFiles []string          `json:"changed_files"`
	Verdict      *verdictView      `json:"verdict,omitempty"`
	Usage        ways.AttemptUsage `json:"usage"`
	// NotKeepable says why Keep would refuse this Attempt; empty when it
	// can be kept.
	NotKeepable string `json:"not_keepable,omitempty"`
}

type verdictView struct {
	Check        string   `json:"check"`
	Passed       bool     `json:"passed"`
	ExitCode     int      `json:"exit_code"`
	OutputTail   string   `json:"output_tail"`
	ChangedFiles []string `json:"changed_files"`
	TouchedTests []string `json:"touched_tests"`
}

func (s *waysRoutes) resultsOf(a projections.AttemptSet) resultsView {
	checked := false
	if ss, ok := s.read.Session(a.Session); ok {
		checked = ss.CheckCommand != nil
	}
	v := resultsView{AttemptSetID: a.ID, Session: a.Session, State: a.State(), Input: a.Input.String(), Task: a.Task,
		CheckConfigured: checked, Attempts: make([]attemptView, len(a.Attempts)), Keep: a.Keep, Settled: a.Settled, Judgment: a.Judgment,
		Usage: ways.NoAttemptUsage()}
	for i, l := range a.Attempts {
		av := attemptView{Index: l.Index, Run: l.Run, State: l.State, Model: l.Model, Agent: l.Agent,
			AgentName: l.Turn.AgentName, AgentVersion: l.Turn.AgentVersion, Output: l.Turn.Output.String(),
			Error: l.Turn.Error, Interrupted: l.Interrupted, ChangedFiles: l.Changed, Usage: ways.UsageOf(l),
			NotKeepable: ways.Keepable(l, checked)}
		if d := l.Verdict; d != nil {
			av.Verdict = &verdictView{Check: d.Check, Passed: d.Passed, ExitCode: d.ExitCode, OutputTail: d.OutputTail, ChangedFiles: d.Changed, TouchedTests: d.TouchedTests}
		}
		v.Attempts[i] = av
		v.Usage = v.Usage.Add(av.Usage)
	}
	return v
}

func (s *waysRoutes) waysResults(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	a, err := s.cmds.Results(ps.ByName("id"))
	if err != nil {
		if r.URL.Query().Get("optional") == "true" && errors.Is(err, core.ErrNotFound) {
			if _, ok := s.read.Session(ps.ByName("id")); ok {
				w.WriteHeader(http.StatusNoContent) // asked "the current set, if any": none yet
				return
			}
		}
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.resultsOf(a))
}

func (s *waysRoutes) waysStatus(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	setID := r.URL.Query().Get("attempt_set_id")
	st, err := s.cmds.Status(r.Context(), ps.ByName("id"), setID)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, waysStatusView{setID, st})
}

// waysStarted is POST /variants: the set and its lanes.
type waysStarted struct {
	AttemptSetID string           `json:"attempt_set_id"`
	Attempts     []startedAttempt `json:"attempts"`
}

// waysStatusView is GET /variants/status.
type waysStatusView struct {
	AttemptSetID string               `json:"attempt_set_id"`
	Attempts     []ways.AttemptStatus `json:"attempts"`
}

// judgedView is POST /variants/judge: the results with the judge's usage.
type judgedView struct {
	resultsView
	ControlUsage ways.AttemptUsage `json:"control_usage"`
}

// trajectoriesView is GET /variants/trajectories.
type trajectoriesView struct {
	AttemptSetID string            `json:"attempt_set_id"`
	Baseline     int               `json:"baseline"`
	Lanes        []ways.Trajectory `json:"lanes"`
}

// probeView is GET /api/variants/probe.
type probeView struct {
	Provider string             `json:"provider"`
	Results  []ways.ProbeResult `json:"results"`
}

func (s *waysRoutes) waysDiff(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	q := r.URL.Query()
	index, err := strconv.Atoi(q.Get("index"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "index must be an Attempt's index (an integer)")
		return
	}
	d, err := s.cmds.Diff(r.Context(), ps.ByName("id"), q.Get("attempt_set_id"), index, q.Get("path"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// waysVerifyBody is the body of waysVerify.
type waysVerifyBody struct {
	AttemptSetID string  `json:"attempt_set_id"`
	Check        *string `json:"check"`
}

func (s *waysRoutes) waysVerify(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var body waysVerifyBody
	if err := decodeJSON(r, &body); err != nil {
		fail(w, err)
		return
	}
	s.answerSet(w)(s.cmds.Verify(r.Context(), ps.ByName("id"), body.AttemptSetID, body.Check))
}

// waysKeepBody is the body of waysKeep.
type waysKeepBody struct {
	AttemptSetID string `json:"attempt_set_id"`
	Index        *int   `json:"index" required:"true"`
}

func (s *waysRoutes) waysKeep(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var body waysKeepBody
	if err := decodeJSON(r, &body); err != nil {
		fail(w, err)
		return
	}
	if body.Index == nil {
		writeError(w, http.StatusBadRequest, "index is required")
		return
	}
	s.answerSet(w)(s.cmds.Keep(r.Context(), ps.ByName("id"), body.AttemptSetID, *body.Index))
}

// waysDiscardBody is the body of waysDiscard.
type waysDiscardBody struct {
	AttemptSetID string `json:"attempt_set_id"`
}

func (s *waysRoutes) waysDiscard(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var body waysDiscardBody
	if err := decodeJSON(r, &body); err != nil {
		fail(w, err)
		return
	}
	s.answerSet(w)(s.cmds.Discard(r.Context(), ps.ByName("id"), body.AttemptSetID))
}

// failControl writes a control call's error with the usage it paid for.
func failControl(w http.ResponseWriter, err error) {
	var ce *ways.ControlError
	if !errors.As(err, &ce) {
		fail(w, err)
		return
	}
	writeJSON(w, statusOf(err), struct {
		Error        string            `json:"error"`
		ControlUsage ways.AttemptUsage `json:"control_usage"`
	}{errorMessage(err), ce.Usage})
}

// waysJudgeBody is the body of waysJudge.
type waysJudgeBody struct {
	AttemptSetID string `json:"attempt_set_id"`
	AgentID      string `json:"agent_id"`
}

func (s *waysRoutes) waysJudge(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var body waysJudgeBody
	if err := decodeJSON(r, &body); err != nil {
		fail(w, err)
		return
	}
	a, u, err := s.cmds.Judge(r.Context(), ps.ByName("id"), body.AttemptSetID, body.AgentID)
	if err != nil {
		failControl(w, err)
		return
	}
	writeJSON(w, http.StatusOK, judgedView{s.resultsOf(a), u})
}

// waysPlanBody is the body of waysPlan.
type waysPlanBody struct {
	Task    string `json:"task"`
	AgentID string `json:"agent_id"`
}

func (s *waysRoutes) waysPlan(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var body waysPlanBody
	if err := decodeJSON(r, &body); err != nil {
		fail(w, err)
		return
	}
	p, err := s.cmds.Plan(r.Context(), ps.ByName("id"), body.Task, body.AgentID)
	if err != nil {
		failControl(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// intParam reads an integer query parameter, def when absent.
func intParam(r *http.Request, name string, def int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

func (s *waysRoutes) waysCost(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	baseline, ok := intParam(r, "baseline", 0)
	if !ok {
		writeError(w, http.StatusBadRequest, "baseline must be an Attempt's index (an integer)")
		return
	}
	q := r.URL.Query()
	rep, err := s.cmds.Cost(ps.ByName("id"), q.Get("attempt_set_id"), baseline, q.Get("baseline_provider"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *waysRoutes) waysTrajectories(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	baseline, ok := intParam(r, "baseline", 0)
	if !ok {
		writeError(w, http.StatusBadRequest, "baseline must be an Attempt's index (an integer)")
		return
	}
	setID := r.URL.Query().Get("attempt_set_id")
	lanes, err := s.cmds.Trajectories(ps.ByName("id"), setID, baseline)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, trajectoriesView{setID, baseline, lanes})
}

func (s *waysRoutes) waysProbe(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	var models []string
	if m := q.Get("models"); m != "" {
		models = strings.Split(m, ",")
	}
	res, err := s.cmds.Probe(r.Context(), q.Get("provider"), models)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, probeView{q.Get("provider"), res})
}

// answerSet writes a set command's outcome: the set's results, or the error.
func (s *waysRoutes) answerSet(w http.ResponseWriter) func(projections.AttemptSet, error) {
	return func(a projections.AttemptSet, err error) {
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, s.resultsOf(a))
	}
}

// The Ways frames (spec: Server frames: Attempts, and the Workspace
// ownership frames).

type ownershipFrame struct {
	Kind         string `json:"kind"` // workspace-attempt-changing or -settled
	Workspace    string `json:"workspace"`
	Session      string `json:"session,omitempty"`
	AttemptSetID string `json:"attempt_set_id"`
}

type laneStartedFrame struct {
	Kind         string `json:"kind"` // "lane-started"
	Run          string `json:"run"`
	AttemptSetID string `json:"attempt_set_id"`
	Session      string `json:"session"`
	Index        int    `json:"index"`
	Model        string `json:"model,omitempty"`
	Agent        string `json:"agent"`
	TurnID       string `json:"turn_id"`
	// AgentName and AgentVersion are what an outside agent reported of
	// itself.
	AgentName    string `json:"agent_name,omitempty"`
	AgentVersion string `json:"agent_version,omitempty"`
}

type laneVerifiedFrame struct {
	Kind         string   `json:"kind"` // "lane-verified"
	AttemptSetID string   `json:"attempt_set_id"`
	Session      string   `json:"session"`
	Index        int      `json:"index"`
	Passed       bool     `json:"passed"`
	ChangedFiles []string `json:"changed_files"`
	TouchedTests []string `json:"touched_tests"`
}

// The live frames of the Attempt set events (liveFrames).

func (*frameSource) attemptSetStartedFrame(c projections.Change, e events.AttemptSetStarted) any {
	return ownershipFrame{Kind: "workspace-attempt-changing", Workspace: e.Workspace, Session: e.Session, AttemptSetID: c.AggregateID}
}

func (*frameSource) attemptSetSettledFrame(c projections.Change, e events.AttemptSetSettled) any {
	return ownershipFrame{Kind: "workspace-attempt-settled", Workspace: e.Workspace, AttemptSetID: c.AggregateID}
}

func (s *frameSource) laneStartedFrame(c projections.Change, e events.LaneStarted) any {
	return laneStartedFrame{Kind: "lane-started", Run: e.Run, AttemptSetID: c.AggregateID, Session: s.setSession(c.AggregateID), Index: e.Index,
		Model: e.Model, Agent: e.Agent, TurnID: e.TurnID, AgentName: e.AgentName, AgentVersion: e.AgentVersion}
}

func (s *frameSource) laneVerifiedFrame(c projections.Change, e events.LaneVerified) any {
	return laneVerifiedFrame{Kind: "lane-verified", AttemptSetID: c.AggregateID, Session: s.setSession(c.AggregateID), Index: e.Index,
		Passed: e.Passed, ChangedFiles: e.Changed, TouchedTests: e.TouchedTests}
}

func (*frameSource) laneToolStartedFrame(c projections.Change, e events.LaneToolStarted) any {
	return toolCallFrame{Kind: "tool-call", Workflow: e.Run, Agent: e.Agent, TurnID: e.TurnID, CallID: e.CallID,
		Occurrence: e.Occurrence, Name: e.Name, Phase: "start", Arguments: e.Arguments.Value(), AttemptSetID: c.AggregateID}
}

func (*frameSource) lanePlannedFrame(c projections.Change, e events.LanePlanned) any {
	return turnPlanFrame{Kind: "turn-plan", Workflow: e.Run, Agent: e.Agent, TurnID: e.TurnID, Entries: e.Entries, AttemptSetID: c.AggregateID}
}

func (*frameSource) laneToolFinishedFrame(c projections.Change, e events.LaneToolFinished) any {
	result := e.Result.String()
	return toolCallFrame{Kind: "tool-call", Workflow: e.Run, Agent: e.Agent, TurnID: e.TurnID, CallID: e.CallID,
		Occurrence: e.Occurrence, Name: e.Name, Phase: "result", Result: &result, IsError: e.IsError, DurationMS: e.DurationMS,
		AttemptSetID: c.AggregateID}
}

// setSession is the Session of Attempt set id, "" if it is unknown.
func (s *frameSource) setSession(id string) string {
	if a, ok := s.read.AttemptSet(id); ok {
		return a.Session
	}
	return ""
}
