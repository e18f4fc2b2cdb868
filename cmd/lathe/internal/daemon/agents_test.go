package daemon

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

const (
	testOpenAIKeyEnv    = "LATHE_TEST_AGENTS_OPENAI_KEY"
	testAnthropicKeyEnv = "LATHE_TEST_AGENTS_ANTHROPIC_KEY_UNSET"
	testSecret          = "sk-test-SECRET-value-7f3a9c"
)

// agentsConfig points the "local" ollama provider at ollamaURL, adds an
// openai provider (OpenAI's own API, never called) whose key variable is
// set, an OpenAI-compatible local server ("vllm", the same fake at /v1) and
// an anthropic provider whose variable is not set, and one Agent per case.
func agentsConfig(ollamaURL string) func(*config.Config) {
	return func(c *config.Config) {
		c.Providers = map[string]config.Provider{
			"local":  {Kind: config.KindOllama, BaseURL: ollamaURL},
			"openai": {Kind: config.KindOpenAI, BaseURL: "https://api.openai.com/v1", APIKeyEnv: testOpenAIKeyEnv},
			"vllm":   {Kind: config.KindOpenAI, BaseURL: ollamaURL + "/v1", APIKeyEnv: testOpenAIKeyEnv},
			"claude": {Kind: config.KindAnthropic, APIKeyEnv: testAnthropicKeyEnv},
		}
		c.Agents = []config.Agent{
			{ID: "coder", Name: "Coder", Provider: "local", Model: "qwen2.5-coder:7b", Prompt: "code",
				Budget: config.Budget{MaxOutputTokens: 1000, MaxUSD: 0.5}},
			{ID: "ghost", Name: "Ghost", Provider: "local", Model: "not-pulled:1b", Dependencies: []string{"coder"}},
			{ID: "gpt", Name: "GPT", Provider: "openai", Model: "gpt-4.1"},
			{ID: "custom", Name: "Custom", Provider: "openai", Model: "my-finetune"},
			{ID: "writer", Name: "Writer", Provider: "claude", Model: "claude-sonnet-4-5"},
			{ID: "served", Name: "Served", Provider: "vllm", Model: "llama3:8b"},
		}
		c.Prices = map[string]config.Price{"openai/gpt-4.1": {Input: 2, Output: 8}}
	}
}

func decodeAgents[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return v
}

func noSecret(t *testing.T, path string, r reply) {
	t.Helper()
	if strings.Contains(string(r.body), testSecret) {
		t.Fatalf("%s leaks the API key value: %s", path, r.body)
	}
}

type agentJSON struct {
	ID           string   `json:"agent_id"`
	Name         string   `json:"name"`
	Provider     string   `json:"provider"`
	ProviderKind string   `json:"provider_kind"`
	Model        string   `json:"model"`
	Prompt       string   `json:"prompt"`
	Dependencies []string `json:"dependencies"`
	Budget       struct {
		MaxOutputTokens int     `json:"max_output_tokens"`
		MaxUSD          float64 `json:"max_usd"`
	} `json:"budget"`
	Price *struct{ Input, Output float64 } `json:"price"`
}

type healthJSON struct {
	OK        bool `json:"ok"`
	Providers []struct {
		Name      string   `json:"name"`
		Kind      string   `json:"kind"`
		BaseURL   string   `json:"base_url"`
		APIKeyEnv string   `json:"api_key_env"`
		APIKeySet bool     `json:"api_key_set"`
		Probed    bool     `json:"probed"`
		Reachable *bool    `json:"reachable"`
		Models    []string `json:"models"`
		Error     string   `json:"error"`
	} `json:"providers"`
	Agents []struct {
		ID           string `json:"agent_id"`
		ModelMissing *bool  `json:"model_missing"`
	} `json:"agents"`
	Reasons  []string `json:"reasons"`
	Warnings []string `json:"warnings"`
}

type modelsJSON struct {
	AgentID             string `json:"agent_id"`
	Provider            string `json:"provider"`
	ProviderKind        string `json:"provider_kind"`
	CurrentModel        string `json:"current_model"`
	Source              string `json:"source"`
	CurrentModelMissing *bool  `json:"current_model_missing"`
	Models              []struct {
		Name    string `json:"name"`
		Current bool   `json:"current"`
	} `json:"models"`
	Error string `json:"error"`
}

func (m modelsJSON) names() []string {
	var out []string
	for _, x := range m.Models {
		out = append(out, x.Name)
	}
	return out
}

func TestAgentRoutes(t *testing.T) {
	t.Setenv(testOpenAIKeyEnv, testSecret)
	llm := fakellm.New(fakellm.Script{Models: []string{"qwen2.5-coder:7b", "llama3:8b"}})
	t.Cleanup(llm.Close)
	_, srv := newTestDaemon(t, agentsConfig(llm.URL()))

	t.Run("agents", func(t *testing.T) {
		r := call(t, srv, http.MethodGet, "/api/agents", "")
		noSecret(t, "/api/agents", r)
		if r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		agents := decodeAgents[[]agentJSON](t, r)
		if len(agents) != 6 {
			t.Fatalf("agents %s", r.body)
		}
		byID := map[string]agentJSON{}
		for _, a := range agents {
			byID[a.ID] = a
		}
		if agents[0].ID != "coder" || agents[4].ID != "writer" {
			t.Errorf("not in config order: %s", r.body)
		}
		c := byID["coder"]
		if c.Name != "Coder" || c.Provider != "local" || c.ProviderKind != "ollama" || c.Model != "qwen2.5-coder:7b" ||
			c.Prompt != "code" || c.Budget.MaxOutputTokens != 1000 || c.Budget.MaxUSD != 0.5 || c.Price != nil ||
			c.Dependencies == nil || len(c.Dependencies) != 0 {
			t.Errorf("coder %+v", c)
		}
		if g := byID["ghost"]; len(g.Dependencies) != 1 || g.Dependencies[0] != "coder" {
			t.Errorf("ghost %+v", g)
		}
		if g := byID["gpt"]; g.ProviderKind != "openai" || g.Price == nil || g.Price.Input != 2 || g.Price.Output != 8 {
			t.Errorf("gpt %+v", g)
		}
		if w := byID["writer"]; w.ProviderKind != "anthropic" || w.Price != nil {
			t.Errorf("writer %+v", w)
		}
		// Unknown price is null, never 0.
		if !strings.Contains(string(r.body), `"price":null`) {
			t.Errorf("unknown price not null: %s", r.body)
		}
	})

	t.Run("health", func(t *testing.T) {
		r := call(t, srv, http.MethodGet, "/api/llm-health", "")
		noSecret(t, "/api/llm-health", r)
		if r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		h := decodeAgents[healthJSON](t, r)
		if h.OK {
			t.Errorf("ok with a missing model: %s", r.body)
		}
		if len(h.Reasons) != 1 || !strings.Contains(h.Reasons[0], "ghost") || !strings.Contains(h.Reasons[0], "not-pulled:1b") {
			t.Errorf("reasons %q", h.Reasons)
		}
		if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], testAnthropicKeyEnv) {
			t.Errorf("warnings %q", h.Warnings)
		}
		provs := map[string]int{}
		for i, p := range h.Providers {
			provs[p.Name] = i
		}
		if len(h.Providers) != 4 {
			t.Fatalf("providers %s", r.body)
		}
		local := h.Providers[provs["local"]]
		if !local.Probed || local.Reachable == nil || !*local.Reachable || len(local.Models) != 2 || local.Error != "" || local.BaseURL != llm.URL() {
			t.Errorf("local %+v", local)
		}
		oa := h.Providers[provs["openai"]]
		if oa.Kind != "openai" || oa.Probed || oa.Reachable != nil || !oa.APIKeySet || oa.APIKeyEnv != testOpenAIKeyEnv {
			t.Errorf("openai %+v", oa)
		}
		an := h.Providers[provs["claude"]]
		if an.Kind != "anthropic" || an.Probed || an.APIKeySet || an.APIKeyEnv != testAnthropicKeyEnv {
			t.Errorf("claude %+v", an)
		}
		missing := map[string]*bool{}
		for _, a := range h.Agents {
			missing[a.ID] = a.ModelMissing
		}
		if m := missing["coder"]; m == nil || *m {
			t.Errorf("coder missing %v", m)
		}
		if m := missing["ghost"]; m == nil || !*m {
			t.Errorf("ghost missing %v", m)
		}
		if missing["gpt"] != nil || missing["writer"] != nil {
			t.Errorf("hosted model_missing must be null: %s", r.body)
		}
		// Hosted APIs are never called; only /api/tags reached the local server.
		for _, req := range llm.Requests() {
			if req.Path != "/api/tags" {
				t.Errorf("unexpected request %s", req.Path)
			}
		}
	})

	for _, tc := range []struct {
		name, query  string
		status       int
		source, kind string
		first        string
		contains     []string
		absent       []string
		missing      *bool
	}{
		{name: "ollama live", query: "?agent=coder", status: 200, source: "live", kind: "ollama", first: "qwen2.5-coder:7b",
			contains: []string{"llama3:8b"}, missing: new(false)},
		{name: "ollama missing model still listed first", query: "?agent=ghost", status: 200, source: "live", kind: "ollama",
			first: "not-pulled:1b", contains: []string{"qwen2.5-coder:7b", "llama3:8b"}, missing: new(true)},
		{name: "openai curated", query: "?agent=gpt", status: 200, source: "curated", kind: "openai", first: "gpt-4.1",
			contains: []string{"gpt-4o-mini"}},
		{name: "openai custom model included", query: "?agent=custom", status: 200, source: "curated", kind: "openai",
			first: "my-finetune", contains: []string{"gpt-4.1"}},
		{name: "an OpenAI-compatible local server lists what it serves", query: "?agent=served", status: 200, source: "live", kind: "openai",
			first: "llama3:8b", contains: []string{"qwen2.5-coder:7b"}, missing: new(false), absent: []string{"gpt-5", "gpt-4.1"}},
		{name: "anthropic curated", query: "?agent=writer", status: 200, source: "curated", kind: "anthropic",
			first: "claude-sonnet-4-5", contains: []string{"claude-opus-4-1"}},
		{name: "no agent", query: "", status: 400},
		{name: "empty agent", query: "?agent=", status: 400},
		{name: "unknown agent", query: "?agent=nobody", status: 404},
	} {
		t.Run("models/"+tc.name, func(t *testing.T) {
			r := call(t, srv, http.MethodGet, "/api/llm/models"+tc.query, "")
			noSecret(t, "/api/llm/models", r)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			m := decodeAgents[modelsJSON](t, r)
			if tc.status != http.StatusOK {
				if m.Error == "" {
					t.Errorf("no error: %s", r.body)
				}
				return
			}
			names := m.names()
			if m.Source != tc.source || m.ProviderKind != tc.kind || m.CurrentModel != tc.first || len(names) == 0 ||
				names[0] != tc.first || !m.Models[0].Current || m.Error != "" {
				t.Fatalf("models %s", r.body)
			}
			seen := map[string]bool{}
			for i, x := range m.Models {
				if seen[x.Name] {
					t.Errorf("duplicate %q", x.Name)
				}
				seen[x.Name] = true
				if i > 0 && x.Current {
					t.Errorf("%q flagged current", x.Name)
				}
			}
			for _, want := range tc.contains {
				if !seen[want] {
					t.Errorf("%q not listed: %s", want, r.body)
				}
			}
			for _, never := range tc.absent {
				if seen[never] {
					t.Errorf("%q offered: %s", never, r.body)
				}
			}
			if (tc.missing == nil) != (m.CurrentModelMissing == nil) || (tc.missing != nil && *tc.missing != *m.CurrentModelMissing) {
				t.Errorf("current_model_missing %v, want %v", m.CurrentModelMissing, tc.missing)
			}
		})
	}

	t.Run("post not allowed", func(t *testing.T) {
		if r := call(t, srv, http.MethodPost, "/api/agents", "{}"); r.status != http.StatusMethodNotAllowed {
			t.Errorf("status %d", r.status)
		}
	})
}

func TestAgentRoutesOllamaUnreachable(t *testing.T) {
	t.Setenv(testOpenAIKeyEnv, testSecret)
	closed := fakellm.New(fakellm.Script{})
	url := closed.URL()
	closed.Close()
	_, srv := newTestDaemon(t, agentsConfig(url))

	r := call(t, srv, http.MethodGet, "/api/llm-health", "")
	noSecret(t, "/api/llm-health", r)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	h := decodeAgents[healthJSON](t, r)
	if h.OK || len(h.Reasons) != 1 || !strings.Contains(h.Reasons[0], "local") || !strings.Contains(h.Reasons[0], "unreachable") {
		t.Fatalf("health %s", r.body)
	}
	for _, p := range h.Providers {
		if p.Name == "local" && (p.Reachable == nil || *p.Reachable || p.Error == "" || len(p.Models) != 0) {
			t.Errorf("local %+v", p)
		}
	}
	for _, a := range h.Agents {
		if a.ModelMissing != nil {
			t.Errorf("agent %s model_missing %v with the server down: unknown must be null", a.ID, *a.ModelMissing)
		}
	}

	r = call(t, srv, http.MethodGet, "/api/llm/models?agent=coder", "")
	noSecret(t, "/api/llm/models", r)
	if r.status != http.StatusBadGateway {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	m := decodeAgents[modelsJSON](t, r)
	if m.Error == "" || !strings.Contains(m.Error, "unreachable") || m.Source != "live" ||
		len(m.Models) != 1 || m.Models[0].Name != "qwen2.5-coder:7b" || !m.Models[0].Current {
		t.Fatalf("models %s", r.body)
	}

	// Hosted lists do not depend on the local server.
	if r := call(t, srv, http.MethodGet, "/api/llm/models?agent=gpt", ""); r.status != http.StatusOK {
		t.Errorf("gpt status %d: %s", r.status, r.body)
	}
	// A local OpenAI-compatible server that is down offers only the current
	// model, with the error, never the curated OpenAI list.
	r = call(t, srv, http.MethodGet, "/api/llm/models?agent=served", "")
	if m := decodeAgents[modelsJSON](t, r); r.status != http.StatusBadGateway || m.Source != "live" || len(m.Models) != 1 || m.Models[0].Name != "llama3:8b" || m.Error == "" {
		t.Errorf("served with its server down: %d %s", r.status, r.body)
	}
}

// TestAgentRecordsNameAgentID is the regression test of defect 1: every
// route that returns Agent records names the Agent agent_id, as the spec's
// Agent resource does (CONTRACT.md), and none calls it id.
func TestAgentRecordsNameAgentID(t *testing.T) {
	t.Setenv(testOpenAIKeyEnv, testSecret)
	llm := fakellm.New(fakellm.Script{Models: []string{"qwen2.5-coder:7b"}})
	t.Cleanup(llm.Close)
	_, srv := newTestDaemon(t, agentsConfig(llm.URL()))

	type object = map[string]any
	one := func(v any) []object { o, _ := v.(object); return []object{o} }
	list := func(v any) []object {
		var out []object
		items, _ := v.([]any)
		for _, it := range items {
			o, _ := it.(object)
			out = append(out, o)
		}
		return out
	}
	field := func(key string, of func(any) []object) func(any) []object {
		return func(v any) []object { o, _ := v.(object); return of(o[key]) }
	}
	for _, tc := range []struct {
		method, path, body string
		records            func(any) []object
		want               int // records expected
	}{
		{method: http.MethodGet, path: "/api/agents", records: list, want: 6},
		{method: http.MethodGet, path: "/api/agents/coder/status", records: one, want: 1},
		{method: http.MethodPatch, path: "/api/agents/coder?restart=false", body: `{"name":"Coder 2"}`, records: one, want: 1},
		{method: http.MethodPatch, path: "/api/agents/coder", body: `{"name":"Coder 3"}`, records: one, want: 1},
		{method: http.MethodPost, path: "/api/agents/coder/restart", records: one, want: 1},
		{method: http.MethodGet, path: "/api/tokens/report", records: field("agents", list), want: 6},
		{method: http.MethodGet, path: "/api/llm-health", records: field("agents", list), want: 6},
		{method: http.MethodGet, path: "/api/llm/models?agent=coder", records: one, want: 1},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := call(t, srv, tc.method, tc.path, tc.body)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			var v any
			if err := json.Unmarshal(r.body, &v); err != nil {
				t.Fatalf("decode %s: %v", r.body, err)
			}
			recs := tc.records(v)
			if len(recs) != tc.want {
				t.Fatalf("%d Agent records, want %d: %s", len(recs), tc.want, r.body)
			}
			for _, o := range recs {
				if id, ok := o["agent_id"].(string); !ok || id == "" {
					t.Errorf("record without agent_id: %v", o)
				}
				if _, ok := o["id"]; ok {
					t.Errorf("record names the Agent id, not agent_id: %v", o)
				}
			}
		})
	}
}
