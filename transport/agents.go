package transport

import (
	"errors"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"lathe/runtime/errs"
)

// The Agent catalog routes: the config projection of the Agents, the model
// server health report and the per-Agent model lists. Their behaviour and
// the decisions behind it (no caching, hosted kinds never probed, key
// values never shown) are documented in package runtime/llm/catalog.
//
//	GET /api/agents                 → 200 [AgentView…] in config order, with
//	                                  the in-memory patches
//	GET /api/llm-health             → 200 LLMHealth (ok false is still 200: the
//	                                  report itself succeeded)
//	GET /api/llm/models?agent=<id>  → 200 ModelList;
//	                                  400 without agent, 404 unknown agent;
//	                                  502 when the ollama server cannot be
//	                                  listed: the body is the ModelList
//	                                  (models = [current model]) plus "error".

func (s *agentRoutes) listAgents(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.runtime.Agents())
}

func (s *agentRoutes) llmHealth(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.catalog.Health(r.Context()))
}

// modelsFailure is the 502 body of /api/llm/models: the list holding the
// current model, and why the live list is missing.
type modelsFailure struct {
	ModelList
	Error string `json:"error"`
}

func (s *agentRoutes) llmModels(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	id := r.URL.Query().Get("agent")
	if id == "" {
		writeError(w, http.StatusBadRequest, "query parameter agent is required (an Agent id)")
		return
	}
	current := "" // the in-memory model of a patched Agent
	if v, err := s.runtime.Agent(id); err == nil {
		current = v.Model
	}
	ml, err := s.catalog.ModelsFor(r.Context(), id, current)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, ml)
	case errors.Is(err, errs.NotFound): // an Agent the catalog does not know
		fail(w, err)
	case isClientGone(r.Context().Err()):
		return
	case ml.Source == "live":
		writeJSON(w, http.StatusBadGateway, modelsFailure{ModelList: ml, Error: err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, modelsFailure{ModelList: ml, Error: err.Error()})
	}
}
