package containerd_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/sandboxtest"
)

// BenchmarkPrepareReady measures Prepare, from nothing to a sandbox that runs
// commands, with the image cached. Each sandbox is removed untimed.
//
//	go test -run '^$' -bench PrepareReady -benchtime 20x ./runtime/sandbox/containerd/
func BenchmarkPrepareReady(b *testing.B) {
	d := containerdtest.Containerd(b)
	ctx := sandboxtest.Context(b, 10*time.Minute)
	var prep, exec []time.Duration
	for b.Loop() {
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
		exec = append(exec, time.Since(start))
		b.StopTimer()
		if err := sb.Teardown(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(prep, 50)), "p50-ms")
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(prep, 95)), "p95-ms")
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(exec, 50)), "p50-first-exec-ms")
	b.ReportMetric(sandboxtest.MS(sandboxtest.Percentile(exec, 95)), "p95-first-exec-ms")
}

// BenchmarkTwentySandboxes prepares 20 sandboxes at once and reports the
// time until all are ready and the host memory they take: containerd's
// shims, the processes inside, and containerd itself.
//
//	go test -run '^$' -bench TwentySandboxes -benchtime 1x ./runtime/sandbox/containerd/
func BenchmarkTwentySandboxes(b *testing.B) {
	const n = 20
	d := containerdtest.Containerd(b)
	containerdBefore := sandboxtest.RSS(sandboxtest.PidsOf(func(cmd string) bool { return strings.HasPrefix(cmd, "containerd ") })...)
	for b.Loop() {
		specs := make([]sandbox.Spec, n)
		for i := range specs {
			specs[i] = sandboxtest.NewSpec(b)
		}
		sbs, all := sandboxtest.PrepareAll(b, d, specs)
		b.StopTimer()
		b.ReportMetric(sandboxtest.MS(all), "all-ready-ms")
		var shims, shimsPss, inside, insidePss int64
		for _, spec := range specs {
			id := containerd.ContainerID(spec.SessionID, spec.Generation)
			shim := sandboxtest.PidsOf(func(cmd string) bool {
				return strings.Contains(cmd, "containerd-shim") && strings.Contains(cmd, " -id "+id+" ")
			})
			shims += sandboxtest.RSS(shim...)
			shimsPss += sandboxtest.PSS(shim...)
			inside += sandboxtest.RSS(cgroupPids(id)...)
			insidePss += sandboxtest.PSS(cgroupPids(id)...)
		}
		containerd := sandboxtest.RSS(sandboxtest.PidsOf(func(cmd string) bool { return strings.HasPrefix(cmd, "containerd ") })...)
		b.ReportMetric(float64(shims)/n/1024, "shim-rss-MiB/sandbox")
		b.ReportMetric(float64(shims)/1024, "shims-rss-MiB")
		b.ReportMetric(float64(shimsPss)/1024, "shims-pss-MiB")
		b.ReportMetric(float64(inside)/1024, "inside-rss-MiB")
		b.ReportMetric(float64(insidePss)/1024, "inside-pss-MiB")
		b.ReportMetric(float64(containerd-containerdBefore)/1024, "containerd-rss-growth-MiB")
		b.ReportMetric(float64(sandboxtest.RSS(os.Getpid()))/1024, "client-process-rss-MiB")
		sandboxtest.TeardownAll(b, sbs)
		b.StartTimer()
	}
}

// cgroupPids lists the processes of a container (cgroup v1, then v2).
func cgroupPids(id string) []int {
	for _, f := range []string{"/sys/fs/cgroup/pids/lathe/" + id + "/cgroup.procs", "/sys/fs/cgroup/lathe/" + id + "/cgroup.procs"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var pids []int
		for _, l := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(l); err == nil {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	return nil
}
