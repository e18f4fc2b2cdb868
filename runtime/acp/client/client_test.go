package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"lathe/runtime/sandbox"
)

// scripted is a sandbox whose one process is an agent played by a Go
// function over the process's stdio, JSON line by JSON line.
type scripted struct {
	play func(in *bufio.Scanner, out io.Writer, errw io.Writer)
}

type proc struct {
	done chan struct{}
	once sync.Once
}

func (p *proc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return 0, nil
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}
func (p *proc) Signal(context.Context, syscall.Signal) error {
	p.once.Do(func() { close(p.done) })
	return nil
}
func (p *proc) Resize(context.Context, uint16, uint16) error { return nil }

func (s scripted) Exec(_ context.Context, es sandbox.ExecSpec) (sandbox.Process, error) {
	p := &proc{done: make(chan struct{})}
	go func() {
		in := bufio.NewScanner(es.Stdin)
		in.Buffer(nil, 16<<20)
		s.play(in, es.Stdout, es.Stderr)
		p.once.Do(func() { close(p.done) })
	}()
	return p, nil
}

type msg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

func read(t *testing.T, in *bufio.Scanner) msg {
	if !in.Scan() {
		return msg{}
	}
	var m msg
	if err := json.Unmarshal(in.Bytes(), &m); err != nil {
		t.Errorf("client sent bad JSON: %v", err)
	}
	return m
}

func send(out io.Writer, v any) {
	b, _ := json.Marshal(v)
	out.Write(append(b, '\n'))
}

func answer(out io.Writer, id json.RawMessage, result any) {
	send(out, map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func update(out io.Writer, session string, u map[string]any) {
	send(out, map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": session, "update": u}})
}

// handshake answers initialize and session/new.
func handshake(t *testing.T, in *bufio.Scanner, out io.Writer) {
	m := read(t, in)
	if m.Method != "initialize" {
		t.Errorf("first method %q", m.Method)
	}
	answer(out, m.ID, map[string]any{"protocolVersion": 1, "agentInfo": map[string]any{"name": "scripted", "version": "1.2.3"}, "agentCapabilities": map[string]any{"loadSession": true}, "authMethods": []any{}})
	m = read(t, in)
	if m.Method != "session/new" {
		t.Errorf("second method %q", m.Method)
	}
	answer(out, m.ID, map[string]any{"sessionId": "s1"})
}

type recorder struct {
	mu      sync.Mutex
	updates []acp.SessionUpdate
	asked   []acp.RequestPermissionRequest
}

func (r *recorder) Update(u acp.SessionUpdate) {
	r.mu.Lock()
	r.updates = append(r.updates, u)
	r.mu.Unlock()
}

func (r *recorder) Permission(_ context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	r.mu.Lock()
	r.asked = append(r.asked, req)
	r.mu.Unlock()
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: req.Options[0].OptionId}}}, nil
}

func start(t *testing.T, play func(in *bufio.Scanner, out io.Writer, errw io.Writer)) *Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := Start(ctx, scripted{play}, Spec{Args: []string{"agent"}, Client: acp.Implementation{Name: "lathe", Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if _, _, err := a.Open(ctx, "/w", nil, ""); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestPromptUpdatesAndPermission(t *testing.T) {
	granted := make(chan string, 1)
	a := start(t, func(in *bufio.Scanner, out io.Writer, _ io.Writer) {
		handshake(t, in, out)
		p := read(t, in)
		if p.Method != "session/prompt" || !strings.Contains(string(p.Params), "write hello") {
			t.Errorf("prompt: %s %s", p.Method, p.Params)
		}
		update(out, "s1", map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "on it"}})
		update(out, "other", map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "not yours"}})
		out.Write([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("x", MaxLine) + `"}}}}` + "\n"))
		out.Write([]byte("not json at all\n"))
		update(out, "s1", map[string]any{"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Write hello.txt", "kind": "edit", "status": "pending"})
		send(out, map[string]any{"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": map[string]any{
			"sessionId": "s1", "toolCall": map[string]any{"toolCallId": "c1"},
			"options": []any{map[string]any{"optionId": "yes", "name": "Allow", "kind": "allow_once"}}}})
		r := read(t, in)
		granted <- string(r.Result)
		update(out, "s1", map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"})
		answer(out, p.ID, map[string]any{"stopReason": "end_turn", "usage": map[string]any{"inputTokens": 10, "outputTokens": 3, "totalTokens": 13}})
		read(t, in) // until stdin closes
	})
	if a.Info.AgentInfo == nil || a.Info.AgentInfo.Version != "1.2.3" {
		t.Fatalf("agent info %+v", a.Info.AgentInfo)
	}
	rec := &recorder{}
	res, err := a.Prompt(context.Background(), "write hello", rec)
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != acp.StopReasonEndTurn || res.Usage == nil || res.Usage.OutputTokens != 3 {
		t.Fatalf("result %+v", res)
	}
	if g := <-granted; !strings.Contains(g, `"yes"`) {
		t.Fatalf("permission answer %s", g)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// The other session's update and the oversized and malformed lines
	// were dropped; the rest arrived in order.
	var kinds []string
	for _, u := range rec.updates {
		switch {
		case u.AgentMessageChunk != nil:
			kinds = append(kinds, "text:"+u.AgentMessageChunk.Content.Text.Text)
		case u.ToolCall != nil:
			kinds = append(kinds, "tool_call")
		case u.ToolCallUpdate != nil:
			kinds = append(kinds, "tool_call_update")
		}
	}
	if got := strings.Join(kinds, ","); got != "text:on it,tool_call,tool_call_update" {
		t.Fatalf("updates %s", got)
	}
	if len(rec.asked) != 1 || rec.asked[0].ToolCall.ToolCallId != "c1" {
		t.Fatalf("asked %+v", rec.asked)
	}
}

func TestExitMidPromptFailsWithStderr(t *testing.T) {
	a := start(t, func(in *bufio.Scanner, out io.Writer, errw io.Writer) {
		handshake(t, in, out)
		read(t, in)
		io.WriteString(errw, "fatal: the model said no\n")
	})
	_, err := a.Prompt(context.Background(), "hi", &recorder{})
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "the model said no") {
		t.Fatalf("err %v", err)
	}
}

func TestPermissionOutsidePromptRefused(t *testing.T) {
	answered := make(chan msg, 1)
	start(t, func(in *bufio.Scanner, out io.Writer, _ io.Writer) {
		handshake(t, in, out)
		send(out, map[string]any{"jsonrpc": "2.0", "id": 9, "method": "session/request_permission", "params": map[string]any{
			"sessionId": "s1", "toolCall": map[string]any{"toolCallId": "c9"}, "options": []any{}}})
		answered <- read(t, in)
		read(t, in)
	})
	m := <-answered
	if len(m.Error) == 0 {
		t.Fatalf("a permission request outside a prompt was answered %s", m.Result)
	}
}

func TestUnknownMethodAnsweredWithError(t *testing.T) {
	answered := make(chan msg, 1)
	start(t, func(in *bufio.Scanner, out io.Writer, _ io.Writer) {
		handshake(t, in, out)
		send(out, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "fs/read_text_file", "params": map[string]any{"sessionId": "s1", "path": "/etc/shadow"}})
		answered <- read(t, in)
		read(t, in)
	})
	if m := <-answered; len(m.Error) == 0 {
		t.Fatalf("fs read answered %s", m.Result)
	}
}

func FuzzBoundLines(f *testing.F) {
	f.Add([]byte("a\nbb\n"), 2)
	f.Add([]byte("{\"x\":1}\n\n"), 100)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max <= 0 || max > 1<<16 {
			return
		}
		out, _ := io.ReadAll(boundLines(strings.NewReader(string(in)), max, slog.New(slog.DiscardHandler)))
		for _, l := range strings.SplitAfter(string(out), "\n") {
			if len(l) > max+1 {
				t.Fatalf("line of %d bytes passed a bound of %d", len(l), max)
			}
		}
	})
}
