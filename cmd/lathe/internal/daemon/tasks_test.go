package daemon

// Task and terminal route tests against the real containerd, in a
// namespace of their own (see containerdtest.Namespace: a daemon removes every
// container of its namespace that its journal does not claim).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/sandboxtest"
)

// tasksNamespace is this file's own containerd namespace.
const tasksNamespace = "lathe-test-tasks"

// taskRig is one test's view of the sandbox daemon: a sessionRig, with the
// daemon for its projections and journal.
type taskRig struct {
	sessionRig
	d *Daemon
}

func newTaskRig(tb testing.TB, d *Daemon, srv *httptest.Server) *taskRig {
	tb.Helper()
	return &taskRig{sessionRig: newSessionRig(tb, srv, nil, "tasks"), d: d}
}

// ready waits until the Session's environment settles, and requires it Ready.
func (r *taskRig) ready(tb testing.TB, id string) projections.Session {
	tb.Helper()
	var ss projections.Session
	sandboxtest.WaitFor(tb, time.Minute, func() bool {
		ss, _ = r.d.Store().Session(id)
		return ss.Environment.Owner == "" && ss.Environment.State != events.EnvPreparing
	})
	if ss.Environment.State != events.EnvReady {
		tb.Fatalf("session %s settled %s, want ready: %+v", id, ss.Environment.State, ss.Environment)
	}
	return ss
}

func (r *taskRig) get(tb testing.TB, id string) projections.Session {
	tb.Helper()
	ss, ok := r.d.Store().Session(id)
	if !ok {
		tb.Fatalf("no session %s", id)
	}
	return ss
}

// version is the number of journal events of one aggregate.
func (r *taskRig) version(tb testing.TB, id string) uint64 {
	tb.Helper()
	v, err := r.d.Journal().Version(id)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// readySession creates a Session and waits until it is Ready.
func (r *taskRig) readySession(t *testing.T) string {
	t.Helper()
	ss := r.create(t, "")
	return r.ready(t, ss.ID).ID
}

// taskReply is a task as the routes answer it.
type taskReply struct {
	projections.Task
	TerminalURL     string `json:"terminal_url"`
	AttachedClients *int   `json:"attached_clients"`
}

func (r *taskRig) startTask(t *testing.T, id, body string) taskReply {
	t.Helper()
	resp := r.do(t, post, "/api/sessions/"+id+"/tasks", body)
	if resp.status != 201 {
		t.Fatalf("POST tasks %s: %d %s", body, resp.status, resp.body)
	}
	var tr taskReply
	if err := json.Unmarshal(resp.body, &tr); err != nil || tr.ID == "" {
		t.Fatalf("not a task (%v): %s", err, resp.body)
	}
	return tr
}

func (r *taskRig) listTasks(t *testing.T, id string) []taskReply {
	t.Helper()
	resp := r.do(t, get, "/api/sessions/"+id+"/tasks", "")
	if resp.status != 200 {
		t.Fatalf("GET tasks: %d %s", resp.status, resp.body)
	}
	var out []taskReply
	if err := json.Unmarshal(resp.body, &out); err != nil {
		t.Fatalf("tasks body: %v: %s", err, resp.body)
	}
	return out
}

// exited waits until the projection records the task's exit.
func (r *taskRig) exited(t *testing.T, id, taskID string) projections.Task {
	t.Helper()
	var task projections.Task
	sandboxtest.WaitFor(t, 30*time.Second, func() bool {
		var ok bool
		task, ok = r.d.Store().Task(id, taskID)
		return ok && task.Status == projections.TaskExited
	})
	return task
}

// countEvents counts the Session's journal events of type typ that name taskID.
func (r *taskRig) countEvents(t *testing.T, id, typ, taskID string) int {
	t.Helper()
	resp := r.do(t, get, "/api/events/journal?aggregate="+id, "")
	if resp.status != 200 {
		t.Fatalf("journal feed: %d %s", resp.status, resp.body)
	}
	n := 0
	for _, env := range feed(t, resp.body) {
		if env.Type == typ && strings.Contains(string(env.Data), `"task_id":"`+taskID+`"`) {
			n++
		}
	}
	return n
}

// ---------------------------------------------------------------------------
// Terminal WebSocket client

// termWatcher reads a terminal WebSocket in the background.
type termWatcher struct {
	c *websocket.Conn

	mu      sync.Mutex
	frames  int
	first   []byte // the scrollback frame
	tail    []byte // the last termTail bytes of scrollback + output
	total   int    // bytes of binary frames
	texts   []string
	err     error // how the connection ended
	changed chan struct{}
}

const termTail = 1 << 20

func dialTerminal(t testing.TB, srv *httptest.Server, path string) (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+path, nil)
	if err == nil {
		c.SetReadLimit(64 << 20)
		t.Cleanup(func() { c.CloseNow() })
	}
	return c, resp, err
}

func watchTerminal(t testing.TB, srv *httptest.Server, path string) *termWatcher {
	t.Helper()
	c, resp, err := dialTerminal(t, srv, path)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", path, err, status)
	}
	return watch(c)
}

func watch(c *websocket.Conn) *termWatcher {
	w := &termWatcher{c: c, changed: make(chan struct{})}
	go func() {
		for {
			typ, data, err := c.Read(context.Background())
			w.mu.Lock()
			switch {
			case err != nil:
				w.err = err
			case typ == websocket.MessageText:
				w.texts = append(w.texts, string(data))
			default:
				if w.frames == 0 {
					w.first = append([]byte{}, data...)
				}
				w.frames++
				w.total += len(data)
				w.tail = append(w.tail, data...)
				if len(w.tail) > 2*termTail {
					w.tail = append([]byte{}, w.tail[len(w.tail)-termTail:]...)
				}
			}
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return w
}

// waitFor waits until cond holds over the watcher's state.
func (w *termWatcher) waitFor(t testing.TB, what string, cond func(w *termWatcher) bool) {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ok, err, changed := cond(w), w.err, w.changed
		w.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			t.Fatalf("terminal closed (%v) before %s; tail %q", err, what, w.tailString(400))
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %s within 60s; tail %q", what, w.tailString(400))
		}
	}
}

// waitOutput waits until the output holds s (the last termTail bytes).
func (w *termWatcher) waitOutput(t testing.TB, s string) {
	t.Helper()
	w.waitFor(t, fmt.Sprintf("output %q", s), func(w *termWatcher) bool { return strings.Contains(string(w.tail), s) })
}

func (w *termWatcher) textFrames() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.texts)
}

func (w *termWatcher) tailString(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.tail
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// closed waits for the connection's end and returns its close status and reason.
func (w *termWatcher) closed(t testing.TB) (websocket.StatusCode, string) {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		err, changed := w.err, w.changed
		w.mu.Unlock()
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code, ce.Reason
			}
			return -1, err.Error()
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatal("terminal never closed")
		}
	}
}

func (w *termWatcher) send(t testing.TB, typ websocket.MessageType, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, typ, []byte(s)); err != nil {
		t.Fatalf("send %q: %v", s, err)
	}
}

// ---------------------------------------------------------------------------
// Tests

func TestTasks(t *testing.T) {
	_, d, srv := sandboxDaemon(t, tasksNamespace)
	rig := func(t *testing.T) *taskRig { return newTaskRig(t, d, srv) }

	t.Run("group", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    func(t *testing.T, r *taskRig)
		}{
			{"BackgroundExitCodeAndTail", testBackgroundTask},
			{"BadRequests", testTaskBadRequests},
			{"NotReadyAndMissing", testTasksNotReady},
			{"InteractiveTerminal", testInteractiveTerminal},
			{"LaggingWatcher", testLaggingWatcher},
			{"CloseEndsTasks", testCloseEndsTasks},
			{"KillEndsTheTaskAndItsChildren", testKillTask},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.f(t, rig(t))
			})
		}
	})
	// Last, as it closes every terminal of the server for good.
	t.Run("ShutdownClosesTerminals", func(t *testing.T) { testShutdownTerminals(t, rig(t)) })
}

func testBackgroundTask(t *testing.T, r *taskRig) {
	id := r.readySession(t)
	tr := r.startTask(t, id, `{"command":"echo hi; echo oops >&2; exit 3"}`)
	if tr.Status != projections.TaskRunning || tr.Interactive || tr.Command != "echo hi; echo oops >&2; exit 3" || tr.Generation != 1 {
		t.Errorf("201 task = %+v", tr)
	}
	if tr.TerminalURL != "" || tr.AttachedClients != nil {
		t.Errorf("a background task has terminal fields: %+v", tr)
	}
	task := r.exited(t, id, tr.ID)
	if task.ExitCode == nil || *task.ExitCode != 3 || task.Error != "" || task.EndedAt == nil {
		t.Errorf("exited task = %+v, want exit code 3 without error", task)
	}
	if !strings.Contains(task.OutputTail, "hi\n") || !strings.Contains(task.OutputTail, "oops\n") {
		t.Errorf("output tail = %q, want hi and oops", task.OutputTail)
	}
	list := r.listTasks(t, id)
	if len(list) != 1 || list[0].ID != tr.ID || list[0].ExitCode == nil || *list[0].ExitCode != 3 || list[0].Status != projections.TaskExited {
		t.Errorf("GET tasks = %+v", list)
	}
	if n := r.countEvents(t, id, "session-task-exited", tr.ID); n != 1 {
		t.Errorf("%d TaskExited events, want 1", n)
	}
	// The task runs in the Session's working dir, in the sandbox.
	tr = r.startTask(t, id, `{"command":"pwd"}`)
	task = r.exited(t, id, tr.ID)
	if *task.ExitCode != 0 || !strings.Contains(task.OutputTail, r.dir) {
		t.Errorf("pwd task = %+v, want the working dir %s", task, r.dir)
	}
	// A background task has no terminal.
	if _, resp, err := dialTerminal(t, r.srv, "/api/sessions/"+id+"/terminals/"+tr.ID+"/ws"); err == nil || resp == nil || resp.StatusCode != 404 {
		t.Errorf("terminal of a background task: %v, %v", err, resp)
	}
	// Output past the tail bound keeps the newest 16 KiB.
	tr = r.startTask(t, id, `{"command":"seq 1 20000"}`)
	task = r.exited(t, id, tr.ID)
	if !strings.HasSuffix(task.OutputTail, "\n20000\n") || len(task.OutputTail) > 17<<10 || !strings.Contains(task.OutputTail, "truncated") {
		t.Errorf("long output tail: %d bytes, ends %q", len(task.OutputTail), task.OutputTail[max(0, len(task.OutputTail)-20):])
	}
}

// testKillTask: a kill ends a running task and what it started (every
// process carrying its LATHE_TASK_ID) in the sandbox; its exit follows.
func testKillTask(t *testing.T, r *taskRig) {
	id := r.readySession(t)
	tr := r.startTask(t, id, `{"command":"sleep 300 & echo $! > child.pid; exec sleep 301"}`)
	sandboxtest.WaitFor(t, 30*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(r.dir, "child.pid"))
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	resp := r.do(t, post, "/api/sessions/"+id+"/tasks/"+tr.ID+"/kill", "")
	if resp.status != 200 {
		t.Fatalf("kill: %d %s", resp.status, resp.body)
	}
	task := r.exited(t, id, tr.ID)
	if task.ExitCode == nil || *task.ExitCode != 128+9 {
		t.Errorf("killed task = %+v, want exit code 137", task)
	}
	child := r.exited(t, id, r.startTask(t, id, `{"command":"p=$(cat child.pid); [ -e /proc/$p ] && [ \"$(cut -d' ' -f3 /proc/$p/stat)\" != Z ]"}`).ID)
	if child.ExitCode == nil || *child.ExitCode == 0 {
		t.Errorf("the task's child survived the kill: %+v", child)
	}
	if n := r.countEvents(t, id, "session-task-killed", tr.ID); n != 1 {
		t.Errorf("%d TaskKilled events, want 1", n)
	}
	if resp := r.do(t, post, "/api/sessions/"+id+"/tasks/"+tr.ID+"/kill", ""); resp.status != 409 {
		t.Errorf("kill an exited task: %d %s", resp.status, resp.body)
	}
	if resp := r.do(t, post, "/api/sessions/"+id+"/tasks/01J00000000000000000000000/kill", ""); resp.status != 404 {
		t.Errorf("kill an unknown task: %d %s", resp.status, resp.body)
	}
}

func testTaskBadRequests(t *testing.T, r *taskRig) {
	id := r.readySession(t)
	path := "/api/sessions/" + id + "/tasks"
	for _, tc := range []struct{ name, body, want string }{
		{"empty command", `{"command":""}`, "command must not be empty"},
		{"blank command", `{"command":"  \n"}`, "command must not be empty"},
		{"no command", `{"interactive":true}`, "command must not be empty"},
		{"NUL", `{"command":"echo \u0000"}`, "NUL"},
		{"huge command", `{"command":"` + strings.Repeat("x", 16<<10+1) + `"}`, "longer than"},
		{"rows without interactive", `{"command":"ls","rows":10,"cols":10}`, "only to interactive"},
		{"zero rows", `{"command":"bash","interactive":true,"rows":0,"cols":80}`, "rows must be 1-1000"},
		{"negative cols", `{"command":"bash","interactive":true,"rows":24,"cols":-1}`, "rows must be 1-1000"},
		{"huge cols", `{"command":"bash","interactive":true,"rows":24,"cols":1001}`, "rows must be 1-1000"},
		{"huge rows", `{"command":"bash","interactive":true,"rows":70000,"cols":80}`, "rows must be 1-1000"},
		{"fractional rows", `{"command":"bash","interactive":true,"rows":2.5,"cols":80}`, "rows"},
		{"string cols", `{"command":"bash","interactive":true,"rows":2,"cols":"80"}`, "cols"},
		{"unknown field", `{"command":"ls","shell":"zsh"}`, "shell"},
		{"not an object", `["ls"]`, "JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := r.version(t, id)
			resp := r.do(t, post, path, tc.body)
			if resp.status != 400 {
				t.Fatalf("status %d, want 400: %s", resp.status, resp.body)
			}
			assertErrorBody(t, resp, tc.want)
			if after := r.version(t, id); after != before {
				t.Errorf("a rejected task appended %d events", after-before)
			}
		})
	}
	if got := r.listTasks(t, id); len(got) != 0 {
		t.Errorf("tasks after rejections: %+v", got)
	}
	// Resize bounds on the socket: an error frame, the terminal unchanged.
	tr := r.startTask(t, id, `{"command":"stty -echo; bash --norc","interactive":true,"rows":12,"cols":34}`)
	w := watchTerminal(t, r.srv, tr.TerminalURL)
	for _, bad := range []string{`{"kind":"resize","rows":0,"cols":80}`, `{"kind":"resize","rows":24,"cols":5000}`, `{"kind":"resize","rows":"x","cols":1}`, `{"kind":"resize"}`} {
		n := len(w.textFrames())
		w.send(t, websocket.MessageText, bad)
		w.waitFor(t, "an error frame for "+bad, func(w *termWatcher) bool { return len(w.texts) > n })
		if reply := w.textFrames()[n]; !strings.Contains(reply, `"kind":"error"`) || !strings.Contains(reply, "resize") {
			t.Errorf("reply to %s: %s", bad, reply)
		}
	}
	w.send(t, websocket.MessageText, "stty size\r")
	w.waitOutput(t, "12 34")
	w.send(t, websocket.MessageText, "exit\r")
	if code, reason := w.closed(t); code != websocket.StatusNormalClosure || reason != "process exited (code 0)" {
		t.Errorf("close %d %q", code, reason)
	}
}

func testTasksNotReady(t *testing.T, r *taskRig) {
	// An unreviewed setup command awaits approval: the Session is never prepared.
	ss := r.create(t, `"setup_command":"make deps"`)
	if ss.Environment.State != events.EnvAwaitingApproval {
		t.Fatalf("state %s, want awaiting_approval", ss.Environment.State)
	}
	before := r.version(t, ss.ID)
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{get, "/api/sessions/" + ss.ID + "/tasks", "", 409},
		{post, "/api/sessions/" + ss.ID + "/tasks", `{"command":"echo hi"}`, 409},
		{post, "/api/sessions/" + ss.ID + "/tasks", `{"command":"bash","interactive":true}`, 409},
		{get, "/api/sessions/" + unknownID + "/tasks", "", 404},
		{post, "/api/sessions/" + unknownID + "/tasks", `{"command":"echo hi"}`, 404},
	} {
		resp := r.do(t, tc.method, tc.path, tc.body)
		if resp.status != tc.status {
			t.Errorf("%s %s: %d, want %d: %s", tc.method, tc.path, resp.status, tc.status, resp.body)
			continue
		}
		assertErrorBody(t, resp, map[int]string{409: "not ready", 404: "session"}[tc.status])
	}
	// The terminal socket refuses before the upgrade, with JSON.
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/api/sessions/" + ss.ID + "/terminals/" + unknownID + "/ws", 409},
		{"/api/sessions/" + unknownID + "/terminals/" + unknownID + "/ws", 404},
	} {
		_, resp, err := dialTerminal(t, r.srv, tc.path)
		if err == nil || resp == nil || resp.StatusCode != tc.status {
			t.Errorf("dial %s: %v, %+v; want %d", tc.path, err, resp, tc.status)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("dial %s: Content-Type %q", tc.path, ct)
		}
	}
	if after := r.version(t, ss.ID); after != before {
		t.Errorf("refused requests appended %d events", after-before)
	}
	if got := r.get(t, ss.ID).Environment.State; got != events.EnvAwaitingApproval {
		t.Errorf("state after task attempts: %s", got)
	}
}

func testInteractiveTerminal(t *testing.T, r *taskRig) {
	id := r.readySession(t)
	tr := r.startTask(t, id, `{"command":"bash --norc","interactive":true,"rows":20,"cols":70}`)
	wantURL := "/api/sessions/" + id + "/terminals/" + tr.ID + "/ws"
	if !tr.Interactive || tr.Status != projections.TaskRunning || tr.TerminalURL != wantURL || tr.AttachedClients == nil || *tr.AttachedClients != 0 {
		t.Fatalf("201 task = %+v, terminal_url %q", tr, tr.TerminalURL)
	}

	// An unknown terminal of a Ready Session: 404 JSON before the upgrade.
	_, resp, err := dialTerminal(t, r.srv, "/api/sessions/"+id+"/terminals/"+unknownID+"/ws")
	if err == nil || resp == nil || resp.StatusCode != 404 {
		t.Fatalf("unknown terminal: %v, %+v", err, resp)
	}
	var body map[string]string
	if b, _ := readAllBody(resp); json.Unmarshal(b, &body) != nil || !strings.Contains(body["error"], unknownID) {
		t.Errorf("unknown terminal body: %q", b)
	}

	a := watchTerminal(t, r.srv, tr.TerminalURL)
	a.waitFor(t, "the scrollback frame", func(w *termWatcher) bool { return w.frames >= 1 })
	a.send(t, websocket.MessageText, "echo lathe-$((1+1))\r")
	a.waitOutput(t, "lathe-2\r\n")

	// A second watcher: the scrollback holds what came before, then both
	// see the same live output.
	b := watchTerminal(t, r.srv, tr.TerminalURL)
	b.waitFor(t, "the scrollback frame", func(w *termWatcher) bool { return w.frames >= 1 })
	if !strings.Contains(string(b.first), "lathe-2") {
		t.Errorf("second watcher's scrollback lacks the earlier output: %q", b.first)
	}
	if l := r.listTasks(t, id); len(l) != 1 || l[0].AttachedClients == nil || *l[0].AttachedClients != 2 || l[0].TerminalURL != wantURL {
		t.Errorf("GET tasks with two watchers: %+v", l)
	}
	b.send(t, websocket.MessageBinary, "echo from-$((2+3))-b\r") // binary keystrokes too
	a.waitOutput(t, "from-5-b\r\n")
	b.waitOutput(t, "from-5-b\r\n")
	// A resize, then keystrokes on the same socket: in that order.
	a.send(t, websocket.MessageText, `{"kind":"resize","rows":33,"cols":111}`)
	a.send(t, websocket.MessageText, "stty size\r")
	a.waitOutput(t, "33 111")
	b.waitOutput(t, "33 111")

	// Exit: both watchers see it, then the socket closes normally.
	a.send(t, websocket.MessageBinary, "exit 5\r")
	for _, w := range []*termWatcher{a, b} {
		if code, reason := w.closed(t); code != websocket.StatusNormalClosure || reason != "process exited (code 5)" {
			t.Errorf("close %d %q, want 1000 process exited (code 5)", code, reason)
		}
	}
	task := r.exited(t, id, tr.ID)
	if task.ExitCode == nil || *task.ExitCode != 5 || task.Error != "" || !strings.Contains(task.OutputTail, "lathe-2") {
		t.Errorf("exited task = %+v", task)
	}
	// The exited terminal still replays its scrollback, then closes.
	c := watchTerminal(t, r.srv, tr.TerminalURL)
	if code, reason := c.closed(t); code != websocket.StatusNormalClosure || reason != "process exited (code 5)" {
		t.Errorf("attach after exit: close %d %q", code, reason)
	}
	if !strings.Contains(string(c.first), "33 111") {
		t.Errorf("scrollback after exit: %q", c.first)
	}
	if n := r.countEvents(t, id, "session-task-exited", tr.ID); n != 1 {
		t.Errorf("%d TaskExited events, want 1", n)
	}
}

func testLaggingWatcher(t *testing.T, r *taskRig) {
	id := r.readySession(t)
	tr := r.startTask(t, id, `{"command":"bash --norc","interactive":true}`)
	// The lagging watcher reads nothing until the flood is over, through a
	// small receive buffer, so that the flood outgrows the socket buffers.
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	ctx := testContext(t, 10*time.Second)
	lagging, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.srv.URL, "http")+tr.TerminalURL,
		&websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}})
	if err != nil {
		t.Fatal(err)
	}
	lagging.SetReadLimit(64 << 20)
	t.Cleanup(func() { lagging.CloseNow() })
	w := watchTerminal(t, r.srv, tr.TerminalURL)
	w.waitFor(t, "the scrollback frame", func(w *termWatcher) bool { return w.frames >= 1 })
	start := time.Now()
	// 12 MB, paced at about 10 MB/s: far more than the stalled watcher's
	// socket buffers and queue hold, while a reading watcher keeps up even
	// on a loaded machine.
	w.send(t, websocket.MessageText, "for i in $(seq 120); do head -c 100000 /dev/zero | tr '\\0' y; sleep 0.01; done; echo; echo lag-$((2*3))-done\r")
	w.waitOutput(t, "lag-6-done")
	t.Logf("12 MB through the terminal in %v", time.Since(start))
	lw := watch(lagging)
	if code, reason := lw.closed(t); code != 4001 || reason != "terminal-resync-required" {
		t.Errorf("lagging watcher closed with %d %q, want 4001 terminal-resync-required", code, reason)
	}
	// The reading watcher was not affected, and the terminal still works.
	w.send(t, websocket.MessageText, "echo still-$((3+4))\r")
	w.waitOutput(t, "still-7")
	again := watchTerminal(t, r.srv, tr.TerminalURL)
	again.waitFor(t, "the scrollback frame", func(w *termWatcher) bool { return w.frames >= 1 })
	if n := len(again.first); n == 0 || n > 256<<10 {
		t.Errorf("a fresh attach replays %d bytes of scrollback, want 1..256 KiB", n)
	}
}

func testCloseEndsTasks(t *testing.T, r *taskRig) {
	id := r.readySession(t)
	marker := filepath.Join(r.dir, ".bg-started-"+id)
	bg := r.startTask(t, id, `{"command":"echo started; : > .bg-started-`+id+`; sleep 600"}`)
	it := r.startTask(t, id, `{"command":"bash --norc","interactive":true}`)
	// The background task has printed before the close, however loaded the machine.
	polltest.Until(t, "the background task's marker", func() bool { _, err := os.Stat(marker); return err == nil })
	w := watchTerminal(t, r.srv, it.TerminalURL)
	w.waitFor(t, "the scrollback frame", func(w *termWatcher) bool { return w.frames >= 1 })
	w.send(t, websocket.MessageText, "echo before-close\r")
	w.waitOutput(t, "before-close\r\n")

	// Soft close tears the sandbox down; the tasks die with it.
	ss := r.lifecycle(t, del, "/api/sessions/"+id, "")
	if !ss.Closed() {
		t.Fatalf("close answered %+v", ss)
	}
	if code, reason := w.closed(t); code != websocket.StatusNormalClosure || !strings.HasPrefix(reason, "process exited") {
		t.Errorf("terminal close %d %q", code, reason)
	}
	for _, tr := range []taskReply{bg, it} {
		task := r.exited(t, id, tr.ID)
		if task.Error == "" || !strings.Contains(task.Error, "sandbox stopped") || task.ExitCode == nil {
			t.Errorf("task %s after close: %+v, want an error note", tr.Command, task)
		}
		if n := r.countEvents(t, id, "session-task-exited", tr.ID); n != 1 {
			t.Errorf("%d TaskExited events for %s, want exactly 1", n, tr.Command)
		}
	}
	if task, _ := r.d.Store().Task(id, bg.ID); !strings.Contains(task.OutputTail, "started") {
		t.Errorf("background tail after close: %q", task.OutputTail)
	}
	// The close bracket comes first: the exits follow its settlement.
	types := r.events(t, id)
	closed := slices.Index(types, "session-closed")
	exited := slices.Index(types, "session-task-exited")
	if closed < 0 || exited < closed {
		t.Errorf("events %v: want the task exits after session-closed", types)
	}
	if resp := r.do(t, get, "/api/sessions/"+id+"/tasks", ""); resp.status != 409 {
		t.Errorf("GET tasks of a closed session: %d", resp.status)
	}
	if _, resp, _ := dialTerminal(t, r.srv, it.TerminalURL); resp == nil || resp.StatusCode != 409 {
		t.Errorf("terminal of a closed session: %+v", resp)
	}

	// Reopened, the Session gets a new sandbox; the old terminal is gone.
	r.lifecycle(t, post, "/api/sessions/"+id+"/reopen", "")
	r.ready(t, id)
	if _, resp, _ := dialTerminal(t, r.srv, it.TerminalURL); resp == nil || resp.StatusCode != 404 {
		t.Errorf("old terminal after reopen: %+v", resp)
	}
	if l := r.listTasks(t, id); len(l) != 2 || l[0].Status != projections.TaskExited || l[1].TerminalURL != "" {
		t.Errorf("tasks after reopen: %+v", l)
	}
}

func testShutdownTerminals(t *testing.T, r *taskRig) {
	id := r.readySession(t)
	tr := r.startTask(t, id, `{"command":"bash --norc","interactive":true}`)
	w := watchTerminal(t, r.srv, tr.TerminalURL)
	w.waitFor(t, "the scrollback frame", func(w *termWatcher) bool { return w.frames >= 1 })
	ctx := testContext(t, 10*time.Second)
	if err := r.d.server.ShutdownTerminals(ctx); err != nil {
		t.Fatalf("ShutdownTerminals: %v", err)
	}
	if code, _ := w.closed(t); code != websocket.StatusGoingAway {
		t.Errorf("terminal closed with %d at shutdown, want 1001", code)
	}
	if _, resp, err := dialTerminal(t, r.srv, tr.TerminalURL); err == nil || resp == nil || resp.StatusCode != 503 {
		t.Errorf("attach after shutdown: %v, %+v", err, resp)
	}
	// The process outlives its watchers.
	if task, _ := r.d.Store().Task(id, tr.ID); task.Status != projections.TaskRunning {
		t.Errorf("task after terminal shutdown: %+v", task)
	}
}

func readAllBody(resp *http.Response) ([]byte, error) {
	if resp.Body == nil {
		return nil, nil
	}
	buf := make([]byte, 1024)
	n, _ := resp.Body.Read(buf)
	return buf[:n], nil
}

// ---------------------------------------------------------------------------
// Benchmark

// BenchmarkTerminalEcho measures a keystroke's round trip through the
// terminal WebSocket: a one-byte binary frame in, the same byte echoed by a
// raw-mode `cat` in a real sandbox, out as a frame.
func BenchmarkTerminalEcho(b *testing.B) {
	srv, id := benchSandboxSession(b)
	benchTerminalEcho(b, srv, id)
}

// benchTerminalEcho is BenchmarkTerminalEcho on the Ready Session id.
func benchTerminalEcho(b *testing.B, srv *httptest.Server, id string) {
	resp := call(b, srv, post, "/api/sessions/"+id+"/tasks", `{"command":"stty raw -echo; echo go; exec cat","interactive":true}`)
	if resp.status != 201 {
		b.Fatalf("start task: %d %s", resp.status, resp.body)
	}
	var tr taskReply
	json.Unmarshal(resp.body, &tr)
	c, _, err := dialTerminal(b, srv, tr.TerminalURL)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var seen []byte
	for !strings.Contains(string(seen), "go\n") {
		_, data, err := c.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		seen = append(seen, data...)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		key := byte('a' + i%26)
		t0 := time.Now()
		if err := c.Write(ctx, websocket.MessageBinary, []byte{key}); err != nil {
			b.Fatal(err)
		}
		for got := false; !got; {
			_, data, err := c.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got = slices.Contains(data, key)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}

// benchSandboxSession starts a daemon with real sandboxes in this file's
// namespace and returns a Ready Session.
func benchSandboxSession(b *testing.B) (*httptest.Server, string) {
	b.Helper()
	_, d, srv := sandboxDaemon(b, tasksNamespace)
	r := newTaskRig(b, d, srv)
	id := r.create(b, "").ID
	r.ready(b, id)
	return srv, id
}
