package events

import "lathe/runtime/usage"

func init() {
	register[AutomationSaved]()
	register[AutomationDeleted]()
	register[AutomationMoved]()
	register[AutomationTriggerSkipped]()
	register[AutomationFolderCreated]()
	register[AutomationFolderRenamed]()
	register[AutomationFolderDeleted]()
	register[RunStarted]()
	register[NodeStarted]()
	register[NodeWaiting]()
	register[NodeFinished]()
	register[NodeToolCall]()
	register[RunWaiting]()
	register[RunFinished]()
}

// Aggregates of the Automations.
const (
	// AutomationAggregate is one Automation record, by its ID.
	AutomationAggregate = "automation"
	// AutomationFolders is the singleton aggregate of the durable folders.
	AutomationFolders = "automation-folders"
	// AutomationRun is one run of an Automation, by its run ID: each run is
	// its own aggregate, so its node events form one short chain.
	AutomationRun = "automation-run"
)

// AutomationFoldersID is the ID of the one AutomationFolders aggregate.
const AutomationFoldersID = "folders"

// Node kinds.
const (
	NodeAgent       = "agent"
	NodeTool        = "tool"
	NodeConditional = "conditional"
	NodeMap         = "map"
	NodeSubgraph    = "subgraph"
	NodeTextInput   = "text_input"
	NodeInterrupt   = "interrupt"
)

// Trigger kinds.
const (
	TriggerManual   = "manual"
	TriggerSchedule = "schedule"
	TriggerOnEvent  = "on_event"
	TriggerOnSkill  = "on_skill"
	// TriggerFork marks a run started by a fork of another run (RunTrigger
	// only; never an Automation's trigger).
	TriggerFork = "fork"
)

// Run and node states. A run is running, waiting, succeeded, failed or
// cancelled; a node pending, running, succeeded, failed, skipped or waiting.
const (
	StatePending   = "pending"
	StateRunning   = "running"
	StateWaiting   = "waiting"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateSkipped   = "skipped"
	StateCancelled = "cancelled"
)

// Automation is the canonical record (issue 12 fixes its shape).
type Automation struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Description string  `json:"description,omitempty"`
	Enabled     bool    `json:"enabled"`
	Folder      *string `json:"folder"`
	Trigger     Trigger `json:"trigger"`
	Nodes       []Node  `json:"nodes"`
	Edges       []Edge  `json:"edges"`
}

// Trigger says what runs an Automation: manual; schedule{every, input};
// on_event{event, input}; on_skill{skill_id}.
type Trigger struct {
	Kind    string `json:"kind"`
	Every   string `json:"every,omitempty"`
	Input   string `json:"input,omitempty"`
	Event   string `json:"event,omitempty"`
	SkillID string `json:"skill_id,omitempty"`
}

// Node is one node of the graph; which fields apply depends on Kind.
type Node struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// agent, tool, conditional, map, subgraph, interrupt: the template.
	Input   string `json:"input,omitempty"`
	AgentID string `json:"agent_id,omitempty"`
	ToolID  string `json:"tool_id,omitempty"`
	// conditional
	Branches []Branch `json:"branches,omitempty"`
	Default  string   `json:"default,omitempty"`
	// map
	BodyNode string `json:"body_node,omitempty"`
	// subgraph
	AutomationID string `json:"automation_id,omitempty"`
	// text_input
	Label        string `json:"label,omitempty"`
	DefaultValue string `json:"default_value,omitempty"`
	Placeholder  string `json:"placeholder,omitempty"`
	Multiline    bool   `json:"multiline,omitempty"`
	// interrupt: replace or append.
	ResumeStrategy string `json:"resume_strategy,omitempty"`
	// Position is where the editor draws the node; it does not change what
	// runs.
	Position *Position `json:"position,omitempty"`
}

// Position is a node's place on the editor's canvas.
type Position struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Branch is one branch of a conditional: the first whose test holds is
// taken. When is always, equals, contains, matches (RE2) or not_empty.
type Branch struct {
	Name  string `json:"name"`
	When  string `json:"when"`
	Value string `json:"value,omitempty"`
}

// Edge runs To after From. From a conditional, Branch names the branch
// that activates it ("default" is the default one); empty follows every
// outcome that succeeded.
type Edge struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Branch string `json:"branch,omitempty"`
}

// AutomationSaved: an Automation was created or replaced whole (PUT and
// PATCH are full replacement). The record was validated before.
type AutomationSaved struct {
	Automation Automation `json:"automation"`
}

// AutomationDeleted: the Automation was deleted (its active runs were
// cancelled first).
type AutomationDeleted struct{}

// AutomationMoved: the Automation now lives in Folder (nil: the root).
type AutomationMoved struct {
	Folder *string `json:"folder"`
}

// AutomationTriggerSkipped: an automatic trigger fired while a run of the
// Automation was active, so it did not start another (Run is the active
// one).
type AutomationTriggerSkipped struct {
	Trigger string `json:"trigger"`
	Event   string `json:"event,omitempty"`
	// Seq is the journal event the firing derives from (on_event,
	// on_skill), so that it is handled once.
	Seq uint64 `json:"seq,omitempty"`
	Run string `json:"run"`
}

// AutomationFolderCreated: a durable folder at Path ("a/b").
type AutomationFolderCreated struct {
	Path string `json:"path"`
	Name string `json:"name,omitempty"`
}

// AutomationFolderRenamed: the folder at OldPath, its subfolders and their
// Automations moved to NewPath.
type AutomationFolderRenamed struct {
	OldPath string `json:"old_path"`
	NewPath string `json:"new_path"`
	NewName string `json:"new_name,omitempty"`
}

// AutomationFolderDeleted: the folder is gone. KeepContents moved its
// subfolders and Automations up to its parent; otherwise its Automations
// were deleted first (each with its own automation-deleted) and its
// subfolders go with it.
type AutomationFolderDeleted struct {
	Path         string `json:"path"`
	KeepContents bool   `json:"keep_contents"`
}

// RunTrigger is what started a run.
type RunTrigger struct {
	Kind string `json:"kind"`
	// Event is the typed event type (on_event, on_skill) and Seq the journal
	// event it derives from.
	Event string `json:"event,omitempty"`
	Seq   uint64 `json:"seq,omitempty"`
	// ForkOf is the run a fork reruns.
	ForkOf string `json:"fork_of,omitempty"`
}

// RunStarted: a run of AutomationID began with the graph as it was then
// (an edit does not change a run under way), its trigger, its input and the
// text_input values.
type RunStarted struct {
	AutomationID string            `json:"automation_id"`
	Graph        Automation        `json:"graph"`
	Trigger      RunTrigger        `json:"trigger"`
	Input        Text              `json:"input"`
	Inputs       map[string]string `json:"inputs,omitempty"`
}

// NodeStarted: a node began (Node is its run key: the node ID, prefixed by
// its map item or subgraph node, as "m.0" or "sub.gate"). A node that was
// mid-flight at a crash starts again.
type NodeStarted struct {
	AutomationID string `json:"automation_id"`
	Node         string `json:"node"`
}

// NodeWaiting: an interrupt node waits for an operator with Prompt.
type NodeWaiting struct {
	Node     string `json:"node"`
	Prompt   Text   `json:"prompt"`
	Strategy string `json:"resume_strategy"`
}

// How an interrupt was woken (NodeFinished.Resumed).
const (
	ResumedValue  = "resume"
	ResumedCancel = "cancel"
)

// NodeFinished: a node ended succeeded, failed or skipped, with its output
// (an interrupt's: the operator's value, or its input and the value),
// error, the branch a conditional took, and the model usage it paid.
type NodeFinished struct {
	AutomationID string        `json:"automation_id"`
	Node         string        `json:"node"`
	State        string        `json:"state"`
	Output       Text          `json:"output,omitzero"`
	Error        string        `json:"error,omitempty"`
	Branch       string        `json:"branch,omitempty"`
	Resumed      string        `json:"resumed,omitempty"`
	Usage        *usage.Tokens `json:"usage,omitempty"`
	// Inferences are an agent node's model calls, for telemetry.
	Inferences []Inference `json:"inferences,omitempty"`
}

// NodeToolCall: an agent node's Agent called a tool (Phase "start", with
// its arguments) or got its result (Phase "result"). CallID and Occurrence
// identify the call within the node's turn, as in a Session turn.
type NodeToolCall struct {
	AutomationID string `json:"automation_id"`
	Node         string `json:"node"`
	Agent        string `json:"agent"`
	CallID       string `json:"call_id"`
	Occurrence   int    `json:"occurrence"`
	Name         string `json:"name"`
	Phase        string `json:"phase"`
	Arguments    JSON   `json:"arguments,omitzero"`
	Result       Text   `json:"result,omitzero"`
	IsError      bool   `json:"is_error,omitempty"`
	DurationMS   int64  `json:"duration_ms,omitempty"`
}

// RunWaiting: the run can go no further until an operator answers its
// waiting interrupts.
type RunWaiting struct{}

// RunFinished: the run ended succeeded, failed or cancelled.
type RunFinished struct {
	AutomationID string       `json:"automation_id"`
	State        string       `json:"state"`
	Output       Text         `json:"output,omitzero"`
	Error        string       `json:"error,omitempty"`
	Usage        usage.Tokens `json:"usage"`
}

func (AutomationSaved) EventType() string          { return "automation-saved" }
func (AutomationDeleted) EventType() string        { return "automation-deleted" }
func (AutomationMoved) EventType() string          { return "automation-moved" }
func (AutomationTriggerSkipped) EventType() string { return "automation-trigger-skipped" }
func (AutomationFolderCreated) EventType() string  { return "automation-folder-created" }
func (AutomationFolderRenamed) EventType() string  { return "automation-folder-renamed" }
func (AutomationFolderDeleted) EventType() string  { return "automation-folder-deleted" }
func (RunStarted) EventType() string               { return "automation-run-started" }
func (NodeStarted) EventType() string              { return "automation-node-started" }
func (NodeWaiting) EventType() string              { return "automation-node-waiting" }
func (NodeFinished) EventType() string             { return "automation-node-finished" }
func (NodeToolCall) EventType() string             { return "automation-node-tool-call" }
func (RunWaiting) EventType() string               { return "automation-run-waiting" }
func (RunFinished) EventType() string              { return "automation-run-finished" }

func (AutomationSaved) Aggregate() string          { return AutomationAggregate }
func (AutomationDeleted) Aggregate() string        { return AutomationAggregate }
func (AutomationMoved) Aggregate() string          { return AutomationAggregate }
func (AutomationTriggerSkipped) Aggregate() string { return AutomationAggregate }
func (AutomationFolderCreated) Aggregate() string  { return AutomationFolders }
func (AutomationFolderRenamed) Aggregate() string  { return AutomationFolders }
func (AutomationFolderDeleted) Aggregate() string  { return AutomationFolders }
func (RunStarted) Aggregate() string               { return AutomationRun }
func (NodeStarted) Aggregate() string              { return AutomationRun }
func (NodeWaiting) Aggregate() string              { return AutomationRun }
func (NodeFinished) Aggregate() string             { return AutomationRun }
func (NodeToolCall) Aggregate() string             { return AutomationRun }
func (RunWaiting) Aggregate() string               { return AutomationRun }
func (RunFinished) Aggregate() string              { return AutomationRun }

func (e RunStarted) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Input)
}

func (e NodeWaiting) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Prompt)
}

func (e NodeFinished) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Output)
}

func (e NodeToolCall) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Arguments, &e.Result)
}

func (e RunFinished) offload(w BlobWriter, limit int) (Payload, error) {
	return e, offloadAll(w, limit, &e.Output)
}

// AutomationSubject is the NATS subject of an Automation's typed progress
// event (CONTRACT.md): lathe.automation.<automation_id>.<type>.
func AutomationSubject(automationID, typ string) string {
	return "lathe.automation." + automationID + "." + typ
}
