package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/coder/websocket"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/git/gittest"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// procWaysSession creates a Ready single-Agent Session on a fresh Git
// repository with one commit and returns its ID and directory.
func procWaysSession(t *testing.T, d *daemonProc) (string, string) {
	t.Helper()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "-c", "user.name=T", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
	status, body := procDo(t, http.MethodPost, d.url+"/api/sessions", `{"working_dir":"`+dir+`","name":"ways","mode":{"kind":"single_agent","agent_id":"coder"}}`)
	if status != 201 {
		t.Fatalf("create session: %d %s", status, body)
	}
	id := idOf(t, body)
	if ss := procWait(t, d, id, "settled", procSettled); ss.Environment.State != events.EnvReady {
		t.Fatalf("session not ready: %+v", ss.Environment)
	}
	return id, dir
}

// procStartWays starts a set and returns its ID.
func procStartWays(t *testing.T, d *daemonProc, session, body string) string {
	t.Helper()
	status, resp := procDo(t, http.MethodPost, d.url+"/api/sessions/"+session+"/variants", body)
	if status != 202 {
		t.Fatalf("POST variants: %d %s", status, resp)
	}
	var out struct {
		AttemptSetID string `json:"attempt_set_id"`
	}
	_ = json.Unmarshal(resp, &out)
	return out.AttemptSetID
}

// procSetEvents lists the event types of a set's aggregate.
func procSetEvents(t *testing.T, d *daemonProc, set string) []string {
	t.Helper()
	var out []string
	for _, env := range procEvents(t, d, set) {
		out = append(out, env.Type)
	}
	return out
}

func procSnapshot(t *testing.T, d *daemonProc) projections.Snapshot {
	t.Helper()
	ctx := procContext(t, 10*time.Second)
	c := dialProc(t, ctx, d)
	defer c.CloseNow()
	var snap projections.Snapshot
	for {
		_, raw, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), `"kind":"snapshot"`) {
			if err := json.Unmarshal(raw, &snap); err != nil {
				t.Fatal(err)
			}
			return snap
		}
	}
}

// TestWaysLaneEndsOnceAcrossKill kills the daemon with SIGKILL while two
// lanes run: after the restart each lane has exactly one end, failed
// (interrupted) with its paid usage as a subtotal; the set still owns the
// Workspace (the snapshot is hydrated from the journal) and is discarded
// with nothing left behind.
func TestWaysLaneEndsOnceAcrossKill(t *testing.T) {
	cl := containerdtest.Namespace(t, turnProcNamespace)
	// Each lane pays for one step (11 in, 7 out), then its model streams
	// and stalls while the daemon is killed.
	paid := fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("looking"), fakellm.ToolCall("c1", "shell", `{"command":"true"}`), fakellm.Usage(11, 7, 0)}}
	stall := fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("thinking"), fakellm.Stall(nil)}}
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{paid, paid, stall, stall}})
	t.Cleanup(fake.Close)
	cfg := turnProcConfig(t, fake, "")
	data := t.TempDir()
	d := procStart(t, data, "--config", cfg)
	session, dir := procWaysSession(t, d)
	set := procStartWays(t, d, session, `{"input":"run the long thing","n":2}`)
	procPoll(t, "both lanes past their paid step", func() bool {
		n := 0
		for _, e := range procSetEvents(t, d, set) {
			if e == "attempt-lane-tool-finished" {
				n++
			}
		}
		return n == 2 && len(fake.Requests()) == 4
	})
	d.kill(t)
	d = procStart(t, data, "--config", cfg)

	var ends []string
	for _, env := range procEvents(t, d, set) {
		if env.Type == "attempt-lane-ended" {
			ends = append(ends, string(env.Data))
		}
	}
	if len(ends) != 2 {
		t.Fatalf("lane ends after the restart: %v, want exactly one per lane", ends)
	}
	status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+session+"/variants/results", "")
	var res struct {
		State    string
		Attempts []struct {
			State       string
			Interrupted bool
			Error       string
			Usage       struct {
				InputTokens     int  `json:"input_tokens"`
				TokenUsageKnown bool `json:"token_usage_known"`
			}
		}
	}
	if status != 200 || json.Unmarshal(body, &res) != nil {
		t.Fatalf("results: %d %s", status, body)
	}
	for i, a := range res.Attempts {
		if a.State != "failed" || !a.Interrupted || !strings.Contains(a.Error, "interrupted") || a.Usage.InputTokens != 11 || a.Usage.TokenUsageKnown {
			t.Errorf("lane %d after the kill: %+v", i, a)
		}
	}
	if res.State != "ready" {
		t.Errorf("set state %q, want ready (resolvable)", res.State)
	}
	if snap := procSnapshot(t, d); len(snap.AttemptOwnerships) != 1 || snap.AttemptOwnerships[0].AttemptSetID != set {
		t.Errorf("ownerships after the restart: %+v", snap.AttemptOwnerships)
	}
	if status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+session+"/git/status", ""); status != 409 {
		t.Errorf("git status while the set still owns the Workspace: %d %s", status, body)
	}
	procDiscard(t, d, cl, session, set, 2)
	if _, err := os.Stat(filepath.Join(data, "ways", set)); !os.IsNotExist(err) {
		t.Errorf("copies left: %v", err)
	}
	if out, _ := gittest.Try(dir, "for-each-ref", "refs/lathe/"); out != "" {
		t.Errorf("refs left: %s", out)
	}
	procDelete(t, d, session)
}

// procKeepPhases lists a set's durable Keep phases.
func procKeepPhases(t *testing.T, d *daemonProc, set string) []string {
	t.Helper()
	var phases []string
	for _, env := range procEvents(t, d, set) {
		if env.Type == "attempt-keep-phase" {
			var p events.KeepPhase
			_ = json.Unmarshal(env.Data, &p)
			phases = append(phases, p.Phase)
		}
	}
	return phases
}

// procDoLong is procDo for a command that may wait for the start-up
// reconstruction (up to 30 s).
func procDoLong(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestWaysKeepResumesAcrossKill kills the daemon with SIGKILL once Keep of
// a 3,000-file Attempt has begun applying, tears one of the files it
// writes (a crash mid-write), restarts, and retries: the retry with the
// same index resumes and leaves exactly the lane's worktree, another index
// is refused, and the kept turn is recorded once.
func TestWaysKeepResumesAcrossKill(t *testing.T) {
	containerdtest.Namespace(t, turnProcNamespace)
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "shell", `{"command":"mkdir -p gen && for i in $(seq 1 3000); do echo \"line $i\" > gen/f$i.txt; done && echo changed > a.txt"}`), fakellm.Usage(5, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("wrote them"), fakellm.Usage(5, 5, 0)}},
	}})
	t.Cleanup(fake.Close)
	cfg := turnProcConfig(t, fake, "")
	data := t.TempDir()
	d := procStart(t, data, "--config", cfg)
	session, dir := procWaysSession(t, d)
	set := procStartWays(t, d, session, `{"input":"write many","n":1}`)
	procPoll(t, "the lane ended", func() bool { return slices.Contains(procSetEvents(t, d, set), "attempt-lane-ended") })

	adopt := `{"attempt_set_id":"` + set + `","index":0}`
	go func() { _, _ = procDoQuiet(http.MethodPost, d.url+"/api/sessions/"+session+"/variants/adopt", adopt) }()
	procPoll(t, "Keep applying", func() bool { return slices.Contains(procSetEvents(t, d, set), "attempt-keep-phase") })
	d.kill(t)
	d = procStart(t, data, "--config", cfg)
	if phases := procKeepPhases(t, d, set); slices.Equal(phases, []string{"applying"}) {
		// Killed mid-apply: add a write the crash cut short (the daemon
		// does nothing with the set until the retry).
		if err := os.MkdirAll(filepath.Join(dir, "gen"), 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "gen", "f7.txt"), []byte("li"), 0o644)
		}
	} else {
		t.Logf("the kill came after apply (phases %v): the retry resumes from there", phases)
	}
	if status, body := procDo(t, http.MethodPost, d.url+"/api/sessions/"+session+"/variants/adopt", `{"attempt_set_id":"`+set+`","index":1}`); status != 400 && status != 409 {
		t.Errorf("keep of another index after apply began: %d %s", status, body)
	}
	// A git process the kill cut off in the primary sandbox can hold up
	// the start-up reconstruction (it then prepares the Session anew): the
	// retry waits for the primary to be Ready again.
	var status int
	var body []byte
	polltest.Check(t, func() error {
		status, body = procDoLong(t, http.MethodPost, d.url+"/api/sessions/"+session+"/variants/adopt", adopt)
		if status == 503 || status == 409 && strings.Contains(string(body), "not ready") {
			return fmt.Errorf("retried keep: %d %s\n%s", status, body, d.stderr.String())
		}
		return nil
	}, polltest.Within(2*time.Minute), polltest.Every(100*time.Millisecond))
	if status != 200 || !strings.Contains(string(body), `"state":"kept"`) {
		t.Fatalf("retried keep: %d %s\n%s", status, body, d.stderr.String())
	}
	for _, c := range []struct{ path, want string }{{"a.txt", "changed\n"}, {"gen/f7.txt", "line 7\n"}, {"gen/f3000.txt", "line 3000\n"}} {
		if b, err := os.ReadFile(filepath.Join(dir, c.path)); err != nil || string(b) != c.want {
			t.Errorf("%s after the resumed Keep = %q, %v; want %q", c.path, b, err, c.want)
		}
	}
	if n := strings.Count(gittest.Run(t, dir, "status", "--porcelain", "-uall"), "\n"); n != 3001 {
		t.Errorf("changed paths after Keep: %d, want 3001", n)
	}
	if got := gittest.Run(t, dir, "diff", "--cached"); got != "" {
		t.Errorf("Keep staged changes: %s", got)
	}
	if phases := procKeepPhases(t, d, set); !slices.Equal(phases, []string{"applying", "applied", "transcript_recorded"}) {
		t.Errorf("keep phases %v", phases)
	}
	accepted := 0
	for _, env := range procEvents(t, d, session) {
		if env.Type == "turn-accepted" {
			accepted++
		}
	}
	if accepted != 1 {
		t.Errorf("the kept turn was recorded %d times", accepted)
	}
	procDelete(t, d, session)
}

func dialProc(t *testing.T, ctx context.Context, d *daemonProc) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, d.url+"/ws", nil)
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	c.SetReadLimit(1 << 24)
	return c
}

// procDoQuiet is procDo for a goroutine: a request the daemon's death cuts
// off is an error, not a test failure.
func procDoQuiet(method, url, body string) (int, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// procDiscard discards the set and checks that none of its lanes' n
// containers is left.
func procDiscard(t *testing.T, d *daemonProc, cl *client.Client, session, set string, n int) {
	t.Helper()
	if status, body := procDo(t, http.MethodPost, d.url+"/api/sessions/"+session+"/variants/discard", `{"attempt_set_id":"`+set+`"}`); status != 200 {
		t.Fatalf("discard: %d %s", status, body)
	}
	for i := range n {
		if left := containerdtest.SessionContainers(t, cl, set+"-"+strconv.Itoa(i)); len(left) != 0 {
			t.Errorf("lane %d containers left: %v", i, left)
		}
	}
}
