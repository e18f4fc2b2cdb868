package daemon

import (
	"context"

	"lathe/commands/agents"
	"lathe/commands/environments"
	"lathe/commands/mcpservers"

	"lathe/projections"
	"lathe/runtime/agent"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/mcp"
	"lathe/runtime/project"
	"lathe/transport"
)

// The one place where the runtime's values become transport's wire types
// (transport/views.go): small adapters that meet transport's route-group
// interfaces over the runtime's catalog, Agent actors, MCP registry and
// host folders, and over the commands that answer with the runtime's values. Each conversion
// copies every field, so a body is what the runtime's own JSON was, and
// views_test.go fails when a runtime field is added and not carried.

// catalogAdapter is transport.AgentCatalog over the runtime's catalog.
type catalogAdapter struct{ c *catalog.Catalog }

func (a catalogAdapter) Health(ctx context.Context) transport.LLMHealth {
	return healthView(a.c.Health(ctx))
}

func (a catalogAdapter) ModelsFor(ctx context.Context, agentID, model string) (transport.ModelList, error) {
	ml, err := a.c.ModelsFor(ctx, agentID, model)
	return modelListView(ml), err
}

// actorsAdapter is transport.AgentRuntime over the Agent actors.
type actorsAdapter struct{ r *agent.Registry }

func (a actorsAdapter) Agents() []transport.AgentView { return views(a.r.Agents(), agentView) }

func (a actorsAdapter) Agent(id string) (transport.AgentView, error) {
	v, err := a.r.Agent(id)
	return agentView(v), err
}

func (a actorsAdapter) Status(id string) (transport.AgentStatus, error) {
	st, err := a.r.Status(id)
	return statusView(st), err
}

func (a actorsAdapter) TokenReport() transport.TokenReport { return tokenReportView(a.r.TokenReport()) }

// agentsAdapter is transport.AgentCommands over commands.Agents.
type agentsAdapter struct{ c *agents.Agents }

func (a agentsAdapter) Execute(ctx context.Context, id string, req agents.ExecuteRequest) (transport.ExecuteResult, error) {
	res, err := a.c.Execute(ctx, id, req)
	return executeView(res), err
}

func (a agentsAdapter) Patch(ctx context.Context, id string, p agents.AgentPatch, restart bool) (transport.AgentView, error) {
	v, err := a.c.Patch(ctx, id, p, restart)
	return agentView(v), err
}

func (a agentsAdapter) Restart(ctx context.Context, id string) (transport.AgentStatus, error) {
	st, err := a.c.Restart(ctx, id)
	return statusView(st), err
}

// mcpAdapter is transport.MCPCommands over commands.MCP.
type mcpAdapter struct{ c *mcpservers.MCP }

func (a mcpAdapter) Install(ctx context.Context, slug, name string, values map[string]string) (transport.MCPServer, error) {
	v, err := a.c.Install(ctx, slug, name, values)
	return mcpServerView(v), err
}

func (a mcpAdapter) Reconnect(ctx context.Context, name string) (transport.MCPServer, error) {
	v, err := a.c.Reconnect(ctx, name)
	return mcpServerView(v), err
}

func (a mcpAdapter) Remove(ctx context.Context, name string) error { return a.c.Remove(ctx, name) }

// registryAdapter is transport.MCPRegistry over the live MCP registry and
// the bundled catalog.
type registryAdapter struct{ r *mcp.Registry }

func (a registryAdapter) Servers() []transport.MCPServer { return views(a.r.Servers(), mcpServerView) }
func (a registryAdapter) Tools() []transport.MCPTool     { return views(a.r.Tools(), mcpToolView) }
func (a registryAdapter) Catalog() []transport.MCPEntry  { return views(mcp.Catalog(), mcpEntryView) }

// foldersAdapter is transport.Folders over the host's folders.
type foldersAdapter struct{}

func (foldersAdapter) ListDirs(path string, hidden bool) (transport.DirListing, error) {
	l, err := project.ListDirs(path, hidden)
	return dirListingView(l), err
}

func (foldersAdapter) Probe(path string) (transport.Project, error) {
	p, err := project.Probe(path)
	return projectView(p), err
}

// sandboxesAdapter is transport.Sandboxes over commands.Environments: the
// Preview reaches a live sandbox only by the three methods
// transport.PreviewSandbox names.
type sandboxesAdapter struct{ e *environments.Environments }

func (a sandboxesAdapter) Sandbox(id string) (transport.PreviewSandbox, projections.Session, error) {
	return a.e.Sandbox(id)
}

// views converts each of in, keeping a nil slice nil (null on the wire) and
// an empty one empty ([]).
func views[S, V any](in []S, view func(S) V) []V {
	if in == nil {
		return nil
	}
	out := make([]V, len(in))
	for i, s := range in {
		out[i] = view(s)
	}
	return out
}

func agentView(v catalog.AgentView) transport.AgentView {
	out := transport.AgentView{ID: v.ID, Name: v.Name, Provider: v.Provider, ProviderKind: v.ProviderKind, Model: v.Model,
		Prompt: v.Prompt, Dependencies: v.Dependencies, Kind: v.Kind,
		Budget: transport.AgentBudget{MaxOutputTokens: v.Budget.MaxOutputTokens, MaxUSD: v.Budget.MaxUSD}}
	if v.Price != nil {
		out.Price = &transport.ModelPrice{Input: v.Price.Input, Output: v.Price.Output}
	}
	if a := v.ACP; a != nil { // its Env stays the operator's
		out.ACP = &transport.AgentACP{Preset: a.Preset, Package: a.Package, Command: a.Command, Args: a.Args, Protocol: a.Protocol}
	}
	if rep := v.Reported; rep != nil {
		out.Reported = &transport.AgentReported{Name: rep.Name, Version: rep.Version}
	}
	return out
}

func healthView(h catalog.Health) transport.LLMHealth {
	return transport.LLMHealth{OK: h.OK, CheckedAt: h.CheckedAt, Reasons: h.Reasons, Warnings: h.Warnings,
		Providers: views(h.Providers, func(p catalog.ProviderHealth) transport.ProviderHealth {
			return transport.ProviderHealth{Name: p.Name, Kind: p.Kind, BaseURL: p.BaseURL, APIKeyEnv: p.APIKeyEnv, APIKeySet: p.APIKeySet,
				Probed: p.Probed, Reachable: p.Reachable, Models: p.Models, LatencyMS: p.LatencyMS, Error: p.Error}
		}),
		Agents: views(h.Agents, func(a catalog.AgentHealth) transport.AgentHealth {
			return transport.AgentHealth{ID: a.ID, Provider: a.Provider, ProviderKind: a.ProviderKind, Model: a.Model, ModelMissing: a.ModelMissing}
		}),
	}
}

func modelListView(ml catalog.ModelList) transport.ModelList {
	return transport.ModelList{AgentID: ml.AgentID, Provider: ml.Provider, ProviderKind: ml.ProviderKind, CurrentModel: ml.CurrentModel,
		Source: ml.Source, CurrentModelMissing: ml.CurrentModelMissing,
		Models: views(ml.Models, func(m catalog.Model) transport.ModelOption {
			return transport.ModelOption{Name: m.Name, Current: m.Current}
		}),
	}
}

func statusView(st agent.Status) transport.AgentStatus {
	return transport.AgentStatus{AgentID: st.AgentID, State: st.State, Spawned: st.Spawned, SpawnedAt: st.SpawnedAt,
		Restarts: st.Restarts, LastError: st.LastError, Messages: st.Messages, TokenCounts: countsView(st.Counts)}
}

func tokenReportView(tr agent.TokenReport) transport.TokenReport {
	return transport.TokenReport{Agents: views(tr.Agents, agentTokensView), Total: countsView(tr.Total)}
}

func executeView(res agent.Result) transport.ExecuteResult {
	return transport.ExecuteResult{Output: res.Output, Model: res.Model, Stateless: res.Stateless, View: res.View}
}

func countsView(c agent.Counts) transport.TokenCounts {
	return transport.TokenCounts{Requests: c.Requests, View: c.View}
}

func agentTokensView(c agent.AgentCounts) transport.AgentTokens {
	return transport.AgentTokens{AgentID: c.AgentID, TokenCounts: countsView(c.Counts)}
}

func mcpServerView(v mcp.ServerView) transport.MCPServer {
	return transport.MCPServer{Name: v.Name, Transport: v.Transport, ToolCount: v.ToolCount, Status: v.Status, Error: v.Error,
		Approval: v.Approval, Agents: v.Agents}
}

func mcpToolView(t mcp.Tool) transport.MCPTool {
	return transport.MCPTool{Name: t.Name, Server: t.Server, Tool: t.Tool, Description: t.Description, InputSchema: t.InputSchema}
}

func mcpEntryView(e mcp.Entry) transport.MCPEntry {
	return transport.MCPEntry{Slug: e.Slug, Name: e.Name, Description: e.Description, Transport: e.Transport, Command: e.Command,
		Args: e.Args, Env: e.Env, URL: e.URL,
		Values: views(e.Values, func(v mcp.Value) transport.MCPValue {
			return transport.MCPValue{Key: v.Key, Description: v.Description, Required: v.Required, Secret: v.Secret, Path: v.Path}
		}),
	}
}

func dirListingView(l project.Listing) transport.DirListing {
	return transport.DirListing{Path: l.Path, Parent: l.Parent,
		Entries: views(l.Entries, func(e project.Entry) transport.DirEntry {
			return transport.DirEntry{Name: e.Name, Path: e.Path, IsGitRepo: e.IsGitRepo}
		}),
	}
}

func projectView(p project.Project) transport.Project {
	out := transport.Project{Path: p.Path, IsGitRepo: p.IsGitRepo,
		Guidance: views(p.Guidance, func(g project.Guidance) transport.Guidance {
			return transport.Guidance{Path: g.Path, Content: g.Content, Truncated: g.Truncated}
		}),
		DetectedSetup: views(p.DetectedSetup, func(c project.SetupCandidate) transport.SetupCandidate {
			return transport.SetupCandidate{Command: c.Command, Source: c.Source, File: c.File}
		}),
	}
	if dc := p.Devcontainer; dc != nil {
		out.Devcontainer = &transport.Devcontainer{Path: dc.Path, Image: dc.Image, PostCreateCommand: dc.PostCreateCommand, Warnings: dc.Warnings}
	}
	return out
}
