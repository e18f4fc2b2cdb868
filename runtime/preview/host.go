// Package preview holds the pure parts of the Preview virtual origin: the
// Host names "<session_id>-p<port>.localhost:<listener-port>", the streaming
// HTML rewrite that injects the picker bridge, and the bridge itself. The
// proxy that uses them lives in transport/preview.go.
package preview

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/oklog/ulid/v2"
)

// Loopback is the name Preview hosts hang under. Browsers resolve every
// "*.localhost" name to their own loopback interface, so each Session and
// port gets an origin of its own without any DNS set-up.
const Loopback = "localhost"

// ErrHost is the class of every Host parsing error.
var ErrHost = errors.New("not a Preview host")

// Host is a parsed Preview Host header.
type Host struct {
	// Session is the canonical (upper-case) Session ID.
	Session string
	// Port is the logical port inside the Session's sandbox, 1..65535.
	Port int
	// ListenPort is the port the Host names for the daemon itself: the one
	// after the colon, or 80 when there is none.
	ListenPort int
}

// Authority is the canonical Host header of h: lower case, as browsers send
// it, with the listener port unless it is 80.
func (h Host) Authority() string {
	a := strings.ToLower(h.Session) + "-p" + strconv.Itoa(h.Port) + "." + Loopback
	if h.ListenPort != 80 {
		a += ":" + strconv.Itoa(h.ListenPort)
	}
	return a
}

// Origin is the browser origin of h over plain HTTP.
func (h Host) Origin() string { return "http://" + h.Authority() }

// Claims reports whether the Host header names a subdomain of Loopback.
// The Preview owns every such name, well-formed or not: none of them may
// reach the workbench router.
func Claims(hostport string) bool {
	name := strings.ToLower(hostname(hostport))
	name = strings.TrimSuffix(name, ".")
	return strings.HasSuffix(name, "."+Loopback)
}

// ParseHost parses a Host header of the shape
// "<session_id>-p<port>.localhost[:<listener-port>]", case-insensitively.
// The Session ID must be a well-formed Lathe ID (a ULID), the port a
// decimal 1..65535 without leading zeros, so that one Session and port have
// exactly one origin. Errors wrap ErrHost.
func ParseHost(hostport string) (Host, error) {
	if len(hostport) > 255 {
		return Host{}, fmt.Errorf("%w: the Host header is longer than 255 bytes", ErrHost)
	}
	lower := strings.ToLower(hostport)
	name, listen, hasPort := strings.Cut(lower, ":")
	label, ok := strings.CutSuffix(name, "."+Loopback)
	if !ok {
		return Host{}, fmt.Errorf("%w: %q does not end in .%s", ErrHost, hostport, Loopback)
	}
	h := Host{ListenPort: 80}
	if hasPort {
		p, err := ParsePort(listen)
		if err != nil {
			return Host{}, fmt.Errorf("%w: listener port in %q: %w", ErrHost, hostport, err)
		}
		h.ListenPort = p
	}
	i := strings.LastIndex(label, "-p")
	if i < 0 {
		return Host{}, fmt.Errorf("%w: %q is not <session_id>-p<port>.%s", ErrHost, hostport, Loopback)
	}
	id, err := ulid.ParseStrict(label[:i])
	if err != nil {
		return Host{}, fmt.Errorf("%w: %q does not start with a session ID", ErrHost, hostport)
	}
	h.Session = id.String()
	if h.Port, err = ParsePort(label[i+2:]); err != nil {
		return Host{}, fmt.Errorf("%w: port in %q: %w", ErrHost, hostport, err)
	}
	return h, nil
}

// ParsePort parses a decimal TCP port 1..65535 with no sign or leading zero:
// the logical port of a Preview, in its Host or in the legacy proxy path.
func ParsePort(s string) (int, error) {
	if s == "" {
		return 0, errors.New("the port is empty")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a decimal port", s)
		}
	}
	if len(s) > 5 || s[0] == '0' {
		if s == "0" || strings.Trim(s, "0") == "" {
			return 0, errors.New("port 0 is not a port")
		}
		if s[0] == '0' {
			return 0, fmt.Errorf("%q has a leading zero", s)
		}
		return 0, fmt.Errorf("%s is above 65535", s)
	}
	p, _ := strconv.Atoi(s)
	if p > 65535 {
		return 0, fmt.Errorf("%d is above 65535", p)
	}
	return p, nil
}

// hostname is the name part of a Host header, without port or brackets.
func hostname(hostport string) string {
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return hostport[1:]
		}
		return hostport[1:end]
	}
	name, _, _ := strings.Cut(hostport, ":")
	return name
}
