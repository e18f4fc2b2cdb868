package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/journal/events"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/sandboxtest"
)

// TestMCPApprovalExpiresAfterKill parks a turn's MCP call for an operator,
// kills the daemon with SIGKILL, and requires after the restart: the
// approval resolved expired exactly once (never left pending), the turn
// ended once, and the server never called.
func TestMCPApprovalExpiresAfterKill(t *testing.T) {
	var d *daemonProc
	t.Cleanup(func() { // last: after the namespace's leak check
		if t.Failed() && d != nil {
			t.Logf("the last daemon's stderr:\n%s", d.stderr.String())
		}
	})
	containerdtest.Namespace(t, turnProcNamespace)
	bin := filepath.Join(t.TempDir(), "lathe-mcptest")
	if out, err := exec.Command("go", "build", "-o", bin, "lathe/cmd/lathe-mcptest").CombinedOutput(); err != nil {
		t.Fatalf("build lathe-mcptest: %v\n%s", err, out)
	}
	calls := filepath.Join(t.TempDir(), "calls.log")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Steps: []fakellm.Step{
		fakellm.ToolCall("c1", "mcp__t__echo", `{"text":"never sent"}`), fakellm.Usage(5, 3, 0),
	}}}})
	t.Cleanup(fake.Close)
	cfg := turnProcConfig(t, fake, fmt.Sprintf(`mcp:
  servers:
    - {name: t, transport: stdio, command: %q, env: {LATHE_MCPTEST_LOG: %q}}
`, bin, calls))
	data := t.TempDir()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	d = procStart(t, data, "--config", cfg)
	session := procCreate(t, d, dir, "")
	if ss := procWait(t, d, session, "settled", procSettled); ss.Environment.State != events.EnvReady {
		t.Fatalf("session not ready: %+v", ss.Environment)
	}
	sandboxtest.WaitFor(t, 30*time.Second, func() bool {
		_, body := procDo(t, http.MethodGet, d.url+"/api/mcp/servers", "")
		return strings.Contains(string(body), `"status":"connected"`)
	})

	var approval, ended string
	procTurnFrames(t, d, map[string]any{"cmd": "session", "id": session, "turn_id": "t1", "input": "ask the server", "target_agent": "coder"}, func(kind string, raw []byte) bool {
		var f struct {
			ApprovalID string `json:"approval_id"`
		}
		_ = json.Unmarshal(raw, &f)
		approval = f.ApprovalID
		if strings.HasPrefix(kind, "session-done") || kind == "session-error" || kind == "session-cancelled" {
			ended = string(raw)
			return true
		}
		return kind == "mcp-approval-required"
	})
	if ended != "" {
		t.Fatalf("the turn ended before its MCP call was parked: %s", ended)
	}
	d.kill(t)
	d = procStart(t, data, "--config", cfg)

	if got := procTypes(procEvents(t, d, approval)); !slices.Equal(got, []string{"approval-requested", "approval-resolved"}) {
		t.Fatalf("approval events after the restart: %v", got)
	}
	resolved := procEvents(t, d, approval)[1]
	var res events.ApprovalResolved
	if err := json.Unmarshal(resolved.Data, &res); err != nil || res.Decision != events.DecisionExpired {
		t.Errorf("resolution: %s", resolved.Data)
	}
	var terminal []string
	for _, env := range procEvents(t, d, session) {
		if env.Type == "turn-done" || env.Type == "turn-cancelled" || env.Type == "turn-failed" {
			terminal = append(terminal, env.Type)
		}
	}
	if !slices.Equal(terminal, []string{"turn-failed"}) {
		t.Errorf("terminal records: %v, want one turn-failed", terminal)
	}
	if b, _ := os.ReadFile(calls); len(b) != 0 {
		t.Errorf("the server was called: %s", b)
	}
	// A second restart finds nothing more to expire. The daemon is stopped
	// at once, likely while its start-up reconstruction runs: a stop is no
	// verdict on the runtime, so the sandbox stays the Session's and the
	// delete below removes it (the namespace's leak check).
	d.stop(t)
	d = procStart(t, data, "--config", cfg)
	if got := procEvents(t, d, approval); len(got) != 2 {
		t.Errorf("approval events after a second restart: %v", procTypes(got))
	}
	procDelete(t, d, session)
}
