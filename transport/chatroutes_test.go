package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"lathe/commands/core"

	"github.com/gobwas/ws"
	"github.com/oklog/ulid/v2"

	"lathe/journal/events"
	"lathe/runtime/usage"
)

// chatRouteRig is a hub with the chat-turn command over the fake, two
// clients in it, and the Server whose SendLive frames the live deltas.
type chatRouteRig struct {
	f    *fake
	srv  *Server
	a, b *Client
}

func newChatRouteRig() *chatRouteRig {
	f := &fake{}
	hub := NewHub(HubOptions{Snapshot: func(context.Context) ([]byte, Cursor, error) { return nil, Cursor{}, nil }})
	h := &handlers{chats: &chatRoutes{logged: logged{slog.New(slog.DiscardHandler)}, chats: f, routes: &hub.chats}}
	for _, c := range h.wsCommands() {
		hub.Handle(c.Name, c.Handle)
	}
	client := func() *Client {
		c := &Client{hub: hub, queue: make(chan queuedFrame, hubSendBuffer), gone: make(chan struct{})}
		hub.add(c)
		return c
	}
	return &chatRouteRig{f: f, srv: &Server{log: slog.New(slog.DiscardHandler), hub: hub}, a: client(), b: client()}
}

// turn has a issue a chat-turn and returns the turn ID the fake was given.
func (r *chatRouteRig) turn(t *testing.T, c *Client) string {
	t.Helper()
	r.srv.hub.dispatch(context.Background(), c, []byte(`{"cmd":"chat-turn","chat_id":"C","content":"hi"}`))
	if r.f.call != "ChatTurn" || len(r.f.args) != 3 {
		t.Fatalf("call %s%v, want ChatTurn", r.f.call, r.f.args)
	}
	turn := r.f.args[1].(string)
	if _, err := ulid.ParseStrict(turn); err != nil {
		t.Fatalf("turn id %q: %v", turn, err)
	}
	return turn
}

// frames takes the frames queued for c.
func frames(t *testing.T, c *Client) []string {
	t.Helper()
	var out []string
	for len(c.queue) > 0 {
		fr, err := ws.ReadFrame(bytes.NewReader((<-c.queue).wire))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(fr.Payload))
	}
	return out
}

// chatSteps are one turn's live deltas, from its start to its end.
func chatSteps(turn string) []events.LiveDelta {
	d := func(kind string) events.LiveDelta {
		return events.LiveDelta{Chat: "C", TurnID: turn, Agent: "a", Kind: kind}
	}
	start, tok, rsn, call, res, end := d(events.DeltaChatStart), d(events.DeltaChatToken), d(events.DeltaChatReasoning),
		d(events.DeltaChatToolStart), d(events.DeltaChatToolResult), d(events.DeltaChatEnd)
	tok.Delta, rsn.Delta = "hello", "hmm"
	call.Tool = &events.ChatTool{CallID: "k1", Name: "echo", Arguments: json.RawMessage(`{"x":1}`)}
	res.Tool = &events.ChatTool{CallID: "k1", Name: "echo", Result: "", IsError: false}
	end.ChatEnd = &events.ChatEnd{Outcome: events.ChatDone, Usage: usage.Tokens{InputTokens: 3, OutputTokens: 2, TokenUsageKnown: true}.View()}
	return []events.LiveDelta{start, rsn, tok, call, res, end}
}

// TestChatFramesRoute: a Chat turn's frames reach the connection that
// issued it and no other, as the frames the spec names (their JSON as the
// connection's own sink wrote them before), and its route goes with its
// end.
func TestChatFramesRoute(t *testing.T) {
	r := newChatRouteRig()
	turn := r.turn(t, r.a)
	for _, d := range chatSteps(turn) {
		r.srv.SendLive(d, 0)
	}
	want := []string{
		`{"kind":"chat-start","chat_id":"C","turn_id":"T","agent":"a"}`,
		`{"kind":"chat-reasoning","chat_id":"C","turn_id":"T","delta":"hmm"}`,
		`{"kind":"chat-token","chat_id":"C","turn_id":"T","delta":"hello"}`,
		`{"kind":"chat-tool-start","chat_id":"C","turn_id":"T","agent":"a","call_id":"k1","name":"echo","arguments":{"x":1}}`,
		`{"kind":"chat-tool-result","chat_id":"C","turn_id":"T","agent":"a","call_id":"k1","name":"echo","result":"","is_error":false}`,
		`{"kind":"chat-done","chat_id":"C","turn_id":"T","input_tokens":3,"output_tokens":2,"reasoning_tokens":0,"token_usage_known":true,"total_tokens":5}`,
	}
	got := frames(t, r.a)
	if len(got) != len(want) {
		t.Fatalf("issuing connection got %d frames, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if w := strings.Replace(want[i], `"turn_id":"T"`, `"turn_id":"`+turn+`"`, 1); got[i] != w {
			t.Errorf("frame %d:\n got %s\nwant %s", i, got[i], w)
		}
	}
	if other := frames(t, r.b); len(other) != 0 {
		t.Errorf("another connection got the turn's frames: %q", other)
	}
	if n := r.srv.hub.chats.len(); n != 0 {
		t.Errorf("%d routes after the turn's end, want none", n)
	}
	// A delta after the end (there is none; were there one) reaches no one.
	r.srv.SendLive(chatSteps(turn)[1], 0)
	if late := append(frames(t, r.a), frames(t, r.b)...); len(late) != 0 {
		t.Errorf("a frame after the end was sent: %q", late)
	}
}

// TestChatRouteDrops: a connection that leaves mid-turn takes its routes
// with it, and so does a refused turn, which is answered directly.
func TestChatRouteDrops(t *testing.T) {
	t.Run("the connection leaves", func(t *testing.T) {
		r := newChatRouteRig()
		turn := r.turn(t, r.a)
		r.turn(t, r.a) // a second Chat's turn from the same connection
		steps := chatSteps(turn)
		r.srv.SendLive(steps[0], 0)
		if n := r.srv.hub.chats.len(); n != 2 {
			t.Fatalf("%d routes mid-turn, want 2", n)
		}
		r.srv.hub.remove(r.a)
		if n := r.srv.hub.chats.len(); n != 0 {
			t.Errorf("%d routes after the connection left, want none", n)
		}
		for _, d := range steps[1:] {
			r.srv.SendLive(d, 0)
		}
		if other := frames(t, r.b); len(other) != 0 {
			t.Errorf("another connection got the turn's frames: %q", other)
		}
	})
	t.Run("the turn is refused", func(t *testing.T) {
		r := newChatRouteRig()
		r.f.err = errors.Join(core.ErrConflict, errors.New(`chat "C" is busy`))
		r.turn(t, r.a)
		if n := r.srv.hub.chats.len(); n != 0 {
			t.Errorf("%d routes after a refused turn, want none", n)
		}
		got := frames(t, r.a)
		if len(got) != 1 || !strings.Contains(got[0], `"kind":"chat-error"`) || !strings.Contains(got[0], "busy") || !strings.Contains(got[0], `"turn_id":""`) {
			t.Errorf("refusal frames %q, want one chat-error with no turn", got)
		}
	})
	t.Run("a frame of a turn with no route", func(t *testing.T) {
		var table chatRouteTable
		table.send("nobody", []byte(`{}`), true) // no route: nothing to send, no panic
		if table.len() != 0 {
			t.Fatal("a send made a route")
		}
	})
}
