package acp

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestLaunch(t *testing.T) {
	g := Gateway{URL: "http://127.0.0.1:4100/", Token: "gw-token", Model: "m-1", Home: "/home/agent"}
	for _, tc := range []struct {
		preset string
		env    map[string]string
		args   []string
	}{
		{"claude-code", map[string]string{
			"ANTHROPIC_BASE_URL": "http://127.0.0.1:4100", "ANTHROPIC_API_KEY": "gw-token", "IS_SANDBOX": "1",
			"ANTHROPIC_SMALL_FAST_MODEL": "m-1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		}, nil},
		{"codex", map[string]string{"P_KEY": "gw-token", "CODEX_HOME": "/home/agent", "OPENAI_API_KEY": "gw-token"},
			[]string{"-c", `model_providers.p.base_url="http://127.0.0.1:4100/v1"`, "-c", `model="m-1"`, "-c", `model_providers.p.wire_api="responses"`}},
		{"gemini", map[string]string{"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:4100", "GEMINI_API_KEY": "gw-token", "GEMINI_TELEMETRY_ENABLED": "false"},
			[]string{"--acp", "-m", "m-1"}},
		{"opencode", map[string]string{"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENAI_BASE_URL": "http://127.0.0.1:4100/v1"}, []string{"acp"}},
	} {
		p := Presets[tc.preset]
		l := p.Launch(p.Protocol, g)
		for k, want := range tc.env {
			if l.Env[k] != want {
				t.Errorf("%s: %s = %q, want %q", tc.preset, k, l.Env[k], want)
			}
		}
		for _, a := range tc.args {
			if !slices.Contains(l.Args, a) {
				t.Errorf("%s: args %q lack %q", tc.preset, l.Args, a)
			}
		}
		for k := range l.Env {
			if !Reserved(k) {
				t.Errorf("%s: %s is set by Lathe but a configured env could name it", tc.preset, k)
			}
		}
	}
	var cfg struct {
		Model      string
		Permission map[string]string
		Provider   map[string]struct {
			Options map[string]string
			Models  map[string]json.RawMessage
		}
	}
	l := Presets["opencode"].Launch(ProtocolOpenAI, g)
	if err := json.Unmarshal([]byte(l.Env["OPENCODE_CONFIG_CONTENT"]), &cfg); err != nil {
		t.Fatal(err)
	}
	p := cfg.Provider["p"]
	if cfg.Model != "p/m-1" || p.Options["baseURL"] != "http://127.0.0.1:4100/v1" || p.Options["apiKey"] != "gw-token" ||
		p.Models["m-1"] == nil || cfg.Permission["bash"] != "ask" {
		t.Errorf("opencode config: %+v", cfg)
	}
	if s := Presets["gemini"].Launch(ProtocolGemini, g).Files[".gemini/settings.json"]; !json.Valid([]byte(s)) || !strings.Contains(s, `"usageStatisticsEnabled":false`) {
		t.Errorf("gemini settings: %s", s)
	}
	// A quoted model name stays one TOML string in codex's -c.
	if a := Presets["codex"].Launch(ProtocolResponses, Gateway{Model: `a"b`}).Args; !slices.Contains(a, `model="a\"b"`) {
		t.Errorf("codex args %q", a)
	}
}

// An Agent configured without a preset gets its protocol's variables.
func TestLaunchWithoutPreset(t *testing.T) {
	g := Gateway{URL: "http://gw", Token: "tok"}
	for proto, key := range map[string]string{ProtocolAnthropic: "ANTHROPIC_API_KEY", ProtocolOpenAI: "OPENAI_API_KEY", ProtocolResponses: "OPENAI_API_KEY", ProtocolGemini: "GEMINI_API_KEY"} {
		if l := (Preset{}).Launch(proto, g); l.Env[key] != "tok" || len(l.Args) != 0 {
			t.Errorf("%s: %+v", proto, l)
		}
	}
}
