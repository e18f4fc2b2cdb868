package docker_test

import (
	"cmp"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
	"lathe/runtime/sandbox/sandboxtest"
)

// These tests only send traffic between this machine and its sandboxes: the
// only addresses dialled from a sandbox are the bridge gateway (or, on
// rootless Podman, this machine's own address), where the test itself
// listens, and a sibling sandbox.

// gatewayScript prints the default route's gateway and the sandbox's own
// address towards it, or nothing without a default route.
const gatewayScript = `import socket, struct
for line in open("/proc/net/route").readlines()[1:]:
    f = line.split()
    if f[1] == "00000000":
        gw = socket.inet_ntoa(struct.pack("<I", int(f[2], 16)))
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((gw, 9))
        print(gw, s.getsockname()[0])
`

// connectScript connects to argv[1]:argv[2] within 3 s and prints the first
// line it gets, or "refused: <reason>".
const connectScript = `import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    print(c.makefile().readline().strip())
except OSError as e:
    print("refused:", e)
`

// TestHostEgress: a host-egress sandbox has a way out through the engine's
// bridge (it reaches a listener on the gateway), and none to a sibling.
// Where the engine is this machine's (make docker-up), sibling traffic is
// dropped by Lathe's nftables table on the bridge.
func TestHostEgress(t *testing.T) {
	if !strings.HasPrefix(dockertest.Host(), "unix://") {
		t.Skip("the gateway listener needs the engine on this machine")
	}
	d := dockertest.Docker(t, docker.Options{Owner: "lathe-test-egress"})
	var sbs []sandbox.Sandbox
	var addrs []string
	var gw string
	for range 2 {
		spec := sandboxtest.NewSpec(t)
		spec.Network = sandbox.NetworkHostEgress
		sb := sandboxtest.Prepare(t, d, spec)
		out, errOut, _ := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"python3", "-c", gatewayScript}})
		f := strings.Fields(out)
		if len(f) != 2 {
			t.Fatalf("a host-egress sandbox has no default route: %q %q", out, errOut)
		}
		gw = f[0]
		sbs, addrs = append(sbs, sb), append(addrs, f[1])
	}
	// from is who the listener sees: the sandbox itself, through the bridge.
	host, from := gw, addrs[0]
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		// Rootless Podman keeps its bridges in the user's own network
		// namespace, whose way out is slirp4netns: this machine does not
		// hold the gateway. The way out reaches this machine's own
		// address instead, from this machine (slirp4netns connects for
		// the sandbox).
		host, from = outwardAddr(t), ""
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	if err != nil {
		t.Fatalf("listen on %s: %v", host, err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("from " + c.RemoteAddr().(*net.TCPAddr).IP.String() + "\n"))
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	out, _, _ := sandboxtest.Output(t, sbs[0], sandbox.ExecSpec{Args: []string{"python3", "-c", connectScript, host, port}})
	if !strings.HasPrefix(out, "from ") || from != "" && out != "from "+from+"\n" {
		t.Errorf("sandbox to %s: %q, want from %s", host, out, cmp.Or(from, "anywhere"))
	}
	// The sibling listens on every address, not only its loopback.
	anyAddr := strings.Replace(sandboxtest.PyServer, `"127.0.0.1"`, `"0.0.0.0"`, 1)
	if _, err := sbs[1].Exec(sandboxtest.Context(t, time.Minute), sandbox.ExecSpec{Args: []string{"python3", "-c", anyAddr, "8000", "sibling"}}); err != nil {
		t.Fatal(err)
	}
	if got := sandboxtest.Greeting(t, sbs[1], 8000, 30*time.Second); got != "sibling" {
		t.Fatalf("the sibling's own listener: %q", got)
	}
	out, _, _ = sandboxtest.Output(t, sbs[0], sandbox.ExecSpec{Args: []string{"python3", "-c", connectScript, addrs[1], "8000"}})
	if !strings.HasPrefix(out, "refused:") {
		t.Errorf("sandbox to its sibling %s: %q, want no way through", addrs[1], out)
	}
}

// outwardAddr is this machine's address on its default route (no packet
// is sent: a UDP socket only picks its source).
func outwardAddr(t *testing.T) string {
	t.Helper()
	c, err := net.Dial("udp4", "192.0.2.1:9") // TEST-NET-1
	if err != nil {
		t.Fatalf("no default route on this machine: %v", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}
