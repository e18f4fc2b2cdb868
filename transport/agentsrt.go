package transport

import (
	"fmt"
	"net/http"

	"lathe/commands/agents"
	"lathe/commands/core"

	"github.com/julienschmidt/httprouter"

	"lathe/runtime/usage"
)

// The live Agent actor routes (package runtime/agent documents the actor
// rules: stateless vs stateful, budgets, restart, in-memory patches).
//
//	GET   /api/agents/:id/status   → 200 AgentStatus; 404 unknown Agent
//	POST  /api/agents/:id/execute  body {input, system_override?,
//	                               model_override?, stateless?} (strict JSON)
//	                               → 200 {output, model, stateless,
//	                               input_tokens, output_tokens,
//	                               reasoning_tokens, total_tokens,
//	                               token_usage_known}
//	                               400 bad body or empty input; 404 unknown
//	                               Agent; 502 provider failure; 402 budget
//	                               exceeded (the error names max_output_tokens
//	                               or max_usd); 503 Agent not spawned. Every
//	                               execute error body is {error} plus the five
//	                               token fields.
//	POST  /api/agents/:id/restart  → 200 AgentStatus
//	PATCH /api/agents/:id[?restart=false]
//	                               body {name?, model?, prompt?,
//	                               dependencies?, budget?} (strict JSON)
//	                               → 200 the Agent's new projection; in
//	                               memory only, never written to the YAML;
//	                               restarts the actor unless restart=false
//	GET   /api/tokens/report       → 200 {agents: [{agent_id, requests,
//	                               input_tokens, …, token_usage_known}], total}
//
// The error classes' statuses (402 for a budget, 502 for a provider) are
// mapped in transport/errors.go.

// executeBody is the body of POST /api/agents/:id/execute.
type executeBody struct {
	Input          string  `json:"input"`
	SystemOverride *string `json:"system_override"`
	ModelOverride  *string `json:"model_override"`
	Stateless      bool    `json:"stateless"`
}

// agentPatchBody is the body of PATCH /api/agents/:id: a nil field stays.
type agentPatchBody struct {
	Name         *string          `json:"name"`
	Model        *string          `json:"model"`
	Prompt       *string          `json:"prompt"`
	Dependencies *[]string        `json:"dependencies"`
	Budget       *agentBudgetBody `json:"budget"`
}

// agentBudgetBody is a patch's budget: both limits, an absent one zero
// (unlimited).
type agentBudgetBody struct {
	MaxOutputTokens int     `json:"max_output_tokens"`
	MaxUSD          float64 `json:"max_usd"`
}

// executeFailure is an execute error body: the message and the token fields.
type executeFailure struct {
	Error string `json:"error"`
	usage.View
}

func (s *agentRoutes) agentStatus(w http.ResponseWriter, _ *http.Request, ps httprouter.Params) {
	st, err := s.runtime.Status(ps.ByName("id"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *agentRoutes) agentExecute(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id := ps.ByName("id")
	if _, err := s.runtime.Status(id); err != nil {
		writeJSON(w, statusOf(err), executeFailure{Error: err.Error(), View: usage.Tokens{TokenUsageKnown: true}.View()})
		return
	}
	var body executeBody
	if err := decodeJSON(r, &body); err != nil {
		writeJSON(w, statusOf(err), executeFailure{Error: err.Error(), View: usage.Tokens{TokenUsageKnown: true}.View()})
		return
	}
	res, err := s.cmds.Execute(r.Context(), id, agents.ExecuteRequest{
		Input: body.Input, SystemOverride: body.SystemOverride, ModelOverride: body.ModelOverride, Stateless: body.Stateless,
	})
	if err != nil {
		if isClientGone(r.Context().Err()) {
			return
		}
		writeJSON(w, statusOf(err), executeFailure{Error: err.Error(), View: res.View})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *agentRoutes) agentRestart(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	st, err := s.cmds.Restart(r.Context(), ps.ByName("id"))
	if err != nil {
		if isClientGone(r.Context().Err()) {
			return
		}
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *agentRoutes) agentPatch(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id := ps.ByName("id")
	if _, err := s.runtime.Status(id); err != nil {
		fail(w, err)
		return
	}
	restart := true
	switch q := r.URL.Query().Get("restart"); q {
	case "", "true", "1":
	case "false", "0":
		restart = false
	default:
		fail(w, fmt.Errorf("%w: query parameter restart must be true or false", core.ErrInvalid))
		return
	}
	var body agentPatchBody
	if err := decodeJSON(r, &body); err != nil {
		fail(w, err)
		return
	}
	p := agents.AgentPatch{Name: body.Name, Model: body.Model, Prompt: body.Prompt, Dependencies: body.Dependencies}
	if b := body.Budget; b != nil {
		p.Budget = &agents.AgentBudget{MaxOutputTokens: b.MaxOutputTokens, MaxUSD: b.MaxUSD}
	}
	v, err := s.cmds.Patch(r.Context(), id, p, restart)
	if err != nil {
		if isClientGone(r.Context().Err()) {
			return
		}
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *agentRoutes) tokenReport(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.runtime.TokenReport())
}
