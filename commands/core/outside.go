package core

import (
	"context"
	"encoding/json"

	"lathe/runtime/agent"
	"lathe/runtime/sandbox"
)

// OutsideRunner runs outside Agents' turns (commands/acprunner), for the
// process managers that run turns: a Session's, a Ways lane's.
type OutsideRunner interface {
	// Outside reports whether Agent id is an outside one.
	Outside(id string) bool
	// Run runs one turn to its result, its steps through obs.
	Run(ctx context.Context, t OutsideTurn, obs agent.TurnObserver) agent.TurnResult
	// End ends run's agent process, if any: its sandbox goes.
	End(run string)
}

// OutsideTurn is one turn of an outside Agent.
type OutsideTurn struct {
	// Run keys the agent process: the Session, or a Ways lane's run,
	// each with a sandbox of its own.
	Run                        string
	SessionID, TurnID, AgentID string
	Model                      *string
	Sandbox                    sandbox.Sandbox
	Dir                        string
	Input                      string
	Stop                       <-chan struct{}
	// Hooks are the run's PreToolUse hooks.
	Hooks PreToolHooks
}

// PreToolHooks asks the operator's PreToolUse hooks about a call
// (commands/agentrun.PreToolHooks).
type PreToolHooks interface {
	PreTool(ctx context.Context, c agent.Call, name string, args json.RawMessage) (blocked bool, msg string)
}

// OutsideAgents starts the outside Agents (kind acp: an agent process over
// the Agent Client Protocol in a Session's sandbox). The assembly's, from
// the config, the presets and the installs (cmd/lathe/internal/daemon).
type OutsideAgents interface {
	// Outside reports whether Agent id is an outside one.
	Outside(id string) bool
	// Tools installs Agent id when it is an outside one (once) and
	// returns the installs a sandbox mounts read-only (sandbox.Spec.Tools).
	// A failed install is the error, with npm's own words.
	Tools(ctx context.Context, id string) ([]sandbox.Tool, error)
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
