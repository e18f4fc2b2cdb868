// Package dockertest has the test helpers of the remote (Docker Engine)
// driver: drivers on the machine's engine and a way to kill a sandbox
// behind a daemon's back. The provider-neutral suite lives in sandboxtest.
package dockertest

import (
	"context"
	"os"
	"testing"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/helper/helpertest"
	"lathe/runtime/sandbox/sandboxtest"
)

// Host is the engine the tests use: $LATHE_DOCKER, or the default socket
// (`make docker-up` starts an engine there and loads the sandbox image).
func Host() string {
	if h := os.Getenv("LATHE_DOCKER"); h != "" {
		return h
	}
	return docker.DefaultHost
}

// Docker returns a new driver on Host with opts' other fields, closed when
// the test ends. Without a reachable engine the test is skipped, or fails
// when $CI is set.
func Docker(t testing.TB, opts docker.Options) *Driver {
	t.Helper()
	if opts.Host == "" {
		opts.Host = Host()
	}
	if opts.Helper == "" {
		opts.Helper = helpertest.Path(t)
	}
	d, err := docker.New(sandboxtest.Context(t, 30*time.Second), opts)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("docker engine: %v", err)
		}
		t.Skipf("no docker engine (run make docker-up; set CI to fail instead): %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return &Driver{d}
}

// Driver adds sandboxtest.Crasher to the docker driver.
type Driver struct{ *docker.Driver }

var _ sandbox.Driver = (*Driver)(nil)

// Crash kills the sandbox's main process with SIGKILL through the engine,
// as an operator's `docker kill` would.
func (d *Driver) Crash(ctx context.Context, sb sandbox.Sandbox) error {
	return d.Kill(ctx, sb.(*docker.Sandbox).RuntimeID())
}
