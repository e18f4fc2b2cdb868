package containerd_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/sandboxtest"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/log"
)

func TestMain(m *testing.M) {
	log.SetLevel("warn") // the client logs failed fetches at info
	os.Exit(m.Run())
}

func TestSuite(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Driver { return containerdtest.Containerd(t) })
}

func TestUnavailable(t *testing.T) {
	// A missing socket, and one nobody serves, as a dead containerd leaves.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	for _, addr := range []string{"/nonexistent/containerd.sock", "unix://" + stale} {
		start := time.Now()
		_, err := containerd.New(context.Background(), containerd.Options{Address: addr, Timeout: 2 * time.Second})
		if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "make containerd-up") {
			t.Errorf("New(%s): %v, want ErrUnavailable naming `make containerd-up`", addr, err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("New(%s) took %v", addr, el)
		}
	}
}

func TestBadSpecs(t *testing.T) {
	d := containerdtest.Containerd(t)
	ctx := sandboxtest.Context(t, time.Minute)
	good := sandboxtest.NewSpec(t)
	for name, mod := range map[string]func(*sandbox.Spec){
		"empty session":   func(s *sandbox.Spec) { s.SessionID = "" },
		"bad session":     func(s *sandbox.Spec) { s.SessionID = "a/b" },
		"relative dir":    func(s *sandbox.Spec) { s.WorkingDir = "work" },
		"unclean dir":     func(s *sandbox.Spec) { s.WorkingDir += "/../x" },
		"missing dir":     func(s *sandbox.Spec) { s.WorkingDir += "/missing" },
		"root dir":        func(s *sandbox.Spec) { s.WorkingDir = "/" },
		"unknown network": func(s *sandbox.Spec) { s.Network = "bridge" },
		"negative limits": func(s *sandbox.Spec) { s.Limits.MemoryMB = -1 },
		"invalid image":   func(s *sandbox.Spec) { s.Image = "UPPER/case" },
		"relative mount":  func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Path: "x"}} },
		"missing mount":   func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Path: s.WorkingDir + "/missing"}} },
	} {
		spec := good
		mod(&spec)
		if sb, err := d.Prepare(ctx, spec); err == nil {
			sb.Teardown(ctx)
			t.Errorf("%s: Prepare succeeded", name)
		}
	}
	sandboxtest.Prepare(t, d, good)
	changed := good
	changed.Env = []string{"X=1"}
	if _, err := d.Prepare(ctx, changed); err == nil {
		t.Error("Prepare of an existing generation with another spec succeeded")
	}
}

// TestMounts: Spec.Mounts appear at their own paths, read-write or
// read-only, a later one over an earlier one.
func TestMounts(t *testing.T) {
	d := containerdtest.Containerd(t)
	spec := sandboxtest.NewSpec(t)
	extra := t.TempDir()
	if err := os.WriteFile(filepath.Join(extra, "config"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec.Mounts = []sandbox.Mount{{Path: extra}, {Path: filepath.Join(extra, "config"), ReadOnly: true}}
	sb := sandboxtest.Prepare(t, d, spec)
	script := "echo new > " + extra + "/new && cat " + extra + "/config && ! echo bad >> " + extra + "/config"
	out, errOut, code := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"sh", "-c", script}})
	if code != 0 || out != "kept\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(extra, "new")); err != nil || string(b) != "new\n" {
		t.Errorf("the read-write mount: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(extra, "config")); string(b) != "kept\n" {
		t.Errorf("the read-only file was written: %q", b)
	}
}

// TestContainerShape checks what the host sees: name, labels and limits.
func TestContainerShape(t *testing.T) {
	d := containerdtest.Containerd(t)
	spec := sandboxtest.NewSpec(t)
	spec.Limits = sandbox.Limits{MemoryMB: 300, CPUs: 1.5, PIDs: 100}
	sandboxtest.Prepare(t, d, spec)
	id := containerd.ContainerID(spec.SessionID, spec.Generation)
	c, err := client.New(containerdtest.Address(), client.WithDefaultNamespace(containerd.DefaultNamespace))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctr, err := c.LoadContainer(sandboxtest.Context(t, time.Minute), id)
	if err != nil {
		t.Fatal(err)
	}
	labels, _ := ctr.Labels(sandboxtest.Context(t, time.Minute))
	if labels["lathe.managed"] != "true" || labels["lathe.session"] != spec.SessionID || labels["lathe.generation"] != "1" {
		t.Errorf("labels %v", labels)
	}
	read := 0
	for file, want := range map[string]string{
		"memory/lathe/" + id + "/memory.limit_in_bytes": "314572800",
		"cpu/lathe/" + id + "/cpu.cfs_quota_us":         "150000",
		"pids/lathe/" + id + "/pids.max":                "100",
		"lathe/" + id + "/memory.max":                   "314572800", // cgroup v2
	} {
		b, err := os.ReadFile("/sys/fs/cgroup/" + file)
		if err != nil {
			continue // the other cgroup version
		}
		read++
		if got := strings.TrimSpace(string(b)); got != want {
			t.Errorf("%s = %s, want %s", file, got, want)
		}
	}
	if read == 0 {
		t.Error("found none of the sandbox's cgroup files")
	}
}

// TestDialKeepsHostNetns: after many Dials into sandboxes, the daemon's own
// connections still go to the host's loopback.
func TestDialKeepsHostNetns(t *testing.T) {
	d := containerdtest.Containerd(t)
	sb := sandboxtest.Prepare(t, d, sandboxtest.NewSpec(t))
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := sandboxtest.Context(t, time.Minute)
	port := l.Addr().(*net.TCPAddr).Port
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if c, err := sb.Dial(ctx, port); err == nil {
				c.Close()
				t.Error("Dial reached the host's listener")
			}
		})
	}
	wg.Wait()
	for range 50 {
		c, err := net.Dial("tcp4", l.Addr().String())
		if err != nil {
			t.Fatalf("host dial after sandbox dials: %v", err)
		}
		c.Close()
	}
}

// TestOlderSecurityRebuilt: a container built before the current privilege
// boundary (here: its label removed, as containers from before it have none)
// is reported exited by Attach and replaced by Prepare, never reused.
func TestOlderSecurityRebuilt(t *testing.T) {
	d := containerdtest.Containerd(t)
	spec := sandboxtest.NewSpec(t)
	sandboxtest.Prepare(t, d, spec)
	ctx := sandboxtest.Context(t, time.Minute)
	c, err := client.New(containerdtest.Address(), client.WithDefaultNamespace(containerd.DefaultNamespace))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := containerd.ContainerID(spec.SessionID, spec.Generation)
	ctr, err := c.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctr.SetLabels(ctx, map[string]string{"lathe.security": ""}); err != nil {
		t.Fatal(err)
	}
	old, err := ctr.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}

	restarted := containerdtest.Containerd(t)
	sbs, err := restarted.Attach(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, sb := range sbs {
		if sb.SessionID() == spec.SessionID {
			found = true
			if sb.Err() == nil || !strings.Contains(sb.Err().Error(), "security generation") {
				t.Errorf("Attach reports the old sandbox with Err %v", sb.Err())
			}
		}
	}
	if !found {
		t.Fatal("Attach does not report the old sandbox")
	}
	sb, err := restarted.Prepare(ctx, spec)
	if err != nil {
		t.Fatalf("Prepare over the old sandbox: %v", err)
	}
	if sb.Err() != nil {
		t.Fatalf("the rebuilt sandbox is not running: %v", sb.Err())
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if task.Pid() == old.Pid() {
		t.Error("Prepare kept the old container's task")
	}
	if labels, _ := ctr.Labels(ctx); labels["lathe.security"] == "" {
		t.Errorf("the rebuilt container has labels %v", labels)
	}
	if out, _, code := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"sh", "-c", "grep -c . /proc/self/uid_map"}}); out != "2\n" || code != 0 {
		t.Errorf("the rebuilt sandbox's uid_map has %q lines", out)
	}
}
