package daemon

import (
	"fmt"
	"os"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm"
	"lathe/runtime/llm/anthropic"
	"lathe/runtime/llm/catalog"
	"lathe/runtime/llm/ollama"
	"lathe/runtime/llm/openai"
)

// defaultOpenAIBaseURL is used for an openai provider without base_url.
const defaultOpenAIBaseURL = "https://api.openai.com/v1"

// providerFor returns the factory that builds an Agent's provider client
// from the configured provider's kind, base_url and the key in the variable
// named by api_key_env (read when the actor is spawned or restarted).
func providerFor(cfg config.Config) func(catalog.AgentView) (llm.Provider, error) {
	return func(a catalog.AgentView) (llm.Provider, error) {
		p, ok := cfg.Providers[a.Provider]
		if !ok {
			return nil, fmt.Errorf("agent %q: provider %q is not configured", a.ID, a.Provider)
		}
		key := ""
		if p.APIKeyEnv != "" {
			key = os.Getenv(p.APIKeyEnv)
		}
		switch p.Kind {
		case config.KindOpenAI:
			base := p.BaseURL
			if base == "" {
				base = defaultOpenAIBaseURL
			}
			return openai.New(openai.Config{BaseURL: base, APIKey: key}), nil
		case config.KindAnthropic:
			return anthropic.New(anthropic.Config{BaseURL: p.BaseURL, APIKey: key}), nil
		case config.KindOllama:
			return ollama.New(ollama.Config{BaseURL: p.BaseURL}), nil
		default:
			return nil, fmt.Errorf("agent %q: provider %q has unknown kind %q", a.ID, a.Provider, p.Kind)
		}
	}
}
