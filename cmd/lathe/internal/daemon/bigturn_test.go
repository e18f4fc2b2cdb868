package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	turnscmd "lathe/commands/turns"

	"github.com/nats-io/nats.go"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// bigText is about n bytes of numbered lines, then end.
func bigText(n int, kind, end string) string {
	var b strings.Builder
	for i := 0; b.Len() < n-len(end); i++ {
		fmt.Fprintf(&b, "%s line %d of a long answer\n", kind, i)
	}
	b.WriteString(end)
	return b.String()
}

// TestLargeTurnIsPublishedWhole runs a turn whose answer is 10 MB, with a
// tool call whose arguments and another whose result are over the inline
// bound, on a daemon with real sandboxes. An integration feed subscribed to
// lathe.events.> on the daemon's NATS receives every event the journal
// committed, byte for byte, and the history routes answer the whole
// content.
func TestLargeTurnIsPublishedWhole(t *testing.T) {
	const ns = "lathe-test-bigturn"
	answer := bigText(10<<20, "answer", "THE-VERY-LAST-WORDS")
	content := bigText(300<<10, "file", "end of file")
	writeArgs, _ := json.Marshal(map[string]string{"path": "big.txt", "content": content})
	var final []fakellm.Step
	for rest := answer; rest != ""; {
		n := min(len(rest), 16<<10)
		final = append(final, fakellm.Text(rest[:n]))
		rest = rest[n:]
	}
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("call_1", "write_file", string(writeArgs)), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("call_2", "read_file", `{"path":"big.txt"}`), fakellm.Usage(20, 5, 0)}},
		{Steps: append(final, fakellm.Usage(30, 100, 0))},
	}}
	fake := fakellm.New(script)
	t.Cleanup(fake.Close)
	t.Setenv(testRuntimeKeyEnv, "k")
	cl := containerdtest.Namespace(t, ns)
	d, srv := newSandboxDaemon(t, ns, func(c *config.Config) {
		c.Providers = map[string]config.Provider{"fake": {Kind: config.KindOpenAI, BaseURL: fake.URL() + "/v1", APIKeyEnv: testRuntimeKeyEnv}}
		c.Agents = []config.Agent{{ID: "coder", Name: "Coder", Provider: "fake", Model: "m1", Prompt: "you code"}}
		c.NATS.Listen = "127.0.0.1:0"
	})
	r := newEnvRig(t, srv, cl)
	id := r.create(t, "").ID
	r.ready(t, id)

	// An integration feed on the daemon's NATS, over TCP.
	nc, err := nats.Connect(d.bus.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	feed := make(chan *nats.Msg, 4096)
	if _, err := nc.ChanSubscribe("lathe.events.>", feed); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	from := d.journal.Last() // every later event is published after the subscription

	// The execute route answers when the turn ended; 10 MB of streamed text
	// takes longer than call's bound.
	ctx := testContext(t, 3*time.Minute)
	req, err := http.NewRequestWithContext(ctx, post, srv.URL+"/api/sessions/"+id+"/execute", strings.NewReader(`{"input":"write, read, then answer at length"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	started := time.Now()
	httpResp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var exec struct{ Status, Output string }
	err = json.NewDecoder(httpResp.Body).Decode(&exec)
	httpResp.Body.Close()
	if httpResp.StatusCode != 200 || err != nil || exec.Status != "done" || exec.Output != answer {
		t.Fatalf("execute: %d, %v, status %q, output %d bytes", httpResp.StatusCode, err, exec.Status, len(exec.Output))
	}
	t.Logf("the turn took %v", time.Since(started))

	// Every event committed since the subscription is small and was
	// published with the very bytes the journal exports (its hash included).
	var committed []journal.Envelope
	var raws [][]byte
	err = d.journal.ScanSealed(context.Background(), from, 0, func(seq uint64, raw []byte) error {
		if len(raw) > journal.MaxEventData+4096 {
			t.Errorf("event %d is %d bytes", seq, len(raw))
		}
		env, err := journal.DecodeEnvelope(raw)
		committed, raws = append(committed, env), append(raws, append([]byte(nil), raw...))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) < 10 {
		t.Fatalf("only %d events committed for the turn", len(committed))
	}
	referenced := 0
	timeout := time.After(30 * time.Second)
	for i, want := range committed {
		var got journal.Envelope
		for got.Seq < want.Seq { // earlier seqs may still arrive: skip them
			select {
			case m := <-feed:
				if got, err = journal.DecodeEnvelope(m.Data); err != nil {
					t.Fatal(err)
				}
				if got.Seq == want.Seq && (m.Subject != want.Subject() || string(m.Data) != string(raws[i])) {
					t.Fatalf("seq %d on NATS differs from the journal (subject %s)", want.Seq, m.Subject)
				}
			case <-timeout:
				t.Fatalf("seq %d (%s, %d bytes) never reached NATS", want.Seq, want.Type, len(raws[i]))
			}
		}
		if got.Seq != want.Seq {
			t.Fatalf("NATS skipped seq %d (%s): next was %d", want.Seq, want.Type, got.Seq)
		}
		if strings.Contains(string(want.Data), `"$blob"`) {
			referenced++
		}
	}
	if referenced < 3 { // the write's arguments, the read's result, the answer
		t.Errorf("only %d events reference blobs", referenced)
	}
	if n := d.bus.Failed(); n != 0 {
		t.Errorf("%d events failed to publish", n)
	}

	// The history routes resolve the content whole.
	var turns struct{ Turns []projections.Turn }
	if resp := r.do(t, get, "/api/sessions/"+id+"/turns", ""); resp.status != 200 || json.Unmarshal(resp.body, &turns) != nil || len(turns.Turns) != 1 {
		t.Fatalf("GET turns: %d", resp.status)
	}
	turn := turns.Turns[0]
	var write struct{ Content string }
	switch {
	case turn.Output.String() != answer || turn.Output.Stored():
		t.Fatalf("turn output %d bytes", len(turn.Output.String()))
	case len(turn.Steps) != 3 || turn.Steps[2].Text.String() != answer || len(turn.ToolCalls) != 2:
		t.Fatalf("turn steps %d, tool calls %d", len(turn.Steps), len(turn.ToolCalls))
	case json.Unmarshal(turn.ToolCalls[0].Arguments.Value(), &write) != nil || write.Content != content:
		t.Fatalf("write_file arguments: %.200s", turn.ToolCalls[0].Arguments.Value())
	case !strings.Contains(turn.ToolCalls[1].Result.String(), "file line 0 of") || len(turn.ToolCalls[1].Result.String()) <= 64<<10:
		t.Fatalf("read_file result %d bytes", len(turn.ToolCalls[1].Result.String()))
	}
	var exp struct{ Turns []projections.Turn }
	if resp := r.do(t, get, "/api/sessions/"+id+"/export?format=json", ""); resp.status != 200 || json.Unmarshal(resp.body, &exp) != nil ||
		len(exp.Turns) != 1 || exp.Turns[0].Output.String() != answer {
		t.Fatalf("JSON export: %d", resp.status)
	}
	if resp := r.do(t, get, "/api/sessions/"+id+"/export?format=markdown", ""); resp.status != 200 || !strings.Contains(string(resp.body), answer) {
		t.Fatalf("markdown export: %d, %d bytes", resp.status, len(resp.body))
	}
	var msgs struct{ Messages []turnscmd.Message }
	if resp := r.do(t, get, "/api/sessions/"+id+"/messages", ""); resp.status != 200 || json.Unmarshal(resp.body, &msgs) != nil ||
		len(msgs.Messages) == 0 || msgs.Messages[len(msgs.Messages)-1].Content != answer {
		t.Fatalf("messages: %d", resp.status)
	}
	var hits struct{ Hits []projections.TurnHit }
	if resp := r.do(t, get, "/api/session-turns/search?q=the-very-last-words", ""); resp.status != 200 || json.Unmarshal(resp.body, &hits) != nil ||
		len(hits.Hits) != 1 || hits.Hits[0].Field != "output" {
		t.Fatalf("search: %d %s", resp.status, resp.body)
	}
}
