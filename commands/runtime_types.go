package commands

import (
	"lathe/runtime/agent"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/mcp"
	"lathe/runtime/project"
	"lathe/runtime/sandbox"
)

// The runtime's value types and error classes that transport shows or maps,
// named here so that transport reaches the runtime through commands (which
// bridges it) and imports no runtime package beyond the Preview host and the
// terminal (journal/deps_test.go). They are aliases: the types are the
// runtime's own, so JSON shapes and errors.Is stay exactly as they were.

// The Agent catalog's views (runtime/llm/catalog).
type (
	// AgentView is one configured Agent as GET /api/agents shows it.
	AgentView = catalog.AgentView
	// LLMHealth is the model servers' health report.
	LLMHealth = catalog.Health
	// ModelList is one Agent's model list.
	ModelList = catalog.ModelList
	// Catalog is the Agent, provider and model-server catalog.
	Catalog = catalog.Catalog
)

// EmptyCatalog is a catalog with no providers and no Agents, for a daemon
// that was given none.
func EmptyCatalog() *Catalog { return catalog.New(nil, nil, catalog.Options{}) }

// The live Agent actors' values (runtime/agent, runtime/agent/tools).
type (
	// AgentStatus is a live Agent actor's status.
	AgentStatus = agent.Status
	// ExecuteRequest is one direct execute of an Agent.
	ExecuteRequest = agent.ExecuteRequest
	// ExecuteResult is what an execute answers.
	ExecuteResult = agent.Result
	// TokenReport is the token use per Agent and in total.
	TokenReport = agent.TokenReport
	// AgentPatch is an in-memory change to an Agent.
	AgentPatch = agent.AgentPatch
)

// The MCP registry's views (runtime/mcp).
type (
	// MCPServerView is one installed MCP server and its state.
	MCPServerView = mcp.ServerView
	// MCPTool is one MCP server's tool.
	MCPTool = mcp.Tool
	// MCPEntry is one installable MCP server of the catalog.
	MCPEntry = mcp.Entry
)

// MCPCatalog lists the installable MCP servers.
func MCPCatalog() []MCPEntry { return mcp.Catalog() }

// Sandbox is a live Session sandbox, as the Preview host dials into it.
type Sandbox = sandbox.Sandbox

// The folder picker's values (runtime/project).
type (
	// Project is a probed project folder.
	Project = project.Project
	// DirListing is the folders under a path.
	DirListing = project.Listing
)

// ListDirs lists the folders under path for the folder picker; its errors
// are of the classes NotFound and Invalid (runtime/project).
func ListDirs(path string, hidden bool) (DirListing, error) { return project.ListDirs(path, hidden) }

// ProbeProject probes path as a project folder, with errors classed as
// ListDirs classes them.
func ProbeProject(path string) (Project, error) { return project.Probe(path) }
