package ways

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"lathe/commands/core"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/llm"
	"lathe/runtime/usage"
)

// The Ways control calls (Judge, Plan, Probe) and the pure reads over a
// set (Cost, Trajectories). A control call is one stateless inference on
// an Agent (runtime/agent.Control); its usage is control usage, outside
// the Attempts' totals, and it is reported on failure too (ControlError).

// ControlError is a failed control call with the usage it paid for.
type ControlError struct {
	Err   error
	Usage AttemptUsage
}

func (e *ControlError) Error() string { return e.Err.Error() }
func (e *ControlError) Unwrap() error { return e.Err }

// controlUsage is the usage of a control inference, priced.
func controlUsage(r agent.ControlResult) AttemptUsage {
	u := AttemptUsage{View: r.Usage.View(), USDKnown: r.Cost.Known}
	if r.Cost.PriceKnown {
		usd := r.Cost.USD
		u.USD = &usd
	}
	return u
}

// control runs a control inference and turns its failure into a
// ControlError (a provider failure is 502-class: ErrUnavailable).
func (s *Ways) control(ctx context.Context, req agent.ControlRequest) (agent.ControlResult, AttemptUsage, error) {
	if s.Opts.Runtime == nil {
		return agent.ControlResult{}, AttemptUsage{View: usage.Tokens{TokenUsageKnown: true}.View()}, fmt.Errorf("%w: no Agent runtime is configured", core.ErrUnavailable)
	}
	res, err := s.Opts.Runtime.Control(ctx, req)
	u := controlUsage(res)
	switch {
	case errors.Is(err, agent.ErrUnknownAgent):
		return res, u, &ControlError{fmt.Errorf("%w: %v", core.ErrNotFound, err), u}
	case err != nil:
		return res, u, &ControlError{fmt.Errorf("%w: %v", core.ErrUnavailable, err), u}
	}
	return res, u, nil
}

// structured returns the arguments of the model's call of tool, or, when
// it made none, its whole answer when that is one JSON object (optionally
// in one ```json fence). Anything else is no structured answer: free text
// is never read for one.
func structured(res agent.ControlResult, tool string) (json.RawMessage, bool) {
	for _, c := range res.Calls {
		if c.Name == tool {
			return c.Arguments, true
		}
	}
	text := strings.TrimSpace(res.Text)
	if rest, ok := strings.CutPrefix(text, "```json"); ok {
		if body, ok := strings.CutSuffix(strings.TrimSpace(rest), "```"); ok {
			text = strings.TrimSpace(body)
		}
	}
	if strings.HasPrefix(text, "{") && json.Valid([]byte(text)) {
		return json.RawMessage(text), true
	}
	return nil, false
}

// decodeStrict decodes one JSON object with no unknown field.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}

const rankingTool = "submit_ranking"

var rankingSchema = json.RawMessage(`{"type":"object","properties":{"ranking":{"type":"array","items":{"type":"object","properties":{"index":{"type":"integer","description":"the Attempt's index"},"rank":{"type":"integer","description":"1 is the best"},"reason":{"type":"string"}},"required":["index","rank","reason"]}}},"required":["ranking"]}`)

// ParseRanking reads a judge's structured ranking of the survivors: each
// survivor exactly once, ranks exactly 1..K, each with a reason.
func ParseRanking(data []byte, survivors []int) ([]events.Ranking, error) {
	var body struct {
		Ranking []events.Ranking `json:"ranking"`
	}
	if err := decodeStrict(data, &body); err != nil {
		return nil, fmt.Errorf("the ranking is not {ranking:[{index, rank, reason}]}: %v", err)
	}
	k := len(survivors)
	if len(body.Ranking) != k {
		return nil, fmt.Errorf("the ranking lists %d Attempts, not the %d survivors", len(body.Ranking), k)
	}
	seenIndex, seenRank := map[int]bool{}, map[int]bool{}
	for _, r := range body.Ranking {
		switch {
		case !slices.Contains(survivors, r.Index):
			return nil, fmt.Errorf("the ranking names Attempt %d, which is not a survivor %v", r.Index, survivors)
		case seenIndex[r.Index]:
			return nil, fmt.Errorf("the ranking names Attempt %d twice", r.Index)
		case r.Rank < 1 || r.Rank > k || seenRank[r.Rank]:
			return nil, fmt.Errorf("rank %d is not a unique rank from 1 to %d", r.Rank, k)
		case strings.TrimSpace(r.Reason) == "" || !utf8.ValidString(r.Reason):
			return nil, fmt.Errorf("Attempt %d has no reason", r.Index)
		}
		seenIndex[r.Index], seenRank[r.Rank] = true, true
	}
	out := slices.Clone(body.Ranking)
	slices.SortFunc(out, func(a, b events.Ranking) int { return a.Rank - b.Rank })
	return out, nil
}

// maxJudgedPatch bounds each survivor's diff in the judge's prompt.
const maxJudgedPatch = 24 << 10

// Judge has a judge Agent rank the passing, non-empty survivors, from the
// task and each one's diff and output, and records the ranking.
func (s *Ways) Judge(ctx context.Context, session, setID, agentID string) (projections.AttemptSet, AttemptUsage, error) {
	none := NoAttemptUsage()
	if strings.TrimSpace(agentID) == "" {
		return projections.AttemptSet{}, none, fmt.Errorf("%w: agent_id is required", core.ErrInvalid)
	}
	a, err := s.set(session, setID)
	if err != nil {
		return a, none, err
	}
	if st := a.State(); st != projections.SetReady {
		return a, none, fmt.Errorf("%w: Ways set %q is %s; Judge needs every Attempt terminal and nothing kept", core.ErrConflict, setID, st)
	}
	ss, _ := s.Store.Session(session)
	var survivors []int
	var why []string
	for _, l := range a.Attempts {
		if reason := Keepable(l, ss.CheckCommand != nil); reason != "" {
			why = append(why, reason)
			continue
		}
		survivors = append(survivors, l.Index)
	}
	if len(survivors) < 2 {
		return a, none, fmt.Errorf("%w: Judge needs at least two passing, non-empty survivors; %d survive (%s)", core.ErrConflict, len(survivors), strings.Join(why, "; "))
	}
	var r events.BlobReader
	if s.Opts.Blobs != nil {
		r = s.Opts.Blobs
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Task:\n%s\n\nRank these %d Attempts at the task, best first, by calling %s once.\n", a.Input.String(), len(survivors), rankingTool)
	for _, i := range survivors {
		l := a.Attempts[i]
		patch, _ := l.Patch.Resolve(r)
		p := patch.String()
		if len(p) > maxJudgedPatch {
			p = p[:maxJudgedPatch] + "\n[… diff cut]"
		}
		fmt.Fprintf(&b, "\n## Attempt %d (model %s)\nAnswer:\n%s\n\nDiff:\n```diff\n%s\n```\n", i, l.Model, l.Turn.Output.String(), p)
	}
	res, u, err := s.control(ctx, agent.ControlRequest{AgentID: agentID,
		System: "You judge competing attempts at one coding task. Rank every attempt you are shown, each once, with a reason.",
		Input:  b.String(), Tools: []llm.Tool{{Name: rankingTool, Description: "Submit the ranking of the attempts.", Schema: rankingSchema}}})
	if err != nil {
		return a, u, err
	}
	data, ok := structured(res, rankingTool)
	if !ok {
		return a, u, &ControlError{fmt.Errorf("%w: the judge answered without a structured ranking (no %s call, no JSON object)", core.ErrUnavailable, rankingTool), u}
	}
	ranking, err := ParseRanking(data, survivors)
	if err != nil {
		return a, u, &ControlError{fmt.Errorf("%w: the judge's ranking is malformed: %v", core.ErrUnavailable, err), u}
	}
	ev := events.AttemptSetJudged{Agent: res.Agent, Model: res.Model, Ranking: ranking, USD: u.USD,
		Usage: u.Tokens}
	// The set may have moved on while the judge thought: record the
	// ranking only for the set as it was judged.
	a, unlock, err := s.lockedSet(session, setID)
	if err != nil {
		return a, u, &ControlError{err, u}
	}
	defer unlock()
	if st := a.State(); st != projections.SetReady {
		return a, u, &ControlError{fmt.Errorf("%w: Ways set %q became %s while it was judged", core.ErrConflict, setID, st), u}
	}
	if err := s.Append(context.WithoutCancel(ctx), []journal.Event{events.New(setID, ev)}); err != nil {
		return a, u, &ControlError{err, u}
	}
	a, _ = s.Store.AttemptSet(setID)
	return a, u, nil
}

// waysPlanTool is the Ways planner's structured answer (a list of steps;
// not the lattice coordinator's submit_plan, whose plan is subtasks).
const waysPlanTool = "submit_steps"

var waysPlanSchema = json.RawMessage(`{"type":"object","properties":{"steps":{"type":"array","items":{"type":"string"},"description":"the plan, one step each"}},"required":["steps"]}`)

// Plan is a plan for a task and the instruction the lanes would get.
type Plan struct {
	Plan         []string     `json:"plan"`
	Instruction  string       `json:"instruction"`
	ControlUsage AttemptUsage `json:"control_usage"`
}

// Plan has an Agent plan a task before Ways start: its steps, and the
// rendered instruction (the task with the plan) to start them with.
func (s *Ways) Plan(ctx context.Context, session, task, agentID string) (Plan, error) {
	out := Plan{Plan: []string{}, ControlUsage: NoAttemptUsage()}
	if _, ok := s.Store.Session(session); !ok {
		return out, fmt.Errorf("%w: session %q", core.ErrNotFound, session)
	}
	switch {
	case strings.TrimSpace(task) == "":
		return out, fmt.Errorf("%w: task must not be empty", core.ErrInvalid)
	case len(task) > maxTaskLen || !utf8.ValidString(task):
		return out, fmt.Errorf("%w: task must be valid UTF-8 of at most %d bytes", core.ErrInvalid, maxTaskLen)
	case strings.TrimSpace(agentID) == "":
		return out, fmt.Errorf("%w: agent_id is required", core.ErrInvalid)
	}
	res, u, err := s.control(ctx, agent.ControlRequest{AgentID: agentID,
		System: "You plan coding tasks for agents that will each attempt them independently. Give a short plan of concrete steps by calling " + waysPlanTool + ".",
		Input:  "Task:\n" + task, Tools: []llm.Tool{{Name: waysPlanTool, Description: "Submit the plan.", Schema: waysPlanSchema}}})
	out.ControlUsage = u
	if err != nil {
		return out, err
	}
	data, ok := structured(res, waysPlanTool)
	var body struct {
		Steps []string `json:"steps"`
	}
	if !ok || decodeStrict(data, &body) != nil || len(body.Steps) == 0 {
		return out, &ControlError{fmt.Errorf("%w: the planner answered without a structured plan ({steps:[…]} through %s)", core.ErrUnavailable, waysPlanTool), u}
	}
	out.Plan = body.Steps
	var b strings.Builder
	b.WriteString(task)
	b.WriteString("\n\nPlan:\n")
	for i, st := range body.Steps {
		fmt.Fprintf(&b, "%d. %s\n", i+1, strings.TrimSpace(st))
	}
	out.Instruction = b.String()
	return out, nil
}

const probeTool = "report_status"

var probeSchema = json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"},"note":{"type":"string"}},"required":["ok","note"]}`)

// ProbeResult is one model's structured tool call check.
type ProbeResult struct {
	Model        string       `json:"model"`
	OK           bool         `json:"ok"`
	Error        string       `json:"error,omitempty"`
	ControlUsage AttemptUsage `json:"control_usage"`
}

// Probe checks, for each model on provider, whether it makes a
// well-formed structured tool call.
func (s *Ways) Probe(ctx context.Context, provider string, models []string) ([]ProbeResult, error) {
	if strings.TrimSpace(provider) == "" {
		return nil, fmt.Errorf("%w: provider is required", core.ErrInvalid)
	}
	if len(models) == 0 || len(models) > MaxLanes {
		return nil, fmt.Errorf("%w: models must name 1 to %d models, comma-separated", core.ErrInvalid, MaxLanes)
	}
	out := make([]ProbeResult, len(models))
	for i, m := range models {
		if strings.TrimSpace(m) == "" || len(m) > core.MaxModelName || strings.ContainsFunc(m, core.IsControl) {
			return nil, fmt.Errorf("%w: models[%d] is not a model name", core.ErrInvalid, i)
		}
		model := m
		res, u, err := s.control(ctx, agent.ControlRequest{Provider: provider, Model: &model,
			System: "Answer only by calling the tool you are given.",
			Input:  "Call " + probeTool + " with ok set to true and a one-line note.",
			Tools:  []llm.Tool{{Name: probeTool, Description: "Report that you can call tools.", Schema: probeSchema}}})
		out[i] = ProbeResult{Model: m, ControlUsage: u}
		if errors.Is(err, core.ErrNotFound) {
			return nil, err
		}
		if err != nil {
			out[i].Error = err.Error()
			continue
		}
		var body struct {
			OK   *bool  `json:"ok"`
			Note string `json:"note"`
		}
		call := slices.IndexFunc(res.Calls, func(c agent.Call) bool { return c.Name == probeTool })
		switch {
		case call < 0:
			out[i].Error = "the model made no " + probeTool + " call"
		case decodeStrict(res.Calls[call].Arguments, &body) != nil || body.OK == nil:
			out[i].Error = "the model's " + probeTool + " call has malformed arguments"
		default:
			out[i].OK = true
		}
	}
	return out, nil
}

// LaneCost is one lane's price, actual and on the baseline model. A nil
// USD is an unknown price, never zero; a known flag is true only when the
// price is known and the counts complete (otherwise the USD is a lower
// bound).
type LaneCost struct {
	Index    int    `json:"index"`
	Model    string `json:"model"`
	Provider string `json:"provider"`
	usage.View
	ActualUSD         *float64 `json:"actual_usd"`
	ActualCostKnown   bool     `json:"actual_cost_known"`
	BaselineUSD       *float64 `json:"baseline_usd"`
	BaselineCostKnown bool     `json:"baseline_cost_known"`
	Local             bool     `json:"local"`
}

// CostReport prices a set against a baseline model.
type CostReport struct {
	AttemptSetID      string     `json:"attempt_set_id"`
	BaselineIndex     int        `json:"baseline"`
	BaselineModel     string     `json:"baseline_model"`
	BaselineProvider  string     `json:"baseline_provider"`
	Lanes             []LaneCost `json:"lanes"`
	TotalUSD          *float64   `json:"total_usd"`
	ActualCostKnown   bool       `json:"actual_cost_known"`
	BaselineUSD       *float64   `json:"baseline_usd"`
	BaselineCostKnown bool       `json:"baseline_cost_known"`
	// Saved is max(0, baseline − total), known only when both are.
	Saved    *float64 `json:"saved"`
	AllLocal bool     `json:"all_local"`
}

// Cost prices each lane as it ran and, counterfactually, the same tokens on
// the baseline lane's model (on baselineProvider, or that lane's Agent's
// provider). The current set's cost stays readable after it settled; an
// older set's ID is stale (409), as for every set-scoped call.
func (s *Ways) Cost(session, setID string, baseline int, baselineProvider string) (CostReport, error) {
	a, err := s.set(session, setID)
	if err != nil {
		return CostReport{}, err
	}
	if s.Opts.Runtime == nil {
		return CostReport{}, fmt.Errorf("%w: no Agent runtime is configured", core.ErrUnavailable)
	}
	b, err := attempt(a, baseline)
	if err != nil {
		return CostReport{}, err
	}
	providerOf := func(agentID string) string {
		if v, err := s.Opts.Runtime.Agent(agentID); err == nil {
			return v.Provider
		}
		return ""
	}
	local := map[string]bool{}
	for _, p := range s.Opts.Runtime.Providers() {
		local[p.Name] = p.Kind == "ollama" || loopbackURL(p.BaseURL)
	}
	rep := CostReport{AttemptSetID: setID, BaselineIndex: baseline, BaselineModel: b.Model, BaselineProvider: baselineProvider,
		Lanes: make([]LaneCost, len(a.Attempts)), ActualCostKnown: true, BaselineCostKnown: true, AllLocal: true}
	if rep.BaselineProvider == "" {
		rep.BaselineProvider = providerOf(b.Agent)
	}
	// A total is given when every lane is priced; a lane's lower bound (a
	// failed lane's subtotal) makes it a lower bound, and its flag false.
	var total, base float64
	priced, basePriced := true, true
	for i, l := range a.Attempts {
		u := l.Turn.Usage
		lc := LaneCost{Index: l.Index, Model: l.Model, Provider: providerOf(l.Agent), View: u.View, ActualUSD: u.PricedUSD(), ActualCostKnown: u.CostKnown}
		lc.Local = local[lc.Provider]
		if lc.ActualUSD != nil {
			total += *lc.ActualUSD
		} else {
			priced = false
		}
		c := s.Opts.Runtime.Price(rep.BaselineProvider, b.Model, u.Tokens)
		lc.BaselineCostKnown = c.Known
		if c.PriceKnown {
			usd := c.USD
			lc.BaselineUSD, base = &usd, base+usd
		} else {
			basePriced = false
		}
		rep.ActualCostKnown = rep.ActualCostKnown && lc.ActualCostKnown
		rep.BaselineCostKnown = rep.BaselineCostKnown && lc.BaselineCostKnown
		rep.AllLocal = rep.AllLocal && lc.Local
		rep.Lanes[i] = lc
	}
	if priced {
		rep.TotalUSD = &total
	}
	if basePriced {
		rep.BaselineUSD = &base
	}
	if rep.ActualCostKnown && rep.BaselineCostKnown {
		saved := max(0, base-total)
		rep.Saved = &saved
	}
	return rep, nil
}

func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Act is one normalised tool call of a lane: what it did and to what.
type Act struct {
	Act    string `json:"act"` // read, edit, write, list, search, run or other
	Target string `json:"target"`
}

// TrajectoryRow is one step of the alignment of a lane to the baseline:
// agree (the same act and target in both), or diverge (one side only).
type TrajectoryRow struct {
	Op       string `json:"op"` // "agree" or "diverge"
	Baseline *Act   `json:"baseline,omitempty"`
	Lane     *Act   `json:"lane,omitempty"`
}

// Trajectory is one lane's acts and its alignment to the baseline lane.
type Trajectory struct {
	Index  int             `json:"index"`
	Acts   []Act           `json:"acts"`
	Rows   []TrajectoryRow `json:"rows"`
	Agreed int             `json:"agreed"`
}

// Trajectories normalises each lane's tool calls to acts and aligns every
// lane to the baseline lane (a longest common subsequence over act and
// target), so that a user sees where the Ways parted.
func (s *Ways) Trajectories(session, setID string, baseline int) ([]Trajectory, error) {
	a, err := s.set(session, setID)
	if err != nil {
		return nil, err
	}
	if _, err := attempt(a, baseline); err != nil {
		return nil, err
	}
	acts := make([][]Act, len(a.Attempts))
	for i, l := range a.Attempts {
		acts[i] = []Act{}
		for _, c := range l.Turn.ToolCalls {
			acts[i] = append(acts[i], NormaliseAct(c.Name, c.Arguments.Value()))
		}
	}
	out := make([]Trajectory, len(a.Attempts))
	for i := range a.Attempts {
		rows := Align(acts[baseline], acts[i])
		t := Trajectory{Index: i, Acts: acts[i], Rows: rows}
		for _, r := range rows {
			if r.Op == "agree" {
				t.Agreed++
			}
		}
		out[i] = t
	}
	return out, nil
}

// NormaliseAct maps a tool call to its act and target.
func NormaliseAct(name string, args json.RawMessage) Act {
	var v struct {
		Path    string `json:"path"`
		Command string `json:"command"`
		Pattern string `json:"pattern"`
		Query   string `json:"query"`
	}
	_ = json.Unmarshal(args, &v)
	act := map[string]string{"read_file": "read", "edit_file": "edit", "write_file": "write", "list_files": "list", "search": "search", "shell": "run"}[name]
	target := v.Path
	switch act {
	case "":
		return Act{Act: "other", Target: name}
	case "run":
		target = strings.Join(strings.Fields(v.Command), " ")
	case "search":
		target = v.Pattern
		if target == "" {
			target = v.Query
		}
	case "list":
		if target == "" {
			target = "."
		}
	}
	return Act{Act: act, Target: target}
}

// Align aligns lane to base by a longest common subsequence of acts.
func Align(base, lane []Act) []TrajectoryRow {
	n, m := len(base), len(lane)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if base[i] == lane[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	rows := []TrajectoryRow{}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && base[i] == lane[j]:
			rows = append(rows, TrajectoryRow{Op: "agree", Baseline: &base[i], Lane: &lane[j]})
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			rows = append(rows, TrajectoryRow{Op: "diverge", Lane: &lane[j]})
			j++
		default:
			rows = append(rows, TrajectoryRow{Op: "diverge", Baseline: &base[i]})
			i++
		}
	}
	return rows
}
