package events

func init() {
	register[MCPServerInstalled]()
	register[MCPServerReconnected]()
	register[MCPServerRemoved]()
}

// MCPServer is the aggregate of one MCP server of the live registry, by its
// name. Its events audit the operator's registry changes; the registry
// itself is runtime state (catalog installs are not persisted: the next
// start connects the configured servers only).
const MCPServer = "mcp-server"

// MCPServerInstalled: an operator connected a catalog server into the live
// registry. Values are the install's non-secret values; a secret value
// never enters the journal.
type MCPServerInstalled struct {
	Slug   string            `json:"slug"`
	Values map[string]string `json:"values,omitempty"`
}

// MCPServerReconnected: an operator reconnected a server.
type MCPServerReconnected struct{}

// MCPServerRemoved: an operator removed a server from the live registry.
type MCPServerRemoved struct{}

func (MCPServerInstalled) EventType() string   { return "mcp-server-installed" }
func (MCPServerReconnected) EventType() string { return "mcp-server-reconnected" }
func (MCPServerRemoved) EventType() string     { return "mcp-server-removed" }

func (MCPServerInstalled) Aggregate() string   { return MCPServer }
func (MCPServerReconnected) Aggregate() string { return MCPServer }
func (MCPServerRemoved) Aggregate() string     { return MCPServer }
