package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
)

// TestRuntimeConnRemote: under provider remote the daemon's runtime is the
// docker driver on sandbox.remote.host; an engine that is not there is
// ErrUnavailable naming the host, and the next use tries again.
func TestRuntimeConnRemote(t *testing.T) {
	cfg := config.Default().Sandbox
	cfg.Provider = config.SandboxRemote
	missing := "unix://" + filepath.Join(t.TempDir(), "none.sock")
	cfg.Remote.Host = missing
	r := &runtimeConn{cfg: cfg, owner: "test-owner"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.connect(ctx); !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("connect to a missing engine: %v, want ErrUnavailable naming %s", err, missing)
	}
	dockertest.Docker(t, docker.Options{}) // skips without an engine
	r.cfg.Remote.Host = dockertest.Host()
	drv, err := r.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if d, ok := drv.(*docker.Driver); !ok || d.Host() != dockertest.Host() || sandbox.CapabilitiesOf(drv).HostWorkingDir {
		t.Errorf("driver %T on %v", drv, drv)
	}
}
