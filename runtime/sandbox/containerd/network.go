package containerd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
)

// Network defaults for Options.
const (
	DefaultBridge = "lathe0"
	DefaultSubnet = "10.89.0.0/16"
)

// labelAddr records a host-egress sandbox's IPv4 address on its container.
const labelAddr = "lathe.addr"

// vethPrefix starts the host end of every sandbox veth. The rest of the name
// is the sandbox address in hex, so that the host's link names are the
// address reservations: creating the link is atomic across processes, and a
// taken address fails with "File exists". The link's alias is the container
// ID, so that Remove deletes only its own.
const vethPrefix = "lh"

// bridgeName is a Linux interface name that is also an nftables identifier.
var bridgeName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,14}$`)

// egress is the host side of host-egress networking: a bridge with the
// subnet's first address as gateway, IPv4 forwarding, and masquerading of the
// subnet out of every other interface.
//
// Each host-egress sandbox gets a veth pair: eth0 in the container's network
// namespace (the one runc creates for the task) with a free address of the
// subnet and a default route via the gateway, and lh<addr> on the bridge.
// The pair goes away with the namespace; Remove also deletes it explicitly.
type egress struct {
	bridge string
	subnet netip.Prefix
	gw     netip.Addr

	mu      sync.Mutex
	ready   bool                // the bridge, forwarding and nft table were set up
	pending map[netip.Addr]bool // picked by this process, veth not made yet
}

func newEgress(bridge, subnet string) (*egress, error) {
	if !bridgeName.MatchString(bridge) {
		return nil, fmt.Errorf("sandbox bridge name %q: want 1-15 letters, digits or _, starting with a letter", bridge)
	}
	p, err := netip.ParsePrefix(subnet)
	if err != nil || !p.Addr().Is4() {
		return nil, fmt.Errorf("sandbox subnet %q is not an IPv4 prefix", subnet)
	}
	if p.Bits() > 29 || p.Bits() < 8 {
		return nil, fmt.Errorf("sandbox subnet %q: want a prefix length between /8 and /29", subnet)
	}
	p = p.Masked()
	return &egress{bridge: bridge, subnet: p, gw: p.Addr().Next(), pending: map[netip.Addr]bool{}}, nil
}

// ensure sets up the bridge, forwarding and masquerading, once per Driver
// unless a later failure resets it. Each step is idempotent, also against
// other processes doing the same.
func (e *egress) ensure(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ready {
		return nil
	}
	if _, err := os.Stat("/sys/class/net/" + e.bridge); err != nil {
		if _, err := run(ctx, nil, "ip", "link", "add", e.bridge, "type", "bridge"); err != nil && !isExists(err) {
			return fmt.Errorf("create sandbox bridge: %w", err)
		}
	}
	if _, err := os.Stat("/sys/class/net/" + e.bridge + "/bridge"); err != nil {
		return fmt.Errorf("sandbox bridge %s exists but is not a bridge", e.bridge)
	}
	gw := netip.PrefixFrom(e.gw, e.subnet.Bits()).String()
	if _, err := run(ctx, nil, "ip", "addr", "replace", gw, "dev", e.bridge); err != nil {
		return fmt.Errorf("address sandbox bridge: %w", err)
	}
	if _, err := run(ctx, nil, "ip", "link", "set", e.bridge, "up"); err != nil {
		return fmt.Errorf("bring up sandbox bridge: %w", err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("enable IPv4 forwarding: %w", err)
	}
	// Tables of our own, per bridge, replaced whole in one transaction:
	// masquerade what leaves the subnet for elsewhere, and keep sandboxes
	// from reaching each other across the bridge (each Session is on its own).
	table := "lathe_" + e.bridge
	rules := fmt.Sprintf(`table ip %[1]s {}
flush table ip %[1]s
table ip %[1]s {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %[2]s oifname != "%[3]s" masquerade
	}
}
table bridge %[1]s {}
flush table bridge %[1]s
table bridge %[1]s {
	chain forward {
		type filter hook forward priority filter; policy accept;
		iifname "%[4]s*" oifname "%[4]s*" drop
	}
}
`, table, e.subnet, e.bridge, vethPrefix)
	if _, err := run(ctx, strings.NewReader(rules), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("masquerade sandbox subnet: %w", err)
	}
	e.ready = true
	return nil
}

// release ends the pending state of addrs picked: by then their veths exist,
// or they were not used.
func (e *egress) release(addrs ...netip.Addr) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range addrs {
		delete(e.pending, a)
	}
}

func (e *egress) reset() {
	e.mu.Lock()
	e.ready = false
	e.mu.Unlock()
}

// vethName is the host end of the veth of the sandbox at addr.
func vethName(addr netip.Addr) string {
	b := addr.As4()
	return fmt.Sprintf("%s%08x", vethPrefix, binary.BigEndian.Uint32(b[:]))
}

// pick returns the lowest address of the subnet, other than the network,
// gateway and broadcast addresses, that has no host veth and is not pending
// in this process, and marks it pending until release. It is a candidate
// only: attach reserves it, against other processes too.
func (e *egress) pick() (netip.Addr, error) {
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("list host interfaces: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	used := map[string]bool{}
	for _, ent := range ents {
		used[ent.Name()] = true
	}
	for a := e.gw.Next(); e.subnet.Contains(a); a = a.Next() {
		if !e.subnet.Contains(a.Next()) {
			break // broadcast
		}
		if !used[vethName(a)] && !e.pending[a] {
			e.pending[a] = true
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("sandbox subnet %s has no free address", e.subnet)
}

// attach gives the network namespace of pid an eth0 at addr, wired to the
// bridge, with a default route via the gateway. It fails with an error
// matching errAddrTaken when addr's veth already exists.
func (e *egress) attach(ctx context.Context, id string, pid uint32, addr netip.Addr) error {
	if err := e.ensure(ctx); err != nil {
		return err
	}
	host := vethName(addr)
	if _, err := run(ctx, nil, "ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(pid)); err != nil {
		if isExists(err) {
			return fmt.Errorf("%w: %s", errAddrTaken, addr)
		}
		return fmt.Errorf("create veth for %s: %w", id, err)
	}
	hostCmds := fmt.Sprintf("link set %s alias %s\nlink set %s master %s\nlink set %s up\n", host, id, host, e.bridge, host)
	if _, err := run(ctx, strings.NewReader(hostCmds), "ip", "-batch", "-"); err != nil {
		e.reset() // the bridge may have gone behind our back
		e.delete(ctx, id, addr)
		return fmt.Errorf("wire veth of %s to bridge %s: %w", id, e.bridge, err)
	}
	nsCmds := fmt.Sprintf("addr add %s dev eth0\nlink set eth0 up\nroute add default via %s dev eth0\n",
		netip.PrefixFrom(addr, e.subnet.Bits()), e.gw)
	if _, err := run(ctx, strings.NewReader(nsCmds), "nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", pid), "--", "ip", "-batch", "-"); err != nil {
		e.delete(ctx, id, addr)
		return fmt.Errorf("configure eth0 of %s: %w", id, err)
	}
	return nil
}

var errAddrTaken = errors.New("sandbox address taken")

// delete removes the host veth of container id: the one at addr when valid,
// and any other whose alias names id (a reservation a crash left unlabelled).
// Links of other containers are never touched. Missing links are fine.
func (e *egress) delete(ctx context.Context, id string, addr netip.Addr) error {
	var names []string
	if addr.IsValid() {
		names = append(names, vethName(addr))
	}
	if ents, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, ent := range ents {
			if n := ent.Name(); strings.HasPrefix(n, vethPrefix) && len(n) == len(vethPrefix)+8 && (len(names) == 0 || n != names[0]) {
				names = append(names, n)
			}
		}
	}
	var errs []error
	for _, n := range names {
		alias, err := os.ReadFile("/sys/class/net/" + n + "/ifalias")
		if err != nil || strings.TrimSpace(string(alias)) != id {
			continue
		}
		if _, err := run(ctx, nil, "ip", "link", "del", n); err != nil && !isMissing(err) {
			errs = append(errs, fmt.Errorf("delete veth %s of %s: %w", n, id, err))
		}
	}
	return errors.Join(errs...)
}

// resolvConf is the host resolver configuration to mount into host-egress
// sandboxes: /etc/resolv.conf, or systemd-resolved's upstream list when that
// names only loopback servers, which the sandbox cannot reach.
func resolvConf() string {
	const host, upstream = "/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"
	b, err := os.ReadFile(host)
	if err != nil {
		return ""
	}
	loopbackOnly := true
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err != nil || !a.IsLoopback() {
				loopbackOnly = false
			}
		}
	}
	if loopbackOnly {
		if _, err := os.Stat(upstream); err == nil {
			return upstream
		}
	}
	return host
}

// cmdError is a failed command with its output.
type cmdError struct {
	args []string
	out  string
	err  error
}

func (e *cmdError) Error() string {
	msg := fmt.Sprintf("%s: %v", strings.Join(e.args, " "), e.err)
	if e.out != "" {
		msg += ": " + e.out
	}
	return msg
}

func (e *cmdError) Unwrap() error { return e.err }

func isExists(err error) bool {
	var ce *cmdError
	return errors.As(err, &ce) && strings.Contains(ce.out, "File exists")
}

func isMissing(err error) bool {
	var ce *cmdError
	return errors.As(err, &ce) && (strings.Contains(ce.out, "Cannot find device") || strings.Contains(ce.out, "does not exist"))
}

// run executes a host tool. A missing tool names the fix.
func run(ctx context.Context, stdin *strings.Reader, args ...string) (string, error) {
	if _, err := exec.LookPath(args[0]); err != nil {
		return "", fmt.Errorf("%s not found (host-egress needs iproute2, nftables and util-linux; `make containerd-up` installs them): %w", args[0], err)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), &cmdError{args: args, out: strings.TrimSpace(out.String()), err: err}
	}
	return out.String(), nil
}
