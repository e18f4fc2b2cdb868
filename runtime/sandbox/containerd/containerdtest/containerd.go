// Package containerdtest has the test helpers of the containerd driver:
// drivers and namespaces on the machine's containerd, the sandbox image,
// and a way to kill a sandbox behind a daemon's back. The provider-neutral
// suite lives in sandboxtest; the driver's own test hands it its driver.
package containerdtest

import (
	"context"
	"os"
	"testing"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd"
	"lathe/runtime/sandbox/helper/helpertest"
	"lathe/runtime/sandbox/sandboxtest"

	"github.com/containerd/containerd/v2/client"
)

// Address is the containerd socket the tests use: $LATHE_CONTAINERD, or
// containerd's default.
func Address() string {
	if a := os.Getenv("LATHE_CONTAINERD"); a != "" {
		return a
	}
	return containerd.DefaultAddress
}

// Containerd returns a new containerd driver in namespace "lathe", where
// `make containerd-up` imports the sandbox image, closed when the test ends.
// Tests keep apart by using fresh session IDs (NewSpec). Without a reachable
// containerd the test is skipped, or fails when $CI is set.
func Containerd(t testing.TB) sandbox.Driver {
	t.Helper()
	helperDir := helpertest.Dir(t) // built before the clock starts
	d, err := containerd.New(sandboxtest.Context(t, 30*time.Second), containerd.Options{Address: Address(), HelperDir: helperDir})
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("containerd: %v", err)
		}
		t.Skipf("no containerd (set CI to fail instead): %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return crashable{d}
}

// crashable adds Crasher to the containerd driver.
type crashable struct{ *containerd.Driver }

// Crash kills the sandbox's main process with SIGKILL, finding its pid
// through a client of its own, as an operator's `kill -9` would.
func (c crashable) Crash(ctx context.Context, sb sandbox.Sandbox) error {
	cl, err := client.New(Address(), client.WithDefaultNamespace(containerd.DefaultNamespace))
	if err != nil {
		return err
	}
	defer cl.Close()
	return Kill(ctx, cl, containerd.ContainerID(sb.SessionID(), sb.Generation()))
}

// ReadySandbox readies containerd namespace ns for the test (Namespace),
// prepares one sandbox there on a fresh working directory (NewSpec) with
// Image, and removes it when the test ends. It is for packages that run
// their code in a real sandbox without a daemon.
func ReadySandbox(t testing.TB, ns string) (sandbox.Sandbox, sandbox.Spec) {
	t.Helper()
	Namespace(t, ns)
	helperDir := helpertest.Dir(t)
	d, err := containerd.New(sandboxtest.Context(t, 30*time.Second), containerd.Options{Address: Address(), Namespace: ns, DefaultImage: Image, HelperDir: helperDir})
	if err != nil {
		t.Fatalf("containerd: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	spec := sandboxtest.NewSpec(t)
	return sandboxtest.Prepare(t, d, spec), spec
}
