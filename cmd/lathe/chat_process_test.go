package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/runtime/llm/fakellm"
)

// TestChatTurnsEndOnceAcrossStops stops a daemon under a streaming Chat
// turn, by SIGTERM and by SIGKILL, and requires afterwards: the user
// message kept, exactly one chat-turn-ended for the turn, and a Chat that
// takes turns again.
func TestChatTurnsEndOnceAcrossStops(t *testing.T) {
	held := fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("halfway"), fakellm.Stall(nil)}}
	done := fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("back"), fakellm.Usage(1, 1, 0)}}
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{held, held, done}})
	t.Cleanup(fake.Close)
	t.Setenv("LATHE_TEST_CHAT_KEY", "k")
	cfg := writeConfig(t, fmt.Sprintf(`providers:
  fake:
    kind: openai
    base_url: %q
    api_key_env: LATHE_TEST_CHAT_KEY
agents:
  - id: coder
    name: Coder
    provider: fake
    model: m1
`, fake.URL()+"/v1"))
	data := t.TempDir()
	d := procStart(t, data, "--config", cfg)
	status, body := procDo(t, http.MethodPost, d.url+"/api/chat", `{"agent_id":"coder"}`)
	if status != 201 {
		t.Fatalf("create chat: %d %s", status, body)
	}
	chat := idOf(t, body)
	chatTurn := func(d *daemonProc, content string, stop func(kind string) bool) {
		t.Helper()
		ctx := procContext(t, 30*time.Second)
		c, _, err := websocket.Dial(ctx, d.url+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		b, _ := json.Marshal(map[string]any{"cmd": "chat-turn", "chat_id": chat, "content": content})
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		for {
			_, raw, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("read /ws: %v\n%s", err, d.stderr.String())
			}
			var f struct{ Kind string }
			if json.Unmarshal(raw, &f) == nil && stop(f.Kind) {
				return
			}
		}
	}
	for _, c := range []struct {
		name    string
		stop    func(*testing.T)
		wantErr string
	}{
		{"sigterm", func(t *testing.T) { d.stop(t) }, "shutting down"},
		{"sigkill", func(t *testing.T) { d.kill(t) }, "stopped during this turn"},
	} {
		chatTurn(d, "question "+c.name, func(kind string) bool { return kind == "chat-token" })
		c.stop(t)
		d = procStart(t, data, "--config", cfg)
		var ended int
		for _, env := range procEvents(t, d, chat) {
			if env.Type == "chat-turn-ended" {
				ended++
			}
		}
		status, body := procDo(t, http.MethodGet, d.url+"/api/chat/"+chat, "")
		var rec struct {
			ActiveTurn string `json:"active_turn"`
			Messages   []struct {
				Role, Content, Outcome, Error string
			} `json:"messages"`
		}
		if status != 200 || json.Unmarshal(body, &rec) != nil {
			t.Fatalf("GET chat: %d %s", status, body)
		}
		last := rec.Messages[len(rec.Messages)-1]
		if rec.ActiveTurn != "" || !strings.Contains(string(body), "question "+c.name) {
			t.Fatalf("%s: chat after the restart: %s", c.name, body)
		}
		if want := map[string]int{"sigterm": 1, "sigkill": 2}[c.name]; ended != want {
			t.Fatalf("%s: %d chat-turn-ended events in all, want %d", c.name, ended, want)
		}
		if c.name == "sigterm" && (last.Role != "assistant" || last.Outcome != "error" || !strings.Contains(last.Error, c.wantErr)) {
			t.Fatalf("%s: the reply record: %+v", c.name, last)
		}
		if c.name == "sigkill" && last.Role != "user" {
			t.Fatalf("%s: the last message: %+v", c.name, last)
		}
	}
	// The Chat takes turns again.
	chatTurn(d, "again", func(kind string) bool {
		if kind == "chat-error" {
			t.Fatalf("a turn after the restarts failed")
		}
		return kind == "chat-done"
	})
}
