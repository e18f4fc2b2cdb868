package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"lathe/runtime/sandbox"
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

// carriersScript sends SIGKILL to every process in the sandbox with an
// environment entry among the chosen ones, a few passes so that children
// forked meanwhile go too, and prints how many it killed. With $1 "entry",
// the chosen entry is $2. With $1 "leftovers", they are the tool runs'
// markers whose first process still runs (an exec's first process is the
// child of the runtime, outside the sandbox: parent 0) and that do not
// begin with $2. Arguments are literal, never patterns. It is bash alone
// (no grep, no pkill): the image may have little else.
const carriersScript = `declare -A chosen
if [ "$1" = entry ]; then
  chosen[$2]=1
else
  for d in /proc/[0-9]*; do
    ppid=
    while read -r k v; do [ "$k" = PPid: ] && { ppid=$v; break; }; done < "$d/status" 2>/dev/null
    [ "$ppid" = 0 ] || continue
    while IFS= read -r -d '' kv; do
      [[ $kv == ` + markerEnv + `=* ]] || continue
      [[ $kv == "$2"* ]] || chosen[$kv]=1
      break
    done < "$d/environ" 2>/dev/null
  done
fi
n=0
for pass in 1 2 3; do
  [ ${#chosen[@]} = 0 ] && break
  found=0
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = "$$" ] && continue
    while IFS= read -r -d '' kv; do
      [ -n "$kv" ] && [ -n "${chosen[$kv]+x}" ] || continue
      kill -KILL "$pid" 2>/dev/null && { n=$((n+1)); found=1; }
      break
    done < "$d/environ" 2>/dev/null
  done
  [ $found = 0 ] && break
done
echo $n
`

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
	out := NewBounded(64)
	p, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"bash", "-c", carriersScript, "lathe-kill", mode, arg}, Stdout: out})
	if err != nil {
		return 0, fmt.Errorf("kill the carriers of %s: %w", arg, err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		return 0, fmt.Errorf("kill the carriers of %s: the kill script exited %d: %v", arg, code, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out.String()))
	return n, nil
}
