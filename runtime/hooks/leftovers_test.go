package hooks

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"lathe/runtime/polltest"
)

func TestParseStat(t *testing.T) {
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 987654 0 0 0"
	for _, tc := range []struct {
		name, line string
		want       stat
		bad        bool
	}{
		{name: "plain", line: "42 (sh) S 1 42 42" + tail, want: stat{pgrp: 42, start: 987654}},
		{name: "a command with ) and spaces", line: "7 (a) b (c) R 1 9 9" + tail, want: stat{pgrp: 9, start: 987654}},
		{name: "no command", line: "42 sh S 1 42", bad: true},
		{name: "short", line: "42 (sh) S 1 42 42", bad: true},
		{name: "not a number", line: "42 (sh) S 1 x 42" + tail, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat(tc.line)
			if (err != nil) != tc.bad || got != tc.want {
				t.Errorf("parseStat = %+v, %v", got, err)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add("42 (sh) S 1 42 42 0 0 0 0 0 0 0 0 0 0 0 0 0 0 987654 0 0 0")
	f.Add("7 (a) b (c) R")
	f.Fuzz(func(t *testing.T, line string) {
		if st, err := parseStat(line); err == nil && !strings.Contains(line, ")") {
			t.Fatalf("parsed %+v from a line without a command", st)
		}
	})
}

// TestSweepHost: the host hook a killed daemon process left under way
// ends at the next start; a live daemon's hook, and what an ended hook
// put in the background, stay.
func TestSweepHost(t *testing.T) {
	gone := exec.Command("sleep", "100")
	if err := gone.Start(); err != nil {
		t.Fatal(err)
	}
	dead, err := procID(gone.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	gone.Process.Kill()
	gone.Wait()
	group := func(mark, script string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), hostRunEnv+"="+mark)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
		return cmd
	}
	left := group(dead, "sleep 321 & sleep 322")
	group(self, "sleep 323")
	ended := group(dead, "sleep 324 & exit 0")
	if err := ended.Wait(); err != nil {
		t.Fatal(err)
	}
	sleeps := func() []string {
		var out []string
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range procs {
			if hostMark(p) == "" {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(p, "cmdline")); err == nil && strings.HasPrefix(string(b), "sleep\x0032") {
				out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
		slices.Sort(out)
		return out
	}
	polltest.Until(t, "every sleep to run", func() bool { return len(sleeps()) == 4 }, polltest.Within(10*time.Second))

	// At least this test's group: a killed daemon of an earlier test may
	// have left one too.
	if n := SweepHost(); n < 1 {
		t.Fatalf("SweepHost ended %d groups", n)
	}
	left.Wait()
	polltest.Until(t, "the killed group to go", func() bool { return len(sleeps()) == 2 }, polltest.Within(10*time.Second))
	if got := sleeps(); !strings.HasPrefix(got[0], "sleep 323") || !strings.HasPrefix(got[1], "sleep 324") {
		t.Errorf("left running: %q", got)
	}
}

// BenchmarkSweepHost: what the sweep adds to a start, a walk of /proc.
func BenchmarkSweepHost(b *testing.B) {
	for b.Loop() {
		SweepHost()
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	b.ReportMetric(float64(len(procs)), "processes")
}
