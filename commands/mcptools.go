package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"lathe/journal/events"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/llm"
	"lathe/runtime/mcp"
)

// turnTools is a Session turn's toolbox: the sandbox tools, plus the MCP
// tools of the servers open to the turn's Agent, advertised as
// mcp__<server>__<tool>. An MCP call goes from the daemon host to its
// server, after an operator's allow when the server's approval is always
// (unless a saved decision covers it); a deny, or a Stop while parked,
// answers the model with an error result and the turn goes on to its end.
type turnTools struct {
	s       *core
	sandbox agent.Toolbox
	mcp     []llm.Tool
	call    ApprovalRequest // the run, Session, turn and Agent making the calls
	stop    <-chan struct{}
}

// newTurnTools composes the toolbox of a turn by agentID.
func newTurnTools(s *core, sandbox agent.Toolbox, call ApprovalRequest, stop <-chan struct{}) agent.Toolbox {
	return turnHooks{s}.tools(mcpTools(s, sandbox, call, stop), sandbox, call) // commands/hooks.go
}

func mcpTools(s *core, sandbox agent.Toolbox, call ApprovalRequest, stop <-chan struct{}) agent.Toolbox {
	if s.opts.MCP == nil {
		return sandbox
	}
	var advertised []llm.Tool
	for _, t := range s.opts.MCP.ToolsFor(call.AgentID) {
		advertised = append(advertised, llm.Tool{Name: t.Name, Description: t.Description, Schema: t.InputSchema})
	}
	if len(advertised) == 0 {
		return sandbox
	}
	return &turnTools{s: s, sandbox: sandbox, mcp: advertised, call: call, stop: stop}
}

func (t *turnTools) Tools() []llm.Tool {
	return append(append([]llm.Tool(nil), t.sandbox.Tools()...), t.mcp...)
}

func (t *turnTools) Call(ctx context.Context, name string, args json.RawMessage) tools.Result {
	if !strings.HasPrefix(name, mcp.ToolPrefix) {
		return t.sandbox.Call(ctx, name, args)
	}
	cfg, tool, err := t.s.opts.MCP.Lookup(name)
	if err != nil {
		return tools.Result{Output: err.Error(), IsError: true}
	}
	if cfg.Approval != mcp.ApprovalNever {
		// A Stop ends the wait for a decision; the parked approval then
		// resolves as cancelled.
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-t.stop:
				cancel()
			case <-pctx.Done():
			}
		}()
		req := t.call
		req.Server, req.Tool, req.Arguments = cfg.Name, tool, args
		decision, err := t.s.approver.Park(pctx, req)
		switch {
		case err != nil:
			return tools.Result{Output: fmt.Sprintf("the call could not be put to the operator: %v", err), IsError: true}
		case decision == events.DecisionDeny:
			return tools.Result{Output: "denied by the operator", IsError: true}
		case decision != events.DecisionAllow:
			return tools.Result{Output: "the call was not made: " + decision, IsError: true}
		}
	}
	res, err := t.s.opts.MCP.Call(ctx, name, args)
	if err != nil {
		return tools.Result{Output: err.Error(), IsError: true}
	}
	return tools.Result{Output: res.Text, IsError: res.IsError}
}
