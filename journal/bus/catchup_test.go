package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"lathe/journal"
	"lathe/journal/bus"
	"lathe/journal/journaltest"
)

// An integration feed that speaks only NATS replays the whole journal, or
// one aggregate, from a seq through lathe.journal.read, in bounded chunks,
// with each envelope as published (its hash included).
func TestJournalCatchUpOverNATS(t *testing.T) {
	b, j := serving(t, bus.Options{Listen: "127.0.0.1:0"}, "v1.2.3")
	big := strings.Repeat("x", 200<<10) // five of these overflow one reply's bytes
	var published []journal.Record
	var batch []journal.Event
	for i := range 2500 {
		data := any(i)
		if i%500 == 7 {
			data = big
		}
		batch = append(batch, journal.Event{Type: "noted", Aggregate: "session", AggregateID: fmt.Sprintf("s%d", i%3), Data: data})
		if len(batch) == 100 {
			recs, err := j.Append(context.Background(), batch)
			if err != nil {
				t.Fatal(err)
			}
			published, batch = append(published, recs...), nil
		}
	}
	nc, err := nats.Connect(b.ClientURL(), nats.CustomInboxPrefix(bus.InboxPrefix(bus.OutsideUser)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	read := func(q string) bus.ReadReply {
		t.Helper()
		msg, err := nc.Request(bus.SubjectJournalRead, []byte(q), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
			t.Fatalf("%s: error %s %s", q, code, msg.Header.Get("Nats-Service-Error"))
		}
		var r bus.ReadReply
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	var got []journal.Envelope
	chunks := 0
	for after, more := uint64(0), true; more; chunks++ {
		r := read(fmt.Sprintf(`{"after":%d}`, after))
		for _, raw := range r.Events {
			env, err := journal.DecodeEnvelope(raw)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, env)
		}
		after, more = r.Next, r.More
	}
	if len(got) != len(published) || chunks < 3 {
		t.Fatalf("caught up %d of %d events in %d chunks", len(got), len(published), chunks)
	}
	for i, env := range got {
		if env.Seq != published[i].Seq || env.Hash != published[i].Hash {
			t.Fatalf("event %d: seq %d hash %s, published %d %s", i, env.Seq, env.Hash, published[i].Seq, published[i].Hash)
		}
	}
	r := read(`{"after":10,"limit":5,"aggregate":"s1"}`)
	if len(r.Events) != 5 || !r.More {
		t.Fatalf("aggregate chunk: %d events, more %v", len(r.Events), r.More)
	}
	for _, raw := range r.Events {
		if env, _ := journal.DecodeEnvelope(raw); env.AggregateID != "s1" || env.Seq <= 10 {
			t.Errorf("aggregate chunk holds seq %d of %s", env.Seq, env.AggregateID)
		}
	}
	// The last page that is exactly full says no more follows.
	last := published[len(published)-1].Seq
	if r := read(fmt.Sprintf(`{"after":%d,"limit":3}`, last-3)); len(r.Events) != 3 || r.More || r.Next != last {
		t.Errorf("last full page: %d events, more %v, next %d", len(r.Events), r.More, r.Next)
	}
	if r := read(fmt.Sprintf(`{"after":%d,"limit":3}`, last-4)); len(r.Events) != 3 || !r.More {
		t.Errorf("a page with one after it: %d events, more %v", len(r.Events), r.More)
	}
	// Errors come as headers and as a {"error"} body a script can read.
	for _, bad := range []string{`{"limit":1001}`, `{"limit":-1}`, `{"after":-1}`, `{"bogus":1}`, `not json`} {
		msg, err := nc.Request(bus.SubjectJournalRead, []byte(bad), 5*time.Second)
		var body struct{ Error string }
		if err != nil || msg.Header.Get("Nats-Service-Error-Code") != "400" || json.Unmarshal(msg.Data, &body) != nil ||
			body.Error == "" || body.Error != msg.Header.Get("Nats-Service-Error") {
			t.Errorf("%s: %v %v %s", bad, err, msg.Header, msg.Data)
		}
	}
	// micro info shows the daemon's version and the endpoint's schemas.
	msg, err := nc.Request("$SRV.INFO.lathe-journal", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Version   string
		Metadata  map[string]string
		Endpoints []struct{ Metadata map[string]string }
	}
	if err := json.Unmarshal(msg.Data, &info); err != nil || info.Version != "1.2.3" || info.Metadata["lathe_version"] != "v1.2.3" ||
		len(info.Endpoints) != 1 || !json.Valid([]byte(info.Endpoints[0].Metadata["request_schema"])) || !json.Valid([]byte(info.Endpoints[0].Metadata["response_schema"])) {
		t.Errorf("service info: %v %s", err, msg.Data)
	}
}

func TestServeJournalVersions(t *testing.T) {
	for _, v := range []string{"dev", "test", "v0.4.1-3-gdeadbee-dirty", "1..2", ""} {
		b, err := bus.Start(bus.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ServeJournal(journaltest.Open(t), v); err != nil {
			t.Errorf("version %q: %v", v, err)
		}
		b.Close()
	}
}

// A read after the largest seq is empty, not the whole journal (issue 23,
// finding 8).
func TestJournalReadPastTheHeadIsEmpty(t *testing.T) {
	b, j := serving(t, bus.Options{Listen: "127.0.0.1:0"}, "test")
	if _, err := j.Append(context.Background(), []journal.Event{{Type: "noted", Aggregate: "session", AggregateID: "s1", Data: 1}}); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(b.ClientURL(), nats.CustomInboxPrefix(bus.InboxPrefix(bus.OutsideUser)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, after := range []string{"1", "2", "18446744073709551615"} {
		msg, err := nc.Request(bus.SubjectJournalRead, []byte(`{"after":`+after+`}`), 5*time.Second)
		var reply bus.ReadReply
		if err != nil || json.Unmarshal(msg.Data, &reply) != nil || len(reply.Events) != 0 || reply.More {
			t.Fatalf("after %s: %v %s", after, err, msg.Data)
		}
	}
}
