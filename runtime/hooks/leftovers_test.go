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

func TestParseStart(t *testing.T) {
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 987654 0 0 0"
	for _, tc := range []struct {
		name, line string
		want       uint64
		bad        bool
	}{
		{name: "plain", line: "42 (sh) S 1 42 42" + tail, want: 987654},
		{name: "a command with ) and spaces", line: "7 (a) b (c) R 1 9 9" + tail, want: 987654},
		{name: "no command", line: "42 sh S 1 42", bad: true},
		{name: "short", line: "42 (sh) S 1 42 42", bad: true},
		{name: "not a number", line: "42 (sh) S 1 42 42" + strings.Replace(tail, "987654", "x", 1), bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStart(tc.line)
			if (err != nil) != tc.bad || got != tc.want {
				t.Errorf("parseStart = %d, %v", got, err)
			}
		})
	}
}

func FuzzParseStart(f *testing.F) {
	f.Add("42 (sh) S 1 42 42 0 0 0 0 0 0 0 0 0 0 0 0 0 0 987654 0 0 0")
	f.Add("7 (a) b (c) R")
	f.Fuzz(func(t *testing.T, line string) {
		if start, err := parseStart(line); err == nil && !strings.Contains(line, ")") {
			t.Fatalf("parsed %d from a line without a command", start)
		}
	})
}

// TestSweepHost: what the host hooks of a killed daemon process left
// running ends at the next start, a hook under way and what an ended one
// put in the background alike; a live daemon's hook stays.
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
	group := func(m mark, script string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), hostRunEnv+"="+m.daemon)
		if m.run != "" {
			cmd.Env = append(cmd.Env, hostRunIDEnv+"="+m.run)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
		return cmd
	}
	left := group(mark{dead, "7"}, "sleep 321 & sleep 322")  // a run of a dead daemon
	group(mark{self, "3"}, "sleep 323")                      // a run of this one
	ended := group(mark{daemon: dead}, "sleep 324 & exit 0") // an earlier version's mark
	if err := ended.Wait(); err != nil {
		t.Fatal(err)
	}
	sleeps := func() []string {
		var out []string
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range procs {
			if _, ok := hostMark(p); !ok {
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

	// At least this test's run: a killed daemon of an earlier test may
	// have left one too.
	if n := SweepHost(); n < 1 {
		t.Fatalf("SweepHost ended %d runs", n)
	}
	left.Wait()
	polltest.Until(t, "the dead daemon's processes to go", func() bool { return len(sleeps()) == 1 }, polltest.Within(10*time.Second))
	if got := sleeps(); !strings.HasPrefix(got[0], "sleep 323") {
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

// BenchmarkHostHook: a host hook that does nothing, with the walks of
// /proc that end what it left (endRun).
func BenchmarkHostHook(b *testing.B) {
	dir := b.TempDir()
	at := Place{Dir: dir, HostDir: dir}
	h := Hook{Event: PreToolUse, Name: "noop", Host: true, Command: "true"}
	for b.Loop() {
		if o := Run(b.Context(), h, Input{}, at); o.Decision != Allow {
			b.Fatalf("%+v", o)
		}
	}
}
