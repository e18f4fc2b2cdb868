package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/runtime/blobs"
	"lathe/runtime/llm/fakellm"
)

// TestDeepToolCallKeepsTheJournalReplayable: a model's tool call whose
// arguments nest 10,000 levels deep (valid JSON, within encoding/json's
// limit) is refused with a tool error, and the journal that records it
// still replays in full: after a SIGKILL, with the checkpoint deleted,
// `lathe journal verify` passes and the daemon starts (issue 23, finding 1).
func TestDeepToolCallKeepsTheJournalReplayable(t *testing.T) {
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("call_1", "mcp__x__y", deep), fakellm.Usage(1, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("done"), fakellm.Usage(1, 1, 0)}},
	}})
	t.Cleanup(fake.Close)
	cfg, data, d, chat := procChat(t, fake)
	ctx := procContext(t, 30*time.Second)
	c, _, err := websocket.Dial(ctx, d.url+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(4 << 20)
	b, _ := json.Marshal(map[string]any{"cmd": "chat-turn", "chat_id": chat, "content": "go deep"})
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	for kind := ""; kind != "chat-done"; {
		_, raw, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read /ws: %v\n%s", err, d.stderr.String())
		}
		var f struct{ Kind string }
		_ = json.Unmarshal(raw, &f)
		if kind = f.Kind; kind == "chat-error" {
			t.Fatalf("the turn failed: %s", raw)
		}
	}
	var refused bool
	for _, env := range procEvents(t, d, chat) {
		// The call is refused (a name never advertised is an unknown tool,
		// issue 32; deep arguments of an advertised one are refused too).
		refused = refused || env.Type == "chat-tool-called" && strings.Contains(string(env.Data), `"is_error":true`)
	}
	if !refused {
		t.Fatalf("no chat-tool-called event refuses the call")
	}
	d.kill(t)
	if err := os.Remove(filepath.Join(data, "projections.checkpoint")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if code, _, verr := runLathe(t, "journal", "verify", "--data", data); code != 0 {
		t.Fatalf("journal verify: code %d\n%s", code, verr)
	}
	d = procStart(t, data, "--config", cfg)
	if status, body := procDo(t, http.MethodGet, d.url+"/api/chat/"+chat, ""); status != 200 || !strings.Contains(string(body), "done") {
		t.Fatalf("the chat after a full replay: %d %.300s", status, body)
	}
}

// `lathe journal verify` checks the blob files against their hashes: a
// tampered blob fails the verify, named (issue 23, finding 10).
func TestJournalVerifyChecksBlobs(t *testing.T) {
	data := t.TempDir()
	startDaemon(t, data).stop(t)
	store, err := blobs.Open(filepath.Join(data, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	hash, _, err := store.Put(strings.NewReader("large content of an event"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, verr := runLathe(t, "journal", "verify", "--data", data); code != 0 || !strings.Contains(out, `"blobs":1`) {
		t.Fatalf("verify of an intact data dir: code %d\n%s%s", code, out, verr)
	}
	if err := os.WriteFile(filepath.Join(data, "blobs", "sha256", hash[:2], hash), []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, verr := runLathe(t, "journal", "verify", "--data", data); code == 0 || !strings.Contains(verr, hash) {
		t.Fatalf("verify of a tampered blob: code %d\n%s", code, verr)
	}
}

// The journal feed after the largest seq is empty, not the whole journal
// (issue 23, finding 8).
func TestJournalFeedPastTheHeadIsEmpty(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	if status, body := procDo(t, http.MethodPost, d.url+"/api/workspaces", `{"path":"`+t.TempDir()+`"}`); status != 201 {
		t.Fatalf("register workspace: %d %s", status, body)
	}
	if status, body := procDo(t, http.MethodGet, d.url+"/api/events/journal?after=0", ""); status != 200 || len(body) == 0 {
		t.Fatalf("the feed from the start: %d %s", status, body)
	}
	for _, after := range []string{"1000", "18446744073709551615"} {
		if status, body := procDo(t, http.MethodGet, d.url+"/api/events/journal?after="+after, ""); status != 200 || len(body) != 0 {
			t.Errorf("the feed after %s: %d %.200s; want 200 and nothing", after, status, body)
		}
	}
}

// With server credentials, a NATS listener needs its own: a config that
// exposes NATS without them stops the start, naming the key (issue 23,
// finding 4).
func TestNATSListenWithKeysNeedsCredentials(t *testing.T) {
	cfg := writeConfig(t, "server:\n  api_keys: [\"a-long-enough-api-key\"]\nnats:\n  listen: \"127.0.0.1:0\"\n")
	code, _, stderr := runLathe(t, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--config", cfg)
	if code == 0 || !strings.Contains(stderr, "nats.listen") || !strings.Contains(stderr, "nats.user and nats.password") {
		t.Fatalf("serve with nats.listen, keys and no NATS credentials: code %d\n%s", code, stderr)
	}
}
