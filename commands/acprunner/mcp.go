package acprunner

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	acp "github.com/coder/acp-go-sdk"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"lathe/commands/agentrun"
	"lathe/commands/core"

	"lathe/runtime/agent/tools"
)

// MCPPath is where an outside agent finds the MCP tools of its Agent: one
// Lathe-hosted MCP server (streamable HTTP) beside the model gateway, named
// in session/new's mcpServers. Each call goes through the running turn's
// toolbox (agentrun.NewTurnTools): the MCP server's approval, saved
// decisions and the tool hooks apply as to the built-in loop's calls.
const MCPPath = "/mcp"

// MCPName is the server's name in the agent's mcpServers.
const MCPName = "lathe"

// mcpServer is l's MCP server: the Agent's MCP tools, or nil when it has
// none.
func (r *ACPRunner) mcpServer(l *live) *sdkmcp.Server {
	if r.core.Opts.MCP == nil {
		return nil
	}
	list := r.core.Opts.MCP.ToolsFor(l.agentID)
	if len(list) == 0 {
		return nil
	}
	s := sdkmcp.NewServer(&sdkmcp.Implementation{Name: "lathe", Version: "1"}, nil)
	for _, t := range list {
		var schema any = json.RawMessage(`{"type":"object"}`)
		if len(t.InputSchema) > 0 {
			schema = t.InputSchema
		}
		name := t.Name
		s.AddTool(&sdkmcp.Tool{Name: name, Description: t.Description, InputSchema: schema},
			func(ctx context.Context, req *sdkmcp.CallToolRequest) (*sdkmcp.CallToolResult, error) {
				res := l.callMCP(ctx, r.core, name, req.Params.Arguments)
				return &sdkmcp.CallToolResult{Content: []sdkmcp.Content{&sdkmcp.TextContent{Text: res.Output}}, IsError: res.IsError}, nil
			})
	}
	return s
}

// callMCP runs one MCP call of l's agent in its running turn.
func (l *live) callMCP(ctx context.Context, c *core.Core, name string, args json.RawMessage) tools.Result {
	tr := l.current()
	if tr == nil {
		return tools.Result{Output: "no turn is running: the call was not made", IsError: true}
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	call := core.ApprovalRequest{Run: cmp.Or(tr.t.Run, l.session), Session: l.session, TurnID: tr.t.TurnID, AgentID: l.agentID}
	box := agentrun.NewTurnTools(c, tools.New(l.sb, tr.t.Dir), call, tr.t.Stop)
	return box.Call(ctx, name, args)
}

// mcpServers is what session/new tells the agent of l's MCP server.
func mcpServers(l *live, url string) []acp.McpServer {
	if l.mcp == nil {
		return nil
	}
	return []acp.McpServer{{Http: &acp.McpServerHttpInline{Type: "http", Name: MCPName, Url: url + MCPPath,
		Headers: []acp.HttpHeader{{Name: "Authorization", Value: "Bearer " + l.token}}}}}
}

// routes serves the gateway and, at MCPPath, each live agent's MCP
// server, found by its token.
func (r *ACPRunner) routes(gw http.Handler) http.Handler {
	mcpH := sdkmcp.NewStreamableHTTPHandler(func(req *http.Request) *sdkmcp.Server {
		if l := r.byToken(bearer(req)); l != nil {
			return l.mcp
		}
		return nil
	}, &sdkmcp.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.Handle(MCPPath, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if l := r.byToken(bearer(req)); l == nil || l.mcp == nil {
			http.Error(w, `{"error":"unknown token"}`, http.StatusUnauthorized)
			return
		}
		req.Body = http.MaxBytesReader(w, req.Body, 8<<20)
		mcpH.ServeHTTP(w, req)
	}))
	mux.Handle("/", gw)
	return mux
}

func bearer(req *http.Request) string {
	t, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	return strings.TrimSpace(t)
}

func (r *ACPRunner) byToken(token string) *live {
	if token == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byTk[token]
}
