package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseHooks(t *testing.T) {
	clearEnv(t)
	c, err := Parse([]byte(`
hooks:
  - event: PreToolUse
    matcher: "shell"
    command: "./scripts/guard"
    timeout_seconds: 5
    name: no-rm
agents:
  - id: coder
    provider: local
    model: m
    hooks:
      - {event: PostToolUse, matcher: "write_file|edit_file", command: "gofmt -w .", host: true}
telemetry:
  otlp_endpoint: "http://127.0.0.1:4318"
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	set := c.HookSet()
	if len(set.Global) != 1 || set.Global[0].Timeout != 5*time.Second || set.Global[0].Label() != "no-rm" ||
		len(set.PerAgent["coder"]) != 1 || !set.PerAgent["coder"][0].Host || set.PerAgent["coder"][0].Timeout != 30*time.Second {
		t.Errorf("hook set: %+v", set)
	}
	if got := set.For("coder", "PostToolUse", "edit_file"); len(got) != 1 {
		t.Errorf("For: %+v", got)
	}
	if c.Telemetry.OTLPEndpoint != "http://127.0.0.1:4318" {
		t.Errorf("telemetry: %+v", c.Telemetry)
	}
	if _, err := Parse([]byte("hooks:\n  - {event: Stop, command: x, when: always}\n")); err == nil || !strings.Contains(err.Error(), `hooks[0].when`) {
		t.Errorf("unknown hook key: %v", err)
	}
}
