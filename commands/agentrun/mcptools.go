package agentrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"lathe/commands/core"

	"lathe/journal/events"
	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/llm"
	"lathe/runtime/mcp"
)

// TurnTools is a Session turn's toolbox: the sandbox tools, plus the MCP
// tools of the servers open to the turn's Agent, advertised as
// mcp__<server>__<tool>. An MCP call goes from the daemon host to its
// server, after an operator's allow when the server's approval is always
// (unless a saved decision covers it); a deny, or a Stop while parked,
// answers the model with an error result and the turn goes on to its end.
type TurnTools struct {
	Core    *core.Core
	Sandbox agent.Toolbox
	mcp     []llm.Tool
	Caller  core.ApprovalRequest // the run, Session, turn and Agent making the calls
	Stop    <-chan struct{}
}

// NewTurnTools composes the toolbox of a turn by agentID.
func NewTurnTools(s *core.Core, sandbox agent.Toolbox, call core.ApprovalRequest, stop <-chan struct{}) agent.Toolbox {
	return TurnHooks{s}.tools(mcpTools(s, sandbox, call, stop), sandbox, call, stop) // commands/agentrun/hooks.go
}

func mcpTools(s *core.Core, sandbox agent.Toolbox, call core.ApprovalRequest, stop <-chan struct{}) agent.Toolbox {
	if s.Opts.MCP == nil {
		return sandbox
	}
	var advertised []llm.Tool
	for _, t := range s.Opts.MCP.ToolsFor(call.AgentID) {
		advertised = append(advertised, llm.Tool{Name: t.Name, Description: t.Description, Schema: t.InputSchema})
	}
	if len(advertised) == 0 {
		return sandbox
	}
	return &TurnTools{Core: s, Sandbox: sandbox, mcp: advertised, Caller: call, Stop: stop}
}

// Undecided is the result of a call an approval did not allow, and false;
// true when it was allowed.
func Undecided(decision string, err error) (tools.Result, bool) {
	switch {
	case err != nil:
		return tools.Result{Output: fmt.Sprintf("the call could not be put to the operator: %v", err), IsError: true}, false
	case decision == events.DecisionDeny:
		return tools.Result{Output: "denied by the operator", IsError: true}, false
	case decision != events.DecisionAllow:
		return tools.Result{Output: "the call was not made: " + decision, IsError: true}, false
	}
	return tools.Result{}, true
}

func (t *TurnTools) Tools() []llm.Tool {
	return append(append([]llm.Tool(nil), t.Sandbox.Tools()...), t.mcp...)
}

func (t *TurnTools) Call(ctx context.Context, name string, args json.RawMessage) tools.Result {
	if !strings.HasPrefix(name, mcp.ToolPrefix) {
		return t.Sandbox.Call(ctx, name, args)
	}
	cfg, tool, err := t.Core.Opts.MCP.Lookup(name)
	if err != nil {
		return tools.Result{Output: err.Error(), IsError: true}
	}
	if cfg.Approval != mcp.ApprovalNever {
		// A Stop ends the wait for a decision; the parked approval then
		// resolves as cancelled.
		req := t.Caller
		req.Server, req.Tool, req.Arguments = cfg.Name, tool, args
		if refused, ok := Undecided(core.ParkOrStop(ctx, t.Core.Approver, req, t.Stop)); !ok {
			return refused
		}
	}
	res, err := t.Core.Opts.MCP.Call(ctx, name, args)
	if err != nil {
		return tools.Result{Output: err.Error(), IsError: true}
	}
	return tools.Result{Output: res.Text, IsError: res.IsError}
}
