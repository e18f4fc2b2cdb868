package containerd_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	b.ReportMetric(ms(percentile(prep, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(prep, 95)), "p95-ms")
	b.ReportMetric(ms(percentile(exec, 50)), "p50-first-exec-ms")
	b.ReportMetric(ms(percentile(exec, 95)), "p95-first-exec-ms")
}

// BenchmarkTwentySandboxes prepares 20 sandboxes at once and reports the
// time until all are ready and the host memory they take: containerd's
// shims, the processes inside, and containerd itself.
//
//	go test -run '^$' -bench TwentySandboxes -benchtime 1x ./runtime/sandbox/containerd/
func BenchmarkTwentySandboxes(b *testing.B) {
	const n = 20
	d := containerdtest.Containerd(b)
	ctx := sandboxtest.Context(b, 10*time.Minute)
	containerdBefore := rssOf(pidsOf(func(cmd string) bool { return strings.HasPrefix(cmd, "containerd ") }))
	for b.Loop() {
		specs := make([]sandbox.Spec, n)
		sbs := make([]sandbox.Sandbox, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range n {
			specs[i] = sandboxtest.NewSpec(b)
			wg.Go(func() { sbs[i], errs[i] = d.Prepare(ctx, specs[i]) })
		}
		wg.Wait()
		all := time.Since(start)
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(ms(all), "all-ready-ms")
		var shims, shimsPss, inside, insidePss int64
		for _, spec := range specs {
			id := containerd.ContainerID(spec.SessionID, spec.Generation)
			shim := pidsOf(func(cmd string) bool {
				return strings.Contains(cmd, "containerd-shim") && strings.Contains(cmd, " -id "+id+" ")
			})
			shims += rssOf(shim)
			shimsPss += pssOf(shim)
			inside += rssOf(cgroupPids(id))
			insidePss += pssOf(cgroupPids(id))
		}
		containerd := rssOf(pidsOf(func(cmd string) bool { return strings.HasPrefix(cmd, "containerd ") }))
		b.ReportMetric(float64(shims)/n/1024, "shim-rss-MiB/sandbox")
		b.ReportMetric(float64(shims)/1024, "shims-rss-MiB")
		b.ReportMetric(float64(shimsPss)/1024, "shims-pss-MiB")
		b.ReportMetric(float64(inside)/1024, "inside-rss-MiB")
		b.ReportMetric(float64(insidePss)/1024, "inside-pss-MiB")
		b.ReportMetric(float64(containerd-containerdBefore)/1024, "containerd-rss-growth-MiB")
		b.ReportMetric(float64(rssOf([]int{os.Getpid()}))/1024, "client-process-rss-MiB")
		for i, sb := range sbs {
			wg.Go(func() {
				if err := sb.Teardown(ctx); err != nil {
					b.Errorf("teardown %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		b.StartTimer()
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// pidsOf lists the processes whose command line matches.
func pidsOf(match func(cmdline string) bool) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue
		}
		if match(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			pids = append(pids, pid)
		}
	}
	return pids
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

// rssOf sums the resident memory of pids, in KiB.
func rssOf(pids []int) int64 { return sumField(pids, "status", "VmRSS:") }

// pssOf sums the proportional set size of pids, in KiB: shared pages (the
// shim binary, libraries) are split between the processes that map them.
func pssOf(pids []int) int64 { return sumField(pids, "smaps_rollup", "Pss:") }

func sumField(pids []int, file, field string) int64 {
	var total int64
	for _, pid := range pids {
		f, err := os.Open(fmt.Sprintf("/proc/%d/%s", pid, file))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), field); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				total += kb
				break
			}
		}
		f.Close()
	}
	return total
}
