package config

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sample is the CONTRACT.md example with its placeholders filled in.
const sample = `server:
  listen: "127.0.0.1:8080"
  cors_origins: []          # empty: same-origin workbench only
  api_keys: []              # accepted ` + "`x-api-key`" + ` values
  bearer_tokens: []         # accepted ` + "`Authorization: Bearer`" + ` values
  rate_limit: {enabled: false, requests_per_second: 20, burst: 40}
nats:
  listen: ""                # empty: in-process only; "127.0.0.1:4222" exposes the subjects to integration feeds
providers:
  local:   {kind: ollama,    base_url: "http://127.0.0.1:11434"}
  openai:  {kind: openai,    base_url: "https://api.openai.com/v1", api_key_env: OPENAI_API_KEY}
  claude:  {kind: anthropic, api_key_env: ANTHROPIC_API_KEY}
agents:
  - id: coder
    name: Coder
    provider: local
    model: qwen2.5-coder:7b
    prompt: "You are a careful software engineer. Keep changes small."
    dependencies: []
    budget: {max_output_tokens: 0, max_usd: 0}   # 0 = unlimited
prices:                      # USD per million tokens; a model missing here has an unknown price
  "openai/gpt-4.1": {input: 2.0, output: 8.0}
sandbox:
  provider: containerd      # containerd | remote
  default_image: "docker.io/library/buildpack-deps:bookworm-scm"
  containerd: {address: "/run/containerd/containerd.sock", namespace: lathe}
`

// writeFile writes data to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// clearEnv unsets the variables this package reads, for the test's duration.
func clearEnv(t *testing.T) {
	for _, k := range []string{"LATHE_CONFIG", "LATHE_CONTAINERD", "LATHE_DOCKER", "XDG_DATA_HOME",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(k, "")
	}
}

func TestDefault(t *testing.T) {
	clearEnv(t)
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if c.AuthEnabled() {
		t.Error("defaults have auth enabled")
	}
	if c.Server.Listen != "127.0.0.1:8080" || c.Sandbox.Containerd.Address != DefaultContainerdAddress ||
		len(c.Agents) != 1 || c.Agents[0].Prompt == "" || c.Providers["local"].Kind != KindOllama ||
		c.Sandbox.Network != NetworkNone || c.Sandbox.Limits != (Limits{2048, 2, 1024}) {
		t.Errorf("unexpected defaults: %+v", c)
	}

	t.Setenv("LATHE_CONTAINERD", "/tmp/ctr.sock")
	if got := Default().Sandbox.Containerd.Address; got != "/tmp/ctr.sock" {
		t.Errorf("LATHE_CONTAINERD ignored: %q", got)
	}
}

func TestContractSample(t *testing.T) {
	clearEnv(t)
	c, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(c.Providers) != 3 || c.Providers["claude"].Kind != KindAnthropic ||
		c.Providers["openai"].APIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("providers: %+v", c.Providers)
	}
	if p := c.Prices["openai/gpt-4.1"]; p != (Price{2, 8}) {
		t.Errorf("prices: %+v", c.Prices)
	}
	if c.Server.RateLimit != (RateLimit{false, 20, 40}) || c.Agents[0].Model != "qwen2.5-coder:7b" {
		t.Errorf("parsed: %+v", c)
	}
}

func TestOverlay(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name  string
		yaml  string
		check func(Config) bool
	}{
		{"empty file keeps defaults", "", func(c Config) bool { return c.Server.Listen == "127.0.0.1:8080" }},
		{"comments only", "# nothing\n", func(c Config) bool { return len(c.Agents) == 1 }},
		{"nested key merges", "server:\n  rate_limit: {enabled: true}\n", func(c Config) bool {
			return c.Server.RateLimit == RateLimit{true, 20, 40} && c.Server.Listen == "127.0.0.1:8080"
		}},
		{"providers replace defaults", "providers:\n  x: {kind: openai, base_url: 'http://h/v1'}\nagents: []\n", func(c Config) bool {
			_, local := c.Providers["local"]
			return !local && len(c.Providers) == 1 && len(c.Agents) == 0
		}},
		{"agents replace defaults", "agents:\n  - {id: a, provider: local, model: m}\n", func(c Config) bool {
			return len(c.Agents) == 1 && c.Agents[0].ID == "a" && c.Agents[0].Name == "" && len(c.Providers) == 1
		}},
		{"YAML 1.1 booleans", "server: {rate_limit: {enabled: yes}}\nsandbox: {auto_approve_devcontainer_setup: on}\n", func(c Config) bool {
			return c.Server.RateLimit.Enabled && c.Sandbox.AutoApproveDevcontainerSetup
		}},
		{"null empties a list", "server: {cors_origins: ~}\nagents:\n", func(c Config) bool { return c.Agents == nil }},
		{"extra keys", "data_dir: /d\nsandbox:\n  auto_approve_devcontainer_setup: true\n  network: host-egress\n  limits: {cpus: 0.5}\n",
			func(c Config) bool {
				s := c.Sandbox
				return c.DataDir == "/d" && s.AutoApproveDevcontainerSetup && s.Network == NetworkHostEgress &&
					s.Limits == Limits{2048, 0.5, 1024} && s.Provider == SandboxContainerd
			}},
		{"lattice", "lattice:\n  coordinator: coder\n  workers: [a, b]\n", func(c Config) bool {
			return c.Lattice.Coordinator == "coder" && len(c.Lattice.Workers) == 2 && c.Lattice.Workers[1] == "b"
		}},
		{"a2a receivers", "a2a:\n  receivers:\n    - {id: helper, agent_id: coder, name: Helper, description: Answers coding questions}\n", func(c Config) bool {
			r := c.A2A.Receivers
			return len(r) == 1 && r[0] == A2AReceiver{ID: "helper", AgentID: "coder", Name: "Helper", Description: "Answers coding questions"}
		}},
		{"aliases", "agents:\n  - &a {id: a, provider: local, model: m}\n  - <<: *a\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml))
			if tt.check == nil {
				// Merge keys are not supported: they surface as an unknown key.
				if err == nil || !strings.Contains(err.Error(), `unknown key "agents[1][<<]"`) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Errorf("unexpected config: %+v", c)
			}
		})
	}
}

func TestLoadLookupOrder(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	flagFile := writeFile(t, dir, "flag.yaml", "server: {listen: '127.0.0.1:1'}\n")
	envFile := writeFile(t, dir, "env.yaml", "server: {listen: '127.0.0.1:2'}\n")
	withLocal, empty := t.TempDir(), t.TempDir()
	writeFile(t, withLocal, "lathe.yaml", "server: {listen: '127.0.0.1:3'}\n")
	missing := filepath.Join(dir, "missing.yaml")

	tests := []struct {
		name, flag, env, cwd string
		wantPath, wantListen string
		wantErr              bool
	}{
		{"flag beats env and local", flagFile, envFile, withLocal, flagFile, "127.0.0.1:1", false},
		{"env beats local", "", envFile, withLocal, envFile, "127.0.0.1:2", false},
		{"local file", "", "", withLocal, "lathe.yaml", "127.0.0.1:3", false},
		{"defaults", "", "", empty, "", "127.0.0.1:8080", false},
		{"missing flag file", missing, envFile, withLocal, missing, "", true},
		{"missing env file", "", missing, withLocal, missing, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("LATHE_CONFIG", tt.env)
			t.Chdir(tt.cwd)
			c, path, err := Load(tt.flag)
			if tt.wantErr {
				if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), tt.wantPath) {
					t.Fatalf("err = %v, want not-exist naming %s", err, tt.wantPath)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if path != tt.wantPath || c.Server.Listen != tt.wantListen {
				t.Errorf("got path %q listen %q, want %q %q", path, c.Server.Listen, tt.wantPath, tt.wantListen)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	clearEnv(t)
	tests := []struct{ name, yaml, want string }{
		{"unknown nested key", "server:\n  listen: '127.0.0.1:1'\n  listne: x\n",
			`config lathe.yaml: unknown key "server.listne" (line 3)`},
		{"unknown deep key", "server:\n  rate_limit:\n    brst: 1\n", `unknown key "server.rate_limit.brst" (line 3)`},
		{"unknown lattice key", "lattice:\n  worker: [a]\n", `unknown key "lattice.worker" (line 2)`},
		{"unknown top key", "\nlisten: x\n", `unknown key "listen" (line 2)`},
		{"unknown provider key", "providers:\n  local: {kind: ollama, url: x}\n", `unknown key "providers.local.url" (line 2)`},
		{"unknown agent key", "agents:\n  - id: a\n    budget: {max_tokens: 1}\n", `unknown key "agents[0].budget.max_tokens" (line 3)`},
		{"unknown price key", "prices:\n  openai/gpt-4.1: {inptu: 1}\n", `unknown key "prices[openai/gpt-4.1].inptu" (line 2)`},
		{"unknown sandbox key", "sandbox:\n  containerd:\n    adress: x\n", `unknown key "sandbox.containerd.adress" (line 3)`},
		{"duplicate key", "server:\n  listen: a\n  listen: b\n", `duplicate key "server.listen" (line 3)`},
		{"unknown first key of a block mapping", "server:\n  listne: x\n", `unknown key "server.listne" (line 2)`},
		{"duplicate name", "prices:\n  a/b: {input: 1}\n  a/b: {input: 2}\n", `duplicate key "prices[a/b]" (line 3)`},
		{"duplicate key in a list item", "agents:\n  - {id: a, id: b}\n", `duplicate key "agents[0].id" (line 2)`},
		{"block mapping for list", "agents:\n  id: a\n", `agents: want a list, got a mapping (line 2)`},
		{"list for a name-keyed map", "providers: [a]\n", `providers: want a mapping, got a list (line 1)`},
		{"list as a key", "prices: {[a]: {input: 1}}\n", `prices: keys must be plain strings (line 1)`},
		{"a tag that does not fit", "server: {listen: !!int abc}\n", `does not fit its explicit tag`},
		{"wrong int", "server:\n  rate_limit:\n    burst: many\n", `server.rate_limit.burst: want an integer, got "many" (line 3)`},
		{"float for int", "server: {rate_limit: {burst: 1.5}}\n", `server.rate_limit.burst: want an integer, got "1.5"`},
		{"wrong bool", "server: {rate_limit: {enabled: maybe}}\n", `server.rate_limit.enabled: want a boolean (true or false), got "maybe"`},
		{"quoted int", "server: {rate_limit: {burst: '4'}}\n", `server.rate_limit.burst: want an integer, got "4"`},
		{"wrong number", "prices: {a/b: {input: cheap}}\n", `prices[a/b].input: want a number, got "cheap"`},
		{"list for mapping", "server: []\n", `server: want a mapping, got a list (line 1)`},
		{"mapping for list", "agents: {id: a}\n", `agents: want a list, got a mapping`},
		{"mapping for string", "server: {listen: {a: b}}\n", `server.listen: want a string, got a mapping`},
		{"scalar for list", "server: {cors_origins: x}\n", `server.cors_origins: want a list, got a single value`},
		{"top level list", "- a\n", `top level must be a mapping`},
		{"two documents", "server: {}\n---\nnats: {}\n", `more than one YAML document (line 2)`},
		{"syntax error", "server: {\n", `config lathe.yaml: yaml:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "lathe.yaml", tt.yaml)
			t.Chdir(dir)
			_, _, err := Load("")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %s", err, tt.want)
			}
		})
	}
}

func TestAliasBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString("agents:\n  - &a {id: a, dependencies: [" + strings.Repeat("x,", 500) + "x]}\n")
	for range 200 {
		b.WriteString("  - *a\n")
	}
	_, err := Parse([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "too many values or aliases") {
		t.Fatalf("err = %v", err)
	}
}

func TestValidate(t *testing.T) {
	clearEnv(t)
	const key16 = "0123456789abcdef"
	guard := Hook{Event: "PreToolUse", Matcher: "shell", Command: "./guard"}
	tests := []struct {
		name   string
		modify func(*Config)
		want   string // "" means valid
	}{
		{"listen without port", func(c *Config) { c.Server.Listen = "127.0.0.1" }, `server.listen: "127.0.0.1" is not host:port`},
		{"listen port text", func(c *Config) { c.Server.Listen = "127.0.0.1:http" }, `server.listen: "127.0.0.1:http": port must be a number`},
		{"listen port too big", func(c *Config) { c.Server.Listen = "127.0.0.1:65536" }, `server.listen:`},
		{"listen port 0", func(c *Config) { c.Server.Listen = "127.0.0.1:0" }, ""},
		{"listen ipv6 loopback", func(c *Config) { c.Server.Listen = "[::1]:8080" }, ""},
		{"listen localhost", func(c *Config) { c.Server.Listen = "LocalHost:8080" }, ""},
		{"listen 127/8", func(c *Config) { c.Server.Listen = "127.1.2.3:8080" }, ""},
		{"cors origin ok", func(c *Config) { c.Server.CORSOrigins = []string{"https://a.example:8443", "http://x"} }, ""},
		{"cors path", func(c *Config) { c.Server.CORSOrigins = []string{"https://a.example/"} }, `server.cors_origins[0]: must be an origin only`},
		{"cors relative", func(c *Config) { c.Server.CORSOrigins = []string{"http://x", "a.example"} }, `server.cors_origins[1]: must be an http`},
		{"cors ftp", func(c *Config) { c.Server.CORSOrigins = []string{"ftp://a"} }, `server.cors_origins[0]: must be an http`},
		{"cors star", func(c *Config) { c.Server.CORSOrigins = []string{"*"} }, `server.cors_origins[0]`},
		{"rate rps", func(c *Config) { c.Server.RateLimit = RateLimit{true, 0, 1} }, `server.rate_limit.requests_per_second: must be greater than 0`},
		{"rate burst", func(c *Config) { c.Server.RateLimit = RateLimit{true, 1, 0} }, `server.rate_limit.burst: must be at least 1`},
		{"rate disabled ignores values", func(c *Config) { c.Server.RateLimit = RateLimit{false, 0, 0} }, ""},
		{"empty api key", func(c *Config) { c.Server.APIKeys = Secrets("") }, `server.api_keys[0]: empty value`},
		{"empty bearer", func(c *Config) { c.Server.BearerTokens = Secrets(key16, "") }, `server.bearer_tokens[1]: empty value`},
		{"short key", func(c *Config) { c.Server.APIKeys = Secrets("short") }, `server.api_keys[0]: weak secret`},
		{"padded key", func(c *Config) { c.Server.APIKeys = Secrets(" " + key16) }, `server.api_keys[0]: starts or ends with whitespace`},
		{"good key", func(c *Config) { c.Server.APIKeys = Secrets(key16) }, ""},
		{"nats listen", func(c *Config) { c.NATS.Listen = "4222" }, `nats.listen: "4222" is not host:port`},
		{"nats listen ok", func(c *Config) { c.NATS.Listen = "127.0.0.1:4222" }, ""},
		// Issue 23, finding 4: NATS credentials.
		{"nats listen with keys and no credentials", func(c *Config) { c.NATS.Listen = "127.0.0.1:4222"; c.Server.APIKeys = Secrets(key16) },
			`nats.listen: server credentials are configured, so the NATS listener needs nats.user and nats.password`},
		{"nats listen with keys and credentials", func(c *Config) {
			c.NATS = NATS{Listen: "127.0.0.1:4222", User: "feed", Password: key16}
			c.Server.APIKeys = Secrets(key16)
		}, ""},
		{"nats listen beyond loopback", func(c *Config) { c.NATS.Listen = "0.0.0.0:4222" }, `nats.listen: "0.0.0.0:4222" is not a loopback address`},
		{"nats listen beyond loopback with credentials", func(c *Config) { c.NATS = NATS{Listen: "0.0.0.0:4222", User: "feed", Password: key16} }, ""},
		{"nats user alone", func(c *Config) { c.NATS = NATS{Listen: "127.0.0.1:4222", User: "feed"} }, `nats.user: nats.user and nats.password go together`},
		{"nats weak password", func(c *Config) { c.NATS = NATS{Listen: "127.0.0.1:4222", User: "feed", Password: "short"} }, `nats.password: weak secret`},
		// Issue 32, finding 10: a user of its own per feed; its name names its inboxes.
		{"nats users", func(c *Config) {
			c.NATS = NATS{Listen: "0.0.0.0:4222", User: "feed", Password: key16, Users: []NATSUser{{"audit", key16}, {"ci-feed_2", key16}}}
		}, ""},
		{"nats users alone are credentials", func(c *Config) {
			c.NATS = NATS{Listen: "0.0.0.0:4222", Users: []NATSUser{{"audit", key16}}}
			c.Server.APIKeys = Secrets(key16)
		}, ""},
		{"nats users weak password", func(c *Config) { c.NATS = NATS{Listen: "127.0.0.1:4222", Users: []NATSUser{{"audit", "short"}}} }, `nats.users[0].password: weak secret`},
		{"nats users twice", func(c *Config) {
			c.NATS = NATS{Listen: "127.0.0.1:4222", User: "feed", Password: key16, Users: []NATSUser{{"audit", key16}, {"feed", key16}}}
		}, `nats.users[1].user: "feed" names another NATS user too`},
		{"nats user with a dot", func(c *Config) { c.NATS = NATS{Listen: "127.0.0.1:4222", User: "feed.a", Password: key16} }, `nats.user: "feed.a" must be 1 to 64 letters`},
		{"nats user wildcard", func(c *Config) { c.NATS = NATS{Listen: "127.0.0.1:4222", Users: []NATSUser{{"*", key16}}} }, `nats.users[0].user: "*" must be`},
		{"nats user reserved", func(c *Config) { c.NATS = NATS{Listen: "127.0.0.1:4222", Users: []NATSUser{{"lathe-daemon", key16}}} }, `other than lathe-daemon`},
		{"nats users without listen", func(c *Config) { c.NATS = NATS{Users: []NATSUser{{"audit", key16}}} }, `nats.users[0].user: credentials without nats.listen`},
		{"mcp files_dir relative", func(c *Config) { c.MCP.FilesDir = "mcp" }, `mcp.files_dir: "mcp" must be an absolute, clean path`},
		{"mcp files_dir ok", func(c *Config) { c.MCP.FilesDir = "/srv/lathe-mcp" }, ""},
		{"nats credentials without listen", func(c *Config) { c.NATS = NATS{User: "feed", Password: key16} }, `nats.user: credentials without nats.listen`},
		{"provider kind", func(c *Config) { c.Providers["local"] = Provider{Kind: "llama", BaseURL: "http://h"} }, `providers.local.kind: "llama" is not one of`},
		{"provider base_url missing", func(c *Config) { c.Providers["local"] = Provider{Kind: KindOpenAI} }, `providers.local.base_url: must be an absolute`},
		{"provider base_url relative", func(c *Config) { c.Providers["local"] = Provider{Kind: KindOllama, BaseURL: "127.0.0.1:11434"} }, `providers.local.base_url`},
		{"anthropic without base_url", func(c *Config) { c.Providers["c"] = Provider{Kind: KindAnthropic} }, ""},
		{"anthropic bad base_url", func(c *Config) { c.Providers["c"] = Provider{Kind: KindAnthropic, BaseURL: "nope"} }, `providers.c.base_url`},
		{"provider name", func(c *Config) { c.Providers["a/b"] = Provider{Kind: KindAnthropic} }, `providers[a/b]: provider names`},
		{"api_key_env holds key", func(c *Config) { c.Providers["c"] = Provider{Kind: KindAnthropic, APIKeyEnv: "sk-ant-123"} }, `providers.c.api_key_env: must be the name`},
		{"agent id missing", func(c *Config) { c.Agents[0].ID = "" }, `agents[0].id: required`},
		{"agent id shape", func(c *Config) { c.Agents[0].ID = "a.b" }, `agents[0].id: "a.b" may use only`},
		{"agent id duplicate", func(c *Config) { c.Agents = append(c.Agents, c.Agents[0]) }, `agents[1].id: duplicate id "coder" (also agents[0])`},
		{"agent provider", func(c *Config) { c.Agents[0].Provider = "nope" }, `agents[0].provider: "nope" is not a configured provider`},
		{"agent model", func(c *Config) { c.Agents[0].Model = "" }, `agents[0].model: required`},
		{"agent dependency", func(c *Config) { c.Agents[0].Dependencies = []string{""} }, `agents[0].dependencies[0]: empty value`},
		{"budget tokens", func(c *Config) { c.Agents[0].Budget.MaxOutputTokens = -1 }, `agents[0].budget.max_output_tokens: must be 0`},
		{"budget usd", func(c *Config) { c.Agents[0].Budget.MaxUSD = -0.5 }, `agents[0].budget.max_usd: must be 0`},
		{"budget usd NaN", func(c *Config) { c.Agents[0].Budget.MaxUSD = math.NaN() }, `agents[0].budget.max_usd`},
		{"price ok", func(c *Config) { c.Prices = map[string]Price{"openrouter/meta/llama-3": {0, 0}} }, ""},
		{"price key", func(c *Config) { c.Prices = map[string]Price{"gpt-4.1": {1, 1}} }, `prices[gpt-4.1]: key must have the form provider/model`},
		{"price key empty model", func(c *Config) { c.Prices = map[string]Price{"openai/": {1, 1}} }, `prices[openai/]: key must`},
		{"price input", func(c *Config) { c.Prices = map[string]Price{"a/b": {-1, 1}} }, `prices[a/b].input: must be 0 or more`},
		{"price output", func(c *Config) { c.Prices = map[string]Price{"a/b": {1, math.Inf(1)}} }, `prices[a/b].output: must be 0 or more`},
		{"sandbox provider", func(c *Config) { c.Sandbox.Provider = "docker" }, `sandbox.provider: "docker" is not one of containerd, remote`},
		{"sandbox remote", func(c *Config) { c.Sandbox.Provider = SandboxRemote; c.Sandbox.Containerd.Address = "" }, ""},
		{"sandbox address", func(c *Config) { c.Sandbox.Containerd.Address = "" }, `sandbox.containerd.address: required`},
		{"sandbox image", func(c *Config) { c.Sandbox.DefaultImage = "" }, `sandbox.default_image: required`},
		{"sandbox namespace", func(c *Config) { c.Sandbox.Containerd.Namespace = "" }, `sandbox.containerd.namespace: required`},
		{"sandbox network", func(c *Config) { c.Sandbox.Network = "bridge" }, `sandbox.network: "bridge" is not one of none, host-egress`},
		{"sandbox memory", func(c *Config) { c.Sandbox.Limits.MemoryMB = 0 }, `sandbox.limits.memory_mb: must be greater than 0`},
		{"turn steps", func(c *Config) { c.Turns.MaxSteps = 0 }, `turns.max_steps: must be greater than 0`},
		{"turn stall", func(c *Config) { c.Turns.StallTimeoutSeconds = -1 }, `turns.stall_timeout_seconds: must be greater than 0`},
		{"git author without email", func(c *Config) { c.Git.Author.Name = "Ada" }, `git.author: set both name and email, or neither`},
		{"git author with angle brackets", func(c *Config) { c.Git.Author = GitAuthor{"Ada <x>", "ada@example.org"} }, `git.author.name: must not contain <, >`},
		{"sandbox cpus", func(c *Config) { c.Sandbox.Limits.CPUs = -1 }, `sandbox.limits.cpus: must be greater than 0`},
		{"sandbox pids", func(c *Config) { c.Sandbox.Limits.PIDs = 0 }, `sandbox.limits.pids: must be greater than 0`},
		{"mcp stdio", func(c *Config) {
			c.MCP.Servers = []MCPServer{{Name: "fs", Transport: "stdio", Command: "npx", Agents: []string{"coder"}}}
		}, ""},
		{"mcp http", func(c *Config) {
			c.MCP.Servers = []MCPServer{{Name: "web", Transport: "http", URL: "http://127.0.0.1:9/mcp", Approval: "never"}}
		}, ""},
		{"mcp duplicate", func(c *Config) {
			c.MCP.Servers = []MCPServer{{Name: "a", Transport: "stdio", Command: "x"}, {Name: "a", Transport: "stdio", Command: "y"}}
		}, `mcp.servers[1].name: duplicate name "a" (also mcp.servers[0])`},
		{"mcp name", func(c *Config) { c.MCP.Servers = []MCPServer{{Name: "a__b", Transport: "stdio", Command: "x"}} }, `mcp.servers[0].name: "a__b" must be`},
		{"mcp transport", func(c *Config) { c.MCP.Servers = []MCPServer{{Name: "a", Transport: "sse", URL: "http://x"}} }, `mcp.servers[0].transport: "sse" is not one of stdio, http`},
		{"mcp command", func(c *Config) { c.MCP.Servers = []MCPServer{{Name: "a", Transport: "stdio"}} }, `mcp.servers[0].command: required`},
		{"mcp url", func(c *Config) { c.MCP.Servers = []MCPServer{{Name: "a", Transport: "http", URL: "x"}} }, `mcp.servers[0].url: must be`},
		{"mcp approval", func(c *Config) {
			c.MCP.Servers = []MCPServer{{Name: "a", Transport: "stdio", Command: "x", Approval: "ask"}}
		}, `mcp.servers[0].approval: "ask" is not one of always, never`},
		{"skill", func(c *Config) {
			c.Skills = []Skill{{ID: "triage", Name: "Triage", Emits: []string{"IncidentReported"}}}
		}, ""},
		{"skill emits nothing", func(c *Config) { c.Skills = []Skill{{ID: "triage"}} }, `skills[0].emits: lists no event type`},
		{"skill emit shape", func(c *Config) { c.Skills = []Skill{{ID: "t", Emits: []string{"a.b"}}} }, `skills[0].emits[0]: "a.b" may use only`},
		{"skill duplicate", func(c *Config) {
			c.Skills = []Skill{{ID: "t", Emits: []string{"A"}}, {ID: "t", Emits: []string{"B"}}}
		}, `skills[1].id: duplicate id "t" (also skills[0])`},
		{"lattice team", func(c *Config) {
			c.Agents = append(c.Agents, Agent{ID: "planner", Provider: "local", Model: "m"}, Agent{ID: "tester", Provider: "local", Model: "m"})
			c.Lattice = Lattice{Coordinator: "planner", Workers: []string{"coder", "tester"}}
		}, ""},
		{"lattice coordinator unknown", func(c *Config) { c.Lattice.Coordinator = "ghost" }, `lattice.coordinator: "ghost" is not a configured Agent`},
		{"lattice worker unknown", func(c *Config) { c.Lattice.Workers = []string{"ghost"} }, `lattice.workers[0]: "ghost" is not a configured Agent`},
		{"lattice worker is coordinator", func(c *Config) { c.Lattice = Lattice{Coordinator: "coder", Workers: []string{"coder"}} }, `lattice.workers[0]: "coder" is the coordinator`},
		{"lattice worker twice", func(c *Config) { c.Lattice.Workers = []string{"coder", "coder"} }, `lattice.workers[1]: "coder" is listed twice`},
		{"a2a receiver", func(c *Config) {
			c.A2A.Receivers = []A2AReceiver{{ID: "helper", AgentID: "coder", Name: "Helper", Description: "Answers"}}
		}, ""},
		{"a2a receiver of no agent", func(c *Config) { c.A2A.Receivers = []A2AReceiver{{ID: "helper", AgentID: "ghost"}} },
			`a2a.receivers[0].agent_id: "ghost" is not a configured agent`},
		{"a2a receiver duplicate", func(c *Config) {
			c.A2A.Receivers = []A2AReceiver{{ID: "h", AgentID: "coder"}, {ID: "h", AgentID: "coder"}}
		}, `a2a.receivers[1].id: duplicate id "h" (also a2a.receivers[0])`},
		{"a2a receiver id shape", func(c *Config) { c.A2A.Receivers = []A2AReceiver{{ID: "a b", AgentID: "coder"}} },
			`a2a.receivers[0].id: "a b" may use only`},
		{"mcp agents", func(c *Config) {
			c.MCP.Servers = []MCPServer{{Name: "a", Transport: "stdio", Command: "x", Agents: []string{"ghost"}}}
		}, `mcp.servers[0].agents[0]: "ghost" is not a configured Agent`},
		{"global hook", func(c *Config) { c.Hooks = []Hook{guard} }, ""},
		{"agent hook", func(c *Config) { c.Agents[0].Hooks = []Hook{{Event: "Stop", Command: "true", Host: true}} }, ""},
		{"unknown event", func(c *Config) { c.Hooks = []Hook{guard, {Event: "PreCommit", Command: "x"}} }, `hooks[1].event: "PreCommit" is not one of SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop`},
		{"empty command", func(c *Config) { c.Agents[0].Hooks = []Hook{{Event: "PostToolUse", Command: "  "}} }, `agents[0].hooks[0].command: required`},
		{"bad matcher", func(c *Config) {
			c.Hooks = []Hook{guard, guard, {Event: "PreToolUse", Matcher: "mcp__[", Command: "x"}}
		},
			"hooks[2].matcher: \"mcp__[\" is not a valid regular expression (missing closing ]: `[`)"},
		{"a glob's leading star", func(c *Config) { c.Agents[0].Hooks = []Hook{{Event: "PostToolUse", Matcher: "*_file", Command: "x"}} },
			"agents[0].hooks[0].matcher: \"*_file\" is not a valid regular expression (missing argument to repetition operator: `*`)"},
		{"Claude Code's matchers", func(c *Config) {
			c.Hooks = []Hook{{Event: "PreToolUse", Matcher: "Edit|Write", Command: "x"}, {Event: "PreToolUse", Matcher: "mcp__memory__.*", Command: "x"},
				{Event: "PostToolUse", Matcher: "*", Command: "x"}}
		}, ""},
		{"matcher on a turn event", func(c *Config) { c.Hooks = []Hook{{Event: "Stop", Matcher: "shell", Command: "x"}} }, `hooks[0].matcher: only PreToolUse and PostToolUse`},
		{"timeout", func(c *Config) { c.Hooks = []Hook{{Event: "Stop", Command: "x", TimeoutSeconds: 601}} }, `hooks[0].timeout_seconds: must be from 1 to 600`},
		{"otlp endpoint", func(c *Config) { c.Telemetry.OTLPEndpoint = "http://127.0.0.1:4318" }, ""},
		{"otlp endpoint shape", func(c *Config) { c.Telemetry.OTLPEndpoint = "127.0.0.1:4318" }, `telemetry.otlp_endpoint: must be an http`},
		{"metrics listen", func(c *Config) { c.Telemetry.MetricsListen = "127.0.0.1:9464" }, ""},
		{"metrics listen not loopback", func(c *Config) { c.Telemetry.MetricsListen = "0.0.0.0:9464" }, `telemetry.metrics_listen: "0.0.0.0:9464" must be a loopback address`},
		{"content without an endpoint", func(c *Config) { c.Telemetry.CaptureContent = true }, `telemetry.capture_content: needs telemetry.otlp_endpoint`},
		{"otlp traces URL", func(c *Config) { c.Telemetry.OTLPEndpoint = "http://127.0.0.1:4318/v1/traces" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.modify(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v\nwant it to contain %s", err, tt.want)
			}
		})
	}
}

// TestCaptureContentEnvEndpoint: an endpoint the OTLP environment names
// is one telemetry.capture_content can export to.
func TestCaptureContentEnvEndpoint(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Run(k, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(k, "http://127.0.0.1:4318")
			c := Default()
			c.Telemetry.CaptureContent = true
			if err := c.Validate(); err != nil {
				t.Fatalf("capture_content with $%s: %v", k, err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	clearEnv(t)
	c := Default()
	c.Server.Listen = "nope"
	c.Sandbox.Network = "bridge"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "server.listen") || !strings.Contains(err.Error(), "sandbox.network") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoopbackRule(t *testing.T) {
	clearEnv(t)
	const key = "a-long-enough-secret-value"
	tests := []struct {
		listen       string
		keys, tokens []string
		refused      bool
	}{
		{"0.0.0.0:8080", nil, nil, true},
		{":8080", nil, nil, true},
		{"192.168.1.5:8080", nil, nil, true},
		{"[::]:8080", nil, nil, true},
		{"lathe.example:8080", nil, nil, true},
		{"0.0.0.0:8080", []string{key}, nil, false},
		{"0.0.0.0:8080", nil, []string{key}, false},
		{"127.0.0.1:8080", nil, nil, false},
		{"[::1]:8080", nil, nil, false},
		{"localhost:8080", nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.listen, func(t *testing.T) {
			c := Default()
			c.Server.Listen, c.Server.APIKeys, c.Server.BearerTokens = tt.listen, Secrets(tt.keys...), Secrets(tt.tokens...)
			err := c.Validate()
			if !tt.refused {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "server.listen") ||
				!strings.Contains(err.Error(), "configure server.api_keys or server.bearer_tokens") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestSecretsNotInMessages(t *testing.T) {
	clearEnv(t)
	secrets := []string{"sekrit1", "  sekrit2-padded-long-enough  ", "sk-ant-sekrit3", "sekrit4pass", "sekrit5list"}
	yamlDoc := `server:
  listen: "0.0.0.0:8080"
  api_keys: ["sekrit1", ""]
  bearer_tokens: ["  sekrit2-padded-long-enough  "]
providers:
  c: {kind: anthropic, api_key_env: "sk-ant-sekrit3", base_url: "https://user:sekrit4pass@:bad"}
`
	c, err := Parse([]byte(yamlDoc))
	if err != nil {
		t.Fatal(err)
	}
	verr := c.Validate()
	if verr == nil {
		t.Fatal("want validation errors")
	}
	_, perr := Parse([]byte("server: {api_keys: sekrit5list, bearer_tokens: !!int sekrit5list}\n"))
	if perr == nil {
		t.Fatal("want decode error")
	}
	_, perr2 := Parse([]byte("server: {bearer_tokens: [!!int sekrit5list]}\n"))
	if perr2 == nil {
		t.Fatal("want decode error")
	}
	for _, err := range []error{verr, perr, perr2} {
		for _, s := range secrets {
			if strings.Contains(err.Error(), strings.TrimSpace(s)) {
				t.Errorf("message leaks %q:\n%v", s, err)
			}
		}
	}
}

func TestDataDir(t *testing.T) {
	clearEnv(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	tests := []struct{ name, flag, file, xdg, want string }{
		{"flag wins", "/f", "/c", "/x", "/f"},
		{"config next", "", "/c", "/x", "/c"},
		{"xdg next", "", "", "/x", "/x/lathe"},
		{"relative xdg ignored", "", "", "rel", filepath.Join(home, ".local/share/lathe")},
		{"home last", "", "", "", filepath.Join(home, ".local/share/lathe")},
		{"tilde expands", "", "~/data", "", filepath.Join(home, "data")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_DATA_HOME", tt.xdg)
			got, err := DataDir(tt.flag, Config{DataDir: tt.file})
			if err != nil || got != tt.want {
				t.Fatalf("DataDir = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		sample, "", "~", "- a", "server: {listen: ':1'}", "agents: [&a {id: a}, *a]",
		"prices: {a/b: {input: .nan}}", "providers: &p {x: *p}", "server:\n  listne: 1\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		_ = c.Validate()
		_ = c.AuthEnabled()
	})
}

// A credential is a bare secret or {key, name}; the name labels it in the
// audit trail.
func TestCredentialsMayCarryAName(t *testing.T) {
	c, err := Parse([]byte("server:\n  api_keys:\n    - \"0123456789abcdef\"\n    - {key: \"fedcba9876543210\", name: laptop}\n  bearer_tokens: [{key: \"abcdefabcdefabcd\"}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Credential{{Key: "0123456789abcdef"}, {Key: "fedcba9876543210", Name: "laptop"}}
	if !reflect.DeepEqual(c.Server.APIKeys, want) || !reflect.DeepEqual(Keys(c.Server.BearerTokens), []string{"abcdefabcdefabcd"}) {
		t.Errorf("api_keys %+v, bearer_tokens %+v", c.Server.APIKeys, c.Server.BearerTokens)
	}
	if _, err := Parse([]byte("server: {api_keys: [{key: \"0123456789abcdef\", label: x}]}\n")); err == nil ||
		!strings.Contains(err.Error(), "server.api_keys[0].label") {
		t.Errorf("an unknown credential field: %v", err)
	}
}
