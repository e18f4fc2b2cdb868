package core

import (
	"context"

	"lathe/runtime/sandbox"
)

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
// sandbox.
type Launch struct {
	Args, Env []string
}
