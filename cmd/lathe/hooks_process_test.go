package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// TestHookKilledEndsTurnOnce kills the daemon with SIGKILL while a
// PreToolUse hook runs, in the sandbox or on the host, and requires the
// turn to end exactly once at the next start, with no tool run and no hook
// result invented, and the hook itself ended.
func TestHookKilledEndsTurnOnce(t *testing.T) {
	for _, where := range []string{"sandbox", "host"} {
		t.Run(where, func(t *testing.T) { hookKilled(t, where == "host") })
	}
}

func hookKilled(t *testing.T, host bool) {
	containerdtest.Namespace(t, turnProcNamespace)
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Steps: []fakellm.Step{
		fakellm.ToolCall("c1", "shell", `{"command":"touch ran-the-tool"}`), fakellm.Usage(11, 7, 0),
	}}}})
	t.Cleanup(fake.Close)
	cfg := turnProcConfig(t, fake, fmt.Sprintf(`hooks:
  - {event: PreToolUse, matcher: shell, name: slow-guard, host: %v, timeout_seconds: 600, command: "touch hook-running; sleep 600"}
`, host))
	data := t.TempDir()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	d := procStart(t, data, "--config", cfg)
	session := procCreate(t, d, dir, "")
	if ss := procWait(t, d, session, "settled", procSettled); ss.Environment.State != events.EnvReady {
		t.Fatalf("session not ready: %+v", ss.Environment)
	}
	cmd := map[string]any{"cmd": "session", "id": session, "turn_id": "hooked", "input": "touch it", "target_agent": "coder"}
	procTurnFrames(t, d, cmd, func(kind string, raw []byte) bool {
		return kind == "tool-call" && strings.Contains(string(raw), `"phase":"start"`)
	})
	// The hook runs once its marker shows in the checkout.
	polltest.Until(t, "the hook to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "hook-running"))
		return err == nil
	}, polltest.Within(30*time.Second))
	hookSleeps := func() []string {
		var out []string
		for _, c := range carriersOf("LATHE_SESSION_ID=" + session) {
			if strings.HasPrefix(c, "sleep 600") {
				out = append(out, c)
			}
		}
		return out
	}
	polltest.Until(t, "the hook's sleep to run", func() bool { return len(hookSleeps()) == 1 }, polltest.Within(30*time.Second))
	d.kill(t)
	d = procStart(t, data, "--config", cfg)
	// Its timeout was the killed daemon's to enforce: the restart ends it.
	polltest.Until(t, "the hook the kill cut off to end", func() bool { return len(hookSleeps()) == 0 }, polltest.Within(30*time.Second))

	var terminal, hooks []string
	for _, env := range procEvents(t, d, session) {
		var p struct {
			TurnID string `json:"turn_id"`
		}
		_ = json.Unmarshal(env.Data, &p)
		switch {
		case p.TurnID != "hooked":
		case env.Type == "turn-done" || env.Type == "turn-cancelled" || env.Type == "turn-failed":
			terminal = append(terminal, env.Type)
		case env.Type == "hook-ran":
			hooks = append(hooks, env.Type)
		}
	}
	if !slices.Equal(terminal, []string{"turn-failed"}) || len(hooks) != 0 {
		t.Fatalf("after the kill: terminal records %v (want one turn-failed), hook runs %v (want none)", terminal, hooks)
	}
	if tr := procTurn(t, d, session, "hooked"); tr.Status != projections.TurnError || !tr.Interrupted {
		t.Errorf("turn after the kill: %s interrupted %v %q", tr.Status, tr.Interrupted, tr.Error)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran-the-tool")); err == nil {
		t.Error("the tool ran although its hook never decided")
	}
	procDelete(t, d, session)
}

// carriersOf lists the command lines (arguments joined by spaces) of the
// host's processes, a sandbox's included, whose environment has entry.
func carriersOf(entry string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		env, err := os.ReadFile(filepath.Join(p, "environ"))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), entry) {
			continue
		}
		if cmd, err := os.ReadFile(filepath.Join(p, "cmdline")); err == nil {
			out = append(out, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
		}
	}
	return out
}
