// Package agentrun is what one Agent run needs whatever starts it: the
// hooks around it, the MCP tools it may call (approval included), the
// inference clock and the observer that journals its steps.
package agentrun
