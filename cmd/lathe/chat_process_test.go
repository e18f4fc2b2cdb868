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
	cfg, data, d, chat := procChat(t, fake)
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

// TestA2ATaskEndsOnceAfterAKill kills a daemon while an inbound A2A task
// runs: after the restart the task reads back failed, ended exactly once.
func TestA2ATaskEndsOnceAfterAKill(t *testing.T) {
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.Text("thinking"), fakellm.Stall(nil)}}}})
	t.Cleanup(fake.Close)
	t.Setenv("LATHE_TEST_A2A_KEY", "k")
	cfg := writeConfig(t, fmt.Sprintf(`providers:
  fake:
    kind: openai
    base_url: %q
    api_key_env: LATHE_TEST_A2A_KEY
agents:
  - id: coder
    name: Coder
    provider: fake
    model: m1
a2a:
  receivers:
    - {id: helper, agent_id: coder, name: Helper, description: Answers}
`, fake.URL()+"/v1"))
	data := t.TempDir()
	d := procStart(t, data, "--config", cfg)
	go func() {
		// Its answer never comes: the daemon is killed under it.
		_, _ = procPost(d.url+"/a2a/tasks", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"a long one"}]}}}`)
	}()
	procPoll(t, "the task reaches the model", func() bool { return len(fake.Requests()) == 1 })
	d.kill(t)
	d = procStart(t, data, "--config", cfg)

	status, body := procDo(t, http.MethodGet, d.url+"/api/events/journal", "")
	if status != 200 {
		t.Fatalf("journal feed: %d %s", status, body)
	}
	var task string
	for line := range strings.Lines(string(body)) {
		if strings.Contains(line, `"type":"a2a-task-received"`) {
			var env struct {
				AggregateID string `json:"aggregate_id"`
			}
			_ = json.Unmarshal([]byte(line), &env)
			task = env.AggregateID
		}
	}
	if task == "" {
		t.Fatalf("no a2a-task-received in the journal")
	}
	var ended int
	for _, env := range procEvents(t, d, task) {
		if env.Type == "a2a-task-ended" {
			ended++
		}
	}
	if ended != 1 {
		t.Fatalf("%d a2a-task-ended events, want 1", ended)
	}
	status, body = procDo(t, http.MethodPost, d.url+"/a2a/tasks", `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"`+task+`"}}`)
	if status != 200 || !strings.Contains(string(body), `"state":"failed"`) || !strings.Contains(string(body), "stopped during this task") {
		t.Fatalf("tasks/get after the restart: %d %s", status, body)
	}
}

// procPost posts JSON without failing the test (for a request the daemon
// may never answer).
func procPost(url, body string) (int, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// procChat starts a daemon whose one Agent, coder, runs on fake, and
// creates a Chat with it: the config, the data dir, the daemon and the
// Chat's ID.
func procChat(t *testing.T, fake *fakellm.Server) (cfg, data string, d *daemonProc, chat string) {
	t.Helper()
	t.Setenv("LATHE_TEST_CHAT_KEY", "k")
	cfg = writeConfig(t, fmt.Sprintf(`providers:
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
	data = t.TempDir()
	d = procStart(t, data, "--config", cfg)
	status, body := procDo(t, http.MethodPost, d.url+"/api/chat", `{"agent_id":"coder"}`)
	if status != 201 {
		t.Fatalf("create chat: %d %s", status, body)
	}
	return cfg, data, d, idOf(t, body)
}
