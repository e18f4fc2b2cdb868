package containerd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"lathe/runtime/polltest"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/sandboxtest"

	"github.com/containerd/containerd/v2/client"
)

// These tests only ever send traffic between this machine and its sandboxes:
// the only address dialled from a sandbox is the bridge gateway, where the
// test itself listens.

var (
	subnet  = netip.MustParsePrefix(containerd.DefaultSubnet)
	gateway = subnet.Addr().Next()
)

// netInfo is what a sandbox sees of its network.
type netInfo struct {
	Links   []string `json:"links"`
	Addr    string   `json:"addr"`    // of eth0, "" without one
	Default string   `json:"default"` // interface and gateway of the default route
}

const netInfoScript = `
import fcntl, json, os, socket, struct
info = {"links": sorted(os.listdir("/sys/class/net")), "addr": "", "default": ""}
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    info["addr"] = socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", b"eth0"))[20:24])
except OSError:
    pass
for line in open("/proc/net/route").readlines()[1:]:
    f = line.split()
    if f[1] == "00000000":
        info["default"] = f[0] + " " + socket.inet_ntoa(struct.pack("<I", int(f[2], 16)))
print(json.dumps(info))
`

func sandboxNet(t *testing.T, sb sandbox.Sandbox) netInfo {
	t.Helper()
	out, errs, code := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"python3", "-c", netInfoScript}})
	if code != 0 {
		t.Fatalf("net info: exit %d: %s", code, errs)
	}
	var ni netInfo
	if err := json.Unmarshal([]byte(out), &ni); err != nil {
		t.Fatalf("net info %q: %v", out, err)
	}
	return ni
}

// connectScript connects to argv[1]:argv[2], sends "ping" and prints the reply.
const connectScript = `
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
c.sendall(b"ping\n")
print(c.makefile().readline().strip())
`

// gatewayServer listens on the bridge gateway and answers each connection
// with the address it came from.
func gatewayServer(t *testing.T) (port string) {
	t.Helper()
	l, err := net.Listen("tcp4", net.JoinHostPort(gateway.String(), "0"))
	if err != nil {
		t.Fatalf("listen on the bridge gateway: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					fmt.Fprintf(c, "from %s\n", c.RemoteAddr().(*net.TCPAddr).IP)
				}
			}()
		}
	}()
	_, port, _ = net.SplitHostPort(l.Addr().String())
	return port
}

func egressSpec(t *testing.T) sandbox.Spec {
	spec := sandboxtest.NewSpec(t)
	spec.Network = sandbox.NetworkHostEgress
	return spec
}

func labelAddr(t *testing.T, spec sandbox.Spec) string {
	t.Helper()
	c, err := client.New(containerdtest.Address(), client.WithDefaultNamespace(containerd.DefaultNamespace))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := sandboxtest.Context(t, time.Minute)
	ctr, err := c.LoadContainer(ctx, containerd.ContainerID(spec.SessionID, spec.Generation))
	if err != nil {
		t.Fatal(err)
	}
	labels, err := ctr.Labels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return labels["lathe.addr"]
}

func hostVeth(addr string) string {
	a := netip.MustParseAddr(addr).As4()
	return fmt.Sprintf("lh%02x%02x%02x%02x", a[0], a[1], a[2], a[3])
}

func linkExists(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

func TestHostEgress(t *testing.T) {
	d := containerdtest.Containerd(t)
	specA, specB := egressSpec(t), egressSpec(t)
	a := sandboxtest.Prepare(t, d, specA)
	b := sandboxtest.Prepare(t, d, specB)
	port := gatewayServer(t)

	var addrs []string
	for _, x := range []struct {
		sb   sandbox.Sandbox
		spec sandbox.Spec
	}{{a, specA}, {b, specB}} {
		ni := sandboxNet(t, x.sb)
		if strings.Join(ni.Links, ",") != "eth0,lo" {
			t.Errorf("links %v, want eth0 and lo", ni.Links)
		}
		addr, err := netip.ParseAddr(ni.Addr)
		if err != nil || !subnet.Contains(addr) || addr == gateway {
			t.Errorf("eth0 address %q is not a sandbox address in %s", ni.Addr, subnet)
		}
		if want := "eth0 " + gateway.String(); ni.Default != want {
			t.Errorf("default route %q, want %q", ni.Default, want)
		}
		if l := labelAddr(t, x.spec); l != ni.Addr {
			t.Errorf("label lathe.addr %q, eth0 has %q", l, ni.Addr)
		}
		if !linkExists(hostVeth(ni.Addr)) {
			t.Errorf("no host veth %s", hostVeth(ni.Addr))
		}
		out, errs, code := sandboxtest.Output(t, x.sb, sandbox.ExecSpec{Args: []string{"python3", "-c", connectScript, gateway.String(), port}})
		if code != 0 || strings.TrimSpace(out) != "from "+ni.Addr {
			t.Errorf("connect to the gateway: exit %d, %q %q; want \"from %s\"", code, out, errs, ni.Addr)
		}
		if _, errs, code := sandboxtest.Output(t, x.sb, sandbox.ExecSpec{Args: []string{"test", "-s", "/etc/resolv.conf"}}); code != 0 {
			t.Errorf("no resolv.conf: %s", errs)
		}
		addrs = append(addrs, ni.Addr)
	}
	if addrs[0] == addrs[1] {
		t.Errorf("both sandboxes have %s", addrs[0])
	}

	// Siblings listen on the same port, each on its own loopback.
	ctx := sandboxtest.Context(t, time.Minute)
	for i, sb := range []sandbox.Sandbox{a, b} {
		_, err := sb.Exec(ctx, sandbox.ExecSpec{Args: []string{"python3", "-c", `
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8000))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(sys.argv[1].encode() + b"\n")
    c.close()
`, "sandbox-" + strconv.Itoa(i)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, sb := range []sandbox.Sandbox{a, b} {
		if got := dialRetry(t, sb, 8000); got != "sandbox-"+strconv.Itoa(i) {
			t.Errorf("sandbox %d: port 8000 answered %q", i, got)
		}
	}

	// Sandboxes do not reach each other across the bridge.
	if _, err := a.Exec(ctx, sandbox.ExecSpec{Args: []string{"python3", "-c", `
import socket
s = socket.socket()
s.bind(("0.0.0.0", 8001))
s.listen()
while True:
    c = s.accept()[0]
    c.sendall(b"sibling\n")
    c.close()
`}}); err != nil {
		t.Fatal(err)
	}
	// Wait until it listens, so that only the bridge can make the connect fail.
	if got := dialRetry(t, a, 8001); got != "sibling" {
		t.Fatalf("port 8001 answered %q", got)
	}
	if out, _, code := sandboxtest.Output(t, b, sandbox.ExecSpec{Args: []string{"python3", "-c", connectScript, addrs[0], "8001"}}); code == 0 {
		t.Errorf("sandbox reached its sibling at %s: %q", addrs[0], out)
	}

	// A restarted daemon finds the sandbox wired as before.
	d2 := containerdtest.Containerd(t)
	sbs, err := d2.Attach(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var again sandbox.Sandbox
	for _, sb := range sbs {
		if sb.SessionID() == specA.SessionID {
			again = sb
		}
	}
	if again == nil {
		t.Fatal("Attach did not find the host-egress sandbox")
	}
	if ni := sandboxNet(t, again); ni.Addr != addrs[0] {
		t.Errorf("after Attach eth0 has %q, want %q", ni.Addr, addrs[0])
	}
	if got := dialRetry(t, again, 8000); got != "sandbox-0" {
		t.Errorf("after Attach port 8000 answered %q", got)
	}

	// Remove deletes the veth and frees the address; it is idempotent.
	if err := d2.Remove(ctx, specA.SessionID, specA.Generation); err != nil {
		t.Fatal(err)
	}
	if linkExists(hostVeth(addrs[0])) {
		t.Errorf("host veth %s outlived Remove", hostVeth(addrs[0]))
	}
	if !linkExists(hostVeth(addrs[1])) {
		t.Errorf("Remove of one sandbox took the other's veth %s", hostVeth(addrs[1]))
	}
	if err := d.Remove(ctx, specA.SessionID, specA.Generation); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}

// dialRetry reads one line from port inside sb, waiting for a listener.
func dialRetry(t *testing.T, sb sandbox.Sandbox, port int) string {
	t.Helper()
	ctx := sandboxtest.Context(t, 30*time.Second)
	var c net.Conn
	polltest.Check(t, func() (err error) {
		if c, err = sb.Dial(ctx, port); err != nil {
			return fmt.Errorf("dial port %d: %w", port, err)
		}
		return nil
	}, polltest.Within(30*time.Second), polltest.Every(50*time.Millisecond))
	c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if err != nil && err != io.EOF {
		t.Fatalf("read from port %d: %v", port, err)
	}
	return strings.TrimSpace(line)
}

// TestNetworkNoneIsolated: a "none" sandbox has loopback only and cannot
// reach the bridge gateway, even while host-egress sandboxes use it.
func TestNetworkNoneIsolated(t *testing.T) {
	d := containerdtest.Containerd(t)
	sandboxtest.Prepare(t, d, egressSpec(t)) // the bridge exists
	port := gatewayServer(t)
	sb := sandboxtest.Prepare(t, d, sandboxtest.NewSpec(t))
	ni := sandboxNet(t, sb)
	if strings.Join(ni.Links, ",") != "lo" || ni.Addr != "" || ni.Default != "" {
		t.Errorf("none sandbox network %+v, want lo only", ni)
	}
	out, _, code := sandboxtest.Output(t, sb, sandbox.ExecSpec{Args: []string{"python3", "-c", connectScript, gateway.String(), port}})
	if code == 0 {
		t.Errorf("none sandbox reached the gateway: %q", out)
	}
}

// TestEgressConcurrent: many sandboxes prepared at once get distinct
// addresses, and removing them frees every veth.
func TestEgressConcurrent(t *testing.T) {
	d := containerdtest.Containerd(t)
	ctx := sandboxtest.Context(t, 2*time.Minute)
	const n = 6
	specs := make([]sandbox.Spec, n)
	errc := make(chan error, n)
	for i := range specs {
		specs[i] = egressSpec(t)
		go func() {
			_, err := d.Prepare(ctx, specs[i])
			errc <- err
		}()
	}
	t.Cleanup(func() {
		for _, s := range specs {
			d.Remove(context.Background(), s.SessionID, s.Generation)
		}
	})
	for range n {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, s := range specs {
		a := labelAddr(t, s)
		if seen[a] || !linkExists(hostVeth(a)) {
			t.Errorf("address %q duplicated or without veth", a)
		}
		seen[a] = true
	}
	for _, s := range specs {
		if err := d.Remove(ctx, s.SessionID, s.Generation); err != nil {
			t.Fatal(err)
		}
	}
	for a := range seen {
		if linkExists(hostVeth(a)) {
			t.Errorf("veth of %s outlived Remove", a)
		}
	}
}
