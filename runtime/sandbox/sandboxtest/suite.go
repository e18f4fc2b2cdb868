// Package sandboxtest holds the suite every sandbox.Driver must pass, and
// provider-neutral helpers for tests that use a sandbox. It imports no
// driver: each driver's own test hands Run its driver (the containerd
// driver's helpers are in containerd/containerdtest).
//
// The suite needs an image whose default has sh, coreutils (tty, stty, sleep,
// cat) and python3, as lathe.local/sandbox:bookworm does.
package sandboxtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lathe/runtime/polltest"
	"lathe/runtime/sandbox"
)

// Crasher is implemented by test drivers that can kill a sandbox's main
// process behind the driver's back, as an operator or the OOM killer would.
// The suite skips the crash test for drivers without it.
type Crasher interface {
	Crash(ctx context.Context, sb sandbox.Sandbox) error
}

// LimitsIgnorer is a driver that can tell that its runtime dropped a
// Spec's limits (rootless Podman on cgroup v1), and why: the limits test
// skips with that reason.
type LimitsIgnorer interface {
	LimitsIgnored() string
}

// Run runs the shared suite. newDriver must return a new Driver instance on
// each call, all of them on the same runtime: a second instance stands for
// the daemon after a restart.
func Run(t *testing.T, newDriver func(t *testing.T) sandbox.Driver) {
	d := newDriver(t)
	caps := sandbox.CapabilitiesOf(d)
	// hostDir marks the cases that hold only where the working dir is the
	// host's own (sandbox.Capabilities.HostWorkingDir); ownDir those that
	// hold only where it is not.
	const both, hostDir, ownDir = 0, 1, 2
	tests := []struct {
		name  string
		needs int
		f     func(t *testing.T, d sandbox.Driver)
	}{
		{"Exec", both, testExec},
		{"ExitCode", both, testExitCode},
		{"EnvAndDir", both, testEnvAndDir},
		{"TTY", both, testTTY},
		{"SharedWorkingDir", hostDir, testSharedWorkingDir},
		{"SourceMountedAtWorkingDir", hostDir, testSourceMount},
		{"Tools", both, testTools},
		{"OwnWorkingDir", ownDir, testOwnWorkingDir},
		{"ConcurrentRemove", both, testConcurrentRemove},
		{"Limits", both, testLimits},
		{"OwnLoopback", both, testOwnLoopback},
		{"DialClosedPort", both, testDialClosedPort},
		{"Signal", both, testSignal},
		{"PrepareIdempotent", both, testPrepareIdempotent},
		{"Remove", both, testRemove},
		{"MissingImage", both, testMissingImage},
		{"NoSetIDOrDevices", hostDir, testNoSetIDOrDevices},
		{"WorkspaceOwner", hostDir, testWorkspaceOwner},
		{"RootInside", both, testRootInside},
		{"AttachAfterRestart", both, func(t *testing.T, d sandbox.Driver) { testAttach(t, d, newDriver(t)) }},
		{"Crash", both, func(t *testing.T, d sandbox.Driver) { testCrash(t, d, newDriver(t)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch {
			case tt.needs == hostDir && !caps.HostWorkingDir:
				t.Skip("the driver declares that its working dir is not the host's (Capabilities.HostWorkingDir false)")
			case tt.needs == ownDir && caps.HostWorkingDir:
				t.Skip("the driver declares that its working dir is the host's (Capabilities.HostWorkingDir true)")
			}
			t.Parallel()
			tt.f(t, d)
		})
	}
}

// Context returns a context bounded by d that ends with the test.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// NewSpec returns a spec for a fresh session with its own working dir.
func NewSpec(t testing.TB) sandbox.Spec {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	return sandbox.Spec{
		SessionID:  "test-" + hex.EncodeToString(b),
		Generation: 1,
		WorkingDir: dir,
		Network:    sandbox.NetworkNone,
	}
}

// Prepare prepares spec and removes the sandbox when the test ends.
func Prepare(t testing.TB, d sandbox.Driver, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := d.Prepare(Context(t, time.Minute), spec)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.Remove(ctx, spec.SessionID, spec.Generation); err != nil {
			t.Errorf("Remove: %v", err)
		}
	})
	return sb
}

// Output runs args in sb and returns its stdout, stderr and exit code.
func Output(t testing.TB, sb sandbox.Sandbox, es sandbox.ExecSpec) (stdout, stderr string, code int) {
	t.Helper()
	ctx := Context(t, time.Minute)
	var out, errb bytes.Buffer
	es.Stdout, es.Stderr = &out, &errb
	p, err := sb.Exec(ctx, es)
	if err != nil {
		t.Fatalf("Exec %q: %v", es.Args, err)
	}
	code, err = p.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait %q: %v", es.Args, err)
	}
	return out.String(), errb.String(), code
}

func sh(script string) sandbox.ExecSpec {
	return sandbox.ExecSpec{Args: []string{"sh", "-c", script}}
}

func testExec(t *testing.T, d sandbox.Driver) {
	sb := Prepare(t, d, NewSpec(t))
	out, errOut, code := Output(t, sb, sandbox.ExecSpec{Args: []string{"echo", "hello", "world"}})
	if out != "hello world\n" || errOut != "" || code != 0 {
		t.Errorf("echo: stdout %q, stderr %q, code %d", out, errOut, code)
	}
	// Stdin is copied in and closed at its end.
	var buf bytes.Buffer
	p, err := sb.Exec(Context(t, time.Minute), sandbox.ExecSpec{Args: []string{"cat"}, Stdin: strings.NewReader("from stdin"), Stdout: &buf})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(Context(t, time.Minute)); err != nil || code != 0 || buf.String() != "from stdin" {
		t.Errorf("cat: %q, code %d, %v", buf.String(), code, err)
	}
	// Stdout and stderr may share one plain buffer.
	var both bytes.Buffer
	p, err = sb.Exec(Context(t, time.Minute), sandbox.ExecSpec{Args: []string{"sh", "-c", "for i in $(seq 200); do echo o$i; echo e$i >&2; done"}, Stdout: &both, Stderr: &both})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(Context(t, time.Minute)); err != nil || code != 0 || strings.Count(both.String(), "\n") != 400 {
		t.Errorf("shared stdout and stderr: %d lines, code %d, %v", strings.Count(both.String(), "\n"), code, err)
	}
	// A missing binary fails Exec, or exits non-zero.
	if p, err := sb.Exec(Context(t, time.Minute), sandbox.ExecSpec{Args: []string{"/no/such/binary"}}); err == nil {
		if code, err := p.Wait(Context(t, time.Minute)); code == 0 {
			t.Errorf("missing binary exited 0 (%v)", err)
		}
	}
}

func testExitCode(t *testing.T, d sandbox.Driver) {
	sb := Prepare(t, d, NewSpec(t))
	out, errOut, code := Output(t, sb, sh("echo out; echo err >&2; exit 3"))
	if out != "out\n" || errOut != "err\n" || code != 3 {
		t.Errorf("stdout %q, stderr %q, code %d; want out, err, 3", out, errOut, code)
	}
}

func testEnvAndDir(t *testing.T, d sandbox.Driver) {
	spec := NewSpec(t)
	spec.Env = []string{"LATHE_A=spec", "LATHE_B=spec"}
	sb := Prepare(t, d, spec)
	sub := filepath.Join(spec.WorkingDir, "sub")
	if _, errOut, code := Output(t, sb, sh("mkdir sub")); code != 0 {
		t.Fatalf("mkdir sub: %s", errOut)
	}
	es := sh(`echo "$LATHE_A $LATHE_B $PYTHONDONTWRITEBYTECODE $PATH"; pwd`)
	es.Env = []string{"LATHE_B=exec"}
	out, _, _ := Output(t, sb, es)
	if !strings.HasPrefix(out, "spec exec 1 /") || !strings.HasSuffix(out, "\n"+spec.WorkingDir+"\n") {
		t.Errorf("env and default dir: %q", out)
	}
	es = sandbox.ExecSpec{Args: []string{"pwd"}, Dir: sub}
	if out, _, _ := Output(t, sb, es); out != sub+"\n" {
		t.Errorf("pwd in %s: %q", sub, out)
	}
}

func testTTY(t *testing.T, d sandbox.Driver) {
	sb := Prepare(t, d, NewSpec(t))
	out, _, code := Output(t, sb, sandbox.ExecSpec{Args: []string{"sh", "-c", "tty; stty size; echo $TERM"}, TTY: true, Rows: 24, Cols: 91})
	if code != 0 || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "24 91\r\n") || !strings.Contains(out, "xterm") {
		t.Errorf("tty; stty size: %q, code %d", out, code)
	}

	// Resize a running terminal, then let it report its size.
	ctx := Context(t, time.Minute)
	stdin, input := io.Pipe()
	defer input.Close()
	var buf polltest.Buffer
	p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"sh", "-c", "stty -echo; echo ready; read x; stty size"},
		TTY: true, Rows: 10, Cols: 20, Stdin: stdin, Stdout: &buf})
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 30*time.Second, func() bool { return strings.Contains(buf.String(), "ready") })
	if err := p.Resize(ctx, 33, 111); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	io.WriteString(input, "\n")
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("Wait: %d, %v", code, err)
	}
	if !strings.Contains(buf.String(), "33 111") {
		t.Errorf("after Resize(33, 111): %q", buf.String())
	}
	if err := p.Resize(ctx, 0, 10); err == nil {
		t.Error("Resize(0, 10) succeeded")
	}
}

// testSharedWorkingDir: the working dir is the same directory at the same
// path inside and out.
func testSharedWorkingDir(t *testing.T, d sandbox.Driver) {
	spec := NewSpec(t)
	sb := Prepare(t, d, spec)
	if err := os.WriteFile(filepath.Join(spec.WorkingDir, "from-host"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := Output(t, sb, sh("cat "+spec.WorkingDir+"/from-host && echo sandbox > from-sandbox && pwd"))
	if code != 0 || out != "host\n"+spec.WorkingDir+"\n" {
		t.Fatalf("inside: %q %q %d", out, errOut, code)
	}
	b, err := os.ReadFile(filepath.Join(spec.WorkingDir, "from-sandbox"))
	if err != nil || string(b) != "sandbox\n" {
		t.Errorf("file written inside, read on the host: %q, %v", b, err)
	}
}

// testOwnWorkingDir: where the working dir is the sandbox's own, it exists
// inside, empty and writable, and nothing written there reaches the host
// directory of that path, nor the other way round.
func testOwnWorkingDir(t *testing.T, d sandbox.Driver) {
	spec := NewSpec(t)
	if err := os.WriteFile(filepath.Join(spec.WorkingDir, "from-host"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := Prepare(t, d, spec)
	out, errOut, code := Output(t, sb, sh("ls -A; echo sandbox > from-sandbox && cat from-sandbox && pwd"))
	if code != 0 || out != "sandbox\n"+spec.WorkingDir+"\n" {
		t.Fatalf("inside: %q %q %d", out, errOut, code)
	}
	if _, err := os.Stat(filepath.Join(spec.WorkingDir, "from-sandbox")); !os.IsNotExist(err) {
		t.Errorf("the write reached the host directory: %v", err)
	}
	if sandbox.CapabilitiesOf(d).HostWorkingDir {
		t.Error("Capabilities changed under the test")
	}
	if _, err := d.Prepare(Context(t, time.Minute), sandbox.Spec{SessionID: spec.SessionID + "-src", Generation: 1,
		WorkingDir: spec.WorkingDir, Source: spec.WorkingDir}); err == nil {
		t.Error("Prepare with a Source succeeded without a host working dir")
	}
}

// testSourceMount: with Source set, that directory is what the sandbox
// sees at WorkingDir; WorkingDir on the host is neither seen nor written.
func testSourceMount(t *testing.T, d sandbox.Driver) {
	spec := NewSpec(t)
	src, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spec.Source = src
	if err := os.WriteFile(filepath.Join(spec.WorkingDir, "primary"), []byte("primary\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "copy"), []byte("copy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := Prepare(t, d, spec)
	out, errOut, code := Output(t, sb, sh("cat copy && ls && echo lane > from-lane && pwd"))
	if code != 0 || out != "copy\ncopy\n"+spec.WorkingDir+"\n" {
		t.Fatalf("inside: %q %q %d", out, errOut, code)
	}
	if b, err := os.ReadFile(filepath.Join(src, "from-lane")); err != nil || string(b) != "lane\n" {
		t.Errorf("file written inside, read in the source: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(spec.WorkingDir, "from-lane")); !os.IsNotExist(err) {
		t.Errorf("the write reached the working dir on the host: %v", err)
	}
}

// testTools: a Spec.Tools directory is at its own path inside, its
// programs (and links among them) run there, nothing can write to it, root
// included, and a second sandbox with the same tool sees the same content.
func testTools(t *testing.T, d sandbox.Driver) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(dir, "agent@1.0.0")
	if err := os.MkdirAll(filepath.Join(dir, "node_modules", ".bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node_modules", "run"), []byte("#!/bin/sh\necho tool \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../run", filepath.Join(dir, "node_modules", ".bin", "agent")); err != nil {
		t.Fatal(err)
	}
	tool := sandbox.Tool{Name: "test-tool-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "@1.0.0", Dir: dir}
	for i := range 2 {
		spec := NewSpec(t)
		spec.Tools = []sandbox.Tool{tool}
		sb := Prepare(t, d, spec)
		script := dir + "/node_modules/.bin/agent " + strconv.Itoa(i) +
			" && ! echo x > " + dir + "/new 2>/dev/null && ! rm " + dir + "/node_modules/run 2>/dev/null" +
			" && ! touch " + dir + "/node_modules/run 2>/dev/null && echo read-only"
		out, errOut, code := Output(t, sb, sh(script))
		if want := "tool " + strconv.Itoa(i) + "\nread-only\n"; code != 0 || out != want {
			t.Fatalf("sandbox %d: exit %d, stdout %q (want %q), stderr %q", i, code, out, want, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("a write inside reached the tool on the host: %v", err)
	}
}

// testConcurrentRemove: two removals of one sandbox at once (an owner's
// and a start-up sweep's) both succeed, and nothing is left.
func testConcurrentRemove(t *testing.T, d sandbox.Driver) {
	spec := NewSpec(t)
	if _, err := d.Prepare(Context(t, time.Minute), spec); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- d.Remove(Context(t, time.Minute), spec.SessionID, spec.Generation) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Remove: %v", err)
		}
	}
	sbs, err := d.Attach(Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if find(sbs, spec) != nil {
		t.Error("the sandbox is still there after both removals")
	}
}

// pyForks forks children that hold until it exits, up to 200, and prints
// how many it got.
const pyForks = `import os
r, w = os.pipe()
n = 0
try:
    while n < 200:
        if os.fork() == 0:
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        n += 1
except OSError:
    pass
print(n)
`

func testLimits(t *testing.T, d sandbox.Driver) {
	spec := NewSpec(t)
	spec.Limits = sandbox.Limits{MemoryMB: 128, CPUs: 0.5, PIDs: 32}
	sb := Prepare(t, d, spec)
	if li, ok := d.(LimitsIgnorer); ok && li.LimitsIgnored() != "" {
		t.Skip(li.LimitsIgnored())
	}
	out, errOut, code := Output(t, sb, sandbox.ExecSpec{Args: []string{"python3", "-c", pyForks}})
	if n, err := strconv.Atoi(strings.TrimSpace(out)); err != nil || n >= 32 || n < 10 || code != 0 {
		t.Errorf("forks under a 32 pids limit: %q %q, code %d", out, errOut, code)
	}
	// Touch 256 MiB: the memory limit kills it.
	if _, _, code := Output(t, sb, sandbox.ExecSpec{Args: []string{"python3", "-c", "b = b'x' * (256 << 20)"}}); code == 0 {
		t.Error("256 MiB allocated under a 128 MiB limit")
	}
	if _, _, code := Output(t, sb, sandbox.ExecSpec{Args: []string{"python3", "-c", "b = b'x' * (32 << 20)"}}); code != 0 {
		t.Errorf("32 MiB under a 128 MiB limit: exit code %d", code)
	}
}

// PyServer (python3 -c PyServer PORT NAME) listens on 127.0.0.1:PORT and
// greets every connection with NAME.
const PyServer = `import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
while True:
    c, _ = s.accept()
    c.sendall(sys.argv[2].encode())
    c.close()
`

// testOwnLoopback: sibling sandboxes listen on the same port, and Dial
// reaches each one's own listener.
func testOwnLoopback(t *testing.T, d sandbox.Driver) {
	var sbs []sandbox.Sandbox
	for range 2 {
		sb := Prepare(t, d, NewSpec(t))
		if _, err := sb.Exec(Context(t, time.Minute), sandbox.ExecSpec{Args: []string{"python3", "-c", PyServer, "8000", sb.SessionID()}}); err != nil {
			t.Fatal(err)
		}
		sbs = append(sbs, sb)
	}
	for _, sb := range sbs {
		if got := Greeting(t, sb, 8000, 30*time.Second); got != sb.SessionID() {
			t.Errorf("Dial(8000) in %s reached %q", sb.SessionID(), got)
		}
	}
	// The sandbox has no interface but loopback.
	out, _, _ := Output(t, sbs[0], sh(`tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`))
	if out != "lo\n" {
		t.Errorf("network interfaces: %q, want only lo", out)
	}
}

// Greeting dials port in sb until it connects or total passes, and returns
// what the listener sends before closing.
func Greeting(t testing.TB, sb sandbox.Sandbox, port int, total time.Duration) string {
	t.Helper()
	ctx := Context(t, total)
	for {
		c, err := sb.Dial(ctx, port)
		if err == nil {
			defer c.Close()
			c.SetDeadline(time.Now().Add(total))
			b, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("read from port %d: %v", port, err)
			}
			return string(b)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Dial(%d) never connected: %v", port, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func testDialClosedPort(t *testing.T, d sandbox.Driver) {
	sb := Prepare(t, d, NewSpec(t))
	start := time.Now()
	c, err := sb.Dial(Context(t, 10*time.Second), 8001)
	if err == nil {
		c.Close()
		t.Fatal("Dial to a closed port connected")
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("Dial to a closed port took %v", el)
	}
	for _, port := range []int{0, -1, 65536} {
		if c, err := sb.Dial(Context(t, 10*time.Second), port); err == nil {
			c.Close()
			t.Errorf("Dial(%d) connected", port)
		}
	}
}

func testSignal(t *testing.T, d sandbox.Driver) {
	sb := Prepare(t, d, NewSpec(t))
	ctx := Context(t, time.Minute)
	var out polltest.Buffer
	p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"sh", "-c", "echo started; exec sleep 1000"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 30*time.Second, func() bool { return out.String() == "started\n" })
	if err := p.Signal(ctx, syscall.SIGTERM); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	code, err := p.Wait(ctx)
	if err != nil || code != 128+int(syscall.SIGTERM) {
		t.Errorf("after SIGTERM: code %d, %v; want %d", code, err, 128+int(syscall.SIGTERM))
	}
	if err := p.Signal(ctx, syscall.SIGKILL); err == nil {
		t.Error("Signal to an exited process succeeded")
	}
}

func testPrepareIdempotent(t *testing.T, d sandbox.Driver) {
	spec := NewSpec(t)
	sb1 := Prepare(t, d, spec)
	sb2, err := d.Prepare(Context(t, time.Minute), spec)
	if err != nil {
		t.Fatalf("second Prepare: %v", err)
	}
	if sb2.SessionID() != spec.SessionID || sb2.Generation() != spec.Generation {
		t.Errorf("second Prepare gave %s/%d", sb2.SessionID(), sb2.Generation())
	}
	// One sandbox: a file left by the first is seen by the second's processes
	// outside the shared dir.
	Output(t, sb1, sh("echo x > /tmp/marker"))
	if out, _, code := Output(t, sb2, sh("cat /tmp/marker")); out != "x\n" || code != 0 {
		t.Errorf("second Prepare made another sandbox: %q, %d", out, code)
	}
	// The next generation is another sandbox, next to it.
	spec.Generation++
	sb3 := Prepare(t, d, spec)
	if out, _, _ := Output(t, sb3, sh("cat /tmp/marker 2>/dev/null; echo g$LATHE_NONE")); out != "g\n" {
		t.Errorf("generation 2 sees generation 1's /tmp: %q", out)
	}
	if sb1.Err() != nil {
		t.Errorf("generation 1 stopped: %v", sb1.Err())
	}
}

func testRemove(t *testing.T, d sandbox.Driver) {
	spec := NewSpec(t)
	sb := Prepare(t, d, spec)
	ctx := Context(t, time.Minute)
	p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Teardown(ctx); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	if err := d.Remove(ctx, spec.SessionID, spec.Generation); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	select {
	case <-sb.Done():
	case <-ctx.Done():
		t.Fatal("Done still open after Remove")
	}
	if code, err := p.Wait(ctx); code == 0 || ctx.Err() != nil {
		t.Errorf("a process of a removed sandbox: code %d, %v", code, err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Exec after Remove: %v, want ErrNotFound", err)
	}
	if c, err := sb.Dial(ctx, 8000); !errors.Is(err, sandbox.ErrNotFound) {
		if c != nil {
			c.Close()
		}
		t.Errorf("Dial after Remove: %v, want ErrNotFound", err)
	}
	sbs, err := d.Attach(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if find(sbs, spec) != nil {
		t.Error("Attach still lists the removed sandbox")
	}
	if _, err := os.Stat(spec.WorkingDir); err != nil {
		t.Errorf("Remove touched the working dir: %v", err)
	}
}

func testMissingImage(t *testing.T, d sandbox.Driver) {
	spec := NewSpec(t)
	spec.Image = "lathe.invalid/no-such-image:missing"
	ctx := Context(t, time.Minute)
	sb, err := d.Prepare(ctx, spec)
	if err == nil {
		sb.Teardown(ctx)
		t.Fatal("Prepare with a missing image succeeded")
	}
	if !errors.Is(err, sandbox.ErrImage) {
		t.Errorf("Prepare with a missing image: %v, want ErrImage", err)
	}
	sbs, _ := d.Attach(ctx)
	if find(sbs, spec) != nil {
		t.Error("a failed Prepare left a sandbox behind")
	}
}

// testAttach: a new driver instance finds a running sandbox and runs commands in it.
func testAttach(t *testing.T, d, restarted sandbox.Driver) {
	spec := NewSpec(t)
	Prepare(t, d, spec)
	ctx := Context(t, time.Minute)
	sbs, err := restarted.Attach(ctx)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	sb := find(sbs, spec)
	if sb == nil {
		t.Fatalf("Attach did not find %s among %d sandboxes", spec.SessionID, len(sbs))
	}
	if err := sb.Err(); err != nil {
		t.Fatalf("reattached sandbox is not running: %v", err)
	}
	if out, _, code := Output(t, sb, sandbox.ExecSpec{Args: []string{"pwd"}}); out != spec.WorkingDir+"\n" || code != 0 {
		t.Errorf("pwd in reattached sandbox: %q, %d", out, code)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"python3", "-c", PyServer, "8000", "reattached"}}); err != nil {
		t.Fatal(err)
	}
	if got := Greeting(t, sb, 8000, 30*time.Second); got != "reattached" {
		t.Errorf("Dial in reattached sandbox: %q", got)
	}
}

// testCrash: the main process killed behind the driver's back closes Done,
// and a restarted driver reports the sandbox as exited.
func testCrash(t *testing.T, d, restarted sandbox.Driver) {
	c, ok := d.(Crasher)
	if !ok {
		t.Skip("driver cannot crash a sandbox")
	}
	spec := NewSpec(t)
	sb := Prepare(t, d, spec)
	ctx := Context(t, time.Minute)
	if err := c.Crash(ctx, sb); err != nil {
		t.Fatalf("Crash: %v", err)
	}
	select {
	case <-sb.Done():
	case <-ctx.Done():
		t.Fatal("Done still open after the main process was killed")
	}
	if sb.Err() == nil {
		t.Error("Err is nil after Done")
	}
	if _, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Exec in crashed sandbox: %v, want ErrNotFound", err)
	}
	sbs, err := restarted.Attach(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := find(sbs, spec)
	if got == nil {
		t.Fatal("Attach does not report the crashed sandbox")
	}
	select {
	case <-got.Done():
	default:
		t.Error("Attach reports the crashed sandbox with Done open")
	}
	// Prepare replaces the dead generation with a running one.
	sb2, err := d.Prepare(ctx, spec)
	if err != nil {
		t.Fatalf("Prepare after crash: %v", err)
	}
	if out, _, _ := Output(t, sb2, sandbox.ExecSpec{Args: []string{"echo", "back"}}); out != "back\n" {
		t.Errorf("after re-Prepare: %q", out)
	}
}

func find(sbs []sandbox.Sandbox, spec sandbox.Spec) sandbox.Sandbox {
	for _, sb := range sbs {
		if sb.SessionID() == spec.SessionID && sb.Generation() == spec.Generation {
			return sb
		}
	}
	return nil
}

// WaitFor polls cond until it holds, failing the test after total: the
// tests' one poll (polltest.Until) with that deadline.
func WaitFor(t testing.TB, total time.Duration, cond func() bool) {
	t.Helper()
	polltest.Until(t, "the condition", cond, polltest.Within(total), polltest.Every(10*time.Millisecond))
}
