// Package bus embeds a NATS server and publishes every committed journal
// record on lathe.events.<aggregate>.<id>.<type>, in seq order, after its
// commit. NATS is fan-out only: the journal stays the source of truth, and a
// subscriber that missed messages catches up from the journal by seq.
package bus

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"lathe/journal"
)

// SubjectAll matches every journal event subject.
const SubjectAll = "lathe.events.>"

// Options configure the embedded server.
type Options struct {
	// Listen exposes the server on a TCP address ("127.0.0.1:4222") for
	// integration feeds; empty keeps it in-process only.
	Listen string
	// Users are the credentials an outside connection may give, each a
	// user of its own. Without any, a connection on a loopback Listen
	// needs none (it is outsideUser); a non-loopback Listen is refused
	// without them. Either way an outside connection has only the
	// permissions of outsidePermissions.
	Users []User
}

// User is one outside user: its name (a NATS subject token, see
// InboxPrefix) and password.
type User struct{ Name, Password string }

// daemonUser is the in-process connection's user; its password is random
// per start, so only the daemon itself is this user.
const daemonUser = "lathe-daemon"

// OutsideUser is the user of an outside connection that gives no
// credentials (a loopback Listen without Users).
const OutsideUser = "lathe-outside"

// InboxPrefix is the inbox prefix of user's connections (nats.go's
// CustomInboxPrefix, the nats CLI's --inbox-prefix): the only inboxes it
// may subscribe to, so that no user reads the replies another user's
// requests get (a connection allowed _INBOX.> read them all).
func InboxPrefix(user string) string { return "_INBOX." + user }

// outsidePermissions is all an outside connection of user may do:
// subscribe to the journal's subjects, the typed ones (lattice,
// automation) and its own inboxes, and request the catch-up service (and
// its discovery). It may not publish on any of them, nor see or send the
// live subjects (lathe.live.>), which only the in-process connection uses:
// an outside publish there would reach every workbench's live turn.
func outsidePermissions(user string) *server.Permissions {
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{SubjectJournalRead, "$SRV.*", "$SRV.*.lathe-journal", "$SRV.*.lathe-journal.>"}},
		Subscribe: &server.SubjectPermission{
			Allow: []string{SubjectAll, "lathe.lattice.>", "lathe.automation.>", InboxPrefix(user) + ".>"},
		},
	}
}

// userName is what an outside user may be called: one subject token, so
// that no user's inboxes lie inside another's.
var userName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ErrUnauthenticatedListen: a non-loopback Listen without credentials.
var ErrUnauthenticatedListen = errors.New("bus: a NATS listen beyond loopback needs nats.user and nats.password")

// Bus is an embedded NATS server with one in-process client connection.
type Bus struct {
	srv    *server.Server
	nc     *nats.Conn
	failed atomic.Uint64
}

// MaxPayload is the embedded server's message size limit. Journal events
// are far smaller (journal.MaxEventData); live deltas are one read each.
const MaxPayload = 8 << 20

// Start runs the embedded server and connects to it in-process.
func Start(opts Options) (*Bus, error) {
	so := &server.Options{
		ServerName: "lathe",
		DontListen: opts.Listen == "",
		NoSigs:     true, // the daemon owns signals; bbolt must close first
		NoLog:      true,
		MaxPayload: MaxPayload,
	}
	if opts.Listen != "" {
		host, port, err := net.SplitHostPort(opts.Listen)
		if err != nil {
			return nil, fmt.Errorf("bus: nats.listen %q: %w", opts.Listen, err)
		}
		so.Host = host
		if so.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("bus: nats.listen %q: port: %w", opts.Listen, err)
		}
		if so.Port == 0 {
			so.Port = server.RANDOM_PORT
		}
		seen := map[string]bool{daemonUser: true, OutsideUser: true}
		for _, u := range opts.Users {
			if !userName.MatchString(u.Name) || seen[u.Name] || u.Password == "" {
				return nil, fmt.Errorf("bus: outside user %q: each needs a name of its own (letters, digits, _ and -; not %s or %s) and a password", u.Name, daemonUser, OutsideUser)
			}
			seen[u.Name] = true
		}
		if ip := net.ParseIP(host); len(opts.Users) == 0 && !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("%w (listen %q)", ErrUnauthenticatedListen, opts.Listen)
		}
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("bus: %w", err)
	}
	daemonPassword := hex.EncodeToString(secret)
	so.Users = []*server.User{{Username: daemonUser, Password: daemonPassword}}
	if opts.Listen != "" {
		for _, u := range opts.Users {
			so.Users = append(so.Users, &server.User{Username: u.Name, Password: u.Password, Permissions: outsidePermissions(u.Name)})
		}
		if len(opts.Users) == 0 {
			so.Users = append(so.Users, &server.User{Username: OutsideUser, Permissions: outsidePermissions(OutsideUser)})
			so.NoAuthUser = OutsideUser
		}
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("bus: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("bus: embedded NATS did not become ready within 5s")
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Name("lathe-daemon"), nats.MaxReconnects(-1),
		nats.UserInfo(daemonUser, daemonPassword))
	if err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("bus: connect in-process: %w", err)
	}
	return &Bus{srv: srv, nc: nc}, nil
}

// ClientURL is the TCP URL integration feeds connect to, or "" when the
// server is in-process only.
func (b *Bus) ClientURL() string {
	if addr := b.srv.Addr(); addr != nil {
		return "nats://" + addr.String()
	}
	return ""
}

// Publish sends each record on its subject, in order. The payload is the
// record's stored envelope bytes. A record that cannot be published does
// not stop the ones after it: every failure is counted (Failed) and named,
// with its seq, subject and size, in the joined error.
func (b *Bus) Publish(recs []journal.Record) error {
	var errs []error
	for _, r := range recs {
		if err := b.nc.Publish(r.Subject(), r.Raw); err != nil {
			b.failed.Add(1)
			errs = append(errs, fmt.Errorf("bus: event seq %d (%s, %d bytes) not published: %w", r.Seq, r.Subject(), len(r.Raw), err))
		}
	}
	return errors.Join(errs...)
}

// Failed counts the committed events Publish could not send: integration
// feeds missed them and must catch up from the journal.
func (b *Bus) Failed() uint64 { return b.failed.Load() }

// PublishSubject sends data on subject: the live subjects (token deltas)
// that are not journal events. Messages of one Bus reach a subscriber in
// the order they were published.
func (b *Bus) PublishSubject(subject string, data []byte) error {
	if err := b.nc.Publish(subject, data); err != nil {
		return fmt.Errorf("bus: publish %s: %w", subject, err)
	}
	return nil
}

// Subscribe calls fn for each message on subject (wildcards allowed), one
// message at a time, in order. The subscription has no pending limit: a
// slow fn delays messages, never drops them.
func (b *Bus) Subscribe(subject string, fn func(data []byte)) error {
	sub, err := b.nc.Subscribe(subject, func(m *nats.Msg) { fn(m.Data) })
	if err != nil {
		return fmt.Errorf("bus: subscribe %s: %w", subject, err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return fmt.Errorf("bus: subscribe %s: %w", subject, err)
	}
	return nil
}

// drainMax bounds Close's drain. Publishing to the embedded server is an
// in-memory hand-off, so a drain that takes longer is stuck; the daemon's
// whole shutdown has 10 s (cmd/lathe/internal/daemon.ShutdownGrace).
const drainMax = time.Second

// Close drains the client connection (within drainMax), then shuts the
// server down and waits.
func (b *Bus) Close() {
	done := make(chan struct{})
	b.nc.SetClosedHandler(func(*nats.Conn) { close(done) })
	if err := b.nc.Drain(); err == nil {
		select {
		case <-done:
		case <-time.After(drainMax):
		}
	}
	b.nc.Close()
	b.srv.Shutdown()
	b.srv.WaitForShutdown()
}
