package hooks

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A host hook runs in a process group of its own (its sh leads it), and
// its timeout is the daemon's to enforce: a daemon killed while one ran
// left it running for good. So every host hook carries the daemon process
// that started it, LATHE_HOST_RUN=<pid>.<start time>, and each start ends
// the groups whose leader still runs and whose daemon process no longer
// does (SweepHost). A hook that ended has no leader left, only what it put
// in the background on purpose, which stays as it would have.

// hostRunEnv names the environment entry of a host hook's processes.
const hostRunEnv = "LATHE_HOST_RUN"

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
	st, err := parseStat(string(b))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d", pid, st.start), nil
}

type stat struct {
	pgrp  int
	start uint64
}

// parseStat reads the process group and the start time from a
// /proc/<pid>/stat line: "pid (comm) state ppid pgrp … starttime …", comm
// being any bytes, a ')' or a space among them.
func parseStat(line string) (stat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("stat line without a command: %.40q", line)
	}
	f := strings.Fields(line[i+1:])
	if len(f) < 20 {
		return stat{}, fmt.Errorf("stat line of %d fields after the command", len(f))
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return stat{}, fmt.Errorf("stat process group: %w", err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("stat start time: %w", err)
	}
	return stat{pgrp: pgrp, start: start}, nil
}

// SweepHost kills the host hooks that a daemon process which no longer
// runs left under way, and says how many it ended. A process the daemon
// may not inspect (another user's) is not seen.
func SweepHost() int {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	n := 0
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		mark := hostMark(p)
		if mark == "" || mark == self || !ownedBySelf(p) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p, "stat"))
		if err != nil {
			continue
		}
		if st, err := parseStat(string(b)); err != nil || st.pgrp != pid {
			continue // not a hook's leader: its hook ended, or it is a child
		}
		daemon, _, _ := strings.Cut(mark, ".")
		dpid, err := strconv.Atoi(daemon)
		if err != nil {
			continue
		}
		if id, err := procID(dpid); err == nil && id == mark {
			continue // its daemon process runs
		}
		if syscall.Kill(-pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// hostMark is the LATHE_HOST_RUN value of process dir, or "".
func hostMark(dir string) string {
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		return ""
	}
	for kv := range strings.SplitSeq(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, hostRunEnv+"="); ok {
			return v
		}
	}
	return ""
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
