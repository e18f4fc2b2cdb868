package automations

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"lathe/commands/core"

	"lathe/journal/events"
)

// InvalidAutomation is a record refused before save: ErrInvalid, naming the
// offending node or edge so the editor can show it on the graph.
type InvalidAutomation struct {
	Node string // the node's ID, when a node is at fault
	Edge string // "from->to", when an edge is
	msg  string
}

func (e *InvalidAutomation) Error() string { return e.msg }
func (e *InvalidAutomation) Unwrap() error { return core.ErrInvalid }

func badNode(id, format string, a ...any) error {
	return &InvalidAutomation{Node: id, msg: fmt.Sprintf("node %q: ", id) + fmt.Sprintf(format, a...)}
}

func badEdge(e events.Edge, format string, a ...any) error {
	key := e.From + "->" + e.To
	return &InvalidAutomation{Edge: key, msg: fmt.Sprintf("edge %s: ", key) + fmt.Sprintf(format, a...)}
}

func badRecord(format string, a ...any) error {
	return &InvalidAutomation{msg: fmt.Sprintf(format, a...)}
}

// Automation limits.
const (
	maxAutomationNodes = 1000
	// maxAutomationBytes bounds an encoded record: a run's start event holds
	// the graph whole, and events stay small.
	maxAutomationBytes = 128 << 10
	minEvery           = time.Second
)

// IdPattern is an Automation's or a node's ID: it appears in URL paths,
// run keys ("m.0", "sub.gate") and NATS subjects.
var IdPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// TemplateToken is one {{…}} of a template.
var TemplateToken = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// ParseEvery reads a schedule's every: a positive count of s, m, h or d,
// at least one second.
func ParseEvery(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("every %q is not like 30s, 5m, 2h or 1d", s)
	}
	n, err := strconv.ParseUint(s[:len(s)-1], 10, 31)
	if err != nil {
		return 0, fmt.Errorf("every %q is not like 30s, 5m, 2h or 1d", s)
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[s[len(s)-1]]
	if unit == 0 {
		return 0, fmt.Errorf("every %q is not like 30s, 5m, 2h or 1d", s)
	}
	if time.Duration(n) > math.MaxInt64/unit {
		return 0, fmt.Errorf("every %q is too long", s)
	}
	d := time.Duration(n) * unit
	if d < minEvery {
		return 0, fmt.Errorf("every %q is shorter than 1s", s)
	}
	return d, nil
}

// validFolder checks a folder path: segments of printable characters, no
// empty, "." or ".." segment, no leading or trailing slash.
func validFolder(p string) error {
	if p == "" || len(p) > 512 {
		return fmt.Errorf("%w: folder path %q must be 1 to 512 bytes", core.ErrInvalid, p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.TrimSpace(seg) != seg || strings.IndexFunc(seg, unicode.IsControl) >= 0 {
			return fmt.Errorf("%w: folder path %q has an empty, dot or badly spaced segment", core.ErrInvalid, p)
		}
	}
	return nil
}

// automationLookup answers the other Automations a record's subgraphs
// name.
type automationLookup func(id string) (events.Automation, bool)

// CheckAutomation validates a record before save: its fields, every node
// (kind, required fields, references, regexes), every edge, that the
// edges make no cycle (a map's body is not an edge), and that its
// subgraphs make no cycle through the saved Automations.
func (s *AutomationRecords) CheckAutomation(a *events.Automation, lookup automationLookup) error {
	if !IdPattern.MatchString(a.ID) {
		return badRecord("id %q must be 1 to 64 letters, digits, '-' or '_'", a.ID)
	}
	name, err := core.CleanName("name", a.Name)
	if err != nil {
		return badRecord("%s", strings.TrimPrefix(err.Error(), core.ErrInvalid.Error()+": "))
	}
	a.Name = name
	if a.Folder != nil {
		if err := validFolder(*a.Folder); err != nil {
			return badRecord("%s", strings.TrimPrefix(err.Error(), core.ErrInvalid.Error()+": "))
		}
	}
	if err := s.checkTrigger(a.Trigger); err != nil {
		return err
	}
	if len(a.Nodes) == 0 {
		return badRecord("an Automation needs at least one node")
	}
	if len(a.Nodes) > maxAutomationNodes {
		return badRecord("an Automation has at most %d nodes", maxAutomationNodes)
	}
	byID := map[string]*events.Node{}
	for i := range a.Nodes {
		n := &a.Nodes[i]
		if !IdPattern.MatchString(n.ID) {
			return badNode(n.ID, "id must be 1 to 64 letters, digits, '-' or '_'")
		}
		if byID[n.ID] != nil {
			return badNode(n.ID, "the id is used twice")
		}
		byID[n.ID] = n
	}
	bodies := map[string]string{} // body node → its map
	for i := range a.Nodes {
		if err := s.checkNode(&a.Nodes[i], byID, bodies, lookup); err != nil {
			return err
		}
	}
	seen := map[events.Edge]bool{}
	for _, e := range a.Edges {
		from, to := byID[e.From], byID[e.To]
		switch {
		case from == nil:
			return badEdge(e, "from names no node %q", e.From)
		case to == nil:
			return badEdge(e, "to names no node %q", e.To)
		case seen[e]:
			return badEdge(e, "is listed twice")
		case bodies[e.From] != "" || bodies[e.To] != "":
			return badEdge(e, "touches %q, the body of map %q, which runs only inside it", pick(bodies[e.From] != "", e.From, e.To), pick(bodies[e.From] != "", bodies[e.From], bodies[e.To]))
		}
		seen[e] = true
		if e.Branch != "" {
			if from.Kind != events.NodeConditional {
				return badEdge(e, "names branch %q, but %q is not a conditional", e.Branch, e.From)
			}
			if e.Branch != "default" && e.Branch != from.Default && !slices.ContainsFunc(from.Branches, func(b events.Branch) bool { return b.Name == e.Branch }) {
				return badEdge(e, "names branch %q, which conditional %q does not have", e.Branch, e.From)
			}
		}
	}
	if cyc := findCycle(a.Nodes, a.Edges); cyc != "" {
		return badNode(cyc, "is on a cycle of edges (only a map's body may repeat)")
	}
	if raw, err := json.Marshal(a); err != nil || len(raw) > maxAutomationBytes {
		return fmt.Errorf("%w: the record is larger than %d KiB", core.ErrTooLarge, maxAutomationBytes>>10)
	}
	return nil
}

func pick[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}

func (s *AutomationRecords) checkTrigger(t events.Trigger) error {
	switch t.Kind {
	case events.TriggerManual:
	case events.TriggerSchedule:
		if _, err := ParseEvery(t.Every); err != nil {
			return badRecord("trigger: %v", err)
		}
	case events.TriggerOnEvent:
		if strings.TrimSpace(t.Event) == "" {
			return badRecord("trigger: on_event needs event")
		}
	case events.TriggerOnSkill:
		if t.SkillID == "" {
			return badRecord("trigger: on_skill needs skill_id")
		}
		if !slices.ContainsFunc(s.Opts.Skills, func(sk core.SkillSpec) bool { return sk.ID == t.SkillID }) {
			return badRecord("trigger: no Skill %q is configured", t.SkillID)
		}
	case "":
		return badRecord("trigger: kind is required (manual, schedule, on_event or on_skill)")
	default:
		return badRecord("trigger: unknown kind %q (manual, schedule, on_event or on_skill)", t.Kind)
	}
	return nil
}

func (s *AutomationRecords) checkNode(n *events.Node, byID map[string]*events.Node, bodies map[string]string, lookup automationLookup) error {
	need := func(field, v string) error {
		if strings.TrimSpace(v) == "" {
			return badNode(n.ID, "%s is required for a %s node", field, n.Kind)
		}
		return nil
	}
	switch n.Kind {
	case events.NodeAgent:
		if err := need("agent_id", n.AgentID); err != nil {
			return err
		}
		if len(s.Agents) > 0 && !s.Agents[n.AgentID] {
			return badNode(n.ID, "no Agent %q is configured", n.AgentID)
		}
		if err := need("input", n.Input); err != nil {
			return err
		}
	case events.NodeTool:
		if err := need("tool_id", n.ToolID); err != nil {
			return err
		}
	case events.NodeConditional:
		if err := need("input", n.Input); err != nil {
			return err
		}
		if len(n.Branches) == 0 && n.Default == "" {
			return badNode(n.ID, "a conditional needs branches or a default")
		}
		names := map[string]bool{}
		for _, b := range n.Branches {
			if strings.TrimSpace(b.Name) == "" {
				return badNode(n.ID, "a branch needs a name")
			}
			if names[b.Name] {
				return badNode(n.ID, "branch %q is named twice", b.Name)
			}
			names[b.Name] = true
			switch b.When {
			case "always", "equals", "contains", "not_empty":
			case "matches":
				if _, err := regexp.Compile(b.Value); err != nil {
					return badNode(n.ID, "branch %q: bad regex: %v", b.Name, err)
				}
			case "":
				return badNode(n.ID, "branch %q: when is required", b.Name)
			default:
				return badNode(n.ID, "branch %q: unknown when %q (always, equals, contains, matches or not_empty)", b.Name, b.When)
			}
		}
	case events.NodeMap:
		if err := need("input", n.Input); err != nil {
			return err
		}
		if err := need("body_node", n.BodyNode); err != nil {
			return err
		}
		body := byID[n.BodyNode]
		switch {
		case body == nil:
			return badNode(n.ID, "body_node names no node %q", n.BodyNode)
		case n.BodyNode == n.ID:
			return badNode(n.ID, "a map cannot be its own body")
		case bodies[n.BodyNode] != "":
			return badNode(n.ID, "body_node %q is already the body of map %q", n.BodyNode, bodies[n.BodyNode])
		}
		bodies[n.BodyNode] = n.ID
	case events.NodeSubgraph:
		if err := need("automation_id", n.AutomationID); err != nil {
			return err
		}
		if n.AutomationID != "" && !IdPattern.MatchString(n.AutomationID) {
			return badNode(n.ID, "automation_id %q is not an Automation ID", n.AutomationID)
		}
		if _, ok := lookup(n.AutomationID); !ok {
			return badNode(n.ID, "automation_id names no Automation %q", n.AutomationID)
		}
		if path := subgraphCycle(n.AutomationID, lookup, nil); path != nil {
			return badNode(n.ID, "subgraph cycle: %s", strings.Join(path, " -> "))
		}
	case events.NodeTextInput:
		if err := need("label", n.Label); err != nil {
			return err
		}
	case events.NodeInterrupt:
		if err := need("input", n.Input); err != nil {
			return err
		}
		switch n.ResumeStrategy {
		case "replace", "append":
		case "":
			return badNode(n.ID, "resume_strategy is required (replace or append)")
		default:
			return badNode(n.ID, "resume_strategy %q must be replace or append", n.ResumeStrategy)
		}
	case "":
		return badNode(n.ID, "kind is required")
	default:
		return badNode(n.ID, "unknown kind %q (agent, tool, conditional, map, subgraph, text_input, interrupt)", n.Kind)
	}
	for _, m := range TemplateToken.FindAllStringSubmatch(n.Input, -1) {
		switch tok := m[1]; {
		case tok == "trigger" || tok == "item":
		case strings.HasPrefix(tok, "node:"):
			if byID[strings.TrimPrefix(tok, "node:")] == nil {
				return badNode(n.ID, "input refers to {{%s}}, but there is no such node", tok)
			}
		default:
			return badNode(n.ID, "input has an unknown template {{%s}} (trigger, node:<id>, item)", tok)
		}
	}
	return nil
}

// subgraphCycle follows the subgraphs of Automation id (as lookup answers
// them, the record being saved included) and returns the path of a cycle,
// or nil.
func subgraphCycle(id string, lookup automationLookup, path []string) []string {
	if i := slices.Index(path, id); i >= 0 {
		return append(slices.Clone(path[i:]), id)
	}
	a, ok := lookup(id)
	if !ok {
		return nil
	}
	path = append(path, id)
	for _, n := range a.Nodes {
		if n.Kind == events.NodeSubgraph {
			if c := subgraphCycle(n.AutomationID, lookup, path); c != nil {
				return c
			}
		}
	}
	return nil
}

// findCycle returns a node on a cycle of edges, or "" (Kahn's algorithm:
// what never reaches in-degree zero is on or behind a cycle).
func findCycle(nodes []events.Node, edges []events.Edge) string {
	order := TopoOrder(nodes, edges)
	if len(order) == len(nodes) {
		return ""
	}
	done := map[string]bool{}
	for _, id := range order {
		done[id] = true
	}
	for _, n := range nodes {
		if !done[n.ID] {
			return n.ID
		}
	}
	return ""
}

// TopoOrder orders the nodes so every edge goes forward, ties in the
// record's order; nodes on a cycle are left out.
func TopoOrder(nodes []events.Node, edges []events.Edge) []string {
	indeg := map[string]int{}
	out := map[string][]string{}
	for _, e := range edges {
		indeg[e.To]++
		out[e.From] = append(out[e.From], e.To)
	}
	var order []string
	placed := map[string]bool{}
	for len(order) < len(nodes) {
		progress := false
		for _, n := range nodes {
			if placed[n.ID] || indeg[n.ID] > 0 {
				continue
			}
			placed[n.ID] = true
			order = append(order, n.ID)
			for _, to := range out[n.ID] {
				indeg[to]--
			}
			progress = true
		}
		if !progress {
			break
		}
	}
	return order
}
