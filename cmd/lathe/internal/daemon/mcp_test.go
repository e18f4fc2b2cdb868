package daemon

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/mcp"
	"lathe/runtime/sandbox/sandboxtest"
)

// mcpTestServer builds cmd/lathe-mcptest, the go-sdk test server.
func mcpTestServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lathe-mcptest")
	if out, err := exec.Command("go", "build", "-o", bin, "lathe/cmd/lathe-mcptest").CombinedOutput(); err != nil {
		t.Fatalf("build lathe-mcptest: %v\n%s", err, out)
	}
	return bin
}

type mcpServerJSON struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	ToolCount int    `json:"tool_count"`
	Status    string `json:"status"`
	Error     string `json:"error"`
}

func TestMCPRegistryRoutes(t *testing.T) {
	bin := mcpTestServer(t)
	// Catalog commands are looked up on this PATH: none is found, so an
	// install fails fast and offline, listed with its error.
	t.Setenv("PATH", t.TempDir())
	d, srv := newTestDaemon(t, func(c *config.Config) {
		c.MCP.Servers = []config.MCPServer{{Name: "t", Transport: "stdio", Command: bin}}
	})
	servers := func() []mcpServerJSON {
		t.Helper()
		var out []mcpServerJSON
		if err := json.Unmarshal(call(t, srv, get, "/api/mcp/servers", "").body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := servers(); len(got) != 1 || got[0].Name != "t" {
		t.Fatalf("servers right after start = %+v", got)
	}
	sandboxtest.WaitFor(t, 30*time.Second, func() bool {
		s := servers()[0]
		if s.Status == "failed" {
			t.Fatalf("the configured server failed: %+v", s)
		}
		return s.Status == "connected"
	})
	var tools []struct{ Name, Server, Description string }
	if err := json.Unmarshal(call(t, srv, get, "/api/mcp/tools", "").body, &tools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	if want := []string{"mcp__t__add", "mcp__t__crash", "mcp__t__echo", "mcp__t__fail", "mcp__t__sleep"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}

	const secret = "ghp_0123456789abcdefSECRET"
	runRoutes(t, d, srv, vars{}, []route{
		{name: "catalog", method: get, path: "/api/mcp/catalog", status: 200, check: func(t *testing.T, body []byte) {
			if !strings.Contains(string(body), `"slug":"filesystem"`) || !strings.Contains(string(body), `"secret":true`) {
				t.Errorf("catalog: %s", body)
			}
		}},
		{name: "reconnect", method: post, path: "/api/mcp/servers/t", status: 200, events: 1},
		{name: "reconnect unknown", method: post, path: "/api/mcp/servers/nope", status: 404, err: `"nope"`},
		{name: "install unknown slug", method: post, path: "/api/mcp/install", body: `{"slug":"nope"}`, status: 404, err: `"nope"`},
		{name: "install missing value", method: post, path: "/api/mcp/install", body: `{"slug":"git"}`, status: 400, err: `needs the value "repository"`},
		{name: "install unknown value", method: post, path: "/api/mcp/install", body: `{"slug":"memory","values":{"x":"1"}}`, status: 400, err: `takes no value "x"`},
		{name: "install duplicate name", method: post, path: "/api/mcp/install", body: `{"slug":"memory","name":"t"}`, status: 409, err: "already in the registry"},
		{name: "install a missing command", method: post, path: "/api/mcp/install", body: `{"slug":"github","name":"gh","values":{"token":"` + secret + `"}}`, status: 201, events: effectEvents,
			check: func(t *testing.T, body []byte) {
				var v mcpServerJSON
				_ = json.Unmarshal(body, &v)
				if v.Name != "gh" || v.Status != "failed" || v.Error == "" || strings.Contains(string(body), secret) {
					t.Errorf("install answer: %s", body)
				}
			}},
		{name: "the failed server is listed", method: get, path: "/api/mcp/servers", status: 200, check: func(t *testing.T, body []byte) {
			if !strings.Contains(string(body), `"name":"gh"`) || !strings.Contains(string(body), `"status":"failed"`) || strings.Contains(string(body), secret) {
				t.Errorf("servers: %s", body)
			}
		}},
		{name: "remove", method: del, path: "/api/mcp/servers/gh", status: 200, events: 1},
		{name: "remove again", method: del, path: "/api/mcp/servers/gh", status: 404, err: `"gh"`},
	})
	// The audit trail names the install, never its secret.
	var all strings.Builder
	_ = d.Journal().Scan(context.Background(), 0, 0, func(_ uint64, raw []byte) error {
		all.Write(raw)
		return nil
	})
	if !strings.Contains(all.String(), "mcp-server-installed") || strings.Contains(all.String(), secret) {
		t.Errorf("journal: %s", all.String())
	}
}

// The catalog's memory server, the npm package `make test` installs beside
// the browser tests' playwright-core, connects as a real MCP server process
// and answers a call.
func TestMCPCatalogNPMServer(t *testing.T) {
	entry, err := filepath.Abs(filepath.Join("testdata", "browser", "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	node, lookErr := exec.LookPath("node")
	if _, err := os.Stat(entry); err != nil || lookErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the npm MCP server is not installed (run make browser-up): %v %v", err, lookErr)
		}
		t.Skipf("the npm MCP server is not installed (run make browser-up): %v %v", err, lookErr)
	}
	mem := filepath.Join(t.TempDir(), "memory.json")
	reg := mcp.New(mcp.Options{})
	t.Cleanup(reg.Close)
	v, err := reg.Add(testContext(t, 60*time.Second), mcp.Config{Name: "memory", Transport: mcp.Stdio, Command: node, Args: []string{entry},
		Env: map[string]string{"MEMORY_FILE_PATH": mem}})
	if err != nil || v.Status != mcp.StatusConnected || v.ToolCount == 0 {
		t.Fatalf("the memory server: %+v, %v", v, err)
	}
	res, err := reg.Call(testContext(t, 30*time.Second), "mcp__memory__create_entities",
		json.RawMessage(`{"entities":[{"name":"Lathe","entityType":"project","observations":["runs coding agents"]}]}`))
	if err != nil || res.IsError {
		t.Fatalf("create_entities: %+v, %v", res, err)
	}
	res, err = reg.Call(testContext(t, 30*time.Second), "mcp__memory__read_graph", json.RawMessage(`{}`))
	if err != nil || !strings.Contains(res.Text, "runs coding agents") {
		t.Errorf("read_graph: %+v, %v", res, err)
	}
}
