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

	"github.com/julienschmidt/httprouter"

	"lathe/commands"
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
	Run(ctx context.Context, id string, req commands.RunRequest) (string, error)
	Fork(ctx context.Context, id, runID string, input *string) (string, error)
	ResumeNode(ctx context.Context, id, runID, nodeID, value string, cancel bool) error
	Execute(ctx context.Context, id string, req commands.RunRequest) (commands.Execution, error)
	PatchSchedule(ctx context.Context, id string, p commands.SchedulePatch) (projections.AutomationRecord, error)
	NextRun(id string) *string
}

func (s *Server) automationRoutes() {
	r := s.router
	r.GET("/api/automations", s.listAutomations)
	r.POST("/api/automations", s.createAutomation)
	r.GET("/api/automations/:id", s.getAutomation)
	r.PUT("/api/automations/:id", s.putAutomation)
	r.PATCH("/api/automations/:id", s.putAutomation)
	r.DELETE("/api/automations/:id", s.deleteAutomation)
	r.POST("/api/automations/:id/move", s.moveAutomation)
	r.POST("/api/automations/:id/run", s.runAutomation)
	r.GET("/api/automations/:id/runs", s.listRuns)
	r.GET("/api/automations/:id/runs/:run_id", s.getRun)
	r.POST("/api/automations/:id/runs/:run_id/fork", s.forkRun)
	r.POST("/api/automations/:id/runs/:run_id/nodes/:node_id/resume", s.resumeNode)
	r.POST("/api/automations/:id/runs/:run_id/nodes/:node_id/cancel", s.cancelNode)
	r.GET("/api/interrupts", s.listInterrupts)
	r.GET("/api/automation-folders", s.listFolders)
	r.POST("/api/automation-folders", s.createFolder)
	r.PATCH("/api/automation-folders", s.renameFolder)
	r.DELETE("/api/automation-folders", s.deleteFolder)
	r.GET("/api/tools", s.listTools)

	r.GET("/api/workflows", s.listWorkflows)
	r.POST("/api/workflows/:id/execute", s.executeWorkflow)
	r.GET("/api/schedules", s.listSchedules)
	r.PATCH("/api/schedules/:id", s.patchSchedule)
	r.POST("/api/schedules/:id/run", s.runSchedule)
	r.GET("/api/proactive", s.listProactive)
	s.hub.Handle("run-workflow", s.handleRunWorkflow)
}

// invalidAutomationBody is a refused record: the error and the node or
// edge at fault.
type invalidAutomationBody struct {
	Error string `json:"error"`
	Node  string `json:"node,omitempty"`
	Edge  string `json:"edge,omitempty"`
}

func failAutomation(w http.ResponseWriter, err error) {
	var inv *commands.InvalidAutomation
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

func (s *Server) listAutomations(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.deps.Store.Automations())
}

func (s *Server) getAutomation(w http.ResponseWriter, _ *http.Request, p httprouter.Params) {
	a, ok := s.deps.Store.Automation(p.ByName("id"))
	if !ok {
		fail(w, errMissing("Automation", p.ByName("id")))
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) createAutomation(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	a, err := decodeAutomation(r)
	if err != nil {
		fail(w, err)
		return
	}
	rec, err := s.deps.Automations.CreateAutomation(r.Context(), a)
	if err != nil {
		failAutomation(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, rec)
}

func (s *Server) putAutomation(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	a, err := decodeAutomation(r)
	if err != nil {
		fail(w, err)
		return
	}
	rec, err := s.deps.Automations.PutAutomation(r.Context(), p.ByName("id"), a)
	if err != nil {
		failAutomation(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

type okBody struct {
	OK bool `json:"ok"`
}

func (s *Server) deleteAutomation(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	respond(w, okBody{true}, s.deps.Automations.DeleteAutomation(r.Context(), p.ByName("id")))
}

func (s *Server) moveAutomation(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req struct {
		Folder *string `json:"folder"`
	}
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	rec, err := s.deps.Automations.MoveAutomation(r.Context(), p.ByName("id"), req.Folder)
	respond(w, rec, err)
}

// runStarted answers a run or fork: id is the Automation's (the spec's
// answer), run_id the new run's.
type runStarted struct {
	OK    bool   `json:"ok"`
	ID    string `json:"id"`
	RunID string `json:"run_id"`
}

func (s *Server) runAutomation(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req commands.RunRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	id := p.ByName("id")
	runID, err := s.deps.Automations.Run(r.Context(), id, req)
	respond(w, runStarted{true, id, runID}, err)
}

func (s *Server) listRuns(w http.ResponseWriter, _ *http.Request, p httprouter.Params) {
	id := p.ByName("id")
	if _, ok := s.deps.Store.Automation(id); !ok {
		fail(w, errMissing("Automation", id))
		return
	}
	runs := s.deps.Store.AutomationRuns(id)
	for i := range runs {
		runs[i] = s.deps.Store.ResolveRun(runs[i])
	}
	writeJSON(w, http.StatusOK, runs)
}

func (s *Server) getRun(w http.ResponseWriter, _ *http.Request, p httprouter.Params) {
	run, ok := s.deps.Store.AutomationRun(p.ByName("run_id"))
	if !ok || run.AutomationID != p.ByName("id") {
		fail(w, fmt.Errorf("%w: Automation %q has no run %q", commands.ErrNotFound, p.ByName("id"), p.ByName("run_id")))
		return
	}
	writeJSON(w, http.StatusOK, s.deps.Store.ResolveRun(run))
}

func (s *Server) forkRun(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req struct {
		Input *string `json:"input"`
	}
	if err := decodeOptionalJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	id := p.ByName("id")
	runID, err := s.deps.Automations.Fork(r.Context(), id, p.ByName("run_id"), req.Input)
	respond(w, runStarted{true, id, runID}, err)
}

func (s *Server) resumeNode(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req struct {
		Value *string `json:"value"`
	}
	if err := decodeOptionalJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	value := ""
	if req.Value != nil {
		value = *req.Value
	}
	err := s.deps.Automations.ResumeNode(r.Context(), p.ByName("id"), p.ByName("run_id"), p.ByName("node_id"), value, false)
	respond(w, okBody{true}, err)
}

func (s *Server) cancelNode(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	if err := decodeOptionalJSON(r, &struct{}{}); err != nil {
		fail(w, err)
		return
	}
	err := s.deps.Automations.ResumeNode(r.Context(), p.ByName("id"), p.ByName("run_id"), p.ByName("node_id"), "", true)
	respond(w, okBody{true}, err)
}

func (s *Server) listInterrupts(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	in := s.deps.Store.Interrupts()
	if in == nil {
		in = []projections.Interrupt{}
	}
	writeJSON(w, http.StatusOK, in)
}

func (s *Server) listFolders(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.deps.Store.AutomationFolders())
}

func (s *Server) createFolder(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req struct {
		Path string `json:"path"`
		Name string `json:"name"`
	}
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	f, err := s.deps.Automations.CreateFolder(r.Context(), req.Path, req.Name)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, f)
}

func (s *Server) renameFolder(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req struct {
		OldPath string `json:"old_path"`
		NewPath string `json:"new_path"`
		NewName string `json:"new_name"`
	}
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	respond(w, okBody{true}, s.deps.Automations.RenameFolder(r.Context(), req.OldPath, req.NewPath, req.NewName))
}

func (s *Server) deleteFolder(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		fail(w, fmt.Errorf("%w: malformed query string: %v", commands.ErrInvalid, err))
		return
	}
	keep := true
	switch q.Get("keep_contents") {
	case "", "true":
	case "false":
		keep = false
	default:
		fail(w, fmt.Errorf("%w: keep_contents must be true or false", commands.ErrInvalid))
		return
	}
	respond(w, okBody{true}, s.deps.Automations.DeleteFolder(r.Context(), q.Get("path"), keep))
}

func (s *Server) listTools(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.deps.Automations.ToolIDs())
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

func (s *Server) listWorkflows(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	out := []workflowView{}
	for _, a := range s.deps.Store.Automations() {
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
func writeExecution(w http.ResponseWriter, ex commands.Execution, err error) {
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

func (s *Server) executeWorkflow(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req struct {
		Input *string `json:"input"`
	}
	if err := decodeOptionalJSON(r, &req); err != nil {
		writeExecution(w, commands.Execution{}, err)
		return
	}
	id := p.ByName("id")
	if a, ok := s.deps.Store.Automation(id); !ok || a.Trigger.Kind != events.TriggerManual {
		writeExecution(w, commands.Execution{}, errMissing("workflow", id))
		return
	}
	ex, err := s.deps.Automations.Execute(r.Context(), id, commands.RunRequest{Input: req.Input})
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

func (s *Server) scheduleOf(a projections.AutomationRecord) scheduleView {
	v := scheduleView{ID: a.ID, Name: a.Name, Enabled: a.Enabled, Every: a.Trigger.Every, Input: a.Trigger.Input,
		Trigger: a.Trigger.Kind, Skipped: a.Skipped, Event: a.Trigger.Event, SkillID: a.Trigger.SkillID}
	if runs := s.deps.Store.AutomationRuns(a.ID); len(runs) > 0 {
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
		v.NextRun = s.deps.Automations.NextRun(a.ID)
	}
	return v
}

func (s *Server) listSchedules(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	out := []scheduleView{}
	for _, a := range s.deps.Store.Automations() {
		if a.Trigger.Kind == events.TriggerSchedule {
			out = append(out, s.scheduleOf(a))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) patchSchedule(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req commands.SchedulePatch
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	rec, err := s.deps.Automations.PatchSchedule(r.Context(), p.ByName("id"), req)
	if err != nil {
		failAutomation(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.scheduleOf(rec))
}

func (s *Server) runSchedule(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	if err := decodeOptionalJSON(r, &struct{}{}); err != nil {
		writeExecution(w, commands.Execution{}, err)
		return
	}
	id := p.ByName("id")
	a, ok := s.deps.Store.Automation(id)
	if !ok || a.Trigger.Kind != events.TriggerSchedule {
		writeExecution(w, commands.Execution{}, errMissing("schedule", id))
		return
	}
	in := a.Trigger.Input
	ex, err := s.deps.Automations.Execute(r.Context(), id, commands.RunRequest{Input: &in})
	writeExecution(w, ex, err)
}

func (s *Server) listProactive(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	out := []scheduleView{}
	for _, a := range s.deps.Store.Automations() {
		switch a.Trigger.Kind {
		case events.TriggerSchedule, events.TriggerOnEvent, events.TriggerOnSkill:
			out = append(out, s.scheduleOf(a))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// runWorkflowCommand is the run-workflow /ws command.
type runWorkflowCommand struct {
	ID    string `json:"id"`
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
func (s *Server) handleRunWorkflow(ctx context.Context, c *Client, raw json.RawMessage) {
	var cmd runWorkflowCommand
	if err := json.Unmarshal(raw, &cmd); err != nil || cmd.ID == "" {
		c.Send(ErrorFrame(`malformed run-workflow command: "id" is required`))
		return
	}
	if a, ok := s.deps.Store.Automation(cmd.ID); !ok || a.Trigger.Kind != events.TriggerManual {
		s.sendTo(c, workflowErrorFrame{Kind: "workflow-error", Workflow: cmd.ID, Error: fmt.Sprintf("no workflow %q", cmd.ID), Tokens: usage.Tokens{TokenUsageKnown: true}})
		return
	}
	input := cmd.Input
	go func() {
		ex, err := s.deps.Automations.Execute(ctx, cmd.ID, commands.RunRequest{Input: &input})
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

// automationFrame is the tool-call frame of an agent node's recorded tool
// call (workflow: the run; turn_id: the node), or nil.
func automationFrame(c projections.Change) any {
	if c.Type != (events.NodeToolCall{}).EventType() {
		return nil
	}
	var e events.NodeToolCall
	if json.Unmarshal(c.Data, &e) != nil {
		return nil
	}
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
