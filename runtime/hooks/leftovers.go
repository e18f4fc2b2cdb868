package hooks

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// A host hook runs in a process group of its own (its sh leads it), but
// what it starts may leave the group (`setsid sleep 600 &`, a daemonising
// double fork), and its timeout is the daemon's to enforce: a daemon
// killed while one ran left it running for good. So every process of a
// host hook carries its run's mark, LATHE_HOST_RUN=<pid>.<start time> (the
// daemon process that started it) and LATHE_HOST_RUN_ID=<run> (the run's
// number in it), which every process it starts inherits. Nothing a hook started outlives it:
// when its shell exits (or is killed at the timeout), every process
// carrying the run's mark is killed (endRun). Each start kills every
// process whose mark names a daemon process that no longer runs
// (SweepHost). A process that drops its environment (env -i) drops the
// mark with it and is not found: a host hook is the operator's own
// command, trusted not to hide from the daemon on purpose.

// hostRunEnv and hostRunIDEnv name the environment entries of a host
// hook's processes (mark).
const (
	hostRunEnv   = "LATHE_HOST_RUN"
	hostRunIDEnv = "LATHE_HOST_RUN_ID"
)

// self is this process as a host hook's mark names it.
var self = func() string {
	id, err := procID(os.Getpid())
	if err != nil {
		return strconv.Itoa(os.Getpid())
	}
	return id
}()

// procID names process pid by its PID and start time (clock ticks after
// boot), which a later process with the same PID does not share.
func procID(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	start, err := parseStart(string(b))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d", pid, start), nil
}

// parseStart reads the start time from a /proc/<pid>/stat line: "pid
// (comm) state ppid pgrp … starttime …", comm being any bytes, a ')' or a
// space among them.
func parseStart(line string) (uint64, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat line without a command: %.40q", line)
	}
	f := strings.Fields(line[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("stat line of %d fields after the command", len(f))
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat start time: %w", err)
	}
	return start, nil
}

// runs numbers this daemon process's host hook runs.
var runs atomic.Uint64

// mark is what a host hook's processes carry: the daemon process that
// started the run (LATHE_HOST_RUN, "<pid>.<start time>") and the run's
// number in it (LATHE_HOST_RUN_ID; none from an earlier version).
type mark struct{ daemon, run string }

// newRun marks a new host hook run of this daemon process.
func newRun() mark { return mark{self, strconv.FormatUint(runs.Add(1), 10)} }

// env is the mark as environment entries.
func (m mark) env() []string {
	return []string{hostRunEnv + "=" + m.daemon, hostRunIDEnv + "=" + m.run}
}

// endRun kills every process left of host hook run m.
func endRun(m mark) {
	killMarked(func(o mark) bool { return o == m })
}

// SweepHost kills what the host hooks of a daemon process which no longer
// runs left running, and says how many runs it ended. A process the daemon
// may not inspect (another user's) is not seen.
func SweepHost() int {
	gone := map[string]bool{} // by daemon process
	ended := killMarked(func(m mark) bool {
		if m.daemon == self {
			return false
		}
		if v, ok := gone[m.daemon]; ok {
			return v
		}
		pid, _, _ := strings.Cut(m.daemon, ".")
		dpid, err := strconv.Atoi(pid)
		if err != nil {
			return false
		}
		id, err := procID(dpid)
		gone[m.daemon] = err != nil || id != m.daemon
		return gone[m.daemon]
	})
	return len(ended)
}

// maxKillRounds bounds killMarked's walks of /proc.
const maxKillRounds = 64

// killMarked sends SIGKILL to every process of this user whose mark match
// accepts, walk after walk of /proc until one finds none it has not
// already killed: a process that forked while a walk ran has its child
// found by the next (a killed process forks no more). It returns the
// marks of the processes it killed.
func killMarked(match func(mark) bool) map[mark]bool {
	marks := map[mark]bool{}
	killed := map[int]bool{}
	for range maxKillRounds {
		fresh := false
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range procs {
			pid, err := strconv.Atoi(filepath.Base(p))
			if err != nil || killed[pid] {
				continue
			}
			m, ok := hostMark(p)
			if !ok || !match(m) || !ownedBySelf(p) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed[pid], marks[m], fresh = true, true, true
			}
		}
		if !fresh {
			break
		}
	}
	return marks
}

// hostMark is the mark of process dir; false when it carries none.
func hostMark(dir string) (m mark, ok bool) {
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		return m, false
	}
	for kv := range strings.SplitSeq(string(env), "\x00") {
		if v, found := strings.CutPrefix(kv, hostRunEnv+"="); found {
			m.daemon, ok = v, v != ""
		} else if v, found := strings.CutPrefix(kv, hostRunIDEnv+"="); found {
			m.run = v
		}
	}
	return m, ok
}

// ownedBySelf reports whether process dir runs as this process's user, as
// its host hooks do: another user's mark is not this daemon's to obey.
func ownedBySelf(dir string) bool {
	fi, err := os.Stat(dir)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uint32(os.Geteuid())
}
