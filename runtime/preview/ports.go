package preview

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// tcpListen is the kernel's TCP_LISTEN state as /proc/net/tcp prints it.
const tcpListen = "0A"

// ListeningPorts returns the TCP ports in the LISTEN state in the text of
// /proc/net/tcp and /proc/net/tcp6 (concatenated, as `cat` prints them),
// sorted and without duplicates: one listener on IPv4 and IPv6 is one port.
// Each line is "sl: local_address rem_address st …" with the local address
// as hex ADDRESS:PORT; header lines and lines that do not parse are skipped,
// since the text comes from inside a sandbox.
func ListeningPorts(text []byte) []int {
	ports := []int{}
	for line := range bytes.Lines(text) {
		f := strings.Fields(string(line))
		if len(f) < 4 || !strings.HasSuffix(f[0], ":") || f[3] != tcpListen {
			continue
		}
		addr, port, ok := strings.Cut(f[1], ":")
		if !ok || (len(addr) != 8 && len(addr) != 32) || !isHex(addr) || len(port) != 4 {
			continue
		}
		n, err := strconv.ParseUint(port, 16, 16)
		if err != nil || n == 0 {
			continue
		}
		ports = append(ports, int(n))
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'F' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
