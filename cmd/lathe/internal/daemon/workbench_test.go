package daemon

// The browser workbench end to end: Debian's Chromium, driven by
// playwright-core (testdata/browser/workbench.mjs), against a whole daemon
// with real sandboxes in this file's own containerd namespace, signed in
// through the sign-in link as a browser is. `make browser-up` installs
// Chromium and the script's node_modules; without them the test is skipped,
// or fails when $CI is set.

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// webNamespace is this file's own containerd namespace.
const webNamespace = "lathe-test-web"

// browserDir holds the browser script and its package-lock.json.
const browserDir = "testdata/browser"

// needBrowser returns node and Chromium, skipping the test when either or
// the script's node_modules is missing (failing it when $CI is set).
func needBrowser(t *testing.T) (node, chromium string) {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing (run `make browser-up`)", what)
		}
		t.Skipf("%s is missing (run `make browser-up`; set CI to fail instead)", what)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node")
	}
	chromium = os.Getenv("LATHE_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing(chromium)
	}
	if _, err := os.Stat(filepath.Join(browserDir, "node_modules", "playwright-core")); err != nil {
		missing(browserDir + "/node_modules/playwright-core")
	}
	return node, chromium
}

func TestWorkbenchInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	containerdtest.Namespace(t, webNamespace)
	const key = "workbench-test-key"
	_, srv := newSandboxDaemon(t, webNamespace, func(cfg *config.Config) { cfg.Server.APIKeys = config.Secrets(key) })

	dir := realDir(t, t.TempDir())
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"README.md": "# demo\n", "src/app.py": "print(\"hello\")\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runBrowser(t, node, chromium, "workbench.mjs", 4*time.Minute, "LATHE_URL="+srv.URL, "LATHE_KEY="+key, "LATHE_WORKSPACE="+dir)
}

// runBrowser runs one browser script of browserDir with env (and
// LATHE_ARTIFACTS, LATHE_CHROMIUM), logging its STEP and METRIC lines; it
// fails the test unless the script prints PASS and exits 0.
func runBrowser(t *testing.T, node, chromium, script string, within time.Duration, env ...string) {
	t.Helper()
	runBrowserSignals(t, node, chromium, script, within, nil, env...)
}

// runBrowserSignals is runBrowser for a script that asks the test to move
// a fake along: a "SIGNAL <name>" line calls signal(name).
func runBrowserSignals(t *testing.T, node, chromium, script string, within time.Duration, signal func(string), env ...string) {
	t.Helper()
	artifacts := os.Getenv("LATHE_TEST_ARTIFACTS") // kept for a look after a failure
	if artifacts == "" {
		artifacts = t.TempDir()
	}

	ctx := testContext(t, within)
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = browserDir
	cmd.Env = append(append(os.Environ(), env...), "LATHE_ARTIFACTS="+artifacts, "LATHE_CHROMIUM="+chromium)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var passed bool
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "METRIC "):
			t.Logf("%s", strings.TrimPrefix(line, "METRIC "))
		case strings.HasPrefix(line, "SIGNAL ") && signal != nil:
			t.Log(line)
			signal(strings.TrimPrefix(line, "SIGNAL "))
		case line == "PASS":
			passed = true
		default:
			t.Log(line)
		}
	}
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil || !passed {
		t.Fatalf("%s failed after %s (%v); its screenshot is in %s", script, time.Since(start).Round(time.Millisecond), err, artifacts)
	}
	t.Logf("browser flows took %s", time.Since(start).Round(time.Millisecond))
}
