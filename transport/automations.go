package transport

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"lathe/commands/automationrunner"
	"lathe/commands/automations"
	"lathe/commands/core"

	"github.com/julienschmidt/httprouter"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/usage"
)

// The Automation routes (commands.Automations).
//
//	GET    /api/automations                       → 200 [record…]
//	POST   /api/automations                       body record → 201 record; 400 {error, node?, edge?}; 409 exists
//	GET    /api/automations/:id                   → 200 record; 404
//	PUT    /api/automations/:id                   body record (upsert, path id = body id) → 200 record
//	PATCH  /api/automations/:id                   the same (not partial)
//	DELETE /api/automations/:id                   → 200 {ok}; active runs are cancelled first
//	POST   /api/automations/:id/move              {folder} (null: root) → 200 record
//	POST   /api/automations/:id/run               {input?, inputs?} → 200 {ok, id, run_id}
//	GET    /api/automations/:id/runs              → 200 [run…] newest first
//	GET    /api/automations/:id/runs/:run_id      → 200 run
//	POST   /api/automations/:id/runs/:run_id/fork {input?} → 200 {ok, id, run_id}
//	POST   …/runs/:run_id/nodes/:node_id/resume   {value?} → 200 {ok}; 409 not waiting; 404
//	POST   …/runs/:run_id/nodes/:node_id/cancel   → 200 {ok}: wakes it with an empty value
//	GET    /api/interrupts                        → 200 [{automation_id, run_id, node_id, prompt, requested_at}]
//	GET    /api/automation-folders                → 200 [{path, name, durable}]
//	POST   /api/automation-folders                {path, name?} → 201 folder
//	PATCH  /api/automation-folders                {old_path, new_path, new_name?} → 200 {ok}
//	DELETE /api/automation-folders?path=&keep_contents= → 200 {ok} (keep_contents defaults to true)
//	GET    /api/tools                             → 200 [tool id…]
//
// The legacy views (compatibility):
//
//	GET   /api/workflows                   → 200 manual Automations as workflows
//	POST  /api/workflows/:id/execute       {input} → waits; 200 {output, completed, *_tokens, token_usage_known};
//	                                       a failed run 502, a cancelled one 409, with the same usage fields and error
//	GET   /api/schedules                   → 200 schedule-triggered Automations with last run, next run, last result
//	PATCH /api/schedules/:id               {enabled?, every?, input?} → 200 schedule view
//	POST  /api/schedules/:id/run           → waits, as execute
//	GET   /api/proactive                   → 200 event-, Skill- and schedule-triggered Automations

// AutomationCommands are the Automation routes' commands
// (commands.Automations).
type AutomationCommands interface {
	CreateAutomation(ctx context.Context, a events.Automation) (projections.AutomationRecord, error)
	PutAutomation(ctx context.Context, id string, a events.Automation) (projections.AutomationRecord, error)
	DeleteAutomation(ctx context.Context, id string) error
	MoveAutomation(ctx context.Context, id string, folder *string) (projections.AutomationRecord, error)
	CreateFolder(ctx context.Context, path, name string) (projections.AutomationFolder, error)
	RenameFolder(ctx context.Context, oldPath, newPath, newName string) error
	DeleteFolder(ctx context.Context, path string, keepContents bool) error
	ToolIDs() []string
	Run(ctx context.Context, id string, req automationrunner.RunRequest) (string, error)
	Fork(ctx context.Context, id, runID string, input *string) (string, error)
	ResumeNode(ctx context.Context, id, runID, nodeID, value string, cancel bool) error
	Execute(ctx context.Context, id string, req automationrunner.RunRequest) (automationrunner.Execution, error)
	PatchSchedule(ctx context.Context, id string, p automationrunner.SchedulePatch) (projections.AutomationRecord, error)
	NextRun(id string) *string
}

// invalidAutomationBody is a refused record: the error and the node or
// edge at fault.
type invalidAutomationBody struct {
	Error string `json:"error"`
	Node  string `json:"node,omitempty"`
	Edge  string `json:"edge,omitempty"`
}

func failAutomation(w http.ResponseWriter, err error) {
	var inv *automations.InvalidAutomation
	if errors.As(err, &inv) {
		writeJSON(w, http.StatusBadRequest, invalidAutomationBody{Error: err.Error(), Node: inv.Node, Edge: inv.Edge})
		return
	}
	fail(w, err)
}

// decodeAutomation reads a record; enabled defaults to true.
func decodeAutomation(r *http.Request) (events.Automation, error) {
	a := events.Automation{Enabled: true}
	err := decodeJSON(r, &a)
	return a, err
}

func (s *automationRoutes) listAutomations(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.read.Automations())
}

func (s *automationRoutes) getAutomation(w http.ResponseWriter, _ *http.Request, p httprouter.Params) {
	a, ok := s.read.Automation(p.ByName("id"))
	if !ok {
		fail(w, errMissing("Automation", p.ByName("id")))
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *automationRoutes) createAutomation(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	a, err := decodeAutomation(r)
	if err != nil {
		fail(w, err)
		return
	}
	rec, err := s.cmds.CreateAutomation(r.Context(), a)
	if err != nil {
		failAutomation(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, rec)
}

func (s *automationRoutes) putAutomation(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	a, err := decodeAutomation(r)
	if err != nil {
		fail(w, err)
		return
	}
	rec, err := s.cmds.PutAutomation(r.Context(), p.ByName("id"), a)
	if err != nil {
		failAutomation(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

type okBody struct {
	OK bool `json:"ok"`
}

func (s *automationRoutes) deleteAutomation(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	respond(w, okBody{true}, s.cmds.DeleteAutomation(r.Context(), p.ByName("id")))
}

// moveAutomationBody is the body of moveAutomation.
type moveAutomationBody struct {
	Folder *string `json:"folder"`
}

func (s *automationRoutes) moveAutomation(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req moveAutomationBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	rec, err := s.cmds.MoveAutomation(r.Context(), p.ByName("id"), req.Folder)
	respond(w, rec, err)
}

// runStarted answers a run or fork: id is the Automation's (the spec's
// answer), run_id the new run's.
type runStarted struct {
	OK    bool   `json:"ok"`
	ID    string `json:"id"`
	RunID string `json:"run_id"`
}

func (s *automationRoutes) runAutomation(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req automationrunner.RunRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	id := p.ByName("id")
	runID, err := s.cmds.Run(r.Context(), id, req)
	respond(w, runStarted{true, id, runID}, err)
}

func (s *automationRoutes) listRuns(w http.ResponseWriter, _ *http.Request, p httprouter.Params) {
	id := p.ByName("id")
	if _, ok := s.read.Automation(id); !ok {
		fail(w, errMissing("Automation", id))
		return
	}
	runs := s.read.AutomationRuns(id)
	for i := range runs {
		runs[i] = s.read.ResolveRun(runs[i])
	}
	writeJSON(w, http.StatusOK, runs)
}

func (s *automationRoutes) getRun(w http.ResponseWriter, _ *http.Request, p httprouter.Params) {
	run, ok := s.read.AutomationRun(p.ByName("run_id"))
	if !ok || run.AutomationID != p.ByName("id") {
		fail(w, fmt.Errorf("%w: Automation %q has no run %q", core.ErrNotFound, p.ByName("id"), p.ByName("run_id")))
		return
	}
	writeJSON(w, http.StatusOK, s.read.ResolveRun(run))
}

// forkRunBody is the body of forkRun.
type forkRunBody struct {
	Input *string `json:"input"`
}

func (s *automationRoutes) forkRun(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req forkRunBody
	if err := decodeOptionalJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	id := p.ByName("id")
	runID, err := s.cmds.Fork(r.Context(), id, p.ByName("run_id"), req.Input)
	respond(w, runStarted{true, id, runID}, err)
}

// resumeNodeBody is the body of resumeNode.
type resumeNodeBody struct {
	Value *string `json:"value"`
}

func (s *automationRoutes) resumeNode(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req resumeNodeBody
	if err := decodeOptionalJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	value := ""
	if req.Value != nil {
		value = *req.Value
	}
	err := s.cmds.ResumeNode(r.Context(), p.ByName("id"), p.ByName("run_id"), p.ByName("node_id"), value, false)
	respond(w, okBody{true}, err)
}

func (s *automationRoutes) cancelNode(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	if err := decodeOptionalJSON(r, &struct{}{}); err != nil {
		fail(w, err)
		return
	}
	err := s.cmds.ResumeNode(r.Context(), p.ByName("id"), p.ByName("run_id"), p.ByName("node_id"), "", true)
	respond(w, okBody{true}, err)
}

func (s *automationRoutes) listInterrupts(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	in := s.read.Interrupts()
	if in == nil {
		in = []projections.Interrupt{}
	}
	writeJSON(w, http.StatusOK, in)
}

func (s *automationRoutes) listFolders(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.read.AutomationFolders())
}

// createFolderBody is the body of createFolder.
type createFolderBody struct {
	Path string `json:"path"`
	Name string `json:"name"`
}

func (s *automationRoutes) createFolder(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req createFolderBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	f, err := s.cmds.CreateFolder(r.Context(), req.Path, req.Name)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, f)
}

// renameFolderBody is the body of renameFolder.
type renameFolderBody struct {
	OldPath string `json:"old_path"`
	NewPath string `json:"new_path"`
	NewName string `json:"new_name"`
}

func (s *automationRoutes) renameFolder(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req renameFolderBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	respond(w, okBody{true}, s.cmds.RenameFolder(r.Context(), req.OldPath, req.NewPath, req.NewName))
}

func (s *automationRoutes) deleteFolder(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		fail(w, fmt.Errorf("%w: malformed query string: %v", core.ErrInvalid, err))
		return
	}
	keep := true
	switch q.Get("keep_contents") {
	case "", "true":
	case "false":
		keep = false
	default:
		fail(w, fmt.Errorf("%w: keep_contents must be true or false", core.ErrInvalid))
		return
	}
	respond(w, okBody{true}, s.cmds.DeleteFolder(r.Context(), q.Get("path"), keep))
}

func (s *automationRoutes) listTools(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.cmds.ToolIDs())
}

// ---- legacy views ----

// workflowView is a manual Automation as a legacy workflow.
type workflowView struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Enabled     bool           `json:"enabled"`
	Steps       []events.Node  `json:"steps"`
	Edges       []events.Edge  `json:"edges"`
	Trigger     events.Trigger `json:"trigger"`
}

func (s *automationRoutes) listWorkflows(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	out := []workflowView{}
	for _, a := range s.read.Automations() {
		if a.Trigger.Kind == events.TriggerManual {
			out = append(out, workflowView{ID: a.ID, Name: a.Name, Description: a.Description, Enabled: a.Enabled, Steps: a.Nodes, Edges: a.Edges, Trigger: a.Trigger})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// workflowResult is a legacy execute's answer: on success output and
// completed; on failure error too. The usage is the run's, a known
// subtotal when token_usage_known is false.
type workflowResult struct {
	RunID     string `json:"run_id,omitempty"`
	Output    string `json:"output"`
	Completed bool   `json:"completed"`
	Error     string `json:"error,omitempty"`
	usage.Tokens
}

// writeExecution answers a waited run: 200 when it succeeded, 502 when it
// failed, 409 when it was cancelled, each with the measured usage.
func writeExecution(w http.ResponseWriter, ex automationrunner.Execution, err error) {
	if err != nil {
		writeJSON(w, statusOf(err), workflowResult{Error: errorMessage(err), Tokens: usage.Tokens{TokenUsageKnown: true}})
		return
	}
	res := workflowResult{RunID: ex.RunID, Output: ex.Output, Completed: ex.State == events.StateSucceeded, Error: ex.Error,
		Tokens: ex.Usage}
	switch ex.State {
	case events.StateSucceeded:
		writeJSON(w, http.StatusOK, res)
	case events.StateCancelled:
		writeJSON(w, http.StatusConflict, res)
	default:
		writeJSON(w, http.StatusBadGateway, res)
	}
}

// executeWorkflowBody is the body of executeWorkflow.
type executeWorkflowBody struct {
	Input *string `json:"input"`
}

func (s *automationRoutes) executeWorkflow(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req executeWorkflowBody
	if err := decodeOptionalJSON(r, &req); err != nil {
		writeExecution(w, automationrunner.Execution{}, err)
		return
	}
	id := p.ByName("id")
	if a, ok := s.read.Automation(id); !ok || a.Trigger.Kind != events.TriggerManual {
		writeExecution(w, automationrunner.Execution{}, errMissing("workflow", id))
		return
	}
	ex, err := s.cmds.Execute(r.Context(), id, automationrunner.RunRequest{Input: req.Input})
	writeExecution(w, ex, err)
}

// scheduleView is a schedule-triggered Automation with its observations.
type scheduleView struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Enabled    bool      `json:"enabled"`
	Every      string    `json:"every"`
	Input      string    `json:"input"`
	LastRun    *runBrief `json:"last_run"`
	NextRun    *string   `json:"next_run"`
	LastResult *string   `json:"last_result"`
	Trigger    string    `json:"trigger"`
	Skipped    int       `json:"skipped_triggers"`
	Event      string    `json:"event,omitempty"`
	SkillID    string    `json:"skill_id,omitempty"`
}

// runBrief is a run as the schedule views show it.
type runBrief struct {
	RunID     string     `json:"run_id"`
	State     string     `json:"state"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	Error     string     `json:"error,omitempty"`
}

func (s *automationRoutes) scheduleOf(a projections.AutomationRecord) scheduleView {
	v := scheduleView{ID: a.ID, Name: a.Name, Enabled: a.Enabled, Every: a.Trigger.Every, Input: a.Trigger.Input,
		Trigger: a.Trigger.Kind, Skipped: a.Skipped, Event: a.Trigger.Event, SkillID: a.Trigger.SkillID}
	if runs := s.read.AutomationRunSummaries(a.ID); len(runs) > 0 { // no nodes: ended runs stay on disk
		r := runs[0]
		v.LastRun = &runBrief{RunID: r.RunID, State: r.State, StartedAt: r.StartedAt, EndedAt: r.EndedAt, Error: r.Error}
		for _, r := range runs {
			if r.EndedAt != nil {
				st := r.State
				v.LastResult = &st
				break
			}
		}
	}
	if a.Trigger.Kind == events.TriggerSchedule {
		v.NextRun = s.cmds.NextRun(a.ID)
	}
	return v
}

func (s *automationRoutes) listSchedules(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	out := []scheduleView{}
	for _, a := range s.read.Automations() {
		if a.Trigger.Kind == events.TriggerSchedule {
			out = append(out, s.scheduleOf(a))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *automationRoutes) patchSchedule(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req automationrunner.SchedulePatch
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	rec, err := s.cmds.PatchSchedule(r.Context(), p.ByName("id"), req)
	if err != nil {
		failAutomation(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.scheduleOf(rec))
}

func (s *automationRoutes) runSchedule(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	if err := decodeOptionalJSON(r, &struct{}{}); err != nil {
		writeExecution(w, automationrunner.Execution{}, err)
		return
	}
	id := p.ByName("id")
	a, ok := s.read.Automation(id)
	if !ok || a.Trigger.Kind != events.TriggerSchedule {
		writeExecution(w, automationrunner.Execution{}, errMissing("schedule", id))
		return
	}
	in := a.Trigger.Input
	ex, err := s.cmds.Execute(r.Context(), id, automationrunner.RunRequest{Input: &in})
	writeExecution(w, ex, err)
}

func (s *automationRoutes) listProactive(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	out := []scheduleView{}
	for _, a := range s.read.Automations() {
		switch a.Trigger.Kind {
		case events.TriggerSchedule, events.TriggerOnEvent, events.TriggerOnSkill:
			out = append(out, s.scheduleOf(a))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// runWorkflowCommand is the run-workflow /ws command.
type runWorkflowCommand struct {
	ID    string `json:"id" required:"true" minLength:"1"`
	Input string `json:"input"`
}

// workflowDoneFrame and workflowErrorFrame end a run-workflow stream, sent
// to the client that asked; workflow is the run key (the run ID).
type workflowDoneFrame struct {
	Kind            string `json:"kind"` // "workflow-done"
	Workflow        string `json:"workflow"`
	Output          string `json:"output"`
	Completed       bool   `json:"completed"`
	Tokens          int    `json:"tokens"`
	TokenUsageKnown bool   `json:"token_usage_known"`
}

type workflowErrorFrame struct {
	Kind     string `json:"kind"` // "workflow-error"
	Workflow string `json:"workflow"`
	Error    string `json:"error"`
	usage.Tokens
}

// handleRunWorkflow runs a manual Automation: its node events reach every
// client as `event` frames as they commit (with the run key in workflow);
// this client then gets workflow-done or workflow-error.
func (s *automationRoutes) handleRunWorkflow(ctx context.Context, c *Client, raw json.RawMessage) {
	var cmd runWorkflowCommand
	if !decodeCommand(c, "run-workflow", raw, &cmd) {
		return
	}
	if cmd.ID == "" {
		c.Send(ErrorFrame(`malformed run-workflow command: "id" is required`))
		return
	}
	if a, ok := s.read.Automation(cmd.ID); !ok || a.Trigger.Kind != events.TriggerManual {
		s.sendTo(c, workflowErrorFrame{Kind: "workflow-error", Workflow: cmd.ID, Error: fmt.Sprintf("no workflow %q", cmd.ID), Tokens: usage.Tokens{TokenUsageKnown: true}})
		return
	}
	input := cmd.Input
	go func() {
		ex, err := s.cmds.Execute(ctx, cmd.ID, automationrunner.RunRequest{Input: &input})
		switch {
		case err != nil:
			s.sendTo(c, workflowErrorFrame{Kind: "workflow-error", Workflow: cmp.Or(ex.RunID, cmd.ID), Error: errorMessage(err), Tokens: usage.Tokens{TokenUsageKnown: true}})
		case ex.State == events.StateSucceeded:
			u := ex.Usage
			s.sendTo(c, workflowDoneFrame{Kind: "workflow-done", Workflow: ex.RunID, Output: ex.Output, Completed: true,
				Tokens: u.Total(), TokenUsageKnown: u.TokenUsageKnown})
		default:
			s.sendTo(c, workflowErrorFrame{Kind: "workflow-error", Workflow: ex.RunID, Error: cmp.Or(ex.Error, "the run was "+ex.State), Tokens: ex.Usage})
		}
	}()
}

// nodeToolCallFrame is the live tool-call frame of an agent node's recorded
// tool call (workflow: the run; turn_id: the node; liveFrames).
func nodeToolCallFrame(_ *frameSource, c projections.Change, e events.NodeToolCall) any {
	f := toolCallFrame{Kind: "tool-call", Workflow: c.AggregateID, Agent: e.Agent, TurnID: e.Node, CallID: e.CallID,
		Occurrence: e.Occurrence, Name: e.Name, Phase: e.Phase, IsError: e.IsError, DurationMS: e.DurationMS}
	if e.Phase == "start" {
		f.Arguments = e.Arguments.Value()
	} else {
		result := e.Result.String()
		f.Result = &result
	}
	return f
}
