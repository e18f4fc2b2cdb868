// Package ollama is the llm provider for an Ollama server: inference through
// its OpenAI-compatible /v1 endpoint, and the model list from /api/tags.
package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"lathe/runtime/llm"
	"lathe/runtime/llm/openai"
)

// Config configures a Provider.
type Config struct {
	// BaseURL is the server root, such as http://127.0.0.1:11434.
	BaseURL    string
	HTTPClient *http.Client
}

// Provider streams from an Ollama server.
type Provider struct {
	*openai.Provider
	base string
	hc   *http.Client
}

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	base := strings.TrimSuffix(cfg.BaseURL, "/")
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Provider{
		Provider: openai.New(openai.Config{BaseURL: base + "/v1", HTTPClient: cfg.HTTPClient}),
		base:     base,
		hc:       hc,
	}
}

var _ llm.Provider = (*Provider)(nil)

// Model is one entry of /api/tags.
type Model struct {
	Name   string `json:"name"`
	Model  string `json:"model"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
}

// Models returns the models the server has pulled. It doubles as the health
// check: an unreachable server or a 5xx is ErrUnavailable.
func (p *Provider) Models(ctx context.Context) ([]Model, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/tags", nil)
	if err != nil {
		return nil, fmt.Errorf("ollama: %w: %w", llm.ErrRequest, err)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ollama: %w", ctx.Err())
		}
		return nil, fmt.Errorf("ollama: %w: %w", llm.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if class := llm.ErrorForStatus(resp.StatusCode); class != nil {
		return nil, fmt.Errorf("ollama: %w: GET /api/tags: status %d", class, resp.StatusCode)
	}
	var out struct {
		Models []Model `json:"models"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if errors.As(err, &syntax) || errors.As(err, &typ) {
			return nil, fmt.Errorf("ollama: %w: /api/tags: %w", llm.ErrMalformed, err)
		}
		return nil, fmt.Errorf("ollama: %w: /api/tags: %w", llm.ErrUnavailable, err)
	}
	return out.Models, nil
}
