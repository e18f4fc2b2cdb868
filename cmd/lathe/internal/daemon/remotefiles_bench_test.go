package daemon

import (
	"testing"

	"lathe/runtime/sandbox/docker/dockertest"
)

// BenchmarkRemoteReadFile100K: GET /file of a 100 KiB file on a remote
// Session, through the file helper in its container (goal p50 ≤ 5 ms).
func BenchmarkRemoteReadFile100K(b *testing.B) {
	srv, dir, id, cid := startRemote(b)
	script := "head -c 102400 /dev/zero | tr '\\0' 'x' > hundred.txt"
	if out, err := dockerCLI(dockertest.Host(), "exec", "-w", dir, cid, "sh", "-c", script); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	benchReadFile(b, srv, id, "hundred.txt")
}

// BenchmarkRemoteTerminalEcho: a keystroke's round trip through the
// terminal WebSocket on a remote Session, which is the engine's exec
// attach (goal p50 ≤ 5 ms).
func BenchmarkRemoteTerminalEcho(b *testing.B) {
	srv, _, id, _ := startRemote(b)
	benchTerminalEcho(b, srv, id)
}
