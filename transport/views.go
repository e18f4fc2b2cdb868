package transport

import (
	"encoding/json"
	"time"

	"lathe/runtime/usage"
)

// Transport's own wire types for what the runtime reports: the Agent
// catalog and actors, the MCP registry and the folder picker. The route
// groups' interfaces (transport/deps.go) are typed with them, and the
// daemon's assembly converts the runtime's values to them in one place
// (cmd/lathe/internal/daemon/views.go), so a runtime type can change
// without changing a response. Each field a body always carries is
// required in the OpenAPI document; a field of a fixed set of values names
// them.

// The Agent catalog (GET /api/agents, /api/llm-health, /api/llm/models).
type (
	// AgentView is one configured Agent, with its in-memory patches when
	// its actor runs.
	AgentView struct {
		ID           string      `json:"agent_id" required:"true"`
		Name         string      `json:"name" required:"true"`
		Provider     string      `json:"provider" required:"true"`
		ProviderKind string      `json:"provider_kind" required:"true"`
		Model        string      `json:"model" required:"true"`
		Prompt       string      `json:"prompt" required:"true"`
		Dependencies []string    `json:"dependencies" required:"true"`
		Budget       AgentBudget `json:"budget" required:"true"`
		// Price is null when unknown.
		Price *ModelPrice `json:"price" required:"true"`
		// Kind is "lathe" (the built-in loop) or "acp" (an outside agent).
		Kind string `json:"kind" required:"true"`
		// ACP is an outside agent's resolved configuration, its env left out.
		ACP *AgentACP `json:"acp,omitempty"`
		// Reported is an outside agent's own name and version, once it ran.
		Reported *AgentReported `json:"reported,omitempty"`
	}

	// AgentReported is what an outside agent said of itself.
	AgentReported struct {
		Name    string `json:"name" required:"true"`
		Version string `json:"version" required:"true"`
	}

	// AgentACP is how an outside agent runs: its npm package (empty: the
	// image has its command), command, args and the wire to its model.
	AgentACP struct {
		Preset   string   `json:"preset,omitempty"`
		Package  string   `json:"package,omitempty"`
		Command  string   `json:"command" required:"true"`
		Args     []string `json:"args" required:"true"`
		Protocol string   `json:"protocol" required:"true"`
	}

	// AgentBudget limits one request; zero means unlimited.
	AgentBudget struct {
		MaxOutputTokens int     `json:"max_output_tokens" required:"true"`
		MaxUSD          float64 `json:"max_usd" required:"true"`
	}

	// ModelPrice is in USD per million tokens.
	ModelPrice struct {
		Input  float64 `json:"input" required:"true"`
		Output float64 `json:"output" required:"true"`
	}

	// LLMHealth is the model servers' health report: OK is true only when
	// every ollama provider answered and no Agent on one lacks its model;
	// Reasons explain OK false, Warnings do not affect it.
	LLMHealth struct {
		OK        bool             `json:"ok" required:"true"`
		CheckedAt time.Time        `json:"checked_at" required:"true"`
		Providers []ProviderHealth `json:"providers" required:"true"`
		Agents    []AgentHealth    `json:"agents" required:"true"`
		Reasons   []string         `json:"reasons" required:"true"`
		Warnings  []string         `json:"warnings" required:"true"`
	}

	// ProviderHealth is one provider's line of the report. It never holds
	// the key, only whether its variable is set; Reachable, Models and
	// LatencyMS are set only for a probed (ollama) provider.
	ProviderHealth struct {
		Name      string   `json:"name" required:"true"`
		Kind      string   `json:"kind" required:"true"`
		BaseURL   string   `json:"base_url" required:"true"`
		APIKeyEnv string   `json:"api_key_env" required:"true"`
		APIKeySet bool     `json:"api_key_set" required:"true"`
		Probed    bool     `json:"probed" required:"true"`
		Reachable *bool    `json:"reachable,omitempty"`
		Models    []string `json:"models,omitempty"`
		LatencyMS *int64   `json:"latency_ms,omitempty"`
		Error     string   `json:"error,omitempty"`
	}

	// AgentHealth is one Agent's line of the report; ModelMissing is null
	// unless it is known (an Agent on a reachable ollama provider).
	AgentHealth struct {
		ID           string `json:"agent_id" required:"true"`
		Provider     string `json:"provider" required:"true"`
		ProviderKind string `json:"provider_kind" required:"true"`
		Model        string `json:"model" required:"true"`
		ModelMissing *bool  `json:"model_missing" required:"true"`
	}

	// ModelList is one Agent's model list, its current model first.
	// CurrentModelMissing is set for a live list whose server lacks the
	// current model.
	ModelList struct {
		AgentID             string        `json:"agent_id" required:"true"`
		Provider            string        `json:"provider" required:"true"`
		ProviderKind        string        `json:"provider_kind" required:"true"`
		CurrentModel        string        `json:"current_model" required:"true"`
		Source              string        `json:"source" required:"true" enum:"live,curated"`
		Models              []ModelOption `json:"models" required:"true"`
		CurrentModelMissing *bool         `json:"current_model_missing,omitempty"`
	}

	// ModelOption is one model of a ModelList.
	ModelOption struct {
		Name    string `json:"name" required:"true"`
		Current bool   `json:"current" required:"true"`
	}
)

// The live Agent actors (GET /api/agents/{id}/status, /api/tokens/report,
// POST …/execute and …/restart).
type (
	// AgentStatus is a live Agent actor's status; Messages is the length of
	// its conversation.
	AgentStatus struct {
		AgentID   string    `json:"agent_id" required:"true"`
		State     string    `json:"state" required:"true" enum:"idle,busy"`
		Spawned   bool      `json:"spawned" required:"true"`
		SpawnedAt time.Time `json:"spawned_at" required:"true"`
		Restarts  int       `json:"restarts" required:"true"`
		LastError string    `json:"last_error,omitempty"`
		Messages  int       `json:"messages" required:"true"`
		TokenCounts
	}

	// TokenCounts are the requests an Agent served and their token use.
	TokenCounts struct {
		Requests int `json:"requests" required:"true"`
		usage.View
	}

	// TokenReport is the token use per Agent and in total.
	TokenReport struct {
		Agents []AgentTokens `json:"agents" required:"true"`
		Total  TokenCounts   `json:"total" required:"true"`
	}

	// AgentTokens is one Agent's line of the TokenReport.
	AgentTokens struct {
		AgentID string `json:"agent_id" required:"true"`
		TokenCounts
	}

	// ExecuteResult is what an execute answers.
	ExecuteResult struct {
		Output    string `json:"output" required:"true"`
		Model     string `json:"model" required:"true"`
		Stateless bool   `json:"stateless" required:"true"`
		usage.View
	}
)

// The MCP registry (GET /api/mcp/catalog, /api/mcp/servers, /api/mcp/tools,
// POST /api/mcp/install and …/servers/{name}).
type (
	// MCPServer is one installed MCP server and its state; Error says why
	// it failed or went away.
	MCPServer struct {
		Name      string   `json:"name" required:"true"`
		Transport string   `json:"transport" required:"true" enum:"stdio,http"`
		ToolCount int      `json:"tool_count" required:"true"`
		Status    string   `json:"status" required:"true" enum:"connecting,connected,disconnected,failed"`
		Error     string   `json:"error,omitempty"`
		Approval  string   `json:"approval" required:"true" enum:"always,never"`
		Agents    []string `json:"agents" required:"true"`
	}

	// MCPTool is one MCP server's tool; Name is what models see,
	// mcp__<server>__<tool>.
	MCPTool struct {
		Name        string          `json:"name" required:"true"`
		Server      string          `json:"server" required:"true"`
		Tool        string          `json:"tool" required:"true"`
		Description string          `json:"description" required:"true"`
		InputSchema json.RawMessage `json:"input_schema,omitempty"`
	}

	// MCPEntry is one installable MCP server of the bundled catalog, with
	// the values an install takes.
	MCPEntry struct {
		Slug        string            `json:"slug" required:"true"`
		Name        string            `json:"name" required:"true"`
		Description string            `json:"description" required:"true"`
		Transport   string            `json:"transport" required:"true" enum:"stdio,http"`
		Command     string            `json:"command,omitempty"`
		Args        []string          `json:"args,omitempty"`
		Env         map[string]string `json:"env,omitempty"`
		URL         string            `json:"url,omitempty"`
		Values      []MCPValue        `json:"values" required:"true"`
	}

	// MCPValue is one value an MCP catalog entry takes; Path says that it
	// names a directory or a file on the daemon host.
	MCPValue struct {
		Key         string `json:"key" required:"true"`
		Description string `json:"description" required:"true"`
		Required    bool   `json:"required" required:"true"`
		Secret      bool   `json:"secret" required:"true"`
		Path        string `json:"path,omitempty" enum:"directory,file"`
	}
)

// The folder picker and the project probe (GET /api/fs/list,
// /api/fs/project).
type (
	// DirListing is the folders under a path: Path is canonical (absolute,
	// symlinks resolved), Parent empty at "/".
	DirListing struct {
		Path    string     `json:"path" required:"true"`
		Parent  string     `json:"parent,omitempty"`
		Entries []DirEntry `json:"entries" required:"true"`
	}

	// DirEntry is one folder of a DirListing; Path is canonical (a
	// symlink's target).
	DirEntry struct {
		Name      string `json:"name" required:"true"`
		Path      string `json:"path" required:"true"`
		IsGitRepo bool   `json:"is_git_repo" required:"true"`
	}

	// Project is what the probe learns about a folder: its devcontainer
	// (null when absent), the LATHE.md files of it and its ancestors (the
	// root's first) and the setup commands its lockfiles suggest (never
	// approved by any default).
	Project struct {
		Path          string           `json:"path" required:"true"`
		IsGitRepo     bool             `json:"is_git_repo" required:"true"`
		Devcontainer  *Devcontainer    `json:"devcontainer" required:"true"`
		Guidance      []Guidance       `json:"guidance" required:"true"`
		DetectedSetup []SetupCandidate `json:"detected_setup" required:"true"`
	}

	// Devcontainer is what Lathe uses of a devcontainer.json, and warnings
	// for what it ignored.
	Devcontainer struct {
		Path              string   `json:"path" required:"true"`
		Image             string   `json:"image,omitempty"`
		PostCreateCommand string   `json:"post_create_command,omitempty"`
		Warnings          []string `json:"warnings,omitempty"`
	}

	// Guidance is one LATHE.md file, its content cut at 64 KiB.
	Guidance struct {
		Path      string `json:"path" required:"true"`
		Content   string `json:"content" required:"true"`
		Truncated bool   `json:"truncated" required:"true"`
	}

	// SetupCandidate is a setup command a lockfile suggests; File is the
	// lockfile's base name.
	SetupCandidate struct {
		Command string `json:"command" required:"true"`
		Source  string `json:"source" required:"true" enum:"lockfile"`
		File    string `json:"file" required:"true"`
	}
)
