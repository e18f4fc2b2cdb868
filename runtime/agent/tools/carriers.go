package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/helper"
)

// Processes in a sandbox are found by what their environment carries: a
// tool run's LATHE_TOOL_CALL marker, a task's LATHE_TASK_ID. Children
// inherit it, so one sweep finds a whole tree, whatever became of its
// first process.
//
// A daemon killed while a tool ran (a shell command, a hook, a Check) left
// that run in the sandbox, which outlives the daemon: nothing would ever
// end it, since its timeout was the daemon's to enforce. A run's marker
// begins with the token of the daemon process that started it, so that the
// next process, once it has the sandbox back, ends the runs another
// process started and did not see end (SweepLeftovers), and none of its
// own. A run that ended has no first process left, only what it put in
// the background on purpose (a dev server), which stays as it would have.

// newMarker is the LATHE_TOOL_CALL value of one run.
func newMarker() string {
	b := make([]byte, 8)
	rand.Read(b)
	return sandbox.ProcessToken + "." + hex.EncodeToString(b)
}

// NewCarrier is the environment entry (KEY=value) that makes a long-lived
// process Lathe starts in a sandbox (an outside agent, its gateway relay)
// a tool run's carrier: KillCarriers with it ends its whole tree, and a
// later daemon process's SweepLeftovers ends it if this one died first.
func NewCarrier() string { return markerEnv + "=" + newMarker() }

// KillCarriers sends SIGKILL to every process in sb whose environment has
// the entry (KEY=value, exactly), and says how many it killed.
func KillCarriers(ctx context.Context, sb sandbox.Sandbox, entry string) (int, error) {
	return killCarriers(ctx, sb, "entry", entry)
}

// SweepLeftovers kills the tool runs in sb that another daemon process
// started and that still run, and says how many processes it killed.
func SweepLeftovers(ctx context.Context, sb sandbox.Sandbox) (int, error) {
	return killCarriers(ctx, sb, "leftovers", markerEnv+"="+sandbox.ProcessToken+".")
}

func killCarriers(ctx context.Context, sb sandbox.Sandbox, mode, arg string) (int, error) {
	argv, err := helper.Argv(ctx, sb, KillCommand, mode, arg)
	if err != nil {
		return 0, fmt.Errorf("kill the carriers of %s: %w", arg, err)
	}
	out, errOut := NewBounded(64), NewBounded(1<<10)
	p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: argv, Stdout: out, Stderr: errOut})
	if err != nil {
		return 0, fmt.Errorf("kill the carriers of %s: %w", arg, err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		return 0, fmt.Errorf("kill the carriers of %s: the helper exited %d: %v %s", arg, code, err, strings.TrimSpace(errOut.String()))
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out.String()))
	return n, nil
}

// KillCommand is the helper command that kills carriers inside the
// sandbox: `kill entry KEY=value` kills every process whose environment
// has that entry; `kill leftovers PREFIX` the tool runs whose marker does
// not begin with PREFIX and whose first process still runs (an exec's
// first process is the child of the runtime, outside the sandbox: parent
// 0). A few passes, so that children forked meanwhile go too; it prints
// how many it killed. Arguments are literal, never patterns.
const KillCommand = "kill"

// Kill is the helper command KillCommand.
func Kill(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 2 || (args[0] != "entry" && args[0] != "leftovers") {
		fmt.Fprintln(stderr, "usage: kill entry KEY=value | kill leftovers PREFIX")
		return 2
	}
	chosen := map[string]bool{}
	if args[0] == "entry" {
		chosen[args[1]] = true
	} else {
		for _, pid := range pids() {
			if ppid(pid) != "0" {
				continue
			}
			if m, ok := envEntry(pid, func(kv string) bool { return strings.HasPrefix(kv, markerEnv+"=") }); ok && !strings.HasPrefix(m, args[1]) {
				chosen[m] = true
			}
		}
	}
	n, self := 0, strconv.Itoa(os.Getpid())
	for pass := 0; pass < 3 && len(chosen) > 0; pass++ {
		found := false
		for _, pid := range pids() {
			if pid == self {
				continue
			}
			if _, ok := envEntry(pid, func(kv string) bool { return chosen[kv] }); !ok {
				continue
			}
			id, _ := strconv.Atoi(pid)
			if syscall.Kill(id, syscall.SIGKILL) == nil {
				n++
				found = true
			}
		}
		if !found {
			break
		}
	}
	fmt.Fprintln(stdout, n)
	return 0
}

// pids lists the processes in /proc.
func pids() []string {
	es, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range es {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// ppid is a process's parent, "" when it is gone.
func ppid(pid string) string {
	b, _ := os.ReadFile("/proc/" + pid + "/status")
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// envEntry is the first entry of a process's environment that pick
// chooses.
func envEntry(pid string, pick func(string) bool) (string, bool) {
	b, _ := os.ReadFile("/proc/" + pid + "/environ")
	for kv := range strings.SplitSeq(string(b), "\x00") {
		if kv != "" && pick(kv) {
			return kv, true
		}
	}
	return "", false
}
