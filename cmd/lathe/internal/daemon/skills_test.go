package daemon

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"lathe/cmd/lathe/internal/config"
)

// Firing a Skill publishes each event it emits three ways: an `event` frame
// on /ws, a message on lathe.lattice.<type>, and an entry of the recent
// typed-event log.
func TestSkillFire(t *testing.T) {
	d, srv := newTestDaemon(t, func(c *config.Config) {
		c.NATS.Listen = "127.0.0.1:0"
		c.Skills = []config.Skill{{ID: "triage", Name: "Triage", Description: "Diagnose an incident", Emits: []string{"IncidentReported", "PagerRaised"}}}
	})
	nc, err := nats.Connect(d.NATSURL(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync("lathe.lattice.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 10*time.Second)
	ws := dialWS(t, ctx, srv, nil)
	expectFrame(t, ctx, ws, "ready")
	expectFrame(t, ctx, ws, "snapshot")

	if r := call(t, srv, get, "/api/skills", ""); r.status != 200 || !strings.Contains(string(r.body), `"emits":["IncidentReported","PagerRaised"]`) {
		t.Fatalf("GET /api/skills: %d %s", r.status, r.body)
	}
	if r := call(t, srv, post, "/api/skills/nope/fire", ""); r.status != 404 {
		t.Errorf("fire an unknown Skill: %d %s", r.status, r.body)
	}
	if r := call(t, srv, post, "/api/skills/triage/fire", ""); r.status != 200 || !strings.Contains(string(r.body), `"events":["IncidentReported","PagerRaised"]`) {
		t.Fatalf("fire: %d %s", r.status, r.body)
	}

	type typed struct{ Kind, Type, Name, Skill string }
	var frames []typed
	for len(frames) < 2 {
		_, raw := readFrame(t, ctx, ws)
		var f typed
		_ = json.Unmarshal(raw, &f)
		if f.Kind == "event" && f.Skill != "" {
			frames = append(frames, f)
		}
	}
	for i, want := range []string{"IncidentReported", "PagerRaised"} {
		if frames[i].Type != want || frames[i].Name != "Triage" || frames[i].Skill != "triage" {
			t.Errorf("frame %d = %+v, want %s from Triage", i, frames[i], want)
		}
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("NATS message %d: %v", i, err)
		}
		var f typed
		if m.Subject != "lathe.lattice."+want || json.Unmarshal(m.Data, &f) != nil || f.Type != want || f.Kind != "event" {
			t.Errorf("NATS message %d on %s: %s", i, m.Subject, m.Data)
		}
	}
	var recent []struct{ Kind, Type, Name string }
	if err := json.Unmarshal(call(t, srv, get, "/api/events/recent", "").body, &recent); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, n := range recent {
		kinds = append(kinds, n.Kind+":"+n.Type)
	}
	if got := strings.Join(kinds, " "); got != "journal:skill-fired event:IncidentReported event:PagerRaised" {
		t.Errorf("recent = %s", got)
	}
}
