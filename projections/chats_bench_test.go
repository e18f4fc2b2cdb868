package projections_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
)

// BenchmarkChatSearch10k times GET /api/chat?q= (Store.Chats) over 10,000
// Chats holding 100,000 messages of about 200 characters: a word in about
// 1% of the messages, and a phrase in none (the whole scan). Target:
// <= 50 ms each.
func BenchmarkChatSearch10k(b *testing.B) {
	const chats, messages = 10_000, 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the a build test deploy chat agent file error result model token stream queue journal event lathe " +
		"session branch commit merge review python golang docker network latency memory disk cache index search")
	sentence := func() string {
		var sb strings.Builder
		for sb.Len() < 200 {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		if rng.IntN(100) == 0 {
			sb.WriteString("Kumquat")
		}
		return sb.String()
	}
	s := projections.New()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var recs []journal.Record
	seq := uint64(0)
	add := func(id string, p events.Payload) {
		seq++
		recs = append(recs, journal.Record{Envelope: journal.Envelope{Seq: seq, ID: fmt.Sprint(seq), Type: p.EventType(), Aggregate: p.Aggregate(),
			AggregateID: id, At: at}, Payload: p})
	}
	ids := make([]string, chats)
	for i := range ids {
		ids[i] = ulid.Make().String()
		add(ids[i], events.ChatCreated{AgentID: "coder", Name: fmt.Sprintf("Chat %d about %s", i, words[i%len(words)])})
	}
	for i := range messages {
		add(ids[i%chats], events.ChatMessageAdded{MessageID: fmt.Sprint(i), Role: events.RoleUser, Content: events.NewText(sentence())})
	}
	if err := s.Apply(recs); err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct{ name, q string }{{"word", "KUMQUAT"}, {"absent", "no such phrase"}} {
		b.Run(q.name, func(b *testing.B) {
			var n int
			start := time.Now()
			for b.Loop() {
				n = len(s.Chats(q.q))
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/search")
			b.ReportMetric(float64(n), "hits")
		})
	}
}
