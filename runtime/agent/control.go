package agent

import (
	"context"
	"fmt"

	"lathe/runtime/llm"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/usage"
)

// Control inferences: one stateless inference on an Agent's provider that
// belongs to no turn and no conversation (a Ways plan, judgment or model
// check). It goes through the one inference path (infer), so the Agent's
// budget, its counters and pricing apply; its usage is the caller's
// control usage, returned on failure too.

// ControlRequest is one control inference. AgentID names the Agent, or,
// when empty, the first Agent (in config order) on Provider.
type ControlRequest struct {
	AgentID  string
	Provider string
	Model    *string
	System   string
	Input    string
	Tools    []llm.Tool
}

// ControlResult is what the model answered and what it cost.
type ControlResult struct {
	Agent string
	Model string
	Text  string
	Calls []Call
	Usage usage.Tokens
	Cost  catalog.Cost
}

// Control runs one control inference. The result carries the usage
// whether or not err is nil.
func (r *Registry) Control(ctx context.Context, req ControlRequest) (ControlResult, error) {
	res := ControlResult{Usage: usage.Tokens{TokenUsageKnown: true}}
	a, err := r.controlActor(req)
	if err != nil {
		return res, err
	}
	a.mu.Lock()
	cfg, provider, lastErr := a.cfg, a.provider, a.lastErr
	a.mu.Unlock()
	if provider == nil {
		return res, fmt.Errorf("%w: %s: %s", ErrNotSpawned, a.id, lastErr)
	}
	res.Agent, res.Model = a.id, cfg.Model
	if req.Model != nil {
		res.Model = *req.Model
	}
	out, err := r.infer(ctx, inference{actor: a, provider: provider, priceAs: cfg.Provider, req: llm.Request{
		Model: res.Model, System: req.System, Messages: []llm.Message{{Role: llm.RoleUser, Text: req.Input}}, Tools: req.Tools,
	}}, newSpend(cfg.Budget))
	res.Text, res.Calls, res.Usage, res.Cost = out.Text, out.Calls, out.Usage, out.Cost
	if err == nil {
		err = finalAnswer(out)
	}
	return res, err
}

func (r *Registry) controlActor(req ControlRequest) (*actor, error) {
	if req.AgentID != "" {
		return r.actor(req.AgentID)
	}
	for _, id := range r.order {
		a := r.actors[id]
		a.mu.Lock()
		p := a.cfg.Provider
		a.mu.Unlock()
		if p == req.Provider {
			return a, nil
		}
	}
	return nil, fmt.Errorf("%w: no Agent uses provider %q", ErrUnknownAgent, req.Provider)
}

// Price prices usage at the configured price of model on provider (an
// unknown price is PriceKnown false, never zero).
func (r *Registry) Price(provider, model string, u usage.Tokens) catalog.Cost {
	return r.cat.Cost(provider, model, u)
}

// Providers lists the configured providers.
func (r *Registry) Providers() []catalog.ProviderView { return r.cat.Providers() }
