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

// The API roots of a provider without base_url: openai's, and
// anthropic's (its SDK's default).
const (
	defaultOpenAIBaseURL    = "https://api.openai.com/v1"
	defaultAnthropicBaseURL = "https://api.anthropic.com"
)

// providerBaseURL is the API root p's client calls.
func providerBaseURL(p config.Provider) string {
	switch {
	case p.BaseURL != "":
		return p.BaseURL
	case p.Kind == config.KindOpenAI:
		return defaultOpenAIBaseURL
	case p.Kind == config.KindAnthropic:
		return defaultAnthropicBaseURL
	}
	return ""
}

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
			return openai.New(openai.Config{BaseURL: providerBaseURL(p), APIKey: key}), nil
		case config.KindAnthropic:
			return anthropic.New(anthropic.Config{BaseURL: p.BaseURL, APIKey: key}), nil
		case config.KindOllama:
			return ollama.New(ollama.Config{BaseURL: p.BaseURL}), nil
		default:
			return nil, fmt.Errorf("agent %q: provider %q has unknown kind %q", a.ID, a.Provider, p.Kind)
		}
	}
}
