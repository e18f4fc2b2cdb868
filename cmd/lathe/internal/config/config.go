// Package config loads, defaults and validates Lathe's YAML configuration.
//
// The keys fixed by CONTRACT.md are mirrored one to one by [Config]. Lathe adds
// these keys of its own:
//
//	data_dir: ""                          # optional; see DataDir for the fallback order
//	sandbox:
//	  auto_approve_devcontainer_setup: false
//	  network: none                       # none | host-egress
//	  limits: {memory_mb: 2048, cpus: 2, pids: 1024}
//	turns:
//	  max_steps: 50                       # model inferences per Session turn
//	  stall_timeout_seconds: 120          # an inference silent this long fails the turn
//	git:
//	  author: {name: "", email: ""}       # the commit identity of Source Control commits;
//	                                      # empty: the daemon user's `git config --global
//	                                      # user.name`/`user.email`, read at start
//
// A file is decoded on top of [Default]: an absent key keeps its default, and a
// mapping such as server or sandbox is merged key by key. Lists and name-keyed
// maps (agents, providers, prices, api_keys, …) are replaced as a whole: a file
// that defines providers or agents drops the built-in "local" provider and
// "coder" agent.
//
// Decoding is strict: an unknown key, a duplicate key or a value of the wrong
// type stops start-up with an error that names the dotted key and its line.
// The YAML library (go.yaml.in/yaml/v4) decodes and enforces all of it
// (WithKnownFields, WithUniqueKeys, merge keys off, a cap of 65,536 values
// with aliases expanded); it reports where it failed but not the key, so
// explain finds the key at that line and column in the node tree, and says
// what the key wants without quoting a value that could be a secret. A
// boolean key reads YAML 1.1's words too (yes, no, on, off), as the library
// does; a quoted '4' is no integer and 1.5 no integer either.
// Load does not validate, so that the caller can apply flag overrides first and
// then call [Config.Validate].
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"

	"lathe/runtime/acp"
)

// Config is the whole configuration file.
type Config struct {
	Server    Server              `yaml:"server"`
	NATS      NATS                `yaml:"nats"`
	Providers map[string]Provider `yaml:"providers"`
	Agents    []Agent             `yaml:"agents"`
	// Prices maps "provider/model" to its price. A model missing here has an
	// unknown price.
	Prices  map[string]Price `yaml:"prices"`
	Sandbox Sandbox          `yaml:"sandbox"`
	Turns   Turns            `yaml:"turns"`
	MCP     MCP              `yaml:"mcp"`
	Skills  []Skill          `yaml:"skills"`
	Lattice Lattice          `yaml:"lattice"`
	Git     Git              `yaml:"git"`
	// A2A configures the inbound agent-to-agent receivers.
	A2A A2A `yaml:"a2a"`
	// Hooks run for every Agent at fixed points of the turn loop; an
	// Agent's own Hooks add to them (hooks.go).
	Hooks []Hook `yaml:"hooks"`
	// Telemetry configures the OpenTelemetry trace export (hooks.go).
	Telemetry Telemetry `yaml:"telemetry"`
	// DataDir overrides the default data directory; see [DataDir].
	DataDir string `yaml:"data_dir"`
}

// Server configures the HTTP listener, browser origins and authentication.
type Server struct {
	Listen string `yaml:"listen"`
	// CORSOrigins lists cross-origin browser origins allowed to write. Empty
	// means same-origin workbench only.
	CORSOrigins []string `yaml:"cors_origins"`
	// APIKeys are accepted x-api-key values. Secret.
	APIKeys []Credential `yaml:"api_keys"`
	// BearerTokens are accepted "Authorization: Bearer" values. Secret.
	BearerTokens []Credential `yaml:"bearer_tokens"`
	RateLimit    RateLimit    `yaml:"rate_limit"`
}

// Credential is one accepted secret: a string, or {key, name} where the
// name labels the credential in the audit trail (the secret never appears
// there; its fingerprint does).
type Credential struct {
	Key  string `yaml:"key"`
	Name string `yaml:"name"`
}

// Secrets returns bare credentials (no names) for keys.
func Secrets(keys ...string) []Credential {
	out := make([]Credential, len(keys))
	for i, k := range keys {
		out[i] = Credential{Key: k}
	}
	return out
}

// Keys returns the secrets of creds.
func Keys(creds []Credential) []string {
	out := make([]string, len(creds))
	for i, c := range creds {
		out[i] = c.Key
	}
	return out
}

// RateLimit configures per-client-IP rate limiting of the control router.
type RateLimit struct {
	Enabled           bool    `yaml:"enabled"`
	RequestsPerSecond float64 `yaml:"requests_per_second"`
	Burst             int     `yaml:"burst"`
}

// NATS configures the embedded NATS server.
type NATS struct {
	// Listen is empty for in-process only, or host:port to expose the subjects.
	Listen string `yaml:"listen"`
	// User and Password are what an outside NATS connection must give.
	// They are required when Listen is set and server credentials are
	// configured, and for a Listen beyond loopback. Password is secret.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// Users are more outside users, each with credentials of its own and
	// so inboxes of its own (journal/bus.InboxPrefix): a feed reads only
	// the replies to its own user's requests. Give each feed its user.
	Users []NATSUser `yaml:"users"`
}

// NATSUser is one outside NATS user. Password is secret.
type NATSUser struct {
	User     string `yaml:"user"`
	Password string `yaml:"password"`
}

// OutsideUsers are every outside user: nats.user first, then nats.users.
func (n NATS) OutsideUsers() []NATSUser {
	out := []NATSUser{}
	if n.User != "" || n.Password != "" {
		out = append(out, NATSUser{n.User, n.Password})
	}
	return append(out, n.Users...)
}

// Provider kinds.
const (
	KindOllama    = "ollama"
	KindOpenAI    = "openai"
	KindAnthropic = "anthropic"
)

// Provider is one model server.
type Provider struct {
	Kind    string `yaml:"kind"`
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable that holds the key; the key
	// itself never appears in the file.
	APIKeyEnv string `yaml:"api_key_env"`
}

// Agent is one configured Agent.
type Agent struct {
	ID           string   `yaml:"id"`
	Name         string   `yaml:"name"`
	Provider     string   `yaml:"provider"`
	Model        string   `yaml:"model"`
	Prompt       string   `yaml:"prompt"`
	Dependencies []string `yaml:"dependencies"`
	Budget       Budget   `yaml:"budget"`
	// Hooks run for this Agent's turns after the global ones.
	Hooks []Hook `yaml:"hooks"`
	// Kind is KindLathe (empty means it: the built-in tool loop) or KindACP
	// (an outside agent over the Agent Client Protocol, configured by ACP).
	Kind string `yaml:"kind"`
	ACP  *ACP   `yaml:"acp"`
}

// The kinds of Agent.
const (
	KindLathe = "lathe"
	KindACP   = "acp"
)

// ACP configures an outside agent (CONTRACT.md, "Outside Agents"): a Preset,
// or a Package (a pinned npm spec), Command and Protocol. Args and Env add
// to a preset's.
type ACP struct {
	Preset   string            `yaml:"preset"`
	Package  string            `yaml:"package"`
	Command  string            `yaml:"command"`
	Args     []string          `yaml:"args"`
	Env      map[string]string `yaml:"env"`
	Protocol string            `yaml:"protocol"`
}

// Resolved is a with its preset's package, command, protocol and quiet
// environment filled in, the preset's args before a's and a's env over the
// preset's. Without a preset it is a as it is.
func (a ACP) Resolved() ACP {
	p, ok := acp.Presets[a.Preset]
	if !ok {
		return a
	}
	env := maps.Clone(p.Quiet)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, a.Env)
	return ACP{
		Preset: a.Preset, Package: p.Package, Command: p.Command,
		Args: append(slices.Clone(p.Args), a.Args...), Env: env, Protocol: p.Protocol,
	}
}

// MCP is the MCP servers connected at start (CONTRACT.md); catalog installs
// add to the live registry only.
type MCP struct {
	Servers []MCPServer `yaml:"servers"`
	// FilesDir is where a catalog server's files (the memory graph's
	// memory_file) must lie; empty means <data dir>/mcp.
	FilesDir string `yaml:"files_dir"`
}

// MCPServer is one configured MCP server.
type MCPServer struct {
	// Name is unique; its tools reach models as mcp__<name>__<tool>.
	Name string `yaml:"name"`
	// Transport is stdio or http (streamable HTTP).
	Transport string `yaml:"transport"`
	// Command and Args run a stdio server on the daemon host, with Env
	// added to its environment.
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	// URL is an http server's endpoint.
	URL string `yaml:"url"`
	// Approval is always (the default: each call waits for a decision
	// unless a saved one covers it) or never.
	Approval string `yaml:"approval"`
	// Agents get its tools; empty means every Agent.
	Agents []string `yaml:"agents"`
}

// Skill is one configured Skill: firing it publishes every event type in
// Emits as a typed event.
type Skill struct {
	ID          string   `yaml:"id"`
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Emits       []string `yaml:"emits"`
}

// Lattice is the team of lattice Sessions (CONTRACT.md).
type Lattice struct {
	// Coordinator is the Agent that plans and synthesises lattice turns;
	// empty: a lattice turn needs target_agent.
	Coordinator string `yaml:"coordinator"`
	// Workers are the Worker Agent IDs; empty: every Agent but the
	// coordinator.
	Workers []string `yaml:"workers"`
}

// A2A is the inbound A2A task receiver (CONTRACT.md: a2a.receivers).
type A2A struct {
	Receivers []A2AReceiver `yaml:"receivers"`
}

// A2AReceiver is one inbound A2A target: a skill on the agent card, run
// by AgentID.
type A2AReceiver struct {
	ID          string `yaml:"id"`
	AgentID     string `yaml:"agent_id"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// Turns bounds the Session turn loop.
type Turns struct {
	MaxSteps            int `yaml:"max_steps"`
	StallTimeoutSeconds int `yaml:"stall_timeout_seconds"`
}

// Budget limits an Agent. Zero means unlimited.
type Budget struct {
	MaxOutputTokens int     `yaml:"max_output_tokens"`
	MaxUSD          float64 `yaml:"max_usd"`
}

// Price is in USD per million tokens.
type Price struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
}

// Sandbox providers and networks.
const (
	SandboxContainerd = "containerd"
	SandboxRemote     = "remote"

	NetworkNone       = "none"
	NetworkHostEgress = "host-egress"
)

// Sandbox configures where Session environments run.
type Sandbox struct {
	Provider     string     `yaml:"provider"`
	DefaultImage string     `yaml:"default_image"`
	Containerd   Containerd `yaml:"containerd"`
	// Remote is the Docker Engine of provider remote.
	Remote Remote `yaml:"remote"`
	// AutoApproveDevcontainerSetup is the operator default for running the
	// exact devcontainer setup command without review.
	AutoApproveDevcontainerSetup bool   `yaml:"auto_approve_devcontainer_setup"`
	Network                      string `yaml:"network"`
	Limits                       Limits `yaml:"limits"`
}

// Git configures the Session Git routes.
type Git struct {
	// Author signs the commits Source Control makes in a repository that
	// names no user.name and user.email of its own. Empty: the daemon user's
	// global git identity, read at start; with neither, commits are refused
	// with a message naming both ways to set one.
	Author GitAuthor `yaml:"author"`
}

// GitAuthor is a commit identity.
type GitAuthor struct {
	Name  string `yaml:"name"`
	Email string `yaml:"email"`
}

// Containerd locates the containerd daemon.
type Containerd struct {
	Address   string `yaml:"address"`
	Namespace string `yaml:"namespace"`
}

// The remote provider's engines.
const EngineDocker = "docker"

// Remote locates the Docker Engine API endpoint of provider remote.
type Remote struct {
	// Engine is the API spoken: "docker" (dockerd, or Podman's service).
	Engine string `yaml:"engine"`
	// Host is unix:///PATH, tcp://HOST:PORT or ssh://[USER@]HOST[:PORT].
	Host string    `yaml:"host"`
	TLS  RemoteTLS `yaml:"tls"`
	// Template is the one image every remote Session runs; empty means
	// sandbox.default_image (see Sandbox.Template).
	Template string `yaml:"template"`
}

// RemoteTLS names the PEM files of a tcp:// host's TLS: the CA of the
// engine's certificate, and the client certificate and key it requires.
type RemoteTLS struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Template is the image of remote Sessions: remote.template, or else the
// default image.
func (s Sandbox) Template() string {
	if s.Remote.Template != "" {
		return s.Remote.Template
	}
	return s.DefaultImage
}

// DefaultDockerHost is the remote provider's host unless $LATHE_DOCKER is set.
const DefaultDockerHost = "unix:///var/run/docker.sock"

// Limits bound each sandbox container.
type Limits struct {
	MemoryMB int     `yaml:"memory_mb"`
	CPUs     float64 `yaml:"cpus"`
	PIDs     int     `yaml:"pids"`
}

// DefaultContainerdAddress is used unless $LATHE_CONTAINERD is set.
const DefaultContainerdAddress = "/run/containerd/containerd.sock"

// Default returns the built-in configuration. $LATHE_CONTAINERD, when set,
// replaces the default containerd address (a file value still wins).
func Default() Config {
	addr := DefaultContainerdAddress
	if env := os.Getenv("LATHE_CONTAINERD"); env != "" {
		addr = env
	}
	dockerHost := DefaultDockerHost
	if env := os.Getenv("LATHE_DOCKER"); env != "" {
		dockerHost = env
	}
	return Config{
		Server: Server{
			Listen:    "127.0.0.1:8080",
			RateLimit: RateLimit{Enabled: false, RequestsPerSecond: 20, Burst: 40},
		},
		Providers: map[string]Provider{
			"local": {Kind: KindOllama, BaseURL: "http://127.0.0.1:11434"},
		},
		Agents: []Agent{{
			ID:       "coder",
			Name:     "Coder",
			Provider: "local",
			Model:    "qwen2.5-coder:7b",
			Prompt: "You are a careful software engineer. Read the code before you change it, " +
				"make small focused changes, run the tests, and explain what you did and why.",
		}},
		Sandbox: Sandbox{
			Provider:     SandboxContainerd,
			DefaultImage: "docker.io/library/buildpack-deps:bookworm-scm",
			Containerd:   Containerd{Address: addr, Namespace: "lathe"},
			Remote:       Remote{Engine: EngineDocker, Host: dockerHost},
			Network:      NetworkNone,
			Limits:       Limits{MemoryMB: 2048, CPUs: 2, PIDs: 1024},
		},
		Turns: Turns{MaxSteps: 50, StallTimeoutSeconds: 120},
	}
}

// AuthEnabled reports whether any API key or bearer token is configured.
// Without one the daemon runs in unauthenticated loopback mode.
func (c Config) AuthEnabled() bool {
	return len(c.Server.APIKeys) > 0 || len(c.Server.BearerTokens) > 0
}

// Load finds and decodes the configuration file. It looks at explicitPath
// (the --config flag), then $LATHE_CONFIG, then ./lathe.yaml if it exists.
// With none of them it returns Default() and an empty path. A path named by
// the flag or the variable must exist. Load returns the path it used.
func Load(explicitPath string) (Config, string, error) {
	path, err := find(explicitPath)
	switch {
	case err != nil:
		return Config{}, path, err
	case path == "":
		return Default(), "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, path, fmt.Errorf("config %s: %w", path, err)
	}
	c, err := Parse(data)
	if err != nil {
		return Config{}, path, fmt.Errorf("config %s: %w", path, err)
	}
	return c, path, nil
}

// find applies the lookup order of Load.
func find(explicit string) (string, error) {
	for _, cand := range []struct{ path, source string }{
		{explicit, "--config"},
		{os.Getenv("LATHE_CONFIG"), "$LATHE_CONFIG"},
	} {
		if cand.path == "" {
			continue
		}
		if _, err := os.Stat(cand.path); errors.Is(err, fs.ErrNotExist) {
			return cand.path, fmt.Errorf("config %s (named by %s): %w", cand.path, cand.source, fs.ErrNotExist)
		}
		return cand.path, nil
	}
	const local = "lathe.yaml"
	switch _, err := os.Stat(local); {
	case err == nil:
		return local, nil
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	default:
		return local, fmt.Errorf("config %s: %w", local, err)
	}
}

// Parse decodes YAML on top of Default(). An empty document yields the
// defaults. It does not validate.
func Parse(data []byte) (Config, error) {
	c := Default()
	l, err := yaml.NewLoader(bytes.NewReader(data), strict...)
	if err != nil {
		return Config{}, err
	}
	var doc yaml.Node
	if err := l.Load(&doc); errors.Is(err, io.EOF) {
		return c, nil
	} else if err != nil {
		return Config{}, explain(err, nil)
	}
	var extra yaml.Node
	if err := l.Load(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return Config{}, explain(err, nil)
		}
		return Config{}, fmt.Errorf("more than one YAML document (line %d)", extra.Line)
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return c, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return Config{}, fmt.Errorf("top level must be a mapping of keys (line %d)", root.Line)
	}
	// The library merges a mapping into a map that has entries: a file's
	// providers replace the built-in one instead.
	if hasKey(root, "providers") {
		c.Providers = nil
	}
	if err := root.Load(&c, strict...); err != nil {
		return Config{}, explain(err, root)
	}
	return c, nil
}

// DataDir picks the data directory: the --data flag, else c.DataDir, else
// $XDG_DATA_HOME/lathe, else ~/.local/share/lathe. A leading "~/" is expanded
// and the result is absolute.
func DataDir(flag string, c Config) (string, error) {
	dir := flag
	if dir == "" {
		dir = c.DataDir
	}
	if dir == "" {
		if xdg := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(xdg) {
			dir = filepath.Join(xdg, "lathe")
		} else {
			dir = filepath.Join("~", ".local", "share", "lathe")
		}
	}
	if dir == "~" || strings.HasPrefix(dir, "~"+string(filepath.Separator)) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("data dir: %w (set --data or data_dir)", err)
		}
		dir = filepath.Join(home, dir[1:])
	}
	return filepath.Abs(dir)
}
