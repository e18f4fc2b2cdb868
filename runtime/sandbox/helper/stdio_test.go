package helper_test

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"lathe/runtime/sandbox/helper"
	"lathe/runtime/sandbox/helper/helpertest"
)

// TestServeStdioPolls: the helper in serve mode has its stdin and stdout
// in Go's poller (O_NONBLOCK on the exec's pipes), so that its session's
// reader and writer, waiting on them, hold no processor from the streams.
func TestServeStdioPolls(t *testing.T) {
	cmd := exec.Command(helpertest.Path(t), helper.Subcommand, "serve")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // the hello
		t.Fatal(err)
	}
	for _, fd := range []string{"0", "1"} {
		flags := fdFlags(t, cmd.Process.Pid, fd)
		if flags&syscall.O_NONBLOCK == 0 {
			t.Errorf("fd %s of the helper: flags %#o, not O_NONBLOCK", fd, flags)
		}
	}
}

// fdFlags reads the file status flags of fd in process pid.
func fdFlags(t *testing.T, pid int, fd string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + fd)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	t.Fatalf("no flags in fdinfo %s", b)
	return 0
}
