package sandboxtest

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
)

// The bookkeeping both drivers' benchmarks share: percentiles, sandboxes
// prepared at once, and the memory of host processes.

// MS is d in milliseconds.
func MS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Percentile is the p-th percentile (0–100) of ds, which it leaves as it
// is.
func Percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// PrepareAll prepares one sandbox per spec, all at once, and answers them
// in the order of specs with the time until the last was ready; a failed
// Prepare is fatal.
func PrepareAll(tb testing.TB, d sandbox.Driver, specs []sandbox.Spec) ([]sandbox.Sandbox, time.Duration) {
	ctx := Context(tb, 10*time.Minute)
	sbs := make([]sandbox.Sandbox, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	start := time.Now()
	for i := range specs {
		wg.Go(func() { sbs[i], errs[i] = d.Prepare(ctx, specs[i]) })
	}
	wg.Wait()
	took := time.Since(start)
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("prepare %d: %v", i, err)
		}
	}
	return sbs, took
}

// TeardownAll tears sbs down at once; a failure is an error of tb.
func TeardownAll(tb testing.TB, sbs []sandbox.Sandbox) {
	ctx := Context(tb, 10*time.Minute)
	var wg sync.WaitGroup
	for i, sb := range sbs {
		wg.Go(func() {
			if err := sb.Teardown(ctx); err != nil {
				tb.Errorf("teardown %d: %v", i, err)
			}
		})
	}
	wg.Wait()
}

// PidsOf lists the processes whose command line (arguments joined by
// spaces) matches.
func PidsOf(match func(cmdline string) bool) []int {
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

// RSS sums the resident memory of pids, in KiB; an unknown pid counts 0.
func RSS(pids ...int) int64 { return sumField(pids, "status", "VmRSS:") }

// PSS sums the proportional set size of pids, in KiB: shared pages (a
// binary, libraries) are split between the processes that map them.
func PSS(pids ...int) int64 { return sumField(pids, "smaps_rollup", "Pss:") }

func sumField(pids []int, file, field string) int64 {
	var total int64
	for _, pid := range pids {
		if pid <= 0 {
			continue
		}
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
