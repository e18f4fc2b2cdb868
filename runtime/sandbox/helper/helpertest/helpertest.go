// Package helpertest builds the sandbox helper for tests. The helper is
// the lathe binary, static; a test binary is not (it is built with cgo for
// -race), so the drivers and daemons under test are pointed at a build of
// cmd/lathe made here once per test process (go build's cache makes the
// later ones cheap, and an unchanged tree costs no link at all).
package helpertest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"lathe/runtime/sandbox/helper"
)

// BinEnv names the environment variable of a prebuilt static lathe.
const BinEnv = "LATHE_TEST_BIN"

// Path returns the helper binary, building it on the first call.
func Path(t testing.TB) string {
	t.Helper()
	p, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Dir returns the directory that holds the helper as "lathe", as the
// containerd driver's Options.HelperDir wants it.
func Dir(t testing.TB) string { return filepath.Dir(Path(t)) }

// Build builds the helper (once per process) and returns its path: a
// folder of the temporary directory per module checkout, so that
// checkouts of different trees on one machine keep apart, under a lock
// that the test processes of one checkout share. $LATHE_TEST_BIN names a
// static lathe built beforehand instead, for a test binary that runs where
// it cannot build one (make test-podman runs it as a user without the Go
// toolchain's caches).
var Build = sync.OnceValues(func() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		b, err := helper.Open(p)
		if err != nil {
			return "", fmt.Errorf("$%s: %w", BinEnv, err)
		}
		return b.Path, nil
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	module := filepath.Dir(strings.TrimSpace(string(gomod)))
	sum := sha256.Sum256([]byte(module))
	dir := filepath.Join(os.TempDir(), "lathe-sandbox-helper-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	// Built beside, then staged: the sandboxes of other test processes
	// may be running dir/lathe, which changes only by a rename.
	bin := filepath.Join(dir, "build", "lathe")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/lathe")
	cmd.Dir = module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the sandbox helper: %w\n%s", err, out)
	}
	b, err := helper.Open(bin)
	if err != nil {
		return "", err
	}
	if b, err = helper.Stage(b, dir); err != nil {
		return "", err
	}
	return b.Path, nil
})
