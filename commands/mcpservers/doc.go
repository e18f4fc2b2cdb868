// Package mcpservers installs, reconnects and removes MCP servers, each a
// bracketed effect.
package mcpservers
