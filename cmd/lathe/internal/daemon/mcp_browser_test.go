package daemon

// MCP in the workbench end to end: Chromium drives testdata/browser/mcp.mjs
// against a whole daemon whose Agent (talking to the scripted model server,
// fakellm) calls a tool of a real MCP server, lathe-mcptest, with real
// sandboxes in this file's own containerd namespace. The prompt shows in two
// tabs, an Allow in one closes both and the turn answers; the MCP panel
// installs a catalog entry whose command is missing, and revokes the saved
// decision, after which the same call asks again and is denied.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/sandboxtest"
)

// mcpWebNamespace is this file's own containerd namespace.
const mcpWebNamespace = "lathe-test-mcpweb"

func TestMCPInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	bin := mcpTestServer(t)
	calls := filepath.Join(t.TempDir(), "calls.log")
	// The catalog entry the browser installs runs uvx: the daemon must not
	// find it, so the entry fails to start and the panel shows why.
	withoutCommand(t, "uvx")

	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "mcp__t__echo", `{"text":"hello over mcp"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("the server said it"), fakellm.Usage(20, 4, 0)}},
		// After the revoke the same call asks again, and is denied.
		{Steps: []fakellm.Step{fakellm.ToolCall("c2", "mcp__t__echo", `{"text":"asks again"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("ok, not allowed"), fakellm.Usage(20, 4, 0)}},
	}}
	r := turnDaemonIn(t, mcpWebNamespace, config.KindOpenAI, script, func(c *config.Config) {
		c.MCP.Servers = []config.MCPServer{{Name: "t", Transport: "stdio", Command: bin, Env: map[string]string{"LATHE_MCPTEST_LOG": calls}}}
	})
	sandboxtest.WaitFor(t, 30*time.Second, func() bool {
		return strings.Contains(string(r.do(t, get, "/api/mcp/servers", "").body), `"status":"connected"`)
	})
	id := r.create(t, "").ID
	r.ready(t, id)

	runBrowser(t, node, chromium, "mcp.mjs", 3*time.Minute, "LATHE_URL="+r.srv.URL, "LATHE_SESSION="+id)

	// The server got the call once, after the Allow; never the denied one.
	if b, err := os.ReadFile(calls); err != nil || strings.Count(string(b), "\n") != 1 {
		t.Errorf("the MCP server's calls: %q, %v", b, err)
	}
}

// withoutCommand takes every directory holding name off PATH for the test.
func withoutCommand(t *testing.T, name string) {
	t.Helper()
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			continue
		}
		keep = append(keep, dir)
	}
	t.Setenv("PATH", strings.Join(keep, string(os.PathListSeparator)))
	if p, err := exec.LookPath(name); err == nil {
		t.Fatalf("%s is still found at %s", name, p)
	}
}
