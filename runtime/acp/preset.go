// Package acp holds what Lathe knows about the outside Agents it runs over
// the Agent Client Protocol: the presets (which npm package, which command,
// which wire to its model, which settings keep it quiet and offline) and the
// environment each needs to reach its model through Lathe's gateway.
package acp

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// The wires an outside agent speaks to its model; the gateway serves each.
const (
	ProtocolAnthropic = "anthropic" // Anthropic Messages
	ProtocolOpenAI    = "openai"    // Chat Completions
	ProtocolResponses = "responses" // OpenAI Responses
	ProtocolGemini    = "gemini"    // Gemini generateContent
)

// Protocols lists every wire, in the order the documentation gives them.
var Protocols = []string{ProtocolAnthropic, ProtocolOpenAI, ProtocolResponses, ProtocolGemini}

// Preset is one outside agent Lathe knows how to run.
type Preset struct {
	Name string
	// Package is the pinned npm spec that provides Command.
	Package string
	// Command is the package's bin, resolved by the installer.
	Command string
	// Args come before the ones [Preset.Launch] adds.
	Args     []string
	Protocol string
	// Quiet is the environment that keeps the agent from updating itself,
	// sending telemetry or fetching what it does without.
	Quiet map[string]string
	// launch adds what reaches the model through the gateway.
	launch func(g Gateway, l *Launch)
}

// Gateway is how an agent reaches its model: the gateway's root URL as seen
// from inside the sandbox, the token scoped to the agent's Session (never a
// provider key), the model to ask for, and the agent's HOME in the sandbox.
type Gateway struct {
	URL   string
	Token string
	Model string
	Home  string
}

// Launch is what Lathe adds to an agent's command line and environment.
type Launch struct {
	Args []string
	Env  map[string]string
	// Files are written under the agent's HOME (relative, slash-separated
	// paths) before it starts.
	Files map[string]string
}

// Presets are the outside agents measured in issue 34, by preset name.
var Presets = map[string]Preset{
	"claude-code": {
		Name:     "claude-code",
		Package:  "@zed-industries/claude-agent-acp@0.23.1",
		Command:  "claude-agent-acp", // node: dist/index.js
		Protocol: ProtocolAnthropic,
		Quiet: map[string]string{
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			"DISABLE_AUTOUPDATER":                      "1",
			"DISABLE_TELEMETRY":                        "1",
			"DISABLE_ERROR_REPORTING":                  "1",
			"DISABLE_BUG_COMMAND":                      "1",
			// It refuses any other value when it runs as root.
			"IS_SANDBOX": "1",
		},
		launch: func(g Gateway, l *Launch) {
			l.Env["ANTHROPIC_SMALL_FAST_MODEL"] = g.Model
			l.Env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] = g.Model
		},
	},
	"opencode": {
		Name:     "opencode",
		Package:  "opencode-ai@1.18.33",
		Command:  "opencode-linux-x64/bin/opencode", // its bin is made by an install script, which Lathe never runs
		Args:     []string{"acp"},
		Protocol: ProtocolOpenAI,
		Quiet: map[string]string{
			"OPENCODE_DISABLE_MODELS_FETCH":    "1",
			"OPENCODE_DISABLE_AUTOUPDATE":      "1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD":    "1",
			"OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
			"OPENCODE_DISABLE_SHARE":           "1",
		},
		launch: func(g Gateway, l *Launch) {
			l.Env["OPENCODE_CONFIG_CONTENT"] = opencodeConfig(g)
		},
	},
	"codex": {
		Name:     "codex",
		Package:  "@zed-industries/codex-acp@0.16.0",
		Command:  "codex-acp",
		Protocol: ProtocolResponses,
		launch: func(g Gateway, l *Launch) {
			l.Args = append(l.Args,
				"-c", `model_provider="p"`,
				"-c", "model="+tomlString(g.Model),
				"-c", `model_providers.p.name="p"`,
				"-c", "model_providers.p.base_url="+tomlString(strings.TrimSuffix(g.URL, "/")+"/v1"),
				"-c", `model_providers.p.env_key="P_KEY"`,
				"-c", `model_providers.p.wire_api="responses"`,
				// Lathe's sandbox is the boundary; its own needs bwrap.
				"-c", `sandbox_mode="danger-full-access"`,
				// Lathe answers its questions: every command is asked.
				"-c", `approval_policy="untrusted"`,
				"-c", "analytics.enabled=false",
				"-c", "feedback.enabled=false",
				"-c", "check_for_update_on_startup=false",
			)
			l.Env["P_KEY"] = g.Token
			// It refuses to create its helper binaries under a temp dir.
			// HOME itself: it must exist, and nothing creates a folder in
			// the sandbox before the agent starts.
			l.Env["CODEX_HOME"] = g.Home
		},
	},
	"gemini": {
		Name:     "gemini",
		Package:  "@google/gemini-cli@0.61.0",
		Command:  "gemini",
		Args:     []string{"--acp"},
		Protocol: ProtocolGemini,
		Quiet: map[string]string{
			"GEMINI_CLI_TRUST_WORKSPACE": "true",
			"GEMINI_TELEMETRY_ENABLED":   "false",
			"GEMINI_CLI_NO_RELAUNCH":     "true",
		},
		launch: func(g Gateway, l *Launch) {
			l.Args = append(l.Args, "-m", g.Model)
			// 0.61.0's own names: it rewrites a file with older ones.
			l.Files[".gemini/settings.json"] = `{"privacy":{"usageStatisticsEnabled":false},` +
				`"telemetry":{"enabled":false},"general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false}}`
		},
	},
}

// PresetNames lists the presets, sorted.
func PresetNames() []string { return slices.Sorted(maps.Keys(Presets)) }

// Launch returns what an agent with this preset (or, for an agent
// configured without one, the zero Preset) speaking protocol needs to reach
// its model through g: the gateway's URL and token in the variables its
// wire's client reads, then the preset's quiet settings and its own.
func (p Preset) Launch(protocol string, g Gateway) Launch {
	l := Launch{Args: slices.Clone(p.Args), Env: map[string]string{}, Files: map[string]string{}}
	root := strings.TrimSuffix(g.URL, "/")
	switch protocol {
	case ProtocolAnthropic:
		l.Env["ANTHROPIC_BASE_URL"] = root
		l.Env["ANTHROPIC_API_KEY"] = g.Token
	case ProtocolOpenAI, ProtocolResponses:
		l.Env["OPENAI_BASE_URL"] = root + "/v1"
		l.Env["OPENAI_API_KEY"] = g.Token
	case ProtocolGemini:
		l.Env["GOOGLE_GEMINI_BASE_URL"] = root
		l.Env["GEMINI_API_KEY"] = g.Token
	}
	maps.Copy(l.Env, p.Quiet)
	if p.launch != nil {
		p.launch(g, &l)
	}
	return l
}

// Reserved reports whether an agent's configured env may not name the
// variable: a provider key's or a base URL's, or one Lathe sets itself.
func Reserved(name string) bool {
	for _, suffix := range []string{"_API_KEY", "_BASE_URL", "_AUTH_TOKEN"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return name == "PATH" || name == "HOME" || setByLathe[name]
}

// setByLathe is every variable some Launch sets.
var setByLathe = func() map[string]bool {
	set := map[string]bool{}
	for _, p := range Presets {
		for _, proto := range Protocols {
			for k := range p.Launch(proto, Gateway{}).Env {
				set[k] = true
			}
		}
	}
	return set
}()

// opencodeConfig is opencode's configuration for one provider, p, behind
// the gateway, with the model for both its turns and its titles, and every
// edit and command asked for (so each arrives as a permission request).
func opencodeConfig(g Gateway) string {
	type model struct {
		ToolCall bool `json:"tool_call,omitempty"`
	}
	cfg := map[string]any{
		"model":       "p/" + g.Model,
		"small_model": "p/" + g.Model,
		"autoupdate":  false,
		"share":       "disabled",
		"permission":  map[string]string{"edit": "ask", "bash": "ask"},
		"provider": map[string]any{"p": map[string]any{
			"npm":     "@ai-sdk/openai-compatible",
			"options": map[string]string{"baseURL": strings.TrimSuffix(g.URL, "/") + "/v1", "apiKey": g.Token},
			"models":  map[string]model{g.Model: {ToolCall: true}},
		}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // maps of strings and bools always encode
	}
	return string(b)
}

// tomlString quotes s as a TOML basic string, as codex's -c values are TOML.
func tomlString(s string) string {
	b, err := json.Marshal(s) // JSON's escapes are TOML's for these strings
	if err != nil {
		panic(err)
	}
	return string(b)
}
