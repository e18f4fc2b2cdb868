package projections

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/usage"
)

// The Automations: their records, durable folders and runs, each run with
// its node states, folded from the automation, automation-folders and
// automation-run aggregates.

// AutomationModel is the read model of the Automations, their folders and
// runs.
type AutomationModel struct {
	sh *shared
	d  *automationState
	// refolded are the ended runs last folded again (evicted.go).
	refolded *refoldCache[*AutomationRun]
}

// refoldRuns is how many ended runs folded again stay cached.
const refoldRuns = 256

// automationState is the AutomationModel's data, kept whole in the
// checkpoint (cpSmall).
type automationState struct {
	Records map[string]*AutomationRecord
	Folders map[string]*AutomationFolder
	// Runs are the runs in memory: those not ended, and the ended ones of
	// a store that does not evict; Ended summarises the others
	// (evicted.go).
	Runs  map[string]*AutomationRun
	Ended map[string]*EndedRun
	// ByAutomation lists each Automation's runs, oldest first; Active the
	// runs that have not ended.
	ByAutomation map[string][]string
	Active       map[string]map[string]bool
}

func newAutomationState() *automationState {
	return &automationState{Records: map[string]*AutomationRecord{}, Folders: map[string]*AutomationFolder{},
		Runs: map[string]*AutomationRun{}, Ended: map[string]*EndedRun{}, ByAutomation: map[string][]string{}, Active: map[string]map[string]bool{}}
}

// AutomationRecord is an Automation as the routes answer it.
type AutomationRecord struct {
	events.Automation
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// LastTriggeredAt is when an automatic trigger last fired (a run or a
	// skip), so a schedule survives restarts.
	LastTriggeredAt *time.Time `json:"last_triggered_at,omitempty"`
	Skipped         int        `json:"skipped_triggers"`
	// SavedSeq is the journal seq of the last save; EventSeq the last
	// journal event an on_event or on_skill firing was handled for (a run
	// or a skip). Events at or below the larger are never fired again.
	SavedSeq uint64 `json:"-"`
	EventSeq uint64 `json:"-"`
	Version  uint64 `json:"-"`
}

// HandledSeq is the journal seq at or below which no event fires the
// Automation again.
func (r AutomationRecord) HandledSeq() uint64 { return max(r.SavedSeq, r.EventSeq) }

// AutomationFolder is a durable folder.
type AutomationFolder struct {
	Path      string    `json:"path"`
	Name      string    `json:"name"`
	Durable   bool      `json:"durable"` // false: implied by an Automation's folder
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// AutomationRun is one run with its node states.
type AutomationRun struct {
	RunID        string              `json:"run_id"`
	AutomationID string              `json:"automation_id"`
	State        string              `json:"state"`
	Trigger      events.RunTrigger   `json:"trigger"`
	Input        events.Text         `json:"input"`
	Inputs       map[string]string   `json:"inputs,omitempty"`
	StartedAt    time.Time           `json:"started_at"`
	EndedAt      *time.Time          `json:"ended_at,omitempty"`
	Nodes        map[string]*RunNode `json:"nodes"`
	Output       events.Text         `json:"output,omitzero"`
	Error        string              `json:"error,omitempty"`
	Usage        usage.Tokens        `json:"usage"`
	// Graph is the Automation as the run started; the engine runs it.
	Graph   events.Automation `json:"-"`
	Version uint64            `json:"-"`
}

// EndedRun is what stays in memory of an ended run: a summary, and the
// seq of its last event, up to which it is folded again when read.
type EndedRun struct {
	AutomationID string
	State        string
	StartedAt    time.Time
	EndedAt      time.Time
	Error        string
	Seq          uint64
}

// RunSummary is a run without its nodes, input and output.
type RunSummary struct {
	RunID     string
	State     string
	StartedAt time.Time
	EndedAt   *time.Time
	Error     string
}

// RunNode is one node's state in a run.
type RunNode struct {
	State     string        `json:"state"`
	Output    events.Text   `json:"output,omitzero"`
	Error     string        `json:"error,omitempty"`
	Branch    string        `json:"branch,omitempty"`
	Prompt    *events.Text  `json:"prompt,omitempty"`
	Strategy  string        `json:"resume_strategy,omitempty"`
	Resumed   string        `json:"resumed,omitempty"`
	StartedAt *time.Time    `json:"started_at,omitempty"`
	EndedAt   *time.Time    `json:"ended_at,omitempty"`
	WaitingAt *time.Time    `json:"-"`
	Usage     *usage.Tokens `json:"usage,omitempty"`
}

// Interrupt is one pending operator Interrupt.
type Interrupt struct {
	AutomationID string      `json:"automation_id"`
	RunID        string      `json:"run_id"`
	NodeID       string      `json:"node_id"`
	Prompt       events.Text `json:"prompt"`
	RequestedAt  time.Time   `json:"requested_at"`
}

// The Automations', their folders' and their runs' events.
func init() {
	fold := func(s *Store, env journal.Envelope, p events.Payload) error {
		s.AutomationModel.fold(env, p)
		return nil
	}
	claimFor("automations", fold,
		events.AutomationSaved{}, events.AutomationDeleted{}, events.AutomationMoved{}, events.AutomationTriggerSkipped{},
		events.AutomationFolderCreated{}, events.AutomationFolderRenamed{}, events.AutomationFolderDeleted{},
		events.RunStarted{}, events.NodeStarted{}, events.NodeWaiting{}, events.NodeFinished{}, events.NodeToolCall{},
		events.NodeHookRan{}, events.RunWaiting{}, events.RunFinished{})
}

// fold applies an event of an Automation, of the folders or of a run.
func (am *AutomationModel) fold(env journal.Envelope, p events.Payload) {
	switch p.(type) {
	case events.RunStarted, events.NodeStarted, events.NodeWaiting, events.NodeFinished, events.NodeToolCall, events.RunWaiting, events.RunFinished,
		events.NodeHookRan: // a hook run only counts as a change of the run
		if ended := am.d.foldRun(env, p, am.sh.evicts()); ended != nil {
			am.refolded.put(refoldKey{env.AggregateID, env.Seq}, ended) // its next reads need no journal
		}
	default:
		am.d.foldAutomation(env.AggregateID, env.Seq, env.At, p)
	}
}

func (m *automationState) foldAutomation(id string, seq uint64, at time.Time, p events.Payload) {
	switch e := p.(type) {
	case events.AutomationSaved:
		r := m.Records[id]
		if r == nil {
			r = &AutomationRecord{CreatedAt: at}
			m.Records[id] = r
		}
		r.Automation, r.UpdatedAt, r.SavedSeq = graphOf(e.Automation), at, seq
		r.Version++
	case events.AutomationMoved:
		if r := m.Records[id]; r != nil {
			r.Folder, r.UpdatedAt = folderOf(e.Folder), at
			r.Version++
		}
	case events.AutomationTriggerSkipped:
		if r := m.Records[id]; r != nil {
			r.LastTriggeredAt = &at
			r.Skipped++
			r.EventSeq = max(r.EventSeq, e.Seq)
			r.Version++
		}
	case events.AutomationDeleted:
		delete(m.Records, id)
		for _, run := range m.ByAutomation[id] {
			delete(m.Runs, run)
			delete(m.Ended, run)
		}
		delete(m.ByAutomation, id)
		delete(m.Active, id)
	case events.AutomationFolderCreated:
		m.Folders[e.Path] = &AutomationFolder{Path: e.Path, Name: cmp.Or(e.Name, lastSegment(e.Path)), Durable: true, CreatedAt: at}
	case events.AutomationFolderRenamed:
		m.moveFolders(e.OldPath, func(p string) string { return e.NewPath + strings.TrimPrefix(p, e.OldPath) })
		if f := m.Folders[e.NewPath]; f != nil && e.NewName != "" {
			f.Name = e.NewName
		}
	case events.AutomationFolderDeleted:
		if !e.KeepContents {
			for p := range m.Folders {
				if p == e.Path || strings.HasPrefix(p, e.Path+"/") {
					delete(m.Folders, p)
				}
			}
			return
		}
		delete(m.Folders, e.Path)
		parent := parentPath(e.Path)
		m.moveFolders(e.Path, func(p string) string {
			rest := strings.TrimPrefix(strings.TrimPrefix(p, e.Path), "/")
			if parent == "" {
				return rest
			}
			if rest == "" {
				return parent
			}
			return parent + "/" + rest
		})
	}
}

// moveFolders renames every folder and Automation folder at or under old
// with to.
func (m *automationState) moveFolders(old string, to func(string) string) {
	under := func(p string) bool { return p == old || strings.HasPrefix(p, old+"/") }
	moved := map[string]*AutomationFolder{}
	for p, f := range m.Folders {
		if under(p) {
			delete(m.Folders, p)
			f.Path = to(p)
			if f.Path != "" {
				moved[f.Path] = f
			}
		}
	}
	maps.Copy(m.Folders, moved)
	for _, r := range m.Records {
		if r.Folder != nil && under(*r.Folder) {
			np := to(*r.Folder)
			if np == "" {
				r.Folder = nil
			} else {
				r.Folder = &np
			}
			// Version counts the Automation's own events, not the folders'.
		}
	}
}

func lastSegment(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func parentPath(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// foldRun applies an event of run env.AggregateID; evict replaces the run
// by its summary when it ends, and returns the run it replaced.
func (m *automationState) foldRun(env journal.Envelope, p events.Payload, evict bool) (ended *AutomationRun) {
	id, at := env.AggregateID, env.At
	if e, ok := p.(events.RunStarted); ok {
		run := &AutomationRun{RunID: id, AutomationID: e.AutomationID, State: events.StateRunning, Trigger: e.Trigger,
			Input: e.Input, Inputs: e.Inputs, StartedAt: at, Nodes: map[string]*RunNode{}, Graph: graphOf(e.Graph),
			Usage: usage.Tokens{TokenUsageKnown: true}, Version: 1}
		for _, n := range e.Graph.Nodes {
			run.Nodes[n.ID] = &RunNode{State: events.StatePending}
		}
		m.Runs[id] = run
		m.ByAutomation[e.AutomationID] = append(m.ByAutomation[e.AutomationID], id)
		if m.Active[e.AutomationID] == nil {
			m.Active[e.AutomationID] = map[string]bool{}
		}
		m.Active[e.AutomationID][id] = true
		if r := m.Records[e.AutomationID]; r != nil && e.Trigger.Kind != events.TriggerManual && e.Trigger.Kind != events.TriggerFork {
			r.LastTriggeredAt = &at
			r.EventSeq = max(r.EventSeq, e.Trigger.Seq)
		}
		return nil
	}
	run := m.Runs[id]
	if run == nil {
		if e := m.Ended[id]; e != nil {
			e.Seq = env.Seq // a late event: the fold again includes it
		}
		return nil // ended and evicted, or its Automation was deleted
	}
	run.Version++
	node := func(key string) *RunNode {
		n := run.Nodes[key]
		if n == nil {
			n = &RunNode{State: events.StatePending}
			run.Nodes[key] = n
		}
		return n
	}
	switch e := p.(type) {
	case events.NodeStarted:
		n := node(e.Node)
		*n = RunNode{State: events.StateRunning, StartedAt: &at}
	case events.NodeWaiting:
		n := node(e.Node)
		prompt := e.Prompt
		n.State, n.Prompt, n.Strategy, n.WaitingAt = events.StateWaiting, &prompt, e.Strategy, &at
	case events.NodeFinished:
		n := node(e.Node)
		wasWaiting := n.State == events.StateWaiting
		n.State, n.Output, n.Error, n.Branch, n.Resumed, n.Usage, n.EndedAt = e.State, e.Output, e.Error, e.Branch, e.Resumed, e.Usage, &at
		if n.StartedAt == nil {
			n.StartedAt = &at
		}
		if e.Usage != nil {
			run.Usage = run.Usage.Add(*e.Usage)
		}
		if wasWaiting && run.State == events.StateWaiting {
			run.State = events.StateRunning
		}
	case events.RunWaiting:
		run.State = events.StateWaiting
	case events.RunFinished:
		run.State, run.Output, run.Error, run.Usage, run.EndedAt = e.State, e.Output, e.Error, e.Usage, &at
		delete(m.Active[run.AutomationID], id)
		if len(m.Active[run.AutomationID]) == 0 {
			delete(m.Active, run.AutomationID)
		}
		if evict {
			aid := run.AutomationID
			if r := m.Records[aid]; r != nil {
				aid = r.ID // one copy of the ID for all its runs
			}
			m.Ended[id] = &EndedRun{AutomationID: aid, State: run.State, StartedAt: run.StartedAt, EndedAt: at, Error: run.Error, Seq: env.Seq}
			delete(m.Runs, id)
			return run
		}
	}
	return nil
}

// graphOf is a with its node and edge lists empty, not nil, when they
// hold nothing (the routes answer [], and a save without edges journals
// []), and its folder "" as the root, nil.
func graphOf(a events.Automation) events.Automation {
	a.Nodes, a.Edges, a.Folder = nonNil(a.Nodes), nonNil(a.Edges), folderOf(a.Folder)
	return a
}

// folderOf is a folder path, nil for the root.
func folderOf(p *string) *string {
	if p != nil && *p == "" {
		return nil
	}
	return p
}

func (r *AutomationRecord) clone() AutomationRecord {
	c := *r
	c.Nodes = slices.Clone(r.Nodes)
	c.Edges = slices.Clone(r.Edges)
	return c
}

func (r *AutomationRun) clone() AutomationRun {
	c := *r
	c.Nodes = make(map[string]*RunNode, len(r.Nodes))
	for k, n := range r.Nodes {
		cp := *n
		c.Nodes[k] = &cp
	}
	return c
}

// Automations lists the Automations by ID.
func (am *AutomationModel) Automations() []AutomationRecord {
	am.sh.mu.RLock()
	defer am.sh.mu.RUnlock()
	out := make([]AutomationRecord, 0, len(am.d.Records))
	for _, r := range am.d.Records {
		out = append(out, r.clone())
	}
	slices.SortFunc(out, func(a, b AutomationRecord) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Automation returns one Automation.
func (am *AutomationModel) Automation(id string) (AutomationRecord, bool) {
	am.sh.mu.RLock()
	defer am.sh.mu.RUnlock()
	r, ok := am.d.Records[id]
	if !ok {
		return AutomationRecord{}, false
	}
	return r.clone(), true
}

// AutomationFolders lists the durable folders and those an Automation's
// folder implies (with their ancestors), by path.
func (am *AutomationModel) AutomationFolders() []AutomationFolder {
	am.sh.mu.RLock()
	defer am.sh.mu.RUnlock()
	all := map[string]AutomationFolder{}
	imply := func(p string) {
		for p != "" {
			if _, ok := all[p]; !ok {
				all[p] = AutomationFolder{Path: p, Name: lastSegment(p)}
			}
			p = parentPath(p)
		}
	}
	for p, f := range am.d.Folders {
		all[p] = *f
		imply(parentPath(p))
	}
	for _, r := range am.d.Records {
		if r.Folder != nil {
			imply(*r.Folder)
		}
	}
	out := slices.AppendSeq(make([]AutomationFolder, 0, len(all)), maps.Values(all)) // [] when none, not null
	slices.SortFunc(out, func(a, b AutomationFolder) int { return cmp.Compare(a.Path, b.Path) })
	return out
}

// AutomationFolderExists reports whether path is a folder (durable or
// implied).
func (am *AutomationModel) AutomationFolderExists(path string) bool {
	for _, f := range am.AutomationFolders() {
		if f.Path == path {
			return true
		}
	}
	return false
}

// AutomationRuns lists an Automation's runs, newest first. Ended runs out
// of memory are folded again from the journal.
func (am *AutomationModel) AutomationRuns(automationID string) []AutomationRun {
	am.sh.mu.RLock()
	ids := am.d.ByAutomation[automationID]
	out := make([]AutomationRun, 0, len(ids))
	ended := map[int]EndedRun{} // the runs out of memory, by their place in out
	for i := len(ids) - 1; i >= 0; i-- {
		if r := am.d.Runs[ids[i]]; r != nil {
			out = append(out, r.clone())
		} else if e := am.d.Ended[ids[i]]; e != nil {
			ended[len(out)] = *e
			out = append(out, AutomationRun{RunID: ids[i]})
		}
	}
	j := am.sh.journal
	am.sh.mu.RUnlock()
	for i, e := range ended {
		out[i] = am.refoldRun(j, out[i].RunID, e)
	}
	return out
}

// AutomationRunSummaries lists an Automation's runs without their nodes,
// newest first, from memory.
func (am *AutomationModel) AutomationRunSummaries(automationID string) []RunSummary {
	am.sh.mu.RLock()
	defer am.sh.mu.RUnlock()
	ids := am.d.ByAutomation[automationID]
	out := make([]RunSummary, 0, len(ids))
	for i := len(ids) - 1; i >= 0; i-- {
		if r := am.d.Runs[ids[i]]; r != nil {
			out = append(out, RunSummary{RunID: r.RunID, State: r.State, StartedAt: r.StartedAt, EndedAt: r.EndedAt, Error: r.Error})
		} else if e := am.d.Ended[ids[i]]; e != nil {
			end := e.EndedAt
			out = append(out, RunSummary{RunID: ids[i], State: e.State, StartedAt: e.StartedAt, EndedAt: &end, Error: e.Error})
		}
	}
	return out
}

// AutomationRun returns one run; an ended run out of memory is folded
// again from the journal.
func (am *AutomationModel) AutomationRun(runID string) (AutomationRun, bool) {
	am.sh.mu.RLock()
	r, ok := am.d.Runs[runID]
	if ok {
		defer am.sh.mu.RUnlock()
		return r.clone(), true
	}
	e, ok := am.d.Ended[runID]
	var ended EndedRun
	if ok {
		ended = *e
	}
	j := am.sh.journal
	am.sh.mu.RUnlock()
	if !ok {
		return AutomationRun{}, false
	}
	return am.refoldRun(j, runID, ended), true
}

// refoldRun folds an ended run again from its events up to e.Seq, or
// takes it from the cache. A journal that cannot be read gives the
// summary, without nodes.
func (am *AutomationModel) refoldRun(j RefoldJournal, id string, e EndedRun) AutomationRun {
	key := refoldKey{id, e.Seq}
	if r, ok := am.refolded.get(key); ok {
		return r.clone()
	}
	st := newAutomationState()
	err := refoldEvents(context.Background(), j, id, e.Seq, func(env journal.Envelope, p events.Payload) error {
		st.foldRun(env, p, false)
		return nil
	})
	r := st.Runs[id]
	if err != nil || r == nil {
		end := e.EndedAt
		return AutomationRun{RunID: id, AutomationID: e.AutomationID, State: e.State, StartedAt: e.StartedAt, EndedAt: &end,
			Error: e.Error, Nodes: map[string]*RunNode{}}
	}
	am.refolded.put(key, r)
	return r.clone()
}

// ActiveAutomationRuns lists the runs that have not ended, of one
// Automation, or of all when automationID is "", oldest first.
func (am *AutomationModel) ActiveAutomationRuns(automationID string) []AutomationRun {
	am.sh.mu.RLock()
	defer am.sh.mu.RUnlock()
	var out []AutomationRun
	for a, runs := range am.d.Active {
		if automationID != "" && a != automationID {
			continue
		}
		for id := range runs {
			out = append(out, am.d.Runs[id].clone())
		}
	}
	slices.SortFunc(out, func(a, b AutomationRun) int { return cmp.Compare(a.RunID, b.RunID) })
	return out
}

// Interrupts lists every pending Interrupt, oldest first.
func (am *AutomationModel) Interrupts() []Interrupt {
	am.sh.mu.RLock()
	defer am.sh.mu.RUnlock()
	var out []Interrupt
	for _, runs := range am.d.Active {
		for id := range runs {
			run := am.d.Runs[id]
			for key, n := range run.Nodes {
				if n.State == events.StateWaiting {
					in := Interrupt{AutomationID: run.AutomationID, RunID: id, NodeID: key, RequestedAt: *n.WaitingAt}
					if n.Prompt != nil {
						in.Prompt = *n.Prompt
					}
					out = append(out, in)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Interrupt) int {
		return cmp.Or(a.RequestedAt.Compare(b.RequestedAt), cmp.Compare(a.RunID, b.RunID), cmp.Compare(a.NodeID, b.NodeID))
	})
	return out
}

// Typed event types of an Automation's progress.
const (
	TypedNodeStarted         = "AutomationNodeStarted"
	TypedNodeFinished        = "AutomationNodeFinished"
	TypedAutomationSucceeded = "AutomationCompleted"
	TypedAutomationFailed    = "AutomationFailed"
	TypedAutomationCancelled = "AutomationCancelled"
)

// automationTyped derives the typed events of a run's node start and end
// and of its end: workflow is the run, name the node's run key.
func automationTyped(env journal.Envelope, p events.Payload) []TypedEvent {
	te := TypedEvent{Kind: "event", Workflow: env.AggregateID, Seq: env.Seq, At: env.At}
	switch e := p.(type) {
	case events.NodeStarted:
		te.Type, te.Automation, te.Name = TypedNodeStarted, e.AutomationID, e.Node
	case events.NodeFinished:
		te.Type, te.Automation, te.Name, te.Output = TypedNodeFinished, e.AutomationID, e.Node, cmp.Or(e.Error, e.Output.String())
		if e.Usage != nil {
			n := e.Usage.Total()
			te.Tokens = &n
		}
	case events.RunFinished:
		te.Automation, te.Output = e.AutomationID, cmp.Or(e.Error, e.Output.String())
		n := e.Usage.Total()
		te.Tokens = &n
		switch e.State {
		case events.StateSucceeded:
			te.Type = TypedAutomationSucceeded
		case events.StateFailed:
			te.Type = TypedAutomationFailed
		default:
			te.Type = TypedAutomationCancelled
		}
	}
	if te.Automation == "" {
		return nil
	}
	return []TypedEvent{te}
}

// ResolveRun replaces the content references of run (a copy) with their
// content, outside the store's lock.
func (am *AutomationModel) ResolveRun(run AutomationRun) AutomationRun {
	am.sh.mu.RLock()
	r := am.sh.blobs
	am.sh.mu.RUnlock()
	if r == nil {
		return run
	}
	run.Input, run.Output = resolveText(r, run.Input), resolveText(r, run.Output)
	for k, n := range run.Nodes {
		cp := *n
		cp.Output = resolveText(r, n.Output)
		if n.Prompt != nil {
			p := resolveText(r, *n.Prompt)
			cp.Prompt = &p
		}
		run.Nodes[k] = &cp
	}
	return run
}

// workflowRunsLocked lists the Automation runs not ended as snapshot runs
// of kind workflow, oldest first, each with the nodes awaiting an operator;
// the read lock is held.
func (am *AutomationModel) workflowRunsLocked() []Run {
	var out []Run
	for _, ids := range am.d.Active {
		for id := range ids {
			r := am.d.Runs[id]
			run := Run{Workflow: id, Automation: r.AutomationID, Kind: "workflow", Status: r.State, Agents: []RunAgent{}, ToolCalls: []ToolCall{}}
			for k, n := range r.Nodes {
				if n.State == events.StateWaiting {
					run.AwaitingHuman = append(run.AwaitingHuman, k)
				}
			}
			slices.Sort(run.AwaitingHuman)
			out = append(out, run)
		}
	}
	slices.SortFunc(out, func(a, b Run) int { return cmp.Compare(a.Workflow, b.Workflow) })
	return out
}
