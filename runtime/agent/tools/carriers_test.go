package tools_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lathe/runtime/agent/tools"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
	"lathe/runtime/sandbox/sandboxtest"
)

// TestSweepLeftovers: a run that a killed daemon process left under way
// in a sandbox ends at the next process's sweep; what ran on purpose (a
// task, a server an ended run put in the background, this process's own
// runs) stays.
// The remote driver's execs must look the same from inside: an exec's
// first process the child of the runtime (parent 0).
func TestSweepLeftovers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		driver func(t *testing.T) sandbox.Driver
	}{
		{"containerd", func(t *testing.T) sandbox.Driver { return containerdtest.Containerd(t) }},
		{"docker", func(t *testing.T) sandbox.Driver {
			return dockertest.Docker(t, docker.Options{Owner: "lathe-test-tools"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { sweepLeftovers(t, tc.driver(t)) })
	}
}

func sweepLeftovers(t *testing.T, d sandbox.Driver) {
	sb := sandboxtest.Prepare(t, d, sandboxtest.NewSpec(t))
	ctx := sandboxtest.Context(t, time.Minute)
	start := func(env string, args ...string) sandbox.Process {
		t.Helper()
		p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: args, Env: []string{env}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	const other = "LATHE_TOOL_CALL=0badc0ffee00."
	start(other+"1", "sh", "-c", "sleep 301 & sleep 302")
	ended := start(other+"2", "sh", "-c", "sleep 303 >/dev/null 2>&1 & exit 0")
	if code, err := ended.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("the ended run: %d %v", code, err)
	}
	start("LATHE_TASK_ID=T1", "sleep", "304")
	own, stop := contextWithCancel(t)
	defer stop()
	go tools.Run(own, sb, sandbox.ExecSpec{Args: []string{"sleep", "305"}}, 0)
	sleeps := func() string {
		t.Helper()
		var b strings.Builder
		for _, l := range processes(t, sb) {
			if strings.HasPrefix(l, "sleep ") {
				b.WriteString(l + "\n")
			}
		}
		return b.String()
	}
	polltest.Check(t, func() error {
		if s := sleeps(); strings.Count(s, "sleep 30") != 5 {
			return fmt.Errorf("sleeps:\n%s", s)
		}
		return nil
	}, polltest.Within(30*time.Second))

	n, err := tools.SweepLeftovers(ctx, sb)
	if err != nil || n < 2 {
		t.Fatalf("SweepLeftovers = %d, %v", n, err)
	}
	left := sleeps()
	for _, gone := range []string{"sleep 301", "sleep 302"} {
		if strings.Contains(left, gone) {
			t.Errorf("%s of the killed daemon's run is still there:\n%s", gone, left)
		}
	}
	for _, kept := range []string{"sleep 303", "sleep 304", "sleep 305"} {
		if !strings.Contains(left, kept) {
			t.Errorf("%s was killed:\n%s", kept, left)
		}
	}
}
