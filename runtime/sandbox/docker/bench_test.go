package docker_test

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
	"lathe/runtime/sandbox/sandboxtest"
)

// BenchmarkDockerReady compares, on the engine of dockertest.Host with the
// image cached, `docker run --rm <template> true` (the CLI, when on PATH)
// with the driver's Prepare and Prepare through a first exec's end. Each
// sandbox is removed untimed.
//
//	go test -run '^$' -bench DockerReady -benchtime 20x ./runtime/sandbox/docker/
func BenchmarkDockerReady(b *testing.B) {
	d := dockertest.Docker(b, docker.Options{Owner: "lathe-bench"})
	ctx := sandboxtest.Context(b, 10*time.Minute)
	cli, cliErr := exec.LookPath("docker")
	var run, prep, first []time.Duration
	for b.Loop() {
		if cliErr == nil {
			start := time.Now()
			out, err := exec.CommandContext(ctx, cli, "-H", dockertest.Host(), "run", "--rm", "--network", "none", docker.DefaultImage, "true").CombinedOutput()
			if err != nil {
				b.Fatalf("docker run: %v: %s", err, out)
			}
			run = append(run, time.Since(start))
		}
		spec := sandboxtest.NewSpec(b)
		start := time.Now()
		sb, err := d.Prepare(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		prep = append(prep, time.Since(start))
		p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"true"}})
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(ctx); code != 0 || err != nil {
			b.Fatal(code, err)
		}
		first = append(first, time.Since(start))
		b.StopTimer()
		if err := sb.Teardown(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	if len(run) > 0 {
		b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(run, 50)), "p50-docker-run-ms")
		b.ReportMetric(float64(sandboxtest.Percentile(first, 50))/float64(sandboxtest.Percentile(run, 50)), "first-exec/docker-run")
	}
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(prep, 50)), "p50-prepare-ms")
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(first, 50)), "p50-first-exec-ms")
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(first, 95)), "p95-first-exec-ms")
}

// BenchmarkDockerExec measures one exec of `true` to its exit code in a
// running sandbox, and one with a byte in and out.
//
//	go test -run '^$' -bench DockerExec -benchtime 200x ./runtime/sandbox/docker/
func BenchmarkDockerExec(b *testing.B) {
	d := dockertest.Docker(b, docker.Options{Owner: "lathe-bench"})
	sb := sandboxtest.Prepare(b, d, sandboxtest.NewSpec(b))
	ctx := sandboxtest.Context(b, 10*time.Minute)
	var rt []time.Duration
	for b.Loop() {
		start := time.Now()
		var out strings.Builder
		p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"cat"}, Stdin: strings.NewReader("x"), Stdout: &out})
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(ctx); code != 0 || err != nil || out.String() != "x" {
			b.Fatal(code, err, out.String())
		}
		rt = append(rt, time.Since(start))
	}
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(rt, 50)), "p50-ms")
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(rt, 95)), "p95-ms")
}

// pyEcho echoes every connection to 127.0.0.1:argv[1], one thread each.
const pyEcho = `import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
def echo(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
`

// BenchmarkDockerDial measures Dial to a listener in the sandbox until its
// first echoed byte: warm, with the sandbox's relay running, and cold,
// right after its relay was closed (an exec and an interpreter's start);
// then one byte's round trip on the open connection.
//
//	go test -run '^$' -bench DockerDial -benchtime 200x ./runtime/sandbox/docker/
func BenchmarkDockerDial(b *testing.B) {
	d := dockertest.Docker(b, docker.Options{Owner: "lathe-bench"})
	sb := sandboxtest.Prepare(b, d, sandboxtest.NewSpec(b))
	ctx := sandboxtest.Context(b, 10*time.Minute)
	if _, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"python3", "-c", pyEcho, "8000"}}); err != nil {
		b.Fatal(err)
	}
	sandboxtest.WaitFor(b, 30*time.Second, func() bool {
		c, err := sb.Dial(ctx, 8000)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	var warm, cold, rt []time.Duration
	buf := make([]byte, 1)
	dial := func() (net.Conn, time.Duration) {
		start := time.Now()
		c, err := sb.Dial(ctx, 8000)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write([]byte("x")); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		return c, time.Since(start)
	}
	for b.Loop() {
		c, el := dial()
		warm = append(warm, el)
		start := time.Now()
		if _, err := c.Write([]byte("x")); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		rt = append(rt, time.Since(start))
		c.Close()
		b.StopTimer()
		docker.CloseLink(sb.(*docker.Sandbox))
		b.StartTimer()
		c, el = dial()
		cold = append(cold, el)
		c.Close()
	}
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(warm, 50)), "p50-warm-connect-ms")
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(cold, 50)), "p50-cold-connect-ms")
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(rt, 50)), "p50-round-trip-ms")
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(rt, 95)), "p95-round-trip-ms")
}

// BenchmarkDockerTenSandboxes prepares ten sandboxes at once and reports the
// time until the last is ready, this (client) process's RSS, and, where the
// engine is make docker-up's, dockerd's RSS growth.
//
//	go test -run '^$' -bench DockerTenSandboxes -benchtime 1x ./runtime/sandbox/docker/
func BenchmarkDockerTenSandboxes(b *testing.B) {
	const n = 10
	d := dockertest.Docker(b, docker.Options{Owner: "lathe-bench"})
	dockerd := 0
	if pid, err := os.ReadFile("/run/lathe/docker.pid"); err == nil {
		dockerd, _ = strconv.Atoi(strings.TrimSpace(string(pid)))
	}
	before := sandboxtest.RSS(dockerd)
	for b.Loop() {
		specs := make([]sandbox.Spec, n)
		for i := range specs {
			specs[i] = sandboxtest.NewSpec(b)
		}
		sbs, all := sandboxtest.PrepareAll(b, d, specs)
		b.StopTimer()
		b.ReportMetric(sandboxtest.MS(all), "all-ready-ms")
		b.ReportMetric(float64(sandboxtest.RSS(os.Getpid()))/1024, "client-rss-MiB")
		if dockerd > 0 {
			b.ReportMetric(float64(sandboxtest.RSS(dockerd)-before)/1024, "dockerd-rss-growth-MiB")
		}
		sandboxtest.TeardownAll(b, sbs)
		b.StartTimer()
	}
}
