package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/sandboxtest"
)

// chatFrame is the part of a Chat frame the tests look at.
type chatFrame struct {
	Kind            string          `json:"kind"`
	ChatID          string          `json:"chat_id"`
	TurnID          string          `json:"turn_id"`
	Agent           string          `json:"agent"`
	Delta           string          `json:"delta"`
	CallID          string          `json:"call_id"`
	Name            string          `json:"name"`
	Arguments       json.RawMessage `json:"arguments"`
	Result          *string         `json:"result"`
	IsError         *bool           `json:"is_error"`
	Error           string          `json:"error"`
	InputTokens     *int            `json:"input_tokens"`
	OutputTokens    *int            `json:"output_tokens"`
	ReasoningTokens *int            `json:"reasoning_tokens"`
	TotalTokens     *int            `json:"total_tokens"`
	TokenUsageKnown *bool           `json:"token_usage_known"`
}

func (f chatFrame) terminal() bool {
	return f.Kind == "chat-done" || f.Kind == "chat-stopped" || f.Kind == "chat-error"
}

// usage renders a terminal frame's tokens: in/out/reasoning/total/known.
func (f chatFrame) usage() string {
	if f.InputTokens == nil || f.OutputTokens == nil || f.ReasoningTokens == nil || f.TotalTokens == nil || f.TokenUsageKnown == nil {
		return "missing token fields"
	}
	return fmt.Sprintf("%d/%d/%d/%d/%v", *f.InputTokens, *f.OutputTokens, *f.ReasoningTokens, *f.TotalTokens, *f.TokenUsageKnown)
}

// chatConn is a /ws connection past its ready and snapshot frames.
type chatConn struct{ c *websocket.Conn }

func openChatConn(t *testing.T, srv *httptest.Server) chatConn {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	c := dialWS(t, ctx, srv, nil)
	expectFrame(t, ctx, c, "ready")
	expectFrame(t, ctx, c, "snapshot")
	return chatConn{c}
}

func (cc chatConn) send(t *testing.T, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeText(t, testContext(t, 5*time.Second), cc.c, string(b))
}

// until reads the Chat frames (others skipped) until stop says so. A
// turn's adjacent text frames of one kind are read as one: the live
// projection merges them when the daemon is behind, so how the text is cut
// into frames is not the daemon's to promise, only the text and its order.
func (cc chatConn) until(t *testing.T, stop func(chatFrame) bool) []chatFrame {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	var got []chatFrame
	for {
		kind, raw := readFrame(t, ctx, cc.c)
		if !strings.HasPrefix(kind, "chat-") && kind != "error" {
			continue
		}
		var f chatFrame
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		if n := len(got) - 1; n >= 0 && (f.Kind == "chat-token" || f.Kind == "chat-reasoning") && got[n].Kind == f.Kind && got[n].TurnID == f.TurnID {
			got[n].Delta += f.Delta
		} else {
			got = append(got, f)
		}
		if stop(got[len(got)-1]) {
			return got
		}
	}
}

func (cc chatConn) terminal(t *testing.T) []chatFrame { return cc.until(t, chatFrame.terminal) }

// noChatFrames pings and reads to the pong: no Chat frame came before it.
func (cc chatConn) noChatFrames(t *testing.T) {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	writeText(t, ctx, cc.c, `{"cmd":"ping"}`)
	for {
		kind, raw := readFrame(t, ctx, cc.c)
		if kind == "pong" {
			return
		}
		if strings.HasPrefix(kind, "chat-") {
			t.Fatalf("a Chat frame reached a connection that did not issue the turn: %s", raw)
		}
	}
}

func kinds(fs []chatFrame) string {
	var out []string
	for _, f := range fs {
		s := f.Kind
		if f.Delta != "" {
			s += fmt.Sprintf("(%s)", f.Delta)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// line renders a Chat frame for a golden sequence: stable fields only.
func (f chatFrame) line() string {
	switch f.Kind {
	case "chat-start":
		return "chat-start agent=" + f.Agent
	case "chat-token", "chat-reasoning":
		return fmt.Sprintf("%s %q", f.Kind, f.Delta)
	case "chat-tool-start":
		return fmt.Sprintf("chat-tool-start %s %s agent=%s %s", f.CallID, f.Name, f.Agent, f.Arguments)
	case "chat-tool-result":
		return fmt.Sprintf("chat-tool-result %s %s agent=%s error=%v %q", f.CallID, f.Name, f.Agent, *f.IsError, *f.Result)
	case "chat-done", "chat-stopped", "chat-error":
		s := f.Kind + " tokens=" + f.usage()
		if f.Error != "" {
			s += fmt.Sprintf(" error=%q", f.Error)
		}
		return s
	}
	return f.Kind
}

// matchGolden compares got with testdata/name (-update rewrites it).
func matchGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("frame sequence differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
}

type chatJSON struct {
	ID             string  `json:"id"`
	AgentID        string  `json:"agent_id"`
	Name           string  `json:"name"`
	Starred        bool    `json:"starred"`
	SystemOverride *string `json:"system_override"`
	ModelOverride  *string `json:"model_override"`
	ActiveTurn     string  `json:"active_turn"`
	Messages       []struct {
		ID      string `json:"id"`
		Role    string `json:"role"`
		Content string `json:"content"`
		Outcome string `json:"outcome"`
		Error   string `json:"error"`
		Usage   *struct {
			TotalTokens     int  `json:"total_tokens"`
			TokenUsageKnown bool `json:"token_usage_known"`
		} `json:"usage"`
		Reasoning string `json:"reasoning"`
		ToolCalls []struct {
			Name    string `json:"name"`
			Result  string `json:"result"`
			IsError bool   `json:"is_error"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Attachments []struct {
		FileID   string `json:"file_id"`
		Pinned   bool   `json:"pinned"`
		Consumed bool   `json:"consumed"`
		File     *struct {
			Name string `json:"name"`
		} `json:"file"`
	} `json:"attachments"`
}

func getChat(t *testing.T, srv *httptest.Server, id string) chatJSON {
	t.Helper()
	r := expectStatus(t, call(t, srv, get, "/api/chat/"+id, ""), 200)
	var c chatJSON
	if err := json.Unmarshal(r.body, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// transcript renders a Chat's messages as role:content|….
func (c chatJSON) transcript() string {
	var out []string
	for _, m := range c.Messages {
		out = append(out, m.Role+":"+m.Content)
	}
	return strings.Join(out, "|")
}

// chatIdle polls until the Chat has no running turn.
func chatIdle(t *testing.T, srv *httptest.Server, id string) chatJSON {
	t.Helper()
	var c chatJSON
	sandboxtest.WaitFor(t, 20*time.Second, func() bool {
		c = getChat(t, srv, id)
		return c.ActiveTurn == ""
	})
	return c
}

// lastUser is the last user message a model request carried.
func lastUser(t *testing.T, r fakellm.Request) string {
	t.Helper()
	msgs, _, _ := wireMessages(t, config.KindOpenAI, r)
	for i := len(msgs) - 1; i >= 0; i-- {
		if s, ok := strings.CutPrefix(msgs[i], "user:"); ok {
			return s
		}
	}
	return ""
}

// TestChatTurnsOverWS runs Chat turns end to end against the scripted
// model: frames only to the issuing connection, usage, a busy Chat, Stop,
// a connection that drops mid-turn, the overrides, a model failure, and
// the attachments' pinned and unpinned context.
func TestChatTurnsOverWS(t *testing.T) {
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	release, release2 := make(chan struct{}), make(chan struct{})
	defer close(release)
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Reasoning("hmm"), fakellm.Text("hello "), fakellm.Text("world"), fakellm.Usage(10, 4, 1)}},
		{Steps: []fakellm.Step{fakellm.Text("part"), fakellm.Stall(release)}},
		{Steps: []fakellm.Step{fakellm.Text("x"), fakellm.Stall(release2), fakellm.Text("y"), fakellm.Usage(1, 1, 0)}},
		{Model: "m9", Steps: []fakellm.Step{fakellm.Text("nine"), fakellm.Usage(2, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("par"), fakellm.Drop()}},
		{Steps: []fakellm.Step{fakellm.Text("seen"), fakellm.Usage(1, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("again"), fakellm.Usage(1, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("pinned"), fakellm.Usage(1, 1, 0)}},
	}})
	defer fake.Close()
	_, srv := newTestDaemon(t, runtimeConfig(config.KindOpenAI, fake.URL()))

	assertErrorBody(t, expectStatus(t, call(t, srv, post, "/api/chat", `{"agent_id":"nobody"}`), 404), `agent "nobody"`)
	id := mustCall(t, srv, 201, post, "/api/chat", `{"agent_id":"a","name":"Talk"}`)["id"].(string)
	a, b := openChatConn(t, srv), openChatConn(t, srv)

	// A whole turn: its frames reach the issuing connection, and only it.
	a.send(t, map[string]any{"cmd": "chat-turn", "chat_id": id, "content": "hi"})
	fs := a.terminal(t)
	if got := kinds(fs); got != "chat-start chat-reasoning(hmm) chat-token(hello world) chat-done" {
		t.Fatalf("frames: %s", got)
	}
	if end := fs[len(fs)-1]; end.usage() != "10/4/1/14/true" || end.ChatID != id || end.TurnID == "" || fs[0].Agent != "a" {
		t.Fatalf("chat-done %+v usage %s", end, end.usage())
	}
	b.noChatFrames(t)
	c := getChat(t, srv, id)
	if c.transcript() != "user:hi|assistant:hello world" || c.Messages[1].Usage == nil || c.Messages[1].Usage.TotalTokens != 14 || c.Messages[1].Reasoning != "hmm" {
		t.Fatalf("record after a turn: %+v", c)
	}

	// A busy Chat refuses a second turn; Stop ends the first with the
	// text streamed so far kept as its reply.
	a.send(t, map[string]any{"cmd": "chat-turn", "chat_id": id, "content": "second"})
	a.until(t, func(f chatFrame) bool { return f.Kind == "chat-token" })
	a.send(t, map[string]any{"cmd": "chat-turn", "chat_id": id, "content": "too soon"})
	busy := a.until(t, chatFrame.terminal)
	if end := busy[len(busy)-1]; end.Kind != "chat-error" || !strings.Contains(end.Error, "busy") || end.TurnID != "" {
		t.Fatalf("second turn on a busy chat: %+v", end)
	}
	a.send(t, map[string]any{"cmd": "chat-stop", "chat_id": id})
	if end := a.terminal(t); end[len(end)-1].Kind != "chat-stopped" || end[len(end)-1].TokenUsageKnown == nil {
		t.Fatalf("stop: %s", kinds(end))
	}
	c = getChat(t, srv, id)
	if c.transcript() != "user:hi|assistant:hello world|user:second|assistant:part" || c.Messages[3].Outcome != "stopped" || c.ActiveTurn != "" {
		t.Fatalf("record after a stop: %s %+v", c.transcript(), c.Messages[3])
	}
	a.send(t, map[string]any{"cmd": "chat-stop", "chat_id": id})
	if f := a.until(t, func(f chatFrame) bool { return f.Kind == "error" }); !strings.Contains(f[len(f)-1].Kind, "error") {
		t.Fatalf("stop with nothing running: %+v", f)
	}

	// A connection that drops mid-turn loses nothing: the reply is in the
	// record when the turn ends.
	drop := openChatConn(t, srv)
	drop.send(t, map[string]any{"cmd": "chat-turn", "chat_id": id, "content": "third"})
	drop.until(t, func(f chatFrame) bool { return f.Kind == "chat-token" })
	drop.c.Close(websocket.StatusNormalClosure, "")
	close(release2)
	if c = chatIdle(t, srv, id); !strings.HasSuffix(c.transcript(), "|user:third|assistant:xy") {
		t.Fatalf("after the dropped connection: %s", c.transcript())
	}

	// The overrides: the system prompt replaced, the model within the
	// Agent's provider, and the whole history sent.
	mustCall(t, srv, 200, patch, "/api/chat/"+id, `{"system_override":"sys","model_override":"m9","starred":true}`)
	a.send(t, map[string]any{"cmd": "chat-turn", "chat_id": id, "content": "fourth"})
	if end := a.terminal(t); end[len(end)-1].Kind != "chat-done" {
		t.Fatalf("override turn: %s", kinds(end))
	}
	reqs := fake.Requests()
	msgs, system, _ := wireMessages(t, config.KindOpenAI, reqs[len(reqs)-1])
	if reqs[len(reqs)-1].Model != "m9" || system != "sys" ||
		strings.Join(msgs, "|") != "user:hi|assistant:hello world|user:second|assistant:part|user:third|assistant:xy|user:fourth" {
		t.Fatalf("override request: model %q system %q messages %q", reqs[len(reqs)-1].Model, system, msgs)
	}
	c = getChat(t, srv, id)
	if !c.Starred || c.SystemOverride == nil || *c.ModelOverride != "m9" {
		t.Fatalf("overrides: %+v", c)
	}
	mustCall(t, srv, 200, patch, "/api/chat/"+id, `{"system_override":null,"model_override":null}`)
	if c = getChat(t, srv, id); c.SystemOverride != nil || c.ModelOverride != nil || !c.Starred {
		t.Fatalf("null did not clear the overrides: %+v", c)
	}

	// A model failure mid-Chat: chat-error with the usage so far, the
	// partial reply kept.
	a.send(t, map[string]any{"cmd": "chat-turn", "chat_id": id, "content": "fifth"})
	fs = a.terminal(t)
	if end := fs[len(fs)-1]; end.Kind != "chat-error" || end.Error == "" || end.TokenUsageKnown == nil || *end.TokenUsageKnown {
		t.Fatalf("model failure: %s %+v", kinds(fs), end)
	}
	if c = getChat(t, srv, id); c.Messages[len(c.Messages)-1].Outcome != "error" || c.Messages[len(c.Messages)-1].Content != "par" {
		t.Fatalf("failed turn's record: %+v", c.Messages[len(c.Messages)-1])
	}

	// Attachments: an unpinned file goes into the next turn only, a
	// pinned one into every turn.
	att := upload(t, srv, "/api/chat/"+id+"/attach", filePart{field: "file", filename: "notes.txt", contentType: "text/plain", body: "SECRET-42"})
	expectStatus(t, att, 201)
	var rel struct {
		FileID string `json:"file_id"`
	}
	if err := json.Unmarshal(att.body, &rel); err != nil || rel.FileID == "" {
		t.Fatalf("attach: %s", att.body)
	}
	turn := func(content string) string {
		t.Helper()
		a.send(t, map[string]any{"cmd": "chat-turn", "chat_id": id, "content": content})
		if end := a.terminal(t); end[len(end)-1].Kind != "chat-done" {
			t.Fatalf("turn %q: %s", content, kinds(end))
		}
		reqs := fake.Requests()
		return lastUser(t, reqs[len(reqs)-1])
	}
	if u := turn("read it"); !strings.Contains(u, "SECRET-42") || !strings.HasPrefix(u, "read it") {
		t.Fatalf("unpinned file not in the next turn: %q", u)
	}
	if u := turn("and now"); strings.Contains(u, "SECRET-42") {
		t.Fatalf("unpinned file in a second turn: %q", u)
	}
	mustCall(t, srv, 200, patch, "/api/chat/"+id+"/attach/"+rel.FileID, `{"pinned":true}`)
	if u := turn("pinned"); !strings.Contains(u, "SECRET-42") {
		t.Fatalf("pinned file not in the turn: %q", u)
	}
	if c = getChat(t, srv, id); len(c.Attachments) != 1 || !c.Attachments[0].Pinned || c.Attachments[0].File == nil || c.Attachments[0].File.Name != "notes.txt" {
		t.Fatalf("attachments: %+v", c.Attachments)
	}
	by := expectStatus(t, call(t, srv, get, "/api/chat/"+id+"/attach/"+rel.FileID, ""), 200)
	if string(by.body) != "SECRET-42" || by.header.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.Contains(by.header.Get("Content-Disposition"), "notes.txt") || by.header.Get("Content-Type") != "text/plain" {
		t.Fatalf("bytes through the relation: %s %v", by.body, by.header)
	}
	// The file is retained: a turn used it.
	assertErrorBody(t, expectStatus(t, call(t, srv, del, "/api/files/"+rel.FileID, ""), 409), "retained")
	b.noChatFrames(t)
}

// TestChatRoutes covers the Chat records, fork, export, search, the shared
// file store and the attachment relations, with their refusals.
func TestChatRoutes(t *testing.T) {
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Text("Hello World"), fakellm.Usage(1, 2, 0)}},
	}})
	defer fake.Close()
	_, srv := newTestDaemon(t, runtimeConfig(config.KindOpenAI, fake.URL()))
	id := mustCall(t, srv, 201, post, "/api/chat", `{"agent_id":"a"}`)["id"].(string)
	other := mustCall(t, srv, 201, post, "/api/chat", `{"agent_id":"b","name":"Other"}`)["id"].(string)
	a := openChatConn(t, srv)
	a.send(t, map[string]any{"cmd": "chat-turn", "chat_id": id, "content": "Say hi"})
	if end := a.terminal(t); end[len(end)-1].Kind != "chat-done" {
		t.Fatalf("turn: %s", kinds(end))
	}

	// Search: literal and case-insensitive over names and message text;
	// the list omits messages.
	for q, want := range map[string]int{"hello wORLD": 1, "other": 1, "": 2, "nothing-like-it": 0, "(": 0} {
		r := expectStatus(t, call(t, srv, get, "/api/chat?q="+strings.ReplaceAll(q, " ", "%20"), ""), 200)
		var list []map[string]any
		if err := json.Unmarshal(r.body, &list); err != nil || len(list) != want {
			t.Fatalf("search %q: %s, want %d", q, r.body, want)
		}
		for _, c := range list {
			if _, ok := c["messages"]; ok {
				t.Fatalf("the list holds messages: %s", r.body)
			}
		}
	}

	// Fork: the messages before truncate_at plus a replacement; the
	// original untouched.
	f := expectStatus(t, call(t, srv, post, "/api/chat/"+id+"/fork", `{"truncate_at":1,"replacement_content":"Say bye","replacement_role":"user"}`), 201)
	var fork chatJSON
	if err := json.Unmarshal(f.body, &fork); err != nil || fork.ID == id || fork.transcript() != "user:Say hi|user:Say bye" || fork.AgentID != "a" {
		t.Fatalf("fork: %s", f.body)
	}
	if c := getChat(t, srv, id); c.transcript() != "user:Say hi|assistant:Hello World" {
		t.Fatalf("original after the fork: %s", c.transcript())
	}
	fork0 := mustCall(t, srv, 201, post, "/api/chat/"+id+"/fork", `{"truncate_at":0}`)
	if msgs := fork0["messages"].([]any); len(msgs) != 0 {
		t.Fatalf("fork at 0: %v", fork0)
	}

	// Export: Markdown by default, JSON on request.
	md := expectStatus(t, call(t, srv, get, "/api/chat/"+id+"/export", ""), 200)
	if !strings.Contains(string(md.body), "## User") || !strings.Contains(string(md.body), "Hello World") || !strings.HasPrefix(md.header.Get("Content-Type"), "text/markdown") {
		t.Fatalf("markdown export: %s", md.body)
	}
	js := expectStatus(t, call(t, srv, get, "/api/chat/"+id+"/export?format=json", ""), 200)
	if !strings.Contains(string(js.body), `"messages"`) {
		t.Fatalf("json export: %s", js.body)
	}

	// The shared store.
	up := upload(t, srv, "/api/files?tags=Alpha,beta", filePart{field: "file", filename: "dir/Report.TXT", contentType: "text/plain", body: "report"})
	expectStatus(t, up, 201)
	var file struct {
		ID          string   `json:"id"`
		Name        string   `json:"name"`
		Size        int64    `json:"size"`
		ContentType string   `json:"content_type"`
		SHA256      string   `json:"sha256"`
		Tags        []string `json:"tags"`
		Chats       []string `json:"chats"`
	}
	if err := json.Unmarshal(up.body, &file); err != nil || file.Name != "Report.TXT" || file.Size != 6 || len(file.SHA256) != 64 ||
		strings.Join(file.Tags, ",") != "Alpha,beta" || file.Chats == nil {
		t.Fatalf("upload: %s", up.body)
	}
	fid := file.ID
	bad := "/api/chat/" + id + "/fork"
	v := vars{"id": id, "other": other, "fid": fid}
	for _, rt := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{get, "/api/files?q=report.txt", "", 200, fid},
		{get, "/api/files?tag=beta", "", 200, fid},
		{get, "/api/files?tag=gamma", "", 200, "[]"},
		{get, "/api/files/{fid}", "", 200, `"chats":[]`},
		{patch, "/api/files/{fid}", `{"name":"r.txt","tags":["x"]}`, 200, `"tags":["x"]`},
		{patch, "/api/files/{fid}", `{"tags":[""]}`, 400, "tag"},
		{get, "/api/files/" + unknownID, "", 404, "file"},
		{put, "/api/chat/{other}/attach", `{"file_id":"{fid}"}`, 200, `"pinned":false`},
		{put, "/api/chat/{other}/attach", `{"file_id":"` + unknownID + `"}`, 404, "file"},
		{put, "/api/chat/{other}/attach", `{}`, 400, "file_id is required"},
		{get, "/api/files/{fid}", "", 200, `"chats":["{other}"]`},
		{get, "/api/chat/{id}/attach/{fid}", "", 404, "holds no file"},
		{get, "/api/chat/{other}/attach/{fid}", "", 200, "report"},
		{patch, "/api/chat/{other}/attach/{fid}", `{}`, 400, "pinned is required"},
		{del, "/api/chat/{other}/attach/{fid}", "", 200, `"detached":true`},
		{del, "/api/chat/{other}/attach/{fid}", "", 404, "holds no file"},
		{get, "/api/files/{fid}/bytes", "", 200, "report"},
		{put, "/api/chat/{other}/attach", `{"file_id":"{fid}","pinned":true}`, 200, `"pinned":true`},
		{del, "/api/files/{fid}", "", 200, `"deleted":true`},
		{get, "/api/chat/{other}", "", 200, `"attachments":[]`},
		{get, "/api/files/{fid}/bytes", "", 404, "file"},
		{post, bad, `{"truncate_at":3}`, 400, "out of range"},
		{post, bad, `{"truncate_at":-1}`, 400, "out of range"},
		{post, bad, `{}`, 400, "truncate_at is required"},
		{post, bad, `{"truncate_at":1,"replacement_content":"x","replacement_role":"system"}`, 400, "replacement_role"},
		{post, "/api/chat/" + unknownID + "/fork", `{"truncate_at":0}`, 404, "chat"},
		{patch, "/api/chat/{id}", `{"model_override":5}`, 400, "model_override"},
		{patch, "/api/chat/{id}", `{"name":""}`, 400, "name"},
		{patch, "/api/chat/{id}", `{"bogus":1}`, 400, "unknown field"},
		{get, "/api/chat/{id}/export?format=pdf", "", 400, "format"},
		{post, "/api/chat", `{}`, 400, "agent_id is required"},
		{del, "/api/chat/{other}", "", 200, `"deleted":true`},
		{get, "/api/chat/{other}", "", 404, "chat"},
		{del, "/api/chat/{other}", "", 404, "chat"},
	} {
		r := call(t, srv, rt.method, v.expand(rt.path), v.expand(rt.body))
		if r.status != rt.status || !strings.Contains(string(r.body), v.expand(rt.want)) {
			t.Errorf("%s %s %s = %d %s, want %d with %q", rt.method, rt.path, rt.body, r.status, r.body, rt.status, v.expand(rt.want))
		}
	}

	// Uploads: no file part, an oversized declared image, an unknown Chat.
	assertErrorBody(t, expectStatus(t, upload(t, srv, "/api/files", filePart{field: "tags", body: "x"}), 400), "no file part")
	assertErrorBody(t, expectStatus(t, upload(t, srv, "/api/files", filePart{field: "file", filename: "big.png", contentType: "image/png", size: 10<<20 + 1}), 413), "10 MiB")
	assertErrorBody(t, expectStatus(t, upload(t, srv, "/api/chat/"+unknownID+"/attach", filePart{field: "file", filename: "a.txt", body: "a"}), 404), "chat")
	if r := expectStatus(t, call(t, srv, get, "/api/files", ""), 200); string(r.body) != "[]\n" && string(r.body) != "[]" {
		t.Fatalf("refused uploads left entries: %s", r.body)
	}
}

// TestBlobCollection: the blobs of a deleted shared file and of a Session
// attachment deleted before use are collected; live files, a consumed
// attachment's bytes and offloaded event content stay; and a collection
// running alongside uploads of the same bytes never takes a blob a record
// names.
func TestBlobCollection(t *testing.T) {
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.Text("ok"), fakellm.Usage(1, 1, 0)}}}})
	defer fake.Close()
	d, srv := newTestDaemon(t, func(c *config.Config) {
		runtimeConfig(config.KindOpenAI, fake.URL())(c)
		c.Agents = append(c.Agents, config.Agent{ID: "coder", Name: "Coder", Provider: "fake", Model: "m1"})
	})
	ctx := testContext(t, 30*time.Second)
	fileOf := func(name, body string) (id, sha string) {
		t.Helper()
		r := expectStatus(t, upload(t, srv, "/api/files", filePart{field: "file", filename: name, contentType: "text/plain", body: body}), 201)
		return str(t, r.body, "id"), str(t, r.body, "sha256")
	}
	gone, goneSHA := fileOf("gone.txt", "gone bytes")
	_, keptSHA := fileOf("kept.txt", "kept bytes")
	expectStatus(t, call(t, srv, del, "/api/files/"+gone, ""), 200)
	session := attachmentSession(t, srv)
	att := expectStatus(t, upload(t, srv, "/api/sessions/"+session+"/attachments", filePart{field: "file", filename: "s.txt", contentType: "text/plain", body: "session bytes"}), 201)
	expectStatus(t, call(t, srv, del, "/api/sessions/"+session+"/attachments/"+str(t, att.body, "reference_id"), ""), 200)
	attSHA := str(t, att.body, "sha256")
	// A Chat message over 64 KiB is offloaded to the blob store.
	chat := mustCall(t, srv, 201, post, "/api/chat", `{"agent_id":"a"}`)["id"].(string)
	long := strings.Repeat("long message ", 6000)
	a := openChatConn(t, srv)
	a.send(t, map[string]any{"cmd": "chat-turn", "chat_id": chat, "content": long})
	a.terminal(t)

	before := len(blobFiles(t, d))
	n, err := d.cmds.Blobs.Collect(ctx, 0)
	if err != nil || n != 2 {
		t.Fatalf("collected %d, %v; want the deleted file's and the unused attachment's", n, err)
	}
	if after := len(blobFiles(t, d)); after != before-2 {
		t.Fatalf("blobs %d → %d", before, after)
	}
	for sha, want := range map[string]bool{goneSHA: false, attSHA: false, keptSHA: true} {
		if d.cmds.Blobs.Stored(sha) != want {
			t.Errorf("blob %s kept %v, want %v", sha, !want, want)
		}
	}
	if c := getChat(t, srv, chat); c.Messages[0].Content != long {
		t.Fatalf("offloaded content lost: %d bytes", len(c.Messages[0].Content))
	}

	// Alongside uploads of the bytes it is collecting: every record's
	// bytes stay readable.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := d.cmds.Blobs.Collect(ctx, 0); err != nil {
				t.Errorf("collect: %v", err)
				return
			}
		}
	}()
	for i := range 40 {
		id, _ := fileOf(fmt.Sprintf("again-%d.txt", i), "gone bytes")
		if r := call(t, srv, get, "/api/files/"+id+"/bytes", ""); r.status != 200 || string(r.body) != "gone bytes" {
			t.Fatalf("upload %d: bytes %d %s", i, r.status, r.body)
		}
		expectStatus(t, call(t, srv, del, "/api/files/"+id, ""), 200)
	}
	close(stop)
	<-stopped
	last, _ := fileOf("last.txt", "gone bytes")
	if _, err := d.cmds.Blobs.Collect(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if r := call(t, srv, get, "/api/files/"+last+"/bytes", ""); r.status != 200 || string(r.body) != "gone bytes" {
		t.Fatalf("a live file's bytes after collection: %d %s", r.status, r.body)
	}
}

// TestChatMCPTools: a Chat turn has the Agent's MCP tools; a call waits for
// the operator's decision (approvals as in Session turns), its start and
// result reach the issuing connection as chat-tool-start and
// chat-tool-result, and a deny answers the model with an error result.
func TestChatMCPTools(t *testing.T) {
	bin := mcpTestServer(t)
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "mcp__t__echo", `{"text":"hello over mcp"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("the server said it"), fakellm.Usage(20, 4, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c2", "mcp__t__echo", `{"text":"no"}`), fakellm.Usage(10, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("not allowed"), fakellm.Usage(20, 4, 0)}},
	}})
	defer fake.Close()
	_, srv := newTestDaemon(t, func(c *config.Config) {
		runtimeConfig(config.KindOpenAI, fake.URL())(c)
		c.MCP.Servers = []config.MCPServer{{Name: "t", Transport: "stdio", Command: bin}}
	})
	sandboxtest.WaitFor(t, 30*time.Second, func() bool {
		return strings.Contains(string(call(t, srv, get, "/api/mcp/servers", "").body), `"status":"connected"`)
	})
	id := mustCall(t, srv, 201, post, "/api/chat", `{"agent_id":"a"}`)["id"].(string)
	a := openChatConn(t, srv)
	ctx := testContext(t, 30*time.Second)
	var seq bytes.Buffer
	for _, c := range []struct{ decision, result string }{{"allow", "hello over mcp"}, {"deny", "denied by the operator"}} {
		a.send(t, map[string]any{"cmd": "chat-turn", "chat_id": id, "content": "use the tool"})
		var approval string
		var early []string
		for approval == "" {
			kind, raw := readFrame(t, ctx, a.c)
			if kind == "mcp-approval-required" {
				var f struct {
					ApprovalID string `json:"approval_id"`
				}
				_ = json.Unmarshal(raw, &f)
				approval = f.ApprovalID
			}
			if strings.HasPrefix(kind, "chat-") {
				var f chatFrame
				if kind != "chat-start" && kind != "chat-tool-start" || json.Unmarshal(raw, &f) != nil {
					t.Fatalf("before the decision: %s", raw)
				}
				early = append(early, f.line())
			}
		}
		a.send(t, map[string]any{"cmd": "mcp-approve", "approval_id": approval, "decision": c.decision, "persist": "once"})
		fs := a.terminal(t)
		fmt.Fprintf(&seq, "# %s\n", c.decision)
		for _, l := range early {
			seq.WriteString(l + "\n")
		}
		seq.WriteString("(decided)\n")
		for _, f := range fs {
			seq.WriteString(f.line() + "\n")
		}
		var res *chatFrame
		for i := range fs {
			if fs[i].Kind == "chat-tool-result" {
				res = &fs[i]
			}
		}
		if res == nil || res.Name != "mcp__t__echo" || res.CallID == "" || *res.Result != c.result || *res.IsError != (c.decision == "deny") ||
			fs[len(fs)-1].Kind != "chat-done" {
			t.Fatalf("%s: frames %s result %+v", c.decision, kinds(fs), res)
		}
	}
	matchGolden(t, "chat_mcp_turns.golden", seq.Bytes())
	reqs := fake.Requests()
	if !strings.Contains(string(reqs[0].Body), `"mcp__t__echo"`) || !strings.Contains(string(reqs[1].Body), "hello over mcp") {
		t.Fatalf("the model did not get the tool or its result")
	}
	c := getChat(t, srv, id)
	if c.transcript() != "user:use the tool|assistant:the server said it|user:use the tool|assistant:not allowed" {
		t.Fatalf("record: %s", c.transcript())
	}
	// Each reply keeps its turn's tool call.
	for i, want := range map[int]string{1: "hello over mcp", 3: "denied by the operator"} {
		if tc := c.Messages[i].ToolCalls; len(tc) != 1 || tc[0].Name != "mcp__t__echo" || tc[0].Result != want || tc[0].IsError != (i == 3) {
			t.Errorf("message %d's tool calls: %+v", i, tc)
		}
	}
}
