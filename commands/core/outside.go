package core

import (
	"context"
	"encoding/json"

	"lathe/runtime/agent"
	"lathe/runtime/agent/tools"
	"lathe/runtime/sandbox"
)

// OutsideRunner runs outside Agents' turns (commands/acprunner), for the
// process managers that run turns: a Session's, a Ways lane's.
type OutsideRunner interface {
	// Outside reports whether Agent id is an outside one.
	Outside(id string) bool
	// Run runs one turn to its result, its steps through obs.
	Run(ctx context.Context, t OutsideTurn, obs agent.TurnObserver) agent.TurnResult
	// RunAlone runs one turn where no Session is (an Agent's execute, an
	// Automation's agent node), in a sandbox of its own for that turn.
	RunAlone(ctx context.Context, t AloneTurn, obs agent.TurnObserver) agent.TurnResult
	// End ends run's agent process, if any: its sandbox goes.
	End(run string)
}

// AloneTurn is one turn of an outside Agent where no Session is.
type AloneTurn struct {
	// Run is what its approvals name (the execute's intent, the
	// Automation run); TurnID the node's key, if any.
	Run, TurnID, AgentID string
	Input                string
	Stop                 <-chan struct{}
	Hooks                ToolHooks
}

// OutsideTurn is one turn of an outside Agent.
type OutsideTurn struct {
	// Run keys the agent process: the Session, or a Ways lane's run,
	// each with a sandbox of its own.
	Run string
	// Process keys the agent process when it is not Run's own: a lattice
	// subtask's Worker, beside the Session's agent in its sandbox. "" is Run.
	Process                    string
	SessionID, TurnID, AgentID string
	Model                      *string
	Sandbox                    sandbox.Sandbox
	Dir                        string
	Input                      string
	Stop                       <-chan struct{}
	// Hooks are the run's PreToolUse and PostToolUse hooks.
	Hooks ToolHooks
}

// ToolHooks asks the operator's PreToolUse hooks about a call an outside
// agent asks to make, and runs the PostToolUse hooks once it ran
// (commands/agentrun.ToolHooks).
type ToolHooks interface {
	PreTool(ctx context.Context, c agent.Call, name string, args json.RawMessage) PreToolVerdict
	// PostTool returns res with what the hooks added; its EndTurn is set
	// when one ended the turn.
	PostTool(ctx context.Context, c agent.Call, name string, args json.RawMessage, res tools.Result) tools.Result
}

// PreToolVerdict is what the PreToolUse hooks decided of one call.
type PreToolVerdict struct {
	// Refused says why the call must not run; "" lets it run.
	Refused string
	// EndTurn: a hook ended the turn (continue: false); Refused says why.
	EndTurn bool
	// AskServer, when set, is the approval server (a hook's) under which
	// the operator decides the call first; AskReason is the hook's why.
	AskServer, AskReason string
}

// OutsideAgents starts the outside Agents (kind acp: an agent process over
// the Agent Client Protocol in a Session's sandbox). The assembly's, from
// the config, the presets and the installs (cmd/lathe/internal/daemon).
type OutsideAgents interface {
	// Outside reports whether Agent id is an outside one.
	Outside(id string) bool
	// Tools installs those of Agents ids that are outside ones (once) and
	// returns the installs a sandbox mounts read-only (sandbox.Spec.Tools).
	// A failed install is the error, with npm's own words.
	Tools(ctx context.Context, ids ...string) ([]sandbox.Tool, error)
	// Launch is how to start Agent id in a sandbox whose gateway is gw.
	Launch(ctx context.Context, id string, gw GatewayAccess) (Launch, error)
}

// GatewayAccess is how an outside agent reaches its model: Lathe's gateway
// at URL inside the sandbox, with a token scoped to its Session. Never a
// provider key.
type GatewayAccess struct{ URL, Token, Model string }

// Launch is an outside agent's command line and environment in the
// sandbox, and the files it needs under its HOME before it starts.
type Launch struct {
	Args, Env []string
	// Home is the agent's HOME in the sandbox; Files are written under it
	// (relative, slash-separated paths to contents).
	Home  string
	Files map[string]string
}
