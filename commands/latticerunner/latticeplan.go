package latticerunner

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"lathe/commands/core"
	"lathe/commands/lattice"

	"lathe/journal/events"
	"lathe/runtime/agent/tools"
	"lathe/runtime/llm"
	"lathe/runtime/llm/catalog"
)

// The coordinator's plan is structured output: the one call of the
// submit_plan tool, whose arguments are checked against the plan's shape
// (strictly: an unknown field is refused) and its dependency graph. A plan
// is never read from free text.

// Plan bounds: the plan is one journal event.
const (
	MaxSubtasks     = 32
	MaxPlanGoal     = 4 << 10
	MaxSubtaskTitle = 200
	MaxSubtaskText  = 4 << 10
	// maxPlanEncoded bounds the plan as JSON, so that with its Workers'
	// names it stays one event (journal.MaxEventData).
	maxPlanEncoded    = 192 << 10
	maxSubtaskToolRef = 32
)

var subtaskIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// planSchema is submit_plan's argument schema.
var planSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["goal","subtasks"],"properties":{` +
	`"goal":{"type":"string","description":"the user's goal in one sentence"},` +
	`"subtasks":{"type":"array","minItems":1,"maxItems":32,"items":{"type":"object","additionalProperties":false,"required":["id","title","instruction"],"properties":{` +
	`"id":{"type":"string","description":"short unique ID: letters, digits, _ . -"},` +
	`"title":{"type":"string"},` +
	`"instruction":{"type":"string","description":"what the Worker is to do, self-contained"},` +
	`"needs_tools":{"type":"array","items":{"type":"string"},"description":"tools the Worker must have"},` +
	`"depends_on":{"type":"array","items":{"type":"string"},"description":"IDs of subtasks whose results this one needs"}}}}}}`)

type PlanArgs struct {
	Goal     string        `json:"goal"`
	Subtasks []PlanSubtask `json:"subtasks"`
}

type PlanSubtask struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Instruction string   `json:"instruction"`
	NeedsTools  []string `json:"needs_tools"`
	DependsOn   []string `json:"depends_on"`
}

// ErrPlan marks a plan that is not valid structured output.
var ErrPlan = errors.New("invalid plan")

// ParsePlan decodes and checks submit_plan's arguments: the goal and the
// subtasks (Worker unassigned), in the plan's order.
func ParsePlan(args json.RawMessage) (string, []events.LatticeSubtask, error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	var p PlanArgs
	if err := dec.Decode(&p); err != nil {
		return "", nil, fmt.Errorf("%w: the arguments are not a plan object: %v", ErrPlan, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", nil, fmt.Errorf("%w: more than one JSON value", ErrPlan)
	}
	if err := checkPlanText("goal", p.Goal, MaxPlanGoal); err != nil {
		return "", nil, err
	}
	if len(p.Subtasks) == 0 || len(p.Subtasks) > MaxSubtasks {
		return "", nil, fmt.Errorf("%w: a plan has 1 to %d subtasks, not %d", ErrPlan, MaxSubtasks, len(p.Subtasks))
	}
	ids := make([]string, len(p.Subtasks))
	for i, st := range p.Subtasks {
		if !subtaskIDPattern.MatchString(st.ID) {
			return "", nil, fmt.Errorf("%w: subtasks[%d].id %q must be 1-64 letters, digits, _ . or -", ErrPlan, i, st.ID)
		}
		if slices.Contains(ids[:i], st.ID) {
			return "", nil, fmt.Errorf("%w: subtask ID %q is used twice", ErrPlan, st.ID)
		}
		ids[i] = st.ID
	}
	out := make([]events.LatticeSubtask, len(p.Subtasks))
	deps := map[string][]string{}
	for i, st := range p.Subtasks {
		if err := checkPlanText(fmt.Sprintf("subtask %q title", st.ID), st.Title, MaxSubtaskTitle); err != nil {
			return "", nil, err
		}
		if err := checkPlanText(fmt.Sprintf("subtask %q instruction", st.ID), st.Instruction, MaxSubtaskText); err != nil {
			return "", nil, err
		}
		if len(st.NeedsTools) > maxSubtaskToolRef || len(st.DependsOn) > MaxSubtasks {
			return "", nil, fmt.Errorf("%w: subtask %q lists too many tools or dependencies", ErrPlan, st.ID)
		}
		for j, name := range st.NeedsTools {
			if strings.TrimSpace(name) == "" || len(name) > 200 || slices.Contains(st.NeedsTools[:j], name) {
				return "", nil, fmt.Errorf("%w: subtask %q needs_tools[%d] must name a tool, once", ErrPlan, st.ID, j)
			}
		}
		for j, d := range st.DependsOn {
			switch {
			case d == st.ID:
				return "", nil, fmt.Errorf("%w: subtask %q depends on itself", ErrPlan, st.ID)
			case !slices.Contains(ids, d):
				return "", nil, fmt.Errorf("%w: subtask %q depends on unknown subtask %q", ErrPlan, st.ID, d)
			case slices.Contains(st.DependsOn[:j], d):
				return "", nil, fmt.Errorf("%w: subtask %q names dependency %q twice", ErrPlan, st.ID, d)
			}
		}
		deps[st.ID] = st.DependsOn
		out[i] = events.LatticeSubtask{ID: st.ID, Title: st.Title, Instruction: st.Instruction,
			NeedsTools: slices.Clone(st.NeedsTools), DependsOn: slices.Clone(st.DependsOn)}
	}
	if cycle := CycleIn(ids, deps); cycle != nil {
		return "", nil, fmt.Errorf("%w: the subtasks' dependencies make a cycle: %s", ErrPlan, strings.Join(cycle, " → "))
	}
	if b, _ := json.Marshal(events.LatticePlanned{Goal: p.Goal, Subtasks: out}); len(b) > maxPlanEncoded {
		return "", nil, fmt.Errorf("%w: the plan is %d bytes as JSON; at most %d", ErrPlan, len(b), maxPlanEncoded)
	}
	return p.Goal, out, nil
}

func checkPlanText(field, v string, limit int) error {
	if strings.TrimSpace(v) == "" || len(v) > limit || !utf8.ValidString(v) {
		return fmt.Errorf("%w: the %s must be 1-%d bytes of text", ErrPlan, field, limit)
	}
	return nil
}

// CycleIn returns a dependency cycle of the graph (node → the nodes it
// waits for), as a path that starts and ends at one node, or nil.
func CycleIn(nodes []string, edges map[string][]string) []string {
	const (
		open = 1
		done = 2
	)
	state := map[string]int{}
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		switch state[n] {
		case open:
			i := slices.Index(path, n)
			return append(slices.Clone(path[i:]), n)
		case done:
			return nil
		}
		state[n] = open
		path = append(path, n)
		for _, m := range edges[n] {
			if c := visit(m); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	for _, n := range nodes {
		if c := visit(n); c != nil {
			return c
		}
	}
	return nil
}

// planBox is the coordinator's toolbox while it plans: submit_plan alone.
// It keeps the last valid plan submitted.
type planBox struct {
	goal     string
	subtasks []events.LatticeSubtask
}

func (*planBox) Tools() []llm.Tool {
	return []llm.Tool{{Name: lattice.PlanTool, Schema: planSchema,
		Description: "Submit the plan: the goal and the subtasks for the Workers. Call it exactly once; it ends planning."}}
}

// Call is only ever submit_plan: the turn loop dispatches no other name.
func (b *planBox) Call(_ context.Context, _ string, args json.RawMessage) tools.Result {
	goal, subtasks, err := ParsePlan(args)
	if err != nil {
		return tools.Result{Output: err.Error(), IsError: true}
	}
	b.goal, b.subtasks = goal, subtasks
	return tools.Result{Output: fmt.Sprintf("plan accepted: %d subtasks", len(subtasks))}
}

// Bidder is one Worker in a plan's auction.
type Bidder struct {
	Id     string
	name   string
	Tools  []string // the tools it has in this Session
	Load   int      // requests it runs now
	Budget catalog.Budget
}

// Auction assigns each subtask, in plan order, to a Worker by a
// deterministic bid: only Workers with every tool the subtask needs bid;
// the lowest load wins (what it runs now plus what this auction already
// gave it), then the larger budget (unlimited above any limit: output
// tokens first, then USD), then the earlier Worker in the team's order. A
// subtask no Worker can take fails the auction.
func Auction(subtasks []events.LatticeSubtask, bidders []Bidder) ([]events.LatticeSubtask, error) {
	out := slices.Clone(subtasks)
	won := make([]int, len(bidders))
	for i := range out {
		best := -1
		for j, b := range bidders {
			if !hasAll(b.Tools, out[i].NeedsTools) {
				continue
			}
			if best < 0 || betterBid(b, won[j], bidders[best], won[best]) {
				best = j
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("%w: no Worker of this session can take subtask %q: it needs the tools %q", core.ErrInvalid, out[i].ID, out[i].NeedsTools)
		}
		won[best]++
		out[i].Worker = bidders[best].Id
	}
	return out, nil
}

// betterBid reports whether a (having won wonA so far) outbids b; ties go
// to b, the earlier Worker.
func betterBid(a Bidder, wonA int, b Bidder, wonB int) bool {
	if c := cmp.Compare(a.Load+wonA, b.Load+wonB); c != 0 {
		return c < 0
	}
	if c := compareLimit(float64(a.Budget.MaxOutputTokens), float64(b.Budget.MaxOutputTokens)); c != 0 {
		return c > 0
	}
	return compareLimit(a.Budget.MaxUSD, b.Budget.MaxUSD) > 0
}

// compareLimit orders budget limits by how much they allow: 0 (unlimited)
// above every limit.
func compareLimit(a, b float64) int {
	switch {
	case a == b:
		return 0
	case a == 0:
		return 1
	case b == 0:
		return -1
	}
	return cmp.Compare(a, b)
}

func hasAll(have, need []string) bool {
	for _, n := range need {
		if !slices.Contains(have, n) {
			return false
		}
	}
	return true
}

// Prerequisites is each subtask's wait list: the subtasks it depends on,
// and every subtask of the Workers its own Worker depends on (an Agent's
// dependencies: their TaskCompleted comes before it activates). A cycle
// through either is refused.
func Prerequisites(subtasks []events.LatticeSubtask, agentDeps func(worker string) []string) (map[string][]string, error) {
	byWorker := map[string][]string{}
	ids := make([]string, len(subtasks))
	for i, st := range subtasks {
		byWorker[st.Worker] = append(byWorker[st.Worker], st.ID)
		ids[i] = st.ID
	}
	pre := map[string][]string{}
	for _, st := range subtasks {
		p := slices.Clone(st.DependsOn)
		for _, d := range agentDeps(st.Worker) {
			if d != st.Worker {
				p = append(p, byWorker[d]...)
			}
		}
		slices.Sort(p)
		pre[st.ID] = slices.Compact(p)
	}
	if cycle := CycleIn(ids, pre); cycle != nil {
		return nil, fmt.Errorf("%w: the plan's dependencies and the Workers' dependencies make a cycle: %s", core.ErrInvalid, strings.Join(cycle, " → "))
	}
	return pre, nil
}
