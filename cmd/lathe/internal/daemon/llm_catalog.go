package daemon

import (
	"cmp"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/catalog"
)

// llmCatalog projects the providers, Agents and prices of cfg into the
// provider-neutral catalog that transport serves.
func llmCatalog(cfg config.Config) *catalog.Catalog {
	providers := make([]catalog.Provider, 0, len(cfg.Providers))
	for name, p := range cfg.Providers {
		providers = append(providers, catalog.Provider{Name: name, Kind: p.Kind, BaseURL: p.BaseURL, APIKeyEnv: p.APIKeyEnv})
	}
	agents := make([]catalog.Agent, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		var outside *catalog.ACP
		if a.ACP != nil {
			r := a.ACP.Resolved()
			outside = &catalog.ACP{Preset: r.Preset, Package: r.Package, Command: r.Command, Args: r.Args, Env: r.Env, Protocol: r.Protocol}
		}
		agents = append(agents, catalog.Agent{
			ID: a.ID, Name: a.Name, Provider: a.Provider, Model: a.Model, Prompt: a.Prompt,
			Dependencies: a.Dependencies,
			Budget:       catalog.Budget{MaxOutputTokens: a.Budget.MaxOutputTokens, MaxUSD: a.Budget.MaxUSD},
			Kind:         cmp.Or(a.Kind, config.KindLathe), ACP: outside,
		})
	}
	prices := make(map[string]catalog.Price, len(cfg.Prices))
	for k, p := range cfg.Prices {
		prices[k] = catalog.Price{Input: p.Input, Output: p.Output}
	}
	return catalog.New(providers, agents, catalog.Options{Prices: prices})
}
