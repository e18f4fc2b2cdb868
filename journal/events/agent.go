package events

func init() {
	register[AgentPatched]()
	register[AgentRestarted]()
	register[DaemonStarted]()
}

// Aggregate names of the Agent audit events.
const (
	// Agent is one configured Agent, by its ID.
	Agent = "agent"
	// Daemon is the daemon of one data dir, by its stable ID.
	Daemon = "daemon"
)

// AgentBudget is an Agent's per-request budget; 0 is unlimited.
type AgentBudget struct {
	MaxOutputTokens int     `json:"max_output_tokens"`
	MaxUSD          float64 `json:"max_usd"`
}

// AgentPatched: an operator changed an Agent's in-memory config (PATCH
// /api/agents/{id}); nil fields stayed. The change lasts until the daemon
// stops: the next start begins from the YAML again (DaemonStarted).
type AgentPatched struct {
	Name         *string      `json:"name,omitempty"`
	Model        *string      `json:"model,omitempty"`
	Prompt       *string      `json:"prompt,omitempty"`
	Dependencies *[]string    `json:"dependencies,omitempty"`
	Budget       *AgentBudget `json:"budget,omitempty"`
	// Restarted is true when the actor was restarted with the patch.
	Restarted bool `json:"restarted"`
}

// AgentRestarted: an operator restarted an Agent's actor.
type AgentRestarted struct{}

// DaemonStarted: a daemon started on this data dir. Agent patches are in
// memory only, so it ends every earlier patch.
type DaemonStarted struct {
	Version string `json:"version,omitempty"`
}

func (AgentPatched) EventType() string   { return "agent-patched" }
func (AgentRestarted) EventType() string { return "agent-restarted" }
func (DaemonStarted) EventType() string  { return "daemon-started" }

func (AgentPatched) Aggregate() string   { return Agent }
func (AgentRestarted) Aggregate() string { return Agent }
func (DaemonStarted) Aggregate() string  { return Daemon }
