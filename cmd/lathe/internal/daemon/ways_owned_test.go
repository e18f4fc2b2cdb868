package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/sandboxtest"
)

// ownedCall is one request to a primary surface of a Session: its status
// and body. A /ws turn, which answers with frames, reads 409 and the
// error for a refused accept (session-error, rejected) and 200 for a turn
// that ran (session-done).
type ownedCall func(t *testing.T, s ownedSession) (int, []byte)

// ownedSession is one Session of the Workspace under test.
type ownedSession struct {
	id, n   string // Session ID; its number, in the file names it uses
	term    string // its interactive terminal task
	preview string // the Preview authority of its port 8000
}

// ownedRoute is a primary-surface route: refused with 409 while a Ways set
// owns the Workspace, answering after with the status after.
type ownedRoute struct {
	surface, name string
	call          ownedCall
	after         int
}

// TestWaysOwnedWorkspace: while a Ways set owns the Workspace, every
// primary surface of every Session there (the set's own and a second one)
// answers 409 with an {error} that names the owning set: Files (read and
// write), Source Control (reads, writes, Check), Preview (ports, the
// virtual origin, the path proxy), Terminal (tasks, the terminal
// WebSocket, kill) and turns (the /ws session command, execute, rewind).
// After the set settles (Discard) each works again. The rows run in order:
// the writes after settlement build on each other.
//
// Already covered elsewhere, listed here too so the table is whole:
// TestWays checks tree, file read, git status, tasks, execute and rewind
// on both Sessions, and turn restore on the owner.
func TestWaysOwnedWorkspace(t *testing.T) {
	var script fakellm.Script
	script.Turns = append(script.Turns, fakellm.Turn{Model: "m1", Steps: []fakellm.Step{fakellm.Text("the lane"), fakellm.Usage(1, 1, 0)}})
	for range 4 { // after settlement: a /ws turn and an execute per Session
		script.Turns = append(script.Turns, fakellm.Turn{Model: "m1", Steps: []fakellm.Step{fakellm.Text("turn after"), fakellm.Usage(1, 1, 0)}})
	}
	r := newWaysRig(t, script)
	r.gitWorkspace(t)
	_, port, _ := net.SplitHostPort(r.srv.Listener.Addr().String())
	var sessions []ownedSession
	for i := range 2 {
		id := r.create(t, `"exposed_ports":[8000]`).ID
		r.ready(t, id)
		r.discardAtEnd(t, id)
		s := ownedSession{id: id, n: fmt.Sprint(i), preview: strings.ToLower(id) + "-p8000.localhost:" + port}
		mustCall(t, r.srv, 200, put, "/api/sessions/"+id+"/check", `{"check_command":"true"}`)
		s.term = mustCall(t, r.srv, 201, post, "/api/sessions/"+id+"/tasks", `{"command":"bash","interactive":true}`)["id"].(string)
		mustCall(t, r.srv, 201, post, "/api/sessions/"+id+"/tasks", `{"command":"exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp"}`)
		sandboxtest.WaitFor(t, 30*time.Second, func() bool { return previewGet(t, r, s.preview).status == 200 })
		sessions = append(sessions, s)
	}
	owner := sessions[0].id

	routes := ownedRoutes(r)
	// A terminal opened before the set takes no keystroke after it.
	open, _, err := dialTerminal(t, r.srv, "/api/sessions/"+sessions[1].id+"/terminals/"+sessions[1].term+"/ws")
	if err != nil {
		t.Fatalf("open the terminal before the set: %v", err)
	}
	defer open.CloseNow()
	set := r.waysStart(t, owner, `{"input":"look","n":1,"lanes":[{"model":"m1"}]}`)
	r.waitResults(t, owner, "ready", func(res waysResults) bool { return res.State == "ready" })
	why := fmt.Sprintf(`Ways set %q of session %q owns workspace %q until it is kept or discarded`, set, owner, r.ws)
	for _, s := range sessions {
		for _, rt := range routes {
			status, body := rt.call(t, s)
			var e struct {
				Error string `json:"error"`
			}
			if status != 409 || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, why) {
				t.Errorf("session %s, %s: %s while the set owns the Workspace = %d %s, want 409 with {error} %q", s.n, rt.surface, rt.name, status, body, why)
			}
		}
	}

	ctx := testContext(t, 30*time.Second)
	if err := open.Write(ctx, websocket.MessageBinary, []byte("echo leaked > leaked.txt\n")); err != nil {
		t.Fatalf("type into the open terminal: %v", err)
	}
	for {
		if _, _, err = open.Read(ctx); err != nil {
			break
		}
	}
	if websocket.CloseStatus(err) != 4009 || !strings.Contains(err.Error(), "owns workspace") {
		t.Errorf("a terminal opened before the set, typed into while it owns the Workspace: %v, want close 4009 naming the owner", err)
	}

	mustCall(t, r.srv, 200, post, "/api/sessions/"+owner+"/variants/discard", `{"attempt_set_id":"`+set+`"}`)
	if rep := r.do(t, get, "/api/sessions/"+sessions[1].id+"/file?path=leaked.txt", ""); rep.status != 404 {
		t.Errorf("the keystrokes typed while the set owned the Workspace reached the shell: GET leaked.txt = %d %s", rep.status, rep.body)
	}
	for _, s := range sessions {
		for _, rt := range routes {
			if status, body := rt.call(t, s); status != rt.after {
				t.Errorf("session %s, %s: %s after settlement = %d %s, want %d", s.n, rt.surface, rt.name, status, body, rt.after)
			}
		}
	}
}

// ownedRoutes lists the primary surfaces' routes, in the order the calls
// after settlement build on each other.
func ownedRoutes(r *waysRig) []ownedRoute {
	plain := func(method, path, body string) ownedCall {
		return func(t *testing.T, s ownedSession) (int, []byte) {
			rep := r.do(t, method, "/api/sessions/"+s.id+strings.ReplaceAll(path, "{n}", s.n), strings.ReplaceAll(body, "{n}", s.n))
			return rep.status, rep.body
		}
	}
	return []ownedRoute{
		{"Files", "tree", plain(get, "/tree?path=.", ""), 200},
		{"Files", "read", plain(get, "/file?path=a.txt", ""), 200},
		{"Files", "create", plain(post, "/files/create", `{"path":"new-{n}.txt","kind":"file"}`), 201},
		{"Files", "write", plain(post, "/file?path=new-{n}.txt", `{"content":"new {n}\n"}`), 200},
		{"Files", "rename", plain(post, "/files/rename", `{"from":"new-{n}.txt","to":"moved-{n}.txt"}`), 200},
		{"Files", "delete", plain(post, "/files/delete", `{"path":"moved-{n}.txt"}`), 200},
		{"Files", "write a tracked file", plain(post, "/file?path=a.txt", `{"content":"a edited by {n}\n"}`), 200},
		{"Source Control", "status", plain(get, "/git/status", ""), 200},
		{"Source Control", "branches", plain(get, "/git/branches", ""), 200},
		{"Source Control", "identity", plain(get, "/git/identity", ""), 200},
		{"Source Control", "diff", plain(get, "/git/diff?path=a.txt", ""), 200},
		{"Source Control", "hunks", plain(get, "/git/hunks?path=a.txt", ""), 200},
		{"Source Control", "stage a hunk", plain(post, "/git/hunk", `{"path":"a.txt","index":0}`), 200},
		{"Source Control", "commit", plain(post, "/git/commit", `{"message":"from session {n}"}`), 200},
		{"Files", "write a tracked file again", plain(post, "/file?path=a.txt", `{"content":"a again by {n}\n"}`), 200},
		{"Source Control", "discard a hunk", plain(post, "/git/hunk/discard", `{"path":"a.txt","index":0}`), 200},
		{"Source Control", "stage", plain(post, "/git/stage", `{"paths":["untracked.txt"]}`), 200},
		{"Source Control", "unstage", plain(post, "/git/unstage", `{"paths":["untracked.txt"]}`), 200},
		{"Source Control", "discard", plain(post, "/git/discard", `{"path":"a.txt"}`), 200},
		{"Source Control", "checkout", plain(post, "/git/checkout", `{"ref":"main"}`), 200},
		{"Source Control", "run the Check", plain(post, "/check/run", ""), 200},
		{"Preview", "listening ports", plain(get, "/preview/ports", ""), 200},
		{"Preview", "virtual origin", func(t *testing.T, s ownedSession) (int, []byte) {
			rep := previewGet(t, r, s.preview)
			return rep.status, rep.body
		}, 200},
		{"Preview", "path proxy", plain(get, "/proxy/8000/", ""), 200},
		{"Terminal", "tasks", plain(get, "/tasks", ""), 200},
		{"Terminal", "start a task", plain(post, "/tasks", `{"command":"true"}`), 201},
		{"Terminal", "attach the terminal", func(t *testing.T, s ownedSession) (int, []byte) {
			c, resp, err := dialTerminal(t, r.srv, "/api/sessions/"+s.id+"/terminals/"+s.term+"/ws")
			if err == nil {
				c.Close(websocket.StatusNormalClosure, "")
				return resp.StatusCode, nil
			}
			if resp == nil {
				t.Fatalf("dial the terminal: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, body
		}, http.StatusSwitchingProtocols},
		{"Terminal", "kill the terminal", func(t *testing.T, s ownedSession) (int, []byte) {
			return plain(post, "/tasks/"+s.term+"/kill", "")(t, s)
		}, 200},
		{"turns", "/ws session", func(t *testing.T, s ownedSession) (int, []byte) { return wsTurn(t, r, s.id) }, 200},
		{"turns", "execute", plain(post, "/execute", `{"input":"hi"}`), 200},
		{"turns", "rewind", plain(post, "/rewind", `{"keep":0}`), 200},
	}
}

// previewGet sends GET / to a Preview authority of the rig's daemon.
func previewGet(t *testing.T, r *waysRig, authority string) reply {
	t.Helper()
	req, err := http.NewRequest(get, "http://"+authority+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return send(t, loopbackClient(r.srv), req)
}

// wsTurn sends a turn to Session id over /ws and reads it to its end: 200
// and its frame for session-done, 409 and {error} for a refused accept.
func wsTurn(t *testing.T, r *waysRig, id string) (int, []byte) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	tc := &turnConn{c: dialWS(t, ctx, r.srv, nil)}
	defer tc.c.Close(websocket.StatusNormalClosure, "")
	expectFrame(t, ctx, tc.c, "ready")
	expectFrame(t, ctx, tc.c, "snapshot")
	turn := "owned-" + fmt.Sprint(time.Now().UnixNano())
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": turn, "input": "hi"})
	last := tc.terminal(t, turn)
	f := last[len(last)-1]
	switch {
	case f.Kind == "session-done":
		return 200, []byte(f.Output)
	case f.Kind == "session-error" && f.Rejected:
		b, _ := json.Marshal(map[string]string{"error": f.Error})
		return 409, b
	}
	return 500, []byte(fmt.Sprintf("%+v", f))
}
