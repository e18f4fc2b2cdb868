package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"lathe/commands/a2a"
	"lathe/commands/chats"
	"lathe/commands/core"

	"lathe/journal/events"
	"lathe/projections"
)

// The fake's Chat and shared file commands (ChatCommands,
// SharedFileCommands): each records its call and answers f.err.

func (f *fake) CreateChat(_ context.Context, agentID string, name *string) (projections.Chat, error) {
	n := ""
	if name != nil {
		n = *name
	}
	return projections.Chat{ChatInfo: projections.ChatInfo{ID: "C", AgentID: agentID}}, f.record("CreateChat", agentID, n)
}
func (f *fake) PatchChat(_ context.Context, id string, p chats.ChatPatch) (projections.Chat, error) {
	return projections.Chat{ChatInfo: projections.ChatInfo{ID: id}}, f.record("PatchChat", id, describePatch(p))
}
func (f *fake) DeleteChat(_ context.Context, id string) error { return f.record("DeleteChat", id) }
func (f *fake) ForkChat(_ context.Context, id string, req chats.ChatForkRequest) (projections.Chat, error) {
	content, role := "-", "-"
	if req.ReplacementContent != nil {
		content = *req.ReplacementContent
	}
	if req.ReplacementRole != nil {
		role = *req.ReplacementRole
	}
	return projections.Chat{ChatInfo: projections.ChatInfo{ID: "F"}}, f.record("ForkChat", id, req.TruncateAt, content, role)
}
func (f *fake) ChatTurn(_ context.Context, chatID, turnID, content string) error {
	return f.record("ChatTurn", chatID, turnID, content)
}
func (f *fake) StopChat(chatID string) error { return f.record("StopChat", chatID) }
func (f *fake) Upload(_ context.Context, up chats.FileUpload) (projections.SharedFile, error) {
	b, _ := io.ReadAll(up.Body)
	if up.Finish != nil {
		if err := up.Finish(); err != nil {
			return projections.SharedFile{}, err
		}
	}
	return projections.SharedFile{ID: "F"}, f.record("Upload", up.Name, string(b), strings.Join(up.Tags, ","))
}
func (f *fake) PatchFile(_ context.Context, id string, name *string, tags *[]string) (projections.SharedFile, error) {
	n, tg := "-", "-"
	if name != nil {
		n = *name
	}
	if tags != nil {
		tg = strings.Join(*tags, ",")
	}
	return projections.SharedFile{ID: id}, f.record("PatchFile", id, n, tg)
}
func (f *fake) DeleteFile(_ context.Context, id string) error { return f.record("DeleteFile", id) }
func (f *fake) OpenFile(id string) (projections.SharedFile, io.ReadCloser, error) {
	return projections.SharedFile{ID: id, Name: "a.txt", ContentType: "text/plain", Size: 2}, io.NopCloser(strings.NewReader("hi")), f.record("OpenFile", id)
}
func (f *fake) AttachUpload(_ context.Context, chatID string, up chats.FileUpload, pinned bool) (projections.ChatAttachment, error) {
	b, _ := io.ReadAll(up.Body)
	if up.Finish != nil {
		if err := up.Finish(); err != nil {
			return projections.ChatAttachment{}, err
		}
	}
	return projections.ChatAttachment{FileID: "F", Pinned: pinned}, f.record("AttachUpload", chatID, up.Name, string(b), pinned)
}
func (f *fake) AttachFile(_ context.Context, chatID, fileID string, pinned bool) (projections.ChatAttachment, error) {
	return projections.ChatAttachment{FileID: fileID, Pinned: pinned}, f.record("AttachFile", chatID, fileID, pinned)
}
func (f *fake) PinFile(_ context.Context, chatID, fileID string, pinned bool) (projections.ChatAttachment, error) {
	return projections.ChatAttachment{FileID: fileID, Pinned: pinned}, f.record("PinFile", chatID, fileID, pinned)
}
func (f *fake) DetachFile(_ context.Context, chatID, fileID string) error {
	return f.record("DetachFile", chatID, fileID)
}
func (f *fake) OpenChatFile(chatID, fileID string) (projections.SharedFile, io.ReadCloser, error) {
	return projections.SharedFile{ID: fileID, Name: "a.txt", ContentType: "text/plain", Size: 2}, io.NopCloser(strings.NewReader("hi")), f.record("OpenChatFile", chatID, fileID)
}

// describePatch renders which PATCH fields were given: an override as
// "set:v", "clear" or "-" (absent).
func describePatch(p chats.ChatPatch) string {
	o := func(v any) string {
		switch v := v.(type) {
		case *string:
			if v != nil {
				return *v
			}
		case *bool:
			if v != nil {
				return fmt.Sprint(*v)
			}
		}
		return "-"
	}
	over := func(v *events.Override) string {
		switch {
		case v == nil:
			return "-"
		case v.Value == nil:
			return "clear"
		}
		return "set:" + *v.Value
	}
	return strings.Join([]string{o(p.Name), o(p.Starred), over(p.SystemOverride), over(p.ModelOverride)}, " ")
}

var errMissingChat = fmt.Errorf("%w: chat %q", core.ErrNotFound, "C")

func multipartBody(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString("--B\r\n" + p + "\r\n")
	}
	b.WriteString("--B--\r\n")
	return b.String()
}

func TestChatRoutesAgainstFakes(t *testing.T) {
	runRoutes(t, []route{
		{name: "list", method: "GET", path: "/api/chat?q=x", status: 200},
		{name: "create", method: "POST", path: "/api/chat", body: `{"agent_id":"coder","name":"n"}`, status: 201, call: "CreateChat", args: []any{"coder", "n"}},
		{name: "create unknown agent", method: "POST", path: "/api/chat", body: `{"agent_id":"x"}`, err: fmt.Errorf("%w: agent %q is not configured", core.ErrNotFound, "x"), status: 404, errText: "not configured", call: "CreateChat"},
		{name: "create without agent", method: "POST", path: "/api/chat", body: `{"name":"n"}`, status: 400, errText: "agent_id is required"},
		{name: "create without a body", method: "POST", path: "/api/chat", status: 400, errText: "request body is empty"},
		{name: "get missing", method: "GET", path: "/api/chat/C", status: 404, errText: `chat "C"`},
		{name: "patch name and star", method: "PATCH", path: "/api/chat/C", body: `{"name":"n","starred":true}`, status: 200, call: "PatchChat", args: []any{"C", "n true - -"}},
		{name: "patch overrides", method: "PATCH", path: "/api/chat/C", body: `{"system_override":"s","model_override":"m"}`, status: 200, call: "PatchChat", args: []any{"C", "- - set:s set:m"}},
		{name: "patch null clears", method: "PATCH", path: "/api/chat/C", body: `{"system_override":null,"model_override":null}`, status: 200, call: "PatchChat", args: []any{"C", "- - clear clear"}},
		{name: "patch wrong type", method: "PATCH", path: "/api/chat/C", body: `{"system_override":1}`, status: 400, errText: `"system_override" must be a string or null`},
		{name: "patch missing", method: "PATCH", path: "/api/chat/C", body: `{}`, err: errMissingChat, status: 404, errText: `chat "C"`, call: "PatchChat"},
		{name: "delete", method: "DELETE", path: "/api/chat/C", status: 200, call: "DeleteChat", args: []any{"C"}},
		{name: "delete busy", method: "DELETE", path: "/api/chat/C", err: fmt.Errorf("%w: turn T is running", core.ErrConflict), status: 409, errText: "running", call: "DeleteChat"},
		{name: "fork", method: "POST", path: "/api/chat/C/fork", body: `{"truncate_at":2,"replacement_content":"x","replacement_role":"assistant"}`, status: 201, call: "ForkChat", args: []any{"C", 2, "x", "assistant"}},
		{name: "fork without truncate_at", method: "POST", path: "/api/chat/C/fork", body: `{}`, status: 400, errText: "truncate_at is required"},
		{name: "fork not an integer", method: "POST", path: "/api/chat/C/fork", body: `{"truncate_at":1.5}`, status: 400, errText: "truncate_at"},
		{name: "fork out of range", method: "POST", path: "/api/chat/C/fork", body: `{"truncate_at":9}`, err: fmt.Errorf("%w: truncate_at 9 is out of range", core.ErrInvalid), status: 400, errText: "out of range", call: "ForkChat"},
		{name: "export missing", method: "GET", path: "/api/chat/C/export", status: 404, errText: `chat "C"`},
		{name: "export bad format", method: "GET", path: "/api/chat/C/export?format=doc", status: 400, errText: "format must be"},
		{name: "attach existing", method: "PUT", path: "/api/chat/C/attach", body: `{"file_id":"F","pinned":true}`, status: 200, call: "AttachFile", args: []any{"C", "F", true}},
		{name: "attach without file", method: "PUT", path: "/api/chat/C/attach", body: `{}`, status: 400, errText: "file_id is required"},
		{name: "attach unknown file", method: "PUT", path: "/api/chat/C/attach", body: `{"file_id":"F"}`, err: fmt.Errorf("%w: file %q", core.ErrNotFound, "F"), status: 404, errText: `file "F"`, call: "AttachFile"},
		{name: "bytes through the relation", method: "GET", path: "/api/chat/C/attach/F", status: 200, call: "OpenChatFile", args: []any{"C", "F"}},
		{name: "bytes not held", method: "GET", path: "/api/chat/C/attach/F", err: fmt.Errorf("%w: chat %q holds no file %q", core.ErrNotFound, "C", "F"), status: 404, errText: "holds no file", call: "OpenChatFile"},
		{name: "pin", method: "PATCH", path: "/api/chat/C/attach/F", body: `{"pinned":true}`, status: 200, call: "PinFile", args: []any{"C", "F", true}},
		{name: "pin without pinned", method: "PATCH", path: "/api/chat/C/attach/F", body: `{}`, status: 400, errText: "pinned is required"},
		{name: "detach", method: "DELETE", path: "/api/chat/C/attach/F", status: 200, call: "DetachFile", args: []any{"C", "F"}},
		{name: "files list", method: "GET", path: "/api/files?q=a&tag=b", status: 200},
		{name: "file missing", method: "GET", path: "/api/files/F", status: 404, errText: `file "F"`},
		{name: "file patch", method: "PATCH", path: "/api/files/F", body: `{"name":"b","tags":["x","y"]}`, status: 200, call: "PatchFile", args: []any{"F", "b", "x,y"}},
		{name: "file patch wrong type", method: "PATCH", path: "/api/files/F", body: `{"tags":"x"}`, status: 400, errText: `"tags"`},
		{name: "file delete", method: "DELETE", path: "/api/files/F", status: 200, call: "DeleteFile", args: []any{"F"}},
		{name: "file delete retained", method: "DELETE", path: "/api/files/F", err: fmt.Errorf("%w: file %q is retained", core.ErrConflict, "F"), status: 409, errText: "retained", call: "DeleteFile"},
		{name: "file bytes", method: "GET", path: "/api/files/F/bytes", status: 200, call: "OpenFile", args: []any{"F"}},
		{name: "upload not multipart", method: "POST", path: "/api/files", body: `{}`, status: 400, errText: "multipart/form-data"},
	})
}

// Uploads go through the multipart reader: the one file part, tags from
// the query and the fields before it, pinned, and the refusals.
func TestSharedFileUploadRoutes(t *testing.T) {
	file := "Content-Disposition: form-data; name=\"file\"; filename=\"dir/a.txt\"\r\nContent-Type: text/plain\r\n\r\nhello"
	tags := "Content-Disposition: form-data; name=\"tags\"\r\n\r\nc, d"
	pinned := "Content-Disposition: form-data; name=\"pinned\"\r\n\r\ntrue"
	for _, c := range []struct {
		name, path, body string
		err              error
		status           int
		errText, call    string
		args             []any
	}{
		{"upload", "/api/files?tags=a,b", multipartBody(tags, file), nil, 201, "", "Upload", []any{"a.txt", "hello", "a,b,c,d"}},
		{"no file part", "/api/files", multipartBody(tags), nil, 400, "no file part", "", nil},
		{"two files", "/api/files", multipartBody(file, file), nil, 400, "more than one file part", "", nil},
		{"too large", "/api/files", multipartBody(file), fmt.Errorf("%w: over the 25 MiB limit", core.ErrTooLarge), 413, "25 MiB", "Upload", nil},
		{"attach pinned", "/api/chat/C/attach", multipartBody(pinned, file), nil, 201, "", "AttachUpload", []any{"C", "a.txt", "hello", true}},
		{"attach to an unknown chat", "/api/chat/C/attach", multipartBody(file), errMissingChat, 404, "chat", "AttachUpload", nil},
		{"attach bad pinned", "/api/chat/C/attach?pinned=maybe", multipartBody(file), nil, 400, "pinned must be true or false", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fake{err: c.err}
			r := httptest.NewRequest("POST", c.path, strings.NewReader(c.body))
			r.Host = "localhost:8080"
			r.Header.Set("x-api-key", testKey)
			r.Header.Set("Content-Type", "multipart/form-data; boundary=B")
			w := httptest.NewRecorder()
			fakeServer(t, f).ServeHTTP(w, r)
			if w.Code != c.status || (c.errText != "" && !strings.Contains(w.Body.String(), c.errText)) {
				t.Fatalf("POST %s = %d %s, want %d with %q", c.path, w.Code, w.Body, c.status, c.errText)
			}
			if f.call != c.call || (c.args != nil && fmt.Sprint(f.args) != fmt.Sprint(c.args)) {
				t.Errorf("call %s %v, want %s %v", f.call, f.args, c.call, c.args)
			}
		})
	}
}

// The fake's A2A commands: one receiver, "helper"; a dispatched task
// completes with the text it was sent.
func (f *fake) Receivers() []core.A2AReceiver {
	return []core.A2AReceiver{{ID: "helper", AgentID: "coder", Name: "Helper", Description: "Answers"}}
}
func (f *fake) Dispatch(_ context.Context, t a2a.A2ATask) (projections.A2ATask, error) {
	if err := f.record("Dispatch", t.ReceiverID, t.Text); err != nil {
		return projections.A2ATask{}, err
	}
	return projections.A2ATask{ID: "T", ReceiverID: t.ReceiverID, ContextID: "ctx", Message: events.NewJSON(t.Message),
		Text: events.NewText(t.Text), State: a2a.A2ACompleted, Output: events.NewText(t.Text)}, nil
}
func (f *fake) Task(id string) (projections.A2ATask, error) {
	return projections.A2ATask{ID: id, State: a2a.A2AWorking}, f.record("Task", id)
}

func TestA2ARoutes(t *testing.T) {
	send := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"},{"kind":"data","data":{"a":1}}]}}}`
	runRoutes(t, []route{
		{name: "card", method: "GET", path: "/.well-known/agent.json", status: 200},
		{name: "send to the one receiver", method: "POST", path: "/a2a/tasks", body: send, status: 200, call: "Dispatch", args: []any{"helper", "hi\n{\"a\":1}"}},
		{name: "send to a receiver in the query", method: "POST", path: "/a2a/tasks?receiver_id=x", body: send, status: 200, call: "Dispatch", args: []any{"x", "hi\n{\"a\":1}"}},
		{name: "get", method: "POST", path: "/a2a/tasks", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"T"}}`, status: 200, call: "Task", args: []any{"T"}},
		{name: "by GET", method: "GET", path: "/a2a/tasks", status: 405, errText: "GET is not allowed"},
	})
	// Both routes are behind authentication.
	for _, path := range []string{"/.well-known/agent.json", "/.well-known/agent-card.json", "/a2a/tasks"} {
		method := "GET"
		if path == "/a2a/tasks" {
			method = "POST"
		}
		r := httptest.NewRequest(method, path, strings.NewReader(send))
		r.Host = "localhost:8080"
		w := httptest.NewRecorder()
		f := &fake{}
		fakeServer(t, f).ServeHTTP(w, r)
		if w.Code != 401 || f.call != "" {
			t.Errorf("%s %s without credentials: %d (call %q)", method, path, w.Code, f.call)
		}
	}
}

// FuzzA2ARequest feeds outside bodies and A2A-Version headers to POST
// /a2a/tasks: whatever comes, in either protocol version or none, the
// answer is one JSON-RPC 2.0 response with exactly one of result and
// error, and no panic.
func FuzzA2ARequest(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"receiver_id":"helper"}}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tasks/get","params":{"id":"T","historyLength":-1}}`,
		`{"jsonrpc":"2.0","id":null,"method":"message/send","params":{"message":{"parts":[{"kind":"file","file":{"bytes":"AA=="}}],"taskId":"t"}}}`,
		`{"jsonrpc":"2.0","method":"message/send","params":{"metadata":{"receiver_id":[]},"message":{"parts":[{"kind":"data","data":{}}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{}}`,
		`[1,2]`, `{`, ``, `null`,
	} {
		f.Add("", []byte(seed))
	}
	for _, seed := range []struct{ version, body string }{
		{"1.0", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"},{"data":{"a":1}}],"metadata":{"receiver_id":"helper"}}}}`},
		{"1.0.3", `{"jsonrpc":"2.0","id":"g","method":"GetTask","params":{"id":"T","historyLength":0}}`},
		{"1.0", `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"parts":[{"url":"http://x/y"}]}}}`},
		{"1.0", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":-1}}`},
		{"0.3", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`},
		{"2.0", `{"jsonrpc":"2.0","id":[1],"method":"GetTask"}`},
		{" 1.", `{"id":{}}`},
	} {
		f.Add(seed.version, []byte(seed.body))
	}
	fk := &fake{}
	h := fakeServer(f, fk)
	f.Fuzz(func(t *testing.T, version string, body []byte) {
		r := httptest.NewRequest("POST", "/a2a/tasks", strings.NewReader(string(body)))
		r.Host = "localhost:8080"
		r.Header.Set("x-api-key", testKey)
		r.Header.Set("A2A-Version", version)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			return // message/stream answers in its own framing
		}
		var rep struct {
			JSONRPC string           `json:"jsonrpc"`
			Result  *json.RawMessage `json:"result"`
			Error   *json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil || rep.JSONRPC != "2.0" || (rep.Result == nil) == (rep.Error == nil) {
			t.Fatalf("not one JSON-RPC response (%v): %s", err, w.Body)
		}
	})
}

// With credentials set, the agent card's url names the address the
// connection reached, not the request's Host header (issue 23, finding 10).
func TestAgentCardURLIgnoresTheHostHeader(t *testing.T) {
	r := httptest.NewRequest("GET", "/.well-known/agent.json", nil)
	r.Host = "attacker.example"
	r.Header.Set("x-api-key", testKey)
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 8080}))
	w := httptest.NewRecorder()
	fakeServer(t, &fake{}).ServeHTTP(w, r)
	var card struct{ URL string }
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &card) != nil || card.URL != "http://10.0.0.7:8080/a2a/tasks" {
		t.Fatalf("card: %d %s; want url http://10.0.0.7:8080/a2a/tasks", w.Code, w.Body)
	}
}
