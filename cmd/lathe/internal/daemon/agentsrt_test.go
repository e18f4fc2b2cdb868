package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
)

const testRuntimeKeyEnv = "LATHE_TEST_AGENTRT_KEY"

// runtimeConfig points one provider of kind at the fake server and adds
// Agent "a" (model m1, prompt "be brief") and Agent "b" (budgeted) on it.
func runtimeConfig(kind, url string) func(*config.Config) {
	return func(c *config.Config) {
		base := url
		if kind == config.KindOpenAI {
			base = url + "/v1"
		}
		c.Providers = map[string]config.Provider{"fake": {Kind: kind, BaseURL: base, APIKeyEnv: testRuntimeKeyEnv}}
		c.Agents = []config.Agent{
			{ID: "a", Name: "A", Provider: "fake", Model: "m1", Prompt: "be brief"},
			{ID: "b", Name: "B", Provider: "fake", Model: "m1", Budget: config.Budget{MaxOutputTokens: 10, MaxUSD: 0.001}},
		}
		c.Prices = map[string]config.Price{"fake/m1": {Input: 1000, Output: 1000}}
	}
}

type execJSON struct {
	Output          string `json:"output"`
	Model           string `json:"model"`
	Stateless       bool   `json:"stateless"`
	Error           string `json:"error"`
	InputTokens     *int   `json:"input_tokens"`
	OutputTokens    *int   `json:"output_tokens"`
	ReasoningTokens *int   `json:"reasoning_tokens"`
	TotalTokens     *int   `json:"total_tokens"`
	TokenUsageKnown *bool  `json:"token_usage_known"`
}

func (e execJSON) tokens() string {
	if e.InputTokens == nil || e.OutputTokens == nil || e.ReasoningTokens == nil || e.TotalTokens == nil || e.TokenUsageKnown == nil {
		return "missing token fields"
	}
	return fmt.Sprintf("%d/%d/%d/%d/%v", *e.InputTokens, *e.OutputTokens, *e.ReasoningTokens, *e.TotalTokens, *e.TokenUsageKnown)
}

// wireMessages returns the texts of the messages a recorded request sent
// (OpenAI: messages[].content incl. the system message; Anthropic:
// messages[].content[].text), the system prompt and whether tools were sent.
func wireMessages(t *testing.T, kind string, r fakellm.Request) (msgs []string, system string, hasTools bool) {
	t.Helper()
	var body map[string]json.RawMessage
	if err := r.JSON(&body); err != nil {
		t.Fatal(err)
	}
	_, hasTools = body["tools"]
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(body["messages"], &raw); err != nil {
		t.Fatalf("messages: %v: %s", err, r.Body)
	}
	text := func(c json.RawMessage) string {
		var s string
		if json.Unmarshal(c, &s) == nil {
			return s
		}
		var parts []struct{ Text string }
		_ = json.Unmarshal(c, &parts)
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	if kind == config.KindAnthropic {
		system = text(body["system"])
	}
	for _, m := range raw {
		var role string
		_ = json.Unmarshal(m["role"], &role)
		if role == "system" {
			system = text(m["content"])
			continue
		}
		msgs = append(msgs, role+":"+text(m["content"]))
	}
	return msgs, system, hasTools
}

func TestAgentRuntime(t *testing.T) {
	for _, kind := range []string{config.KindOpenAI, config.KindAnthropic} {
		t.Run(kind, func(t *testing.T) { testAgentRuntime(t, kind) })
	}
}

func testAgentRuntime(t *testing.T, kind string) {
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Text("hello "), fakellm.Text("one"), fakellm.Usage(10, 4, 0)}}, // 1 stateful
		{Steps: []fakellm.Step{fakellm.Text("two"), fakellm.Usage(20, 3, 0)}},                         // 2 stateful
		{Steps: []fakellm.Step{fakellm.Text("alone"), fakellm.Usage(5, 2, 0)}},                        // 3 stateless
		{Model: "m9", Steps: []fakellm.Step{fakellm.Text("overridden")}},                              // 4 model override, usage omitted (openai)
		{Steps: []fakellm.Step{fakellm.Fail(503)}},                                                    // 5 provider failure
		{Steps: []fakellm.Step{fakellm.Text("way too long"), fakellm.Usage(1, 50, 0)}},                // 6 budget b
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("from m2"), fakellm.Usage(7, 1, 0)}},         // 7 after patch
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("after restart"), fakellm.Usage(8, 1, 0)}},   // 8 after restart
	}})
	defer fake.Close()
	d, srv := newTestDaemon(t, runtimeConfig(kind, fake.URL()))

	exec := func(id, body string, status int) execJSON {
		t.Helper()
		r := call(t, srv, post, "/api/agents/"+id+"/execute", body)
		if r.status != status {
			t.Fatalf("execute %s %s: %d, want %d: %s", id, body, r.status, status, r.body)
		}
		return decodeAgents[execJSON](t, r)
	}
	reqs := func(n int) []fakellm.Request {
		t.Helper()
		rs := fake.Requests()
		if len(rs) != n {
			t.Fatalf("fake server saw %d requests, want %d", len(rs), n)
		}
		return rs
	}

	// Health is ready with two spawned Agents.
	if r := call(t, srv, get, "/health/ready", ""); r.status != 200 || !strings.Contains(string(r.body), `"agents":2`) {
		t.Fatalf("/health/ready: %d %s", r.status, r.body)
	}

	// Stateful twice: the second request carries the history.
	e := exec("a", `{"input":"first"}`, 200)
	if e.Output != "hello one" || e.tokens() != "10/4/0/14/true" || e.Stateless {
		t.Fatalf("first execute: %+v %s", e, e.tokens())
	}
	e = exec("a", `{"input":"second"}`, 200)
	if e.Output != "two" || e.tokens() != "20/3/0/23/true" {
		t.Fatalf("second execute: %+v %s", e, e.tokens())
	}
	rs := reqs(2)
	msgs, system, tools := wireMessages(t, kind, rs[1])
	if got := strings.Join(msgs, "|"); got != "user:first|assistant:hello one|user:second" || system != "be brief" || tools {
		t.Fatalf("second request: messages %q system %q tools %v", got, system, tools)
	}

	// Stateless: one request with only the input, no tools; history untouched.
	e = exec("a", `{"input":"solo","stateless":true}`, 200)
	if e.Output != "alone" || !e.Stateless || e.tokens() != "5/2/0/7/true" {
		t.Fatalf("stateless execute: %+v %s", e, e.tokens())
	}
	msgs, _, tools = wireMessages(t, kind, reqs(3)[2])
	if got := strings.Join(msgs, "|"); got != "user:solo" || tools {
		t.Fatalf("stateless request: messages %q tools %v", got, tools)
	}

	// A model override implies stateless. OpenAI without a usage step omits
	// usage (unknown); Anthropic always reports its counts.
	e = exec("a", `{"input":"other","model_override":"m9","system_override":"sys"}`, 200)
	if e.Output != "overridden" || !e.Stateless || e.Model != "m9" {
		t.Fatalf("override execute: %+v", e)
	}
	if kind == config.KindOpenAI && e.tokens() != "0/0/0/0/false" {
		t.Fatalf("override execute without usage: %s, want unknown", e.tokens())
	}
	msgs, system, tools = wireMessages(t, kind, reqs(4)[3])
	if got := strings.Join(msgs, "|"); got != "user:other" || system != "sys" || tools || reqs(4)[3].Model != "m9" {
		t.Fatalf("override request: messages %q system %q tools %v", got, system, tools)
	}

	// Provider 503 → 502 with token fields.
	e = exec("a", `{"input":"boom","stateless":true}`, 502)
	if e.Error == "" || e.tokens() != "0/0/0/0/false" {
		t.Fatalf("provider failure: %+v %s", e, e.tokens())
	}

	// Budget: 50 output tokens over max_output_tokens 10 → 402 naming it.
	e = exec("b", `{"input":"long"}`, 402)
	if !strings.Contains(e.Error, "max_output_tokens") || e.tokens() != "1/50/0/51/true" {
		t.Fatalf("budget: %+v %s", e, e.tokens())
	}
	var capBody struct {
		MaxTokens int `json:"max_tokens"`
	}
	_ = reqs(6)[5].JSON(&capBody)
	if capBody.MaxTokens != 10 {
		t.Errorf("budgeted request max_tokens = %d, want 10 (the budget cap)", capBody.MaxTokens)
	}

	// Bad input.
	exec("a", `{"input":""}`, 400)
	exec("a", `{"input":"x","bogus":1}`, 400)
	exec("nope", `{"input":"x"}`, 404)

	// Patch the model without restart; the next execute uses it, and
	// GET /api/agents shows the in-memory config.
	r := call(t, srv, "PATCH", "/api/agents/a?restart=false", `{"model":"m2","name":"A2"}`)
	if r.status != 200 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	agents := decodeAgents[[]agentJSON](t, call(t, srv, get, "/api/agents", ""))
	if agents[0].Model != "m2" || agents[0].Name != "A2" {
		t.Fatalf("GET /api/agents after patch: %+v", agents[0])
	}
	// The model list always includes the Agent's current (patched) model.
	if ml := decodeAgents[modelsJSON](t, call(t, srv, get, "/api/llm/models?agent=a", "")); ml.CurrentModel != "m2" || !slices.Contains(ml.names(), "m2") {
		t.Fatalf("GET /api/llm/models after patch: %+v", ml)
	}
	for _, bad := range []string{`{"model":""}`, `{"name":" "}`, `{"budget":{"max_usd":-1}}`, `{"provider":"x"}`} {
		if r := call(t, srv, "PATCH", "/api/agents/a", bad); r.status != 400 {
			t.Errorf("patch %s: %d, want 400: %s", bad, r.status, r.body)
		}
	}
	if r := call(t, srv, "PATCH", "/api/agents/nope", `{}`); r.status != 404 {
		t.Errorf("patch unknown agent: %d", r.status)
	}
	e = exec("a", `{"input":"third"}`, 200)
	if e.Output != "from m2" || e.Model != "m2" || reqs(7)[6].Model != "m2" {
		t.Fatalf("execute after patch: %+v", e)
	}

	// Restart keeps the conversation.
	st := decodeAgents[map[string]any](t, call(t, srv, post, "/api/agents/a/restart", ""))
	if st["restarts"] != float64(1) || st["messages"] != float64(6) {
		t.Fatalf("restart status: %v", st)
	}
	exec("a", `{"input":"fourth"}`, 200)
	msgs, _, _ = wireMessages(t, kind, reqs(8)[7])
	if got := strings.Join(msgs, "|"); got != "user:first|assistant:hello one|user:second|assistant:two|user:third|assistant:from m2|user:fourth" {
		t.Fatalf("request after restart: %q", got)
	}

	// The patch and the restart are journaled: the Agent overlay the
	// projection folds from them is what the live daemon holds.
	if o, ok := d.Store().AgentOverlay("a"); !ok || o.Model == nil || *o.Model != "m2" || o.Name == nil || *o.Name != "A2" || o.Patches != 1 || o.Restarts != 1 {
		t.Fatalf("agent overlay after patch and restart: %+v, %v", o, ok)
	}
	if _, ok := d.Store().AgentOverlay("b"); ok {
		t.Error("Agent b has an overlay, though nobody changed it")
	}

	// Status counts. a: 7 requests (8 scripted minus b's one).
	st = decodeAgents[map[string]any](t, call(t, srv, get, "/api/agents/a/status", ""))
	if st["agent_id"] != "a" || st["state"] != "idle" || st["requests"] != float64(7) || st["spawned_at"] == "" || st["last_error"] != nil {
		t.Fatalf("status: %v", st)
	}
	if r := call(t, srv, get, "/api/agents/nope/status", ""); r.status != 404 {
		t.Errorf("status of an unknown agent: %d", r.status)
	}

	// Token report totals.
	rep := decodeAgents[reportJSON](t, call(t, srv, get, "/api/tokens/report", ""))
	if len(rep.Agents) != 2 || rep.Agents[0].AgentID != "a" || rep.Agents[1].AgentID != "b" {
		t.Fatalf("report agents: %+v", rep.Agents)
	}
	if b := rep.Agents[1]; b.Requests != 1 || b.InputTokens != 1 || b.OutputTokens != 50 || !b.TokenUsageKnown {
		t.Errorf("report b: %+v", b)
	}
	a := rep.Agents[0]
	if a.TokenUsageKnown { // the 503 (and openai's omitted usage) are unknown
		t.Errorf("report a known, want unknown: %+v", a)
	}
	if rep.Total.Requests != 8 || rep.Total.InputTokens != a.InputTokens+1 || rep.Total.OutputTokens != a.OutputTokens+50 ||
		rep.Total.TotalTokens != rep.Total.InputTokens+rep.Total.OutputTokens || rep.Total.TokenUsageKnown {
		t.Errorf("report total: %+v (a %+v)", rep.Total, a)
	}
	if a.InputTokens < 10+20+5+7+8 {
		t.Errorf("report a input = %d, want at least %d", a.InputTokens, 10+20+5+7+8)
	}
}

type countsJSON struct {
	AgentID         string `json:"agent_id"`
	Requests        int    `json:"requests"`
	InputTokens     int    `json:"input_tokens"`
	OutputTokens    int    `json:"output_tokens"`
	TotalTokens     int    `json:"total_tokens"`
	TokenUsageKnown bool   `json:"token_usage_known"`
}

type reportJSON struct {
	Agents []countsJSON `json:"agents"`
	Total  countsJSON   `json:"total"`
}

func TestAgentBudgetUSD(t *testing.T) {
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Text("pricey"), fakellm.Usage(3, 2, 0)}}, // 5 tokens at 1000 USD/M = 0.005 > 0.001
	}})
	defer fake.Close()
	_, srv := newTestDaemon(t, runtimeConfig(config.KindOpenAI, fake.URL()))
	r := call(t, srv, post, "/api/agents/b/execute", `{"input":"x"}`)
	e := decodeAgents[execJSON](t, r)
	if r.status != 402 || !strings.Contains(e.Error, "max_usd") || e.tokens() != "3/2/0/5/true" {
		t.Fatalf("max_usd budget: %d %s", r.status, r.body)
	}
}

func TestAgentHealthReady(t *testing.T) {
	_, srv := newTestDaemon(t, nil) // the default config has one Agent
	if r := call(t, srv, get, "/health/ready", ""); r.status != 200 || !strings.Contains(string(r.body), `"agents":1`) {
		t.Fatalf("/health/ready with an agent: %d %s", r.status, r.body)
	}
	if r := call(t, srv, get, "/health", ""); !strings.Contains(string(r.body), `"agents":1`) {
		t.Fatalf("/health: %s", r.body)
	}
	_, srv = newTestDaemon(t, func(c *config.Config) { c.Agents = []config.Agent{} })
	if r := call(t, srv, get, "/health/ready", ""); r.status != 503 {
		t.Fatalf("/health/ready without agents: %d %s", r.status, r.body)
	}
	// agents: [] is a valid configuration.
	cfg := config.Default()
	cfg.Agents = []config.Agent{}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("agents: [] rejected: %v", err)
	}
}

// An Agent PATCH lasts until the daemon stops: the next start on the same
// data dir serves the YAML again, journals daemon-started, and a replay of
// the whole journal agrees with the live daemon on both sides of it.
func TestAgentPatchEndsAtRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	runtimeConfig(config.KindOpenAI, "http://127.0.0.1:9")(&cfg)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	run := func(check func(d *Daemon, srv *httptest.Server)) {
		t.Helper()
		d, err := Start(testContext(t, 10*time.Second), cfg, dir, log, "test", WithoutSandbox())
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(d.Handler())
		check(d, srv)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		srv.Close()
		d.Close()
	}
	model := func(srv *httptest.Server) string {
		t.Helper()
		return decodeAgents[[]agentJSON](t, call(t, srv, get, "/api/agents", ""))[0].Model
	}
	replayedModel := func(d *Daemon) (string, bool) {
		t.Helper()
		s, _, err := projections.Load(context.Background(), d.Journal(), "")
		if err != nil {
			t.Fatal(err)
		}
		o, ok := s.AgentOverlay("a")
		if !ok || o.Model == nil {
			return "", ok
		}
		return *o.Model, ok
	}
	run(func(d *Daemon, srv *httptest.Server) {
		if r := call(t, srv, "PATCH", "/api/agents/a?restart=false", `{"model":"m2"}`); r.status != 200 {
			t.Fatalf("patch: %d %s", r.status, r.body)
		}
		if got := model(srv); got != "m2" {
			t.Fatalf("model after patch = %q", got)
		}
		if got, _ := replayedModel(d); got != "m2" {
			t.Errorf("replay after patch: model %q, want m2", got)
		}
	})
	run(func(d *Daemon, srv *httptest.Server) {
		if got := model(srv); got != "m1" {
			t.Errorf("model after restart = %q, want the YAML's m1", got)
		}
		if _, ok := replayedModel(d); ok {
			t.Error("a replay after the restart still holds the patch")
		}
		if _, ok := d.Store().AgentOverlay("a"); ok {
			t.Error("the live store after the restart still holds the patch")
		}
		types := []string{}
		_ = d.Journal().Scan(context.Background(), 0, 0, func(_ uint64, raw []byte) error {
			var env struct{ Type string }
			_ = json.Unmarshal(raw, &env)
			types = append(types, env.Type)
			return nil
		})
		if want := []string{"agent-patched", "daemon-started"}; !slices.Equal(types, want) {
			t.Errorf("journal = %v, want %v", types, want)
		}
	})
}
