package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/runtime/mcp"
	"lathe/runtime/polltest"
)

// serverBin is cmd/lathe-mcptest, built once for the package's tests.
var serverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lathe-mcptest-")
	if err != nil {
		panic(err)
	}
	serverBin = filepath.Join(dir, "lathe-mcptest")
	if out, err := exec.Command("go", "build", "-o", serverBin, "lathe/cmd/lathe-mcptest").CombinedOutput(); err != nil {
		panic("build lathe-mcptest: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func newRegistry(t *testing.T, opts mcp.Options) (*mcp.Registry, *polltest.Buffer) {
	t.Helper()
	logs := &polltest.Buffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	r := mcp.New(opts)
	t.Cleanup(r.Close)
	return r, logs
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func toolNames(ts []mcp.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func TestStdioServer(t *testing.T) {
	r, logs := newRegistry(t, mcp.Options{CallTimeout: 500 * time.Millisecond})
	v, err := r.Add(ctx(t), mcp.Config{Name: "t", Transport: mcp.Stdio, Command: serverBin})
	if err != nil || v.Status != mcp.StatusConnected || v.ToolCount != 5 || v.Approval != mcp.ApprovalAlways {
		t.Fatalf("Add = %+v, %v", v, err)
	}
	want := []string{"mcp__t__add", "mcp__t__crash", "mcp__t__echo", "mcp__t__fail", "mcp__t__sleep"}
	if got := toolNames(r.Tools()); !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	for _, tool := range r.Tools() {
		if tool.Name == "mcp__t__echo" && (tool.Description == "" || !strings.Contains(string(tool.InputSchema), `"text"`)) {
			t.Errorf("echo tool = %+v", tool)
		}
	}

	for _, tc := range []struct {
		tool, args, text string
		isError          bool
		err              error
	}{
		{tool: "mcp__t__echo", args: `{"text":"hello"}`, text: "hello"},
		{tool: "mcp__t__add", args: `{"a":2,"b":40}`, text: "42"},
		{tool: "mcp__t__fail", args: `{}`, text: "the tool failed on purpose", isError: true},
		{tool: "mcp__t__echo", args: `[1]`, err: mcp.ErrInvalid},
		{tool: "mcp__t__nope", args: `{}`, err: mcp.ErrUnknownTool},
		{tool: "mcp__x__echo", args: `{}`, err: mcp.ErrUnknownServer},
		{tool: "echo", args: `{}`, err: mcp.ErrUnknownTool},
		{tool: "mcp__t__sleep", args: `{"ms":10000}`, err: mcp.ErrUnavailable}, // cut off by the call timeout
	} {
		res, err := r.Call(ctx(t), tc.tool, json.RawMessage(tc.args))
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("Call(%s, %s) = %+v, %v; want %v", tc.tool, tc.args, res, err, tc.err)
		case tc.err == nil && (err != nil || res.Text != tc.text || res.IsError != tc.isError):
			t.Errorf("Call(%s, %s) = %+v, %v; want %q (error %v)", tc.tool, tc.args, res, err, tc.text, tc.isError)
		}
	}

	// A server that dies mid-call is disconnected, its tools gone, the
	// registry unharmed; a reconnect brings it back.
	if _, err := r.Call(ctx(t), "mcp__t__crash", nil); !errors.Is(err, mcp.ErrUnavailable) {
		t.Errorf("a crashing call: %v", err)
	}
	polltest.Until(t, "the crashed server to be disconnected", func() bool {
		v, _ := r.Server("t")
		return v.Status == mcp.StatusDisconnected
	})
	if v, _ := r.Server("t"); v.Error == "" || v.ToolCount != 0 || len(r.Tools()) != 0 {
		t.Errorf("after the crash: %+v, tools %v", v, r.Tools())
	}
	if _, err := r.Call(ctx(t), "mcp__t__echo", json.RawMessage(`{"text":"x"}`)); !errors.Is(err, mcp.ErrUnavailable) {
		t.Errorf("a call to a disconnected server: %v", err)
	}
	if v, err := r.Reconnect(ctx(t), "t"); err != nil || v.Status != mcp.StatusConnected || v.Error != "" {
		t.Fatalf("Reconnect = %+v, %v", v, err)
	}
	if res, err := r.Call(ctx(t), "mcp__t__echo", json.RawMessage(`{"text":"back"}`)); err != nil || res.Text != "back" {
		t.Errorf("a call after the reconnect: %+v, %v", res, err)
	}
	if !strings.Contains(logs.String(), "lathe-mcptest: starting") {
		t.Errorf("the server's stderr is not in the log:\n%s", logs)
	}

	if err := r.Remove("t"); err != nil {
		t.Fatal(err)
	}
	if err := r.Remove("t"); !errors.Is(err, mcp.ErrUnknownServer) {
		t.Errorf("a second Remove: %v", err)
	}
	if len(r.Servers()) != 0 || len(r.Tools()) != 0 {
		t.Errorf("after Remove: %v %v", r.Servers(), r.Tools())
	}
}

func TestHTTPServer(t *testing.T) {
	cmd := exec.Command(serverBin, "-http", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))

	r, _ := newRegistry(t, mcp.Options{})
	v, err := r.Add(ctx(t), mcp.Config{Name: "web", Transport: mcp.HTTP, URL: url, Approval: mcp.ApprovalNever, Agents: []string{"coder"}})
	if err != nil || v.Status != mcp.StatusConnected || v.ToolCount != 5 {
		t.Fatalf("Add = %+v, %v", v, err)
	}
	if res, err := r.Call(ctx(t), "mcp__web__echo", json.RawMessage(`{"text":"over http"}`)); err != nil || res.Text != "over http" {
		t.Errorf("Call = %+v, %v", res, err)
	}
	// Its tools are open to coder only.
	if n := len(r.ToolsFor("coder")); n != 5 {
		t.Errorf("coder sees %d tools", n)
	}
	if n := len(r.ToolsFor("reviewer")); n != 0 {
		t.Errorf("reviewer sees %d tools of a server open to coder only", n)
	}
}

func TestRefusedAndFailedServers(t *testing.T) {
	r, _ := newRegistry(t, mcp.Options{ConnectTimeout: 5 * time.Second})
	for _, c := range []mcp.Config{
		{Name: "", Transport: mcp.Stdio, Command: "x"},
		{Name: "a__b", Transport: mcp.Stdio, Command: "x"},
		{Name: "sp ace", Transport: mcp.Stdio, Command: "x"},
		{Name: "a", Transport: "grpc", Command: "x"},
		{Name: "a", Transport: mcp.Stdio},
		{Name: "a", Transport: mcp.HTTP, URL: "ftp://x"},
		{Name: "a", Transport: mcp.Stdio, Command: "x", Approval: "sometimes"},
	} {
		if _, err := r.Add(ctx(t), c); !errors.Is(err, mcp.ErrInvalid) {
			t.Errorf("Add(%+v) = %v, want ErrInvalid", c, err)
		}
	}
	// A command that does not exist is listed failed, with its error.
	v, err := r.Add(ctx(t), mcp.Config{Name: "ghost", Transport: mcp.Stdio, Command: "/nonexistent/mcp-server", Secrets: []string{"nonexistent"}})
	if err != nil || v.Status != mcp.StatusFailed || v.Error == "" {
		t.Fatalf("Add of a missing command = %+v, %v", v, err)
	}
	if strings.Contains(v.Error, "nonexistent") {
		t.Errorf("the error shows a secret value: %q", v.Error)
	}
	if _, err := r.Add(ctx(t), mcp.Config{Name: "ghost", Transport: mcp.Stdio, Command: serverBin}); !errors.Is(err, mcp.ErrDuplicate) {
		t.Errorf("a duplicate name: %v", err)
	}
	if got := r.Servers(); len(got) != 1 || got[0].Name != "ghost" || got[0].Status != mcp.StatusFailed {
		t.Errorf("Servers = %+v", got)
	}
	// A server that is not MCP at all fails its handshake.
	v, _ = r.Add(ctx(t), mcp.Config{Name: "cat", Transport: mcp.Stdio, Command: "sh", Args: []string{"-c", "echo not json; sleep 30"}})
	if v.Status != mcp.StatusFailed {
		t.Errorf("a server speaking garbage: %+v", v)
	}
}

func TestSplitName(t *testing.T) {
	for _, tc := range []struct {
		in, server, tool string
		ok               bool
	}{
		{"mcp__fs__read_file", "fs", "read_file", true},
		{"mcp__fs__a__b", "fs", "a__b", true},
		{"mcp__fs__", "", "", false},
		{"mcp____x", "", "", false},
		{"fs__read", "", "", false},
	} {
		s, tool, ok := mcp.SplitName(tc.in)
		if ok != tc.ok || ok && (s != tc.server || tool != tc.tool) {
			t.Errorf("SplitName(%q) = %q %q %v", tc.in, s, tool, ok)
		}
	}
}

// Start lists a server at once and connects it in the background.
func TestStartConnectsInTheBackground(t *testing.T) {
	r, _ := newRegistry(t, mcp.Options{})
	if err := r.Start(mcp.Config{Name: "bg", Transport: mcp.Stdio, Command: serverBin}); err != nil {
		t.Fatal(err)
	}
	if got := r.Servers(); len(got) != 1 || got[0].Name != "bg" {
		t.Fatalf("Servers right after Start = %+v", got)
	}
	polltest.Until(t, "the background connect", func() bool {
		v, _ := r.Server("bg")
		return v.Status == mcp.StatusConnected && v.ToolCount == 5
	})
	if err := r.Start(mcp.Config{Name: "bg", Transport: mcp.Stdio, Command: serverBin}); !errors.Is(err, mcp.ErrDuplicate) {
		t.Errorf("a second Start of the name: %v", err)
	}
}

// A stdio server sees PATH, HOME and its own variables, never the rest of
// the daemon's environment, such as a provider's API key (issue 23,
// finding 5).
func TestStdioServerEnvironment(t *testing.T) {
	t.Setenv("LATHE_TEST_PROVIDER_API_KEY", "sk-provider-secret")
	t.Setenv("HOME", "/home/lathe-test")
	r, logs := newRegistry(t, mcp.Options{})
	v, err := r.Add(ctx(t), mcp.Config{Name: "t", Transport: mcp.Stdio, Command: serverBin,
		Args: []string{"-print-env", "LATHE_TEST_PROVIDER_API_KEY,HOME,OWN_SETTING"}, Env: map[string]string{"OWN_SETTING": "mine"}})
	if err != nil || v.Status != mcp.StatusConnected {
		t.Fatalf("Add = %+v, %v", v, err)
	}
	polltest.Until(t, "the server's environment in the log", func() bool { return strings.Contains(logs.String(), "OWN_SETTING") })
	for _, want := range []string{`env LATHE_TEST_PROVIDER_API_KEY=\"\"`, `env HOME=\"/home/lathe-test\"`, `env OWN_SETTING=\"mine\"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the server's environment lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs.String(), "sk-provider-secret") {
		t.Errorf("the provider key reached the server:\n%s", logs)
	}
}
