package agents

import "lathe/runtime/agent"

// The Agent commands' own input types: what a caller hands Agents.Execute
// and Agents.Patch, converted to the Agent runtime's here and nowhere else.

// ExecuteRequest is one direct execute of an Agent: Input with the Agent's
// config, or stateless (one inference, no tools, no conversation kept),
// which an override of the system prompt or the model implies.
type ExecuteRequest struct {
	Input          string
	SystemOverride *string
	ModelOverride  *string
	Stateless      bool
}

// AgentPatch changes an Agent's in-memory config; a nil field stays.
type AgentPatch struct {
	Name         *string
	Model        *string
	Prompt       *string
	Dependencies *[]string
	Budget       *AgentBudget
}

// AgentBudget limits one request of an Agent; zero means unlimited.
type AgentBudget struct {
	MaxOutputTokens int
	MaxUSD          float64
}

func (r ExecuteRequest) runtime() agent.ExecuteRequest {
	return agent.ExecuteRequest{Input: r.Input, SystemOverride: r.SystemOverride, ModelOverride: r.ModelOverride, Stateless: r.Stateless}
}

func (p AgentPatch) runtime() agent.AgentPatch {
	out := agent.AgentPatch{Name: p.Name, Model: p.Model, Prompt: p.Prompt, Dependencies: p.Dependencies}
	if p.Budget != nil {
		out.Budget = &agent.Budget{MaxOutputTokens: p.Budget.MaxOutputTokens, MaxUSD: p.Budget.MaxUSD}
	}
	return out
}
