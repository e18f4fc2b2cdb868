// Package catalog is the provider-neutral view of the configured model
// providers and Agents: the config projection that GET /api/agents serves,
// the model-server health report of GET /api/llm-health, and the model lists
// of GET /api/llm/models.
//
// Decisions:
//   - Nothing is cached. Every Health and Models call probes the ollama
//     servers live (GET {base_url}/api/tags) with ProbeTimeout (2 s by
//     default); Health probes the providers in parallel, so a call takes at
//     most about one timeout. The routes are operator diagnostics, not a hot
//     path, and a cached answer would hide a server that just came up.
//   - Hosted kinds (openai, anthropic) are never probed for health: it is
//     only whether the API key variable is set. The model lists of OpenAI's
//     own API and of anthropic are the curated, hand-maintained lists; any
//     other OpenAI-compatible server (vLLM, llama.cpp, LM Studio…) is asked
//     GET {base_url}/models, so it is never offered a model it lacks.
//   - The API key value is never read into any view: only whether the
//     variable named by api_key_env is set and non-empty. Base URLs are shown
//     with any userinfo password redacted.
//   - A price comes from the prices key "<provider name>/<model>" and is nil
//     (unknown) when that key is absent; it is never reported as zero unless
//     configured as zero.
package catalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"lathe/runtime/errs"
	"lathe/runtime/llm/ollama"
)

// Provider kinds, as in the config.
const (
	KindOllama    = "ollama"
	KindOpenAI    = "openai"
	KindAnthropic = "anthropic"
)

// DefaultProbeTimeout bounds one GET /api/tags probe.
const DefaultProbeTimeout = 2 * time.Second

// ErrUnknownAgent is returned by Models for an Agent id not in the catalog.
var ErrUnknownAgent = errs.New(errs.NotFound, "unknown agent")

// Provider is one configured model server.
type Provider struct {
	Name      string
	Kind      string
	BaseURL   string
	APIKeyEnv string // the variable's name, never its value
}

// Budget limits an Agent. Zero means unlimited.
type Budget struct {
	MaxOutputTokens int     `json:"max_output_tokens"`
	MaxUSD          float64 `json:"max_usd"`
}

// Price is in USD per million tokens.
type Price struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
}

// Agent is one configured Agent.
type Agent struct {
	ID           string
	Name         string
	Provider     string // a Provider's Name
	Model        string
	Prompt       string
	Dependencies []string
	Budget       Budget
	// Kind is "lathe" (the built-in tool loop; empty means it) or "acp".
	Kind string
	// ACP is set for kind acp, its preset resolved.
	ACP *ACP
}

// ACP is an outside agent's resolved configuration: the npm package to
// install (empty: Command is on the image's PATH), the command and its
// args, the environment added to the gateway's, and the wire it speaks.
type ACP struct {
	Preset  string   `json:"preset,omitempty"`
	Package string   `json:"package,omitempty"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	// Env is not shown: it is the operator's, and the view needs none of it.
	Env      map[string]string `json:"-"`
	Protocol string            `json:"protocol"`
}

// Reported is an outside agent's own name and version.
type Reported struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Options configure a Catalog.
type Options struct {
	// Prices maps "provider/model" to its price; absent means unknown.
	Prices map[string]Price
	// ProbeTimeout bounds one /api/tags probe; 0 means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// HTTPClient is used for the probes; nil means a plain client.
	HTTPClient *http.Client
	// LookupEnv reads an environment variable; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Catalog is immutable after New and safe for concurrent use.
type Catalog struct {
	providers map[string]Provider
	names     []string // provider names, sorted
	agents    []Agent
	prices    map[string]Price
	timeout   time.Duration
	hc        *http.Client
	lookupEnv func(string) (string, bool)
}

// New builds a Catalog. It copies its inputs.
func New(providers []Provider, agents []Agent, opts Options) *Catalog {
	c := &Catalog{
		providers: make(map[string]Provider, len(providers)),
		prices:    make(map[string]Price, len(opts.Prices)),
		timeout:   opts.ProbeTimeout,
		hc:        opts.HTTPClient,
		lookupEnv: opts.LookupEnv,
	}
	if c.timeout <= 0 {
		c.timeout = DefaultProbeTimeout
	}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if c.lookupEnv == nil {
		c.lookupEnv = lookupEnv
	}
	for _, p := range providers {
		if _, dup := c.providers[p.Name]; !dup {
			c.names = append(c.names, p.Name)
		}
		c.providers[p.Name] = p
	}
	slices.Sort(c.names)
	for k, v := range opts.Prices {
		c.prices[k] = v
	}
	for _, a := range agents {
		a.Dependencies = slices.Clone(a.Dependencies)
		c.agents = append(c.agents, a)
	}
	return c
}

// AgentView is the config projection of one Agent. Like every Agent record
// on the wire (status, report, health, model list), it names the Agent
// agent_id, as the spec's Agent resource does.
type AgentView struct {
	ID           string   `json:"agent_id"`
	Name         string   `json:"name"`
	Provider     string   `json:"provider"`
	ProviderKind string   `json:"provider_kind"`
	Model        string   `json:"model"`
	Prompt       string   `json:"prompt"`
	Dependencies []string `json:"dependencies"`
	Budget       Budget   `json:"budget"`
	// Price is nil when unknown.
	Price *Price `json:"price"`
	Kind  string `json:"kind"`
	ACP   *ACP   `json:"acp,omitempty"`
	// Reported is what an outside agent said of itself in its last
	// initialize; nil until it has run.
	Reported *Reported `json:"reported,omitempty"`
}

// ProviderView is the projection of one provider. It never holds the key.
type ProviderView struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	BaseURL   string `json:"base_url"`
	APIKeyEnv string `json:"api_key_env"`
	// APIKeySet reports whether the variable named by APIKeyEnv is set and
	// non-empty.
	APIKeySet bool `json:"api_key_set"`
}

// Agents returns every Agent in config order.
func (c *Catalog) Agents() []AgentView {
	out := make([]AgentView, 0, len(c.agents))
	for _, a := range c.agents {
		out = append(out, c.agentView(a))
	}
	return out
}

// Agent returns one Agent's projection.
func (c *Catalog) Agent(id string) (AgentView, bool) {
	for _, a := range c.agents {
		if a.ID == id {
			return c.agentView(a), true
		}
	}
	return AgentView{}, false
}

// Providers returns every provider, sorted by name.
func (c *Catalog) Providers() []ProviderView {
	out := make([]ProviderView, 0, len(c.names))
	for _, n := range c.names {
		out = append(out, c.providerView(c.providers[n]))
	}
	return out
}

// PriceOf returns the configured price of model on the named provider, or
// nil when unknown.
func (c *Catalog) PriceOf(provider, model string) *Price {
	p, ok := c.prices[provider+"/"+model]
	if !ok {
		return nil
	}
	return &p
}

func (c *Catalog) agentView(a Agent) AgentView {
	deps := a.Dependencies
	if deps == nil {
		deps = []string{}
	}
	return AgentView{
		ID: a.ID, Name: a.Name, Provider: a.Provider, ProviderKind: c.providers[a.Provider].Kind,
		Model: a.Model, Prompt: a.Prompt, Dependencies: slices.Clone(deps), Budget: a.Budget,
		Price: c.PriceOf(a.Provider, a.Model), Kind: cmp.Or(a.Kind, "lathe"), ACP: a.ACP.clone(),
	}
}

func (a *ACP) clone() *ACP {
	if a == nil {
		return nil
	}
	c := *a
	c.Args = slices.Clone(a.Args)
	if c.Args == nil {
		c.Args = []string{}
	}
	c.Env = maps.Clone(a.Env)
	return &c
}

func (c *Catalog) providerView(p Provider) ProviderView {
	return ProviderView{Name: p.Name, Kind: p.Kind, BaseURL: redactURL(p.BaseURL), APIKeyEnv: p.APIKeyEnv, APIKeySet: c.keySet(p)}
}

func (c *Catalog) keySet(p Provider) bool {
	if p.APIKeyEnv == "" {
		return false
	}
	v, ok := c.lookupEnv(p.APIKeyEnv)
	return ok && v != ""
}

// ---------------------------------------------------------------------------
// Health

// Health is the GET /api/llm-health report.
type Health struct {
	// OK is true only when every ollama provider answered /api/tags and no
	// Agent on one lacks its model.
	OK        bool             `json:"ok"`
	CheckedAt time.Time        `json:"checked_at"`
	Providers []ProviderHealth `json:"providers"`
	Agents    []AgentHealth    `json:"agents"`
	// Reasons explain OK false, one line each; empty when OK.
	Reasons []string `json:"reasons"`
	// Warnings do not affect OK: for example a hosted provider an Agent
	// uses whose API key variable is unset.
	Warnings []string `json:"warnings"`
}

// ProviderHealth is one provider's line of the report.
type ProviderHealth struct {
	ProviderView
	// Probed is true for ollama providers (GET /api/tags was attempted) and
	// false for hosted kinds, which are never called.
	Probed bool `json:"probed"`
	// Reachable is set only for probed providers.
	Reachable *bool `json:"reachable,omitempty"`
	// Models are the model names the server has, for reachable providers.
	Models    []string `json:"models,omitempty"`
	LatencyMS *int64   `json:"latency_ms,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// AgentHealth is one Agent's line of the report.
type AgentHealth struct {
	ID           string `json:"agent_id"`
	Provider     string `json:"provider"`
	ProviderKind string `json:"provider_kind"`
	Model        string `json:"model"`
	// ModelMissing is set only when it is known: for an Agent on a reachable
	// ollama provider. It is null for hosted kinds and unreachable servers.
	ModelMissing *bool `json:"model_missing"`
}

type probe struct {
	models  []string
	latency time.Duration
	err     error
}

// Health probes every ollama provider (in parallel, each bounded by the
// probe timeout) and reports hosted providers without calling them.
func (c *Catalog) Health(ctx context.Context) Health {
	probes := make(map[string]*probe)
	var wg sync.WaitGroup
	for _, n := range c.names {
		p := c.providers[n]
		if p.Kind != KindOllama {
			continue
		}
		pr := &probe{}
		probes[n] = pr
		wg.Go(func() {
			start := time.Now()
			pr.models, pr.err = c.ollamaModels(ctx, p)
			pr.latency = time.Since(start)
		})
	}
	wg.Wait()

	h := Health{OK: true, CheckedAt: time.Now().UTC(), Reasons: []string{}, Warnings: []string{}}
	for _, n := range c.names {
		p := c.providers[n]
		ph := ProviderHealth{ProviderView: c.providerView(p)}
		if pr := probes[n]; pr != nil {
			ph.Probed = true
			ok := pr.err == nil
			ph.Reachable = &ok
			if ok {
				ms := pr.latency.Milliseconds()
				ph.LatencyMS = &ms
				ph.Models = pr.models
			} else {
				ph.Error = pr.err.Error()
				h.OK = false
				h.Reasons = append(h.Reasons, fmt.Sprintf("provider %s (ollama at %s) is unreachable: %s", n, ph.BaseURL, ph.Error))
			}
		}
		h.Providers = append(h.Providers, ph)
	}
	if h.Providers == nil {
		h.Providers = []ProviderHealth{}
	}

	h.Agents = make([]AgentHealth, 0, len(c.agents))
	for _, a := range c.agents {
		p, known := c.providers[a.Provider]
		ah := AgentHealth{ID: a.ID, Provider: a.Provider, ProviderKind: p.Kind, Model: a.Model}
		switch {
		case !known:
			h.OK = false
			h.Reasons = append(h.Reasons, fmt.Sprintf("agent %s: provider %q is not configured", a.ID, a.Provider))
		case p.Kind == KindOllama:
			if pr := probes[a.Provider]; pr != nil && pr.err == nil {
				missing := !hasModel(pr.models, a.Model)
				ah.ModelMissing = &missing
				if missing {
					h.OK = false
					h.Reasons = append(h.Reasons, fmt.Sprintf("agent %s: model %q is not available on provider %s (try: ollama pull %s)", a.ID, a.Model, a.Provider, a.Model))
				}
			}
		default:
			if !c.keySet(p) {
				if p.APIKeyEnv == "" {
					h.Warnings = append(h.Warnings, fmt.Sprintf("agent %s: provider %s (%s) has no api_key_env", a.ID, a.Provider, p.Kind))
				} else {
					h.Warnings = append(h.Warnings, fmt.Sprintf("agent %s: provider %s (%s): $%s is not set", a.ID, a.Provider, p.Kind, p.APIKeyEnv))
				}
			}
		}
		h.Agents = append(h.Agents, ah)
	}
	return h
}

// ---------------------------------------------------------------------------
// Models

// Model is one entry of a model list.
type Model struct {
	Name string `json:"name"`
	// Current marks the Agent's configured model; it is always first.
	Current bool `json:"current"`
}

// ModelList is the GET /api/llm/models answer for one Agent.
type ModelList struct {
	AgentID      string `json:"agent_id"`
	Provider     string `json:"provider"`
	ProviderKind string `json:"provider_kind"`
	CurrentModel string `json:"current_model"`
	// Source is "live" (ollama /api/tags, or GET {base_url}/models of an
	// OpenAI-compatible server other than OpenAI's) or "curated" (OpenAI's
	// own API and anthropic).
	Source string  `json:"source"`
	Models []Model `json:"models"`
	// CurrentModelMissing is set for a live list: the server lacks the
	// Agent's model (it is still listed, first, flagged current).
	CurrentModelMissing *bool `json:"current_model_missing,omitempty"`
}

// Models lists the models an Agent could use. The current model is always
// the first entry. For ollama a failed probe returns the list holding only
// the current model together with the error (wrapping llm.ErrUnavailable or
// llm.ErrMalformed). An unknown id is ErrUnknownAgent.
func (c *Catalog) Models(ctx context.Context, agentID string) (ModelList, error) {
	return c.ModelsFor(ctx, agentID, "")
}

// ModelsFor is Models for an Agent whose current model is model (its
// in-memory config after a PATCH); "" means the configured model.
func (c *Catalog) ModelsFor(ctx context.Context, agentID, model string) (ModelList, error) {
	i := slices.IndexFunc(c.agents, func(a Agent) bool { return a.ID == agentID })
	if i < 0 {
		return ModelList{}, fmt.Errorf("%w %q", ErrUnknownAgent, agentID)
	}
	a := c.agents[i]
	if model != "" {
		a.Model = model
	}
	p, known := c.providers[a.Provider]
	ml := ModelList{AgentID: a.ID, Provider: a.Provider, ProviderKind: p.Kind, CurrentModel: a.Model,
		Models: []Model{{Name: a.Model, Current: true}}}
	if !known {
		return ml, fmt.Errorf("agent %s: provider %q is not configured", a.ID, a.Provider)
	}
	var names []string
	switch p.Kind {
	case KindOllama:
		ml.Source = "live"
		live, err := c.ollamaModels(ctx, p)
		if err != nil {
			return ml, fmt.Errorf("provider %s (ollama at %s) is unreachable: %w", p.Name, redactURL(p.BaseURL), err)
		}
		missing := !hasModel(live, a.Model)
		ml.CurrentModelMissing = &missing
		names = live
	case KindOpenAI:
		if hostedOpenAI(p.BaseURL) {
			ml.Source, names = "curated", Curated(p.Kind)
			break
		}
		// Any other OpenAI-compatible server lists what it serves; the
		// curated list (gpt-5, …) would offer models it does not have.
		ml.Source = "live"
		live, err := c.openAIModels(ctx, p)
		if err != nil {
			return ml, fmt.Errorf("provider %s (OpenAI-compatible at %s) did not list its models: %w", p.Name, redactURL(p.BaseURL), err)
		}
		missing := !slices.Contains(live, a.Model)
		ml.CurrentModelMissing = &missing
		names = live
	default:
		ml.Source = "curated"
		names = Curated(p.Kind)
	}
	seen := map[string]bool{a.Model: true}
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			ml.Models = append(ml.Models, Model{Name: n})
		}
	}
	return ml, nil
}

// ollamaModels asks p for /api/tags within the probe timeout.
func (c *Catalog) ollamaModels(ctx context.Context, p Provider) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ms, err := ollama.New(ollama.Config{BaseURL: p.BaseURL, HTTPClient: c.hc}).Models(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer from /api/tags within %s", c.timeout)
		}
		return nil, errors.New(scrub(err.Error(), p.BaseURL))
	}
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		n := m.Name
		if n == "" {
			n = m.Model
		}
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// hasModel reports whether model is in names. Ollama lists "name:tag"; a
// configured model without a tag means ":latest".
func hasModel(names []string, model string) bool {
	if slices.Contains(names, model) {
		return true
	}
	if !strings.Contains(model, ":") {
		return slices.Contains(names, model+":latest")
	}
	if base, ok := strings.CutSuffix(model, ":latest"); ok {
		return slices.Contains(names, base)
	}
	return false
}

// redactURL hides a password in a URL's userinfo.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// scrub removes a raw base URL (which may carry userinfo) from an error text.
func scrub(msg, base string) string {
	if r := redactURL(base); r != base && base != "" {
		msg = strings.ReplaceAll(msg, strings.TrimSuffix(base, "/"), strings.TrimSuffix(r, "/"))
	}
	return msg
}
