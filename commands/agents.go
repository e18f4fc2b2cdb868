package commands

import (
	"context"
	"fmt"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/agent"
	"lathe/runtime/llm/catalog"
)

// Agents changes the live Agent actors: a PATCH of an Agent's in-memory
// config and a restart of its actor. Both are journaled (agent-patched,
// agent-restarted) before the runtime applies them, so the journal audits
// them; the config itself stays in memory, and Started journals the
// daemon-started event that ends every earlier patch.
type Agents struct {
	*core
	runtime *agent.Registry
}

// Execute runs an Agent on one input. TEMPORARY: it forwards to the
// runtime until the commands branch's journaled Execute (with the tool
// loop) merges; the merge drops this method.
func (s *Agents) Execute(ctx context.Context, id string, req agent.ExecuteRequest) (agent.Result, error) {
	return s.runtime.Execute(ctx, id, req)
}

// maxPromptBytes bounds a patched prompt: it is journaled whole.
const maxPromptBytes = 64 << 10

// Started journals that a daemon started on this data dir (id is its
// stable ID) when Agent patches of the run before are still in force in the
// projection, which the event ends. A start with nothing to end appends
// nothing.
func (s *Agents) Started(ctx context.Context, id, version string) error {
	if !s.store.AgentPatched() {
		return nil
	}
	return s.append(ctx, []journal.Event{events.New(id, events.DaemonStarted{Version: version})})
}

// Patch validates p, journals it, and applies it to the Agent in memory
// (never to the YAML), restarting the actor unless restart is false.
func (s *Agents) Patch(ctx context.Context, id string, p agent.AgentPatch, restart bool) (catalog.AgentView, error) {
	if _, err := s.runtime.Status(id); err != nil {
		return catalog.AgentView{}, err
	}
	if err := agent.CheckPatch(p); err != nil {
		return catalog.AgentView{}, err
	}
	if p.Prompt != nil && len(*p.Prompt) > maxPromptBytes {
		return catalog.AgentView{}, fmt.Errorf("%w: prompt is %d bytes, over the %d-byte limit", ErrTooLarge, len(*p.Prompt), maxPromptBytes)
	}
	ev := events.AgentPatched{Name: p.Name, Model: p.Model, Prompt: p.Prompt, Dependencies: p.Dependencies, Restarted: restart}
	if p.Budget != nil {
		ev.Budget = &events.AgentBudget{MaxOutputTokens: p.Budget.MaxOutputTokens, MaxUSD: p.Budget.MaxUSD}
	}
	if err := s.append(ctx, []journal.Event{events.New(id, ev)}); err != nil {
		return catalog.AgentView{}, err
	}
	return s.runtime.Patch(context.WithoutCancel(ctx), id, p, restart)
}

// Restart journals and restarts an Agent's actor.
func (s *Agents) Restart(ctx context.Context, id string) (agent.Status, error) {
	if _, err := s.runtime.Status(id); err != nil {
		return agent.Status{}, err
	}
	if err := s.append(ctx, []journal.Event{events.New(id, events.AgentRestarted{})}); err != nil {
		return agent.Status{}, err
	}
	return s.runtime.Restart(context.WithoutCancel(ctx), id)
}
