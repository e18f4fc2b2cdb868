package transport

import (
	"fmt"
	"net/http"

	"lathe/commands/core"

	"github.com/julienschmidt/httprouter"
)

// The MCP registry routes (commands.MCP and the registry's reads;
// runtime/mcp documents the registry and the bundled catalog).
//
//	GET    /api/mcp/catalog          → 200 [MCPEntry…]
//	POST   /api/mcp/install          body {slug, values?, name?} → 201 the
//	                                  server (listed failed, with its
//	                                  error, when it could not start); 400
//	                                  bad values, 404 unknown slug, 409
//	                                  duplicate name
//	GET    /api/mcp/servers          → 200 [{name, transport, tool_count,
//	                                  status, error?, approval, agents}]
//	POST   /api/mcp/servers/:name    → 200 the server, reconnected
//	DELETE /api/mcp/servers/:name    → 200 {name, removed}
//	GET    /api/mcp/tools            → 200 [{name, server, tool,
//	                                  description, input_schema}]

func (s *mcpRoutes) mcpCatalog(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.registry.Catalog())
}

// mcpInstallBody is the body of mcpInstall.
type mcpInstallBody struct {
	Slug   string            `json:"slug" required:"true" minLength:"1"`
	Values map[string]string `json:"values"`
	Name   string            `json:"name"`
}

func (s *mcpRoutes) mcpInstall(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req mcpInstallBody
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.Slug == "" {
		fail(w, fmt.Errorf("%w: slug is required (see GET /api/mcp/catalog)", core.ErrInvalid))
		return
	}
	v, err := s.cmds.Install(r.Context(), req.Slug, req.Name, req.Values)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, v)
}

func (s *mcpRoutes) mcpServers(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.registry.Servers())
}

func (s *mcpRoutes) mcpReconnect(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	v, err := s.cmds.Reconnect(r.Context(), p.ByName("name"))
	respond(w, v, err)
}

func (s *mcpRoutes) mcpRemove(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	if err := s.cmds.Remove(r.Context(), p.ByName("name")); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, mcpRemovedBody{Name: p.ByName("name"), Removed: true})
}

// mcpRemovedBody is DELETE /api/mcp/servers/{name}.
type mcpRemovedBody struct {
	Name    string `json:"name"`
	Removed bool   `json:"removed"`
}

func (s *mcpRoutes) mcpTools(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.registry.Tools())
}
