package config

import (
	"slices"
	"strings"
	"testing"
)

// An outside Agent from the YAML of CONTRACT.md: a preset resolves to its
// package, command, args, protocol and quiet settings, with the Agent's own
// args after the preset's and its env over the preset's.
func TestParseOutsideAgent(t *testing.T) {
	clearEnv(t)
	c, err := Parse([]byte(`
providers:
  claude: {kind: anthropic, api_key_env: ANTHROPIC_KEY}
agents:
  - id: claude-code
    name: Claude Code
    kind: acp
    acp:
      preset: claude-code
      args: [--verbose]
      env: {RUST_LOG: info, LANG: C.UTF-8}
    provider: claude
    model: claude-sonnet-4-6
  - id: mine
    kind: acp
    acp:
      package: "opencode-ai@1.18.33"
      command: opencode
      args: [acp]
      protocol: openai
    provider: claude
    model: m
  - id: built-in
    provider: claude
    model: m
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	a := c.Agents[0]
	if a.Kind != KindACP || a.ACP == nil {
		t.Fatalf("agent = %+v", a)
	}
	r := a.ACP.Resolved()
	if r.Package != "@zed-industries/claude-agent-acp@0.23.1" || r.Command != "claude-agent-acp" || r.Protocol != "anthropic" ||
		!slices.Equal(r.Args, []string{"--verbose"}) {
		t.Errorf("resolved claude-code = %+v", r)
	}
	if r.Env["RUST_LOG"] != "info" || r.Env["LANG"] != "C.UTF-8" || r.Env["IS_SANDBOX"] != "1" || r.Env["DISABLE_AUTOUPDATER"] != "1" {
		t.Errorf("resolved env = %v", r.Env)
	}
	if m := c.Agents[1].ACP.Resolved(); m.Package != "opencode-ai@1.18.33" || m.Command != "opencode" || m.Protocol != "openai" || !slices.Equal(m.Args, []string{"acp"}) {
		t.Errorf("resolved explicit = %+v", m)
	}
	if c.Agents[2].Kind != "" || c.Agents[2].ACP != nil {
		t.Errorf("built-in = %+v", c.Agents[2])
	}
	for _, name := range []string{"opencode", "codex", "gemini"} {
		if r := (ACP{Preset: name}).Resolved(); r.Package == "" || r.Command == "" || r.Protocol == "" {
			t.Errorf("preset %s resolves to %+v", name, r)
		}
	}
}

func TestLoadErrorsOutsideAgent(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown acp key", "agents:\n  - id: a\n    kind: acp\n    acp: {preset: codex, modle: x}\n", `unknown key "agents[0].acp.modle" (line 4)`},
		{"args not a list", "agents:\n  - id: a\n    acp: {args: x}\n", `agents[0].acp.args: want a list, got a single value`},
		{"env not a mapping", "agents:\n  - id: a\n    acp: {env: [a]}\n", `agents[0].acp.env: want a mapping, got a list`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to contain %s", err, tc.want)
			}
		})
	}
}

func TestValidateOutsideAgent(t *testing.T) {
	clearEnv(t)
	preset := func(name string) func(c *Config) {
		return func(c *Config) { c.Agents[0].Kind, c.Agents[0].ACP = KindACP, &ACP{Preset: name} }
	}
	with := func(x ACP) func(c *Config) {
		return func(c *Config) { c.Agents[0].Kind, c.Agents[0].ACP = KindACP, &x }
	}
	explicit := ACP{Package: "opencode-ai@1.18.33", Command: "opencode", Protocol: "openai"}
	edit := func(f func(*ACP)) func(c *Config) {
		x := explicit
		f(&x)
		return with(x)
	}
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"kind lathe", func(c *Config) { c.Agents[0].Kind = KindLathe }, ""},
		{"kind unknown", func(c *Config) { c.Agents[0].Kind = "mcp" }, `agents[0].kind: "mcp" is not one of lathe, acp`},
		{"acp block on a lathe agent", func(c *Config) { c.Agents[0].ACP = &ACP{Preset: "codex"} }, `agents[0].acp: only for kind: acp`},
		{"acp without block", func(c *Config) { c.Agents[0].Kind = KindACP }, `agents[0].acp: required for kind: acp`},
		{"preset claude-code", preset("claude-code"), ""},
		{"preset codex", preset("codex"), ""},
		{"preset opencode", preset("opencode"), ""},
		{"preset gemini", preset("gemini"), ""},
		{"explicit gemini", with(ACP{Command: "gemini", Args: []string{"--acp"}, Protocol: "gemini"}), ""},
		{"preset unknown", preset("aider"), `agents[0].acp.preset: "aider" is not one of claude-code, codex, gemini, opencode`},
		{"preset and package", with(ACP{Preset: "codex", Package: "x@1.0.0"}), `agents[0].acp.package: set by the preset`},
		{"preset and command", with(ACP{Preset: "codex", Command: "x"}), `agents[0].acp.command: set by the preset`},
		{"preset and protocol", with(ACP{Preset: "codex", Protocol: "openai"}), `agents[0].acp.protocol: set by the preset`},
		{"preset with args and env", with(ACP{Preset: "codex", Args: []string{"-c", "x=1"}, Env: map[string]string{"RUST_LOG": "info"}}), ""},
		{"explicit", with(explicit), ""},
		{"command on the image", with(ACP{Command: "my-agent", Protocol: "responses"}), ""},
		{"absolute command on the image", with(ACP{Command: "/opt/agent/bin/run", Protocol: "responses"}), ""},
		{"relative path command", with(ACP{Command: "bin/run", Protocol: "gemini"}), `agents[0].acp.command: "bin/run" must be a program name on the image's PATH or an absolute, clean path`},
		{"unclean command", with(ACP{Command: "/opt/../bin/run", Protocol: "gemini"}), `agents[0].acp.command: "/opt/../bin/run" must be`},
		{"path command with a package", edit(func(x *ACP) { x.Command = "/usr/bin/opencode" }), `agents[0].acp.command: "/usr/bin/opencode" must be one of the package's bin names`},
		{"escaping command with a package", edit(func(x *ACP) { x.Command = "../x/bin" }), `agents[0].acp.command: "../x/bin" must be one of the package's bin names`},
		{"path inside the package", edit(func(x *ACP) { x.Command = "opencode-linux-x64/bin/opencode" }), ""},
		{"command missing", edit(func(x *ACP) { x.Command = "" }), `agents[0].acp.command: required without a preset`},
		{"command with NUL", edit(func(x *ACP) { x.Command = "a\x00b" }), `agents[0].acp.command: must be a program name`},
		{"package range", edit(func(x *ACP) { x.Package = "opencode-ai@^1.18.33" }), `agents[0].acp.package: not a pinned npm package spec`},
		{"package tag", edit(func(x *ACP) { x.Package = "opencode-ai@latest" }), `agents[0].acp.package: not a pinned npm package spec`},
		{"package unpinned", edit(func(x *ACP) { x.Package = "opencode-ai" }), `agents[0].acp.package: not a pinned`},
		{"package url", edit(func(x *ACP) { x.Package = "https://example.invalid/x.tgz" }), `agents[0].acp.package: not a pinned`},
		{"package git", edit(func(x *ACP) { x.Package = "git+ssh://git@example.invalid/x.git" }), `agents[0].acp.package: not a pinned`},
		{"package file", edit(func(x *ACP) { x.Package = "file:../agent" }), `agents[0].acp.package: not a pinned`},
		{"package alias", edit(func(x *ACP) { x.Package = "x@npm:opencode-ai@1.18.33" }), `agents[0].acp.package: not a pinned`},
		{"protocol missing", edit(func(x *ACP) { x.Protocol = "" }), `agents[0].acp.protocol: "" is not one of anthropic, openai, responses, gemini`},
		{"protocol unknown", edit(func(x *ACP) { x.Protocol = "ollama" }), `agents[0].acp.protocol: "ollama" is not one of`},
		{"too many args", edit(func(x *ACP) { x.Args = make([]string, 65) }), `agents[0].acp.args: more than 64`},
		{"arg with NUL", edit(func(x *ACP) { x.Args = []string{"ok", "a\x00"} }), `agents[0].acp.args[1]: longer than 4096 bytes or holds a NUL`},
		{"arg too long", edit(func(x *ACP) { x.Args = []string{strings.Repeat("a", 4097)} }), `agents[0].acp.args[0]: longer than`},
		{"env name", edit(func(x *ACP) { x.Env = map[string]string{"A-B": "1"} }), `agents[0].acp.env.A-B: "A-B" is not an environment variable name`},
		{"env value too long", edit(func(x *ACP) { x.Env = map[string]string{"A": strings.Repeat("a", 4097)} }), `agents[0].acp.env.A: longer than`},
		{"env too many", edit(func(x *ACP) {
			x.Env = map[string]string{}
			for i := range 65 {
				x.Env[strings.Repeat("A", i+1)] = ""
			}
		}), `agents[0].acp.env: more than 64 variables`},
		{"env ok", edit(func(x *ACP) { x.Env = map[string]string{"LANG": "C.UTF-8", "RUST_LOG": "debug"} }), ""},
	}
	// Every variable the gateway's URL or token travels in, and every
	// provider key's: never from the configured env.
	for _, name := range []string{
		"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_AUTH_TOKEN",
		"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "ANY_BASE_URL", "P_KEY",
		"OPENCODE_CONFIG_CONTENT", "CODEX_HOME", "PATH", "HOME", "PROVIDER_SECRET", "IS_SANDBOX", "DISABLE_TELEMETRY",
	} {
		tests = append(tests, struct {
			name   string
			modify func(*Config)
			want   string
		}{"env " + name, func(c *Config) {
			c.Providers["local"] = Provider{Kind: KindOllama, BaseURL: "http://127.0.0.1:11434", APIKeyEnv: "PROVIDER_SECRET"}
			c.Agents[0].Kind = KindACP
			c.Agents[0].ACP = &ACP{Preset: "opencode", Env: map[string]string{name: "x"}}
		}, `agents[0].acp.env.` + name + `: ` + name + ` is a provider key's variable or one Lathe sets`})
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

// The key is reported at its place in the list.
func TestValidateOutsideAgentIndex(t *testing.T) {
	clearEnv(t)
	c := Default()
	for _, id := range []string{"b", "c"} {
		a := c.Agents[0]
		a.ID = id
		c.Agents = append(c.Agents, a)
	}
	c.Agents[2].Kind = KindACP
	c.Agents[2].ACP = &ACP{Command: "x", Protocol: "grpc"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `agents[2].acp.protocol: "grpc" is not one of`) {
		t.Fatalf("err = %v", err)
	}
}
