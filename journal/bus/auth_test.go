package bus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"lathe/journal"
	"lathe/journal/bus"
	"lathe/journal/journaltest"
)

// serving starts a bus on opts with the catch-up service on a fresh
// journal, both closed when the test ends.
func serving(t *testing.T, opts bus.Options, version string) (*bus.Bus, *journal.Journal) {
	t.Helper()
	b, err := bus.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	j := journaltest.Open(t)
	if err := b.ServeJournal(j, version); err != nil {
		t.Fatal(err)
	}
	return b, j
}

// awaitViolation flushes nc and waits for the permissions violation what
// caused, as nc's error handler sends it on violations.
func awaitViolation(t *testing.T, nc *nats.Conn, violations <-chan error, what string) {
	t.Helper()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("%s: %v, want a permissions violation", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no permissions violation", what)
	}
}

// An outside connection may subscribe to the journal's subjects and request
// the catch-up service, and nothing else: it cannot publish a forged event
// on lathe.events.>, nor publish or read the live subjects that feed every
// workbench's live turn. With credentials configured, it must give them
// (issue 23, finding 4).
func TestOutsideConnectionsHaveOnlyTheirPermissions(t *testing.T) {
	const user, password = "feed", "a-long-nats-password"
	for _, tc := range []struct {
		name string
		opts bus.Options
		auth []nats.Option
	}{
		{"loopback without credentials", bus.Options{Listen: "127.0.0.1:0"}, []nats.Option{nats.CustomInboxPrefix(bus.InboxPrefix(bus.OutsideUser))}},
		{"with credentials", bus.Options{Listen: "127.0.0.1:0", Users: []bus.User{{Name: user, Password: password}}},
			[]nats.Option{nats.UserInfo(user, password), nats.CustomInboxPrefix(bus.InboxPrefix(user))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, j := serving(t, tc.opts, "test")
			if tc.opts.Users != nil {
				for _, bad := range [][]nats.Option{nil, {nats.UserInfo(user, "wrong-password-of-length")}} {
					if nc, err := nats.Connect(b.ClientURL(), bad...); err == nil {
						nc.Close()
						t.Fatalf("a connection without the right credentials was accepted")
					}
				}
			}
			violations := make(chan error, 16)
			nc, err := nats.Connect(b.ClientURL(), append(tc.auth, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				violations <- err
			}))...)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			expectViolation := func(what string) { t.Helper(); awaitViolation(t, nc, violations, what) }

			// What the daemon's own subscribers receive.
			events, live := make(chan []byte, 16), make(chan []byte, 16)
			if err := b.Subscribe(bus.SubjectAll, func(d []byte) { events <- d }); err != nil {
				t.Fatal(err)
			}
			if err := b.Subscribe("lathe.live.>", func(d []byte) { live <- d }); err != nil {
				t.Fatal(err)
			}
			// Allowed: follow the journal, and read it back.
			feed, err := nc.SubscribeSync(bus.SubjectAll)
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			recs, err := j.Append(context.Background(), []journal.Event{{Type: "noted", Aggregate: "session", AggregateID: "s1", Data: "real"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Publish(recs); err != nil {
				t.Fatal(err)
			}
			if m, err := feed.NextMsg(5 * time.Second); err != nil || !strings.Contains(string(m.Data), `"real"`) {
				t.Fatalf("the feed did not receive the event: %v", err)
			}
			if msg, err := nc.Request(bus.SubjectJournalRead, []byte(`{"after":0}`), 5*time.Second); err != nil || !strings.Contains(string(msg.Data), `"real"`) {
				t.Fatalf("journal read: %v", err)
			}
			<-events

			// Refused: forge an event, inject a live delta, read the live subjects.
			if err := nc.Publish("lathe.events.workspace.w1.workspace-deleted", []byte(`{"seq":99}`)); err != nil {
				t.Fatal(err)
			}
			expectViolation("publish on lathe.events")
			if err := nc.Publish("lathe.live.session.s1", []byte(`{"kind":"token","delta":"injected"}`)); err != nil {
				t.Fatal(err)
			}
			expectViolation("publish on lathe.live")
			if _, err := nc.SubscribeSync("lathe.live.>"); err != nil {
				t.Fatal(err)
			}
			expectViolation("subscribe to lathe.live")
			// Nothing forged arrived before the daemon's own next messages.
			if err := b.PublishSubject("lathe.live.session.s1", []byte("marker")); err != nil {
				t.Fatal(err)
			}
			if got := <-live; string(got) != "marker" {
				t.Fatalf("the daemon's live subscriber received %s", got)
			}
			recs, _ = j.Append(context.Background(), []journal.Event{{Type: "noted", Aggregate: "session", AggregateID: "s1", Data: "next"}})
			_ = b.Publish(recs)
			if got := <-events; !strings.Contains(string(got), `"next"`) {
				t.Fatalf("the daemon's event subscriber received %s", got)
			}
		})
	}
}

// A NATS listen beyond loopback needs credentials.
func TestNonLoopbackListenNeedsCredentials(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		if b, err := bus.Start(bus.Options{Listen: listen}); !errors.Is(err, bus.ErrUnauthenticatedListen) {
			if err == nil {
				b.Close()
			}
			t.Errorf("listen %s without credentials: %v", listen, err)
		}
	}
	b, err := bus.Start(bus.Options{Listen: "0.0.0.0:0", Users: []bus.User{{Name: "feed", Password: "a-long-nats-password"}}})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// Each outside user subscribes only to its own inboxes: one feed cannot
// read the journal replies (or any reply) another user's requests get,
// with _INBOX.> or the other's prefix, and a request without its user's
// inbox prefix gets no reply (issue 32, finding 10).
func TestRepliesReachOnlyTheirUser(t *testing.T) {
	const password = "a-long-nats-password"
	b, j := serving(t, bus.Options{Listen: "127.0.0.1:0", Users: []bus.User{{Name: "feed-a", Password: password}, {Name: "feed-b", Password: password}}}, "test")
	if _, err := j.Append(context.Background(), []journal.Event{{Type: "noted", Aggregate: "session", AggregateID: "s1", Data: "for feed-a"}}); err != nil {
		t.Fatal(err)
	}
	connect := func(user string, opts ...nats.Option) (*nats.Conn, chan error) {
		t.Helper()
		violations := make(chan error, 16)
		nc, err := nats.Connect(b.ClientURL(), append(opts, nats.UserInfo(user, password),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc, violations
	}
	victim, _ := connect("feed-a", nats.CustomInboxPrefix(bus.InboxPrefix("feed-a")))
	spy, violations := connect("feed-b", nats.CustomInboxPrefix(bus.InboxPrefix("feed-b")))

	var spies []*nats.Subscription
	for _, subject := range []string{"_INBOX.>", bus.InboxPrefix("feed-a") + ".>", "_INBOX.*.*"} {
		sub, err := spy.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		awaitViolation(t, spy, violations, "feed-b subscribing to "+subject)
		spies = append(spies, sub)
	}
	if msg, err := victim.Request(bus.SubjectJournalRead, []byte(`{"after":0}`), 5*time.Second); err != nil || !strings.Contains(string(msg.Data), `"for feed-a"`) {
		t.Fatalf("feed-a's journal read: %v", err)
	}
	// The spy's own request is answered after feed-a's, on the same
	// connection of the daemon: had feed-a's reply reached a spying
	// subscription, it would be there by now.
	if _, err := spy.Request(bus.SubjectJournalRead, []byte(`{"after":0}`), 5*time.Second); err != nil {
		t.Fatalf("feed-b's own journal read: %v", err)
	}
	for i, sub := range spies {
		for {
			m, err := sub.NextMsg(0)
			if err != nil {
				break
			}
			if !strings.HasPrefix(m.Subject, bus.InboxPrefix("feed-b")+".") {
				t.Errorf("spying subscription %d received the reply on %s", i, m.Subject)
			}
		}
	}

	// A request with the default inbox prefix gets no reply.
	plain, _ := connect("feed-a")
	if _, err := plain.Request(bus.SubjectJournalRead, []byte(`{"after":0}`), 2*time.Second); err == nil {
		t.Errorf("a request outside the user's inboxes was answered")
	}
}
