package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/sandbox/sandboxtest"
)

// wholeStore folds the daemon's journal into a store that evicts nothing.
func wholeStore(t *testing.T, d *Daemon) *projections.Store {
	t.Helper()
	s := projections.New()
	var recs []journal.Record
	err := d.journal.Scan(context.Background(), 0, 0, func(_ uint64, raw []byte) error {
		env, err := journal.DecodeEnvelope(raw)
		recs = append(recs, journal.Record{Envelope: env})
		return err
	})
	if err == nil {
		err = s.Apply(recs)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sameBody fails unless body is v's JSON (compared as values).
func sameBody(t *testing.T, what string, body []byte, v any) {
	t.Helper()
	want, _ := json.Marshal(v)
	var g, w any
	if err := json.Unmarshal(body, &g); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	_ = json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: the route answers\n%s\nwhere a store holding everything has\n%s", what, body, want)
	}
}

// An ended run and a Chat's old messages leave the daemon's memory, and
// their routes answer exactly what a store holding them answers: the run,
// the runs list, the Chat's messages and a search that only an evicted
// message matches.
func TestEvictedRecordsThroughTheRoutes(t *testing.T) {
	d, srv := newTestDaemon(t, func(*config.Config) {})
	if r := call(t, srv, post, "/api/automations", `{"id":"wf","name":"WF","trigger":{"kind":"manual"},"nodes":[{"id":"a","kind":"tool","tool_id":"lathe__echo","input":"{\"text\": \"got {{trigger}}\"}"}],"edges":[]}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r := expectStatus(t, call(t, srv, post, "/api/automations/wf/run", `{"input":"hello"}`), 200)
	var started struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(r.body, &started); err != nil || started.RunID == "" {
		t.Fatalf("run: %s", r.body)
	}
	sandboxtest.WaitFor(t, 20*time.Second, func() bool { runs, _ := d.store.Evicted(); return runs == 1 })

	r = expectStatus(t, call(t, srv, post, "/api/chat", `{"agent_id":"coder","name":"long"}`), 201)
	var chat struct{ ID string }
	_ = json.Unmarshal(r.body, &chat)
	var evs []journal.Event
	for i := range 40 {
		evs = append(evs, events.New(chat.ID, events.ChatMessageAdded{MessageID: fmt.Sprintf("M%02d", i), Role: events.RoleUser, Content: events.NewText(fmt.Sprintf("Message %d", i))}))
	}
	recs, err := d.journal.Append(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.store.Await(context.Background(), recs[len(recs)-1].Seq); err != nil {
		t.Fatal(err)
	}
	if _, msgs := d.store.Evicted(); msgs != 32 {
		t.Fatalf("%d messages evicted, want 32", msgs)
	}

	whole := wholeStore(t, d)
	run, _ := whole.AutomationRun(started.RunID)
	sameBody(t, "the run", expectStatus(t, call(t, srv, get, "/api/automations/wf/runs/"+started.RunID, ""), 200).body, whole.ResolveRun(run))
	runs := whole.AutomationRuns("wf")
	for i := range runs {
		runs[i] = whole.ResolveRun(runs[i])
	}
	sameBody(t, "the runs", expectStatus(t, call(t, srv, get, "/api/automations/wf/runs", ""), 200).body, runs)
	c, _ := whole.Chat(chat.ID)
	var got struct{ Messages json.RawMessage }
	_ = json.Unmarshal(expectStatus(t, call(t, srv, get, "/api/chat/"+chat.ID, ""), 200).body, &got)
	sameBody(t, "the Chat's messages", got.Messages, c.Messages)
	sameBody(t, "a search of an evicted message", expectStatus(t, call(t, srv, get, "/api/chat?q=message+3", ""), 200).body, whole.Chats("message 3"))
	if len(c.Messages) != 40 {
		t.Errorf("%d messages, want 40", len(c.Messages))
	}
}
