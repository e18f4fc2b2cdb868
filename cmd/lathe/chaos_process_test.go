package main

// The chaos driver (issue 23): a mixed load through the public interface —
// Session turns with tool calls that write files, Git commits, an
// Automation with a map, Chat turns, Ways sets of two lanes, and turns whose
// MCP calls park for an operator's approval — while the daemon is killed with
// SIGKILL at random moments and restarted. After every restart it checks
// the journal, the acknowledgements, the terminal records, leaks and the
// read models against a full replay. `make chaos` runs it with
// -chaos.kills 50; `make test` runs it with the default 10.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/containerd/containerd/v2/client"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/containerd"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

var (
	chaosKills  = flag.Int("chaos.kills", 10, "SIGKILLs of the chaos driver")
	chaosWindow = flag.Duration("chaos.window", 2*time.Second, "each kill comes at a random moment within this much load")
	chaosSeed   = flag.Uint64("chaos.seed", 0, "seed of the kill moments (0: from the clock)")
)

// chaosAck is one acknowledgement the daemon gave: what kind of thing, and
// the ID or turn ID that must be found again in the journal.
type chaosAck struct{ kind, id string }

// chaosRig is the daemon under load with what the driver recorded.
type chaosRig struct {
	t       *testing.T
	cl      *client.Client
	cfg     string
	data    string
	dir     string // the Session's working dir, a Git repository
	d       *daemonProc
	session string
	// ways and asking are two more Sessions, each on a Git repository of
	// its own: one runs Ways sets, the other turns whose MCP calls wait
	// for approval.
	ways, asking string
	lastSet      string        // the newest Ways set, discarded after each restart
	pace         time.Duration // a pause after each Chat turn, 20 after a Session turn (the soak's)
	owner        string        // the lathe.owner label of this daemon's containers

	mu    sync.Mutex
	acks  []chaosAck
	ops   map[string]int // operations attempted, by kind
	found map[string]int // findings, by check
}

func (r *chaosRig) ack(kind, id string) {
	r.mu.Lock()
	r.acks = append(r.acks, chaosAck{kind, id})
	r.ops[kind+" acked"]++
	r.mu.Unlock()
}

func (r *chaosRig) op(kind string) {
	r.mu.Lock()
	r.ops[kind]++
	r.mu.Unlock()
}

func (r *chaosRig) finding(check, format string, args ...any) {
	r.t.Helper()
	r.mu.Lock()
	r.found[check]++
	r.mu.Unlock()
	r.t.Errorf(check+": "+format, args...)
}

// chaosScript answers Session turns (model m1) with a shell tool call that
// writes a file and then a text, Chats and Automation agent nodes (model
// m2) with a text that streams for a while, the asker (m3) with an MCP call
// and then a text, and Ways lanes (m4) with a streamed text, n times each.
func chaosScript(n int) fakellm.Script {
	var s fakellm.Script
	for i := range n {
		s.Turns = append(s.Turns,
			fakellm.Turn{Model: "m3", Steps: []fakellm.Step{
				fakellm.ToolCall(fmt.Sprintf("a%d", i), "mcp__t__echo", `{"text":"chaos"}`), fakellm.Usage(2, 1, 0)}},
			fakellm.Turn{Model: "m3", Steps: []fakellm.Step{fakellm.Text("asked"), fakellm.Usage(1, 1, 0)}},
			fakellm.Turn{Model: "m4", Steps: []fakellm.Step{fakellm.Text("lane, "), fakellm.Pause(100), fakellm.Text("done"), fakellm.Usage(1, 1, 0)}},
			fakellm.Turn{Model: "m4", Steps: []fakellm.Step{fakellm.Text("lane, "), fakellm.Pause(100), fakellm.Text("done"), fakellm.Usage(1, 1, 0)}},
			fakellm.Turn{Model: "m1", Steps: []fakellm.Step{
				fakellm.Text("writing"),
				fakellm.ToolCall(fmt.Sprintf("c%d", i), "shell", fmt.Sprintf(`{"command":"echo %d >> chaos.txt"}`, i)),
				fakellm.Usage(3, 2, 0),
			}},
			fakellm.Turn{Model: "m1", Steps: []fakellm.Step{fakellm.Text("written"), fakellm.Usage(2, 1, 0)}},
			fakellm.Turn{Model: "m2", Steps: []fakellm.Step{fakellm.Text("part one, "), fakellm.Pause(50), fakellm.Text("part two"), fakellm.Usage(1, 1, 0)}},
		)
	}
	return s
}

// newChaosRig starts a daemon whose sandboxes live in the containerd
// namespace ns: the chaos test shares turnProcNamespace with the other
// process tests, the soak has soakNamespace to itself (an hour in a shared
// namespace would hold its lock from every other process test).
func newChaosRig(t *testing.T, turns int, ns string) *chaosRig {
	cl := containerdtest.Namespace(t, ns)
	fake := fakellm.New(chaosScript(turns))
	t.Cleanup(fake.Close)
	// More Agents: writer (m2), asker (m3, whose MCP calls park for an
	// approval) and laner (m4, the Ways lanes'); and the MCP server.
	mcptest := filepath.Join(t.TempDir(), "lathe-mcptest")
	if out, err := exec.Command("go", "build", "-o", mcptest, "lathe/cmd/lathe-mcptest").CombinedOutput(); err != nil {
		t.Fatalf("build lathe-mcptest: %v\n%s", err, out)
	}
	cfg := turnProcConfig(t, fake, fmt.Sprintf(`  - {id: writer, name: Writer, provider: fake, model: m2}
  - {id: asker, name: Asker, provider: fake, model: m3}
  - {id: laner, name: Laner, provider: fake, model: m4}
mcp:
  servers:
    - {name: t, transport: stdio, command: %q, approval: always}
`, mcptest))
	if ns != turnProcNamespace {
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		from := []byte(fmt.Sprintf("namespace: %q", turnProcNamespace))
		if !bytes.Contains(b, from) {
			t.Fatalf("no %s in the config:\n%s", from, b)
		}
		b = bytes.Replace(b, from, []byte(fmt.Sprintf("namespace: %q", ns)), 1)
		if err := os.WriteFile(cfg, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	repo := func() string {
		dir, _ := filepath.EvalSymlinks(t.TempDir())
		for _, args := range [][]string{
			{"init", "-q", "-b", "main"},
			{"-c", "user.name=chaos", "-c", "user.email=chaos@example.invalid", "commit", "-q", "--allow-empty", "-m", "start"},
		} {
			if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		return dir
	}
	dir := repo()
	r := &chaosRig{t: t, cl: cl, cfg: cfg, data: t.TempDir(), dir: dir, ops: map[string]int{}, found: map[string]int{}}
	r.d = procStart(t, r.data, "--config", cfg)
	r.session = procCreate(t, r.d, dir, "")
	single := func(agent string) string {
		status, body := procDo(t, http.MethodPost, r.d.url+"/api/sessions",
			`{"working_dir":"`+repo()+`","name":"`+agent+`","mode":{"kind":"single_agent","agent_id":"`+agent+`"}}`)
		if status != 201 {
			t.Fatalf("create a %s session: %d %s", agent, status, body)
		}
		return idOf(t, body)
	}
	r.ways, r.asking = single("laner"), single("asker")
	for _, id := range r.sessions() {
		r.ack("session", id)
		if ss := procWait(t, r.d, id, "settled", procSettled); ss.Environment.State != events.EnvReady {
			t.Fatalf("session not ready: %+v", ss.Environment)
		}
	}
	for _, c := range r.containers() {
		if labels, _ := c.Labels(procContext(t, 10*time.Second)); labels["lathe.session"] == r.session {
			r.owner = labels["lathe.owner"]
		}
	}
	if r.owner == "" {
		t.Fatal("no container carries the Session's label")
	}
	automation := `{"id":"fan","name":"Fan","trigger":{"kind":"manual"},
	  "nodes":[{"id":"m","kind":"map","input":"{{trigger}}","body_node":"b"},
	           {"id":"b","kind":"tool","tool_id":"lathe__echo","input":"{\"text\": \"item\"}"},
	           {"id":"sum","kind":"agent","agent_id":"writer","input":"sum {{node:m}}"}],
	  "edges":[{"from":"m","to":"sum"}]}`
	if status, body := procDo(t, http.MethodPost, r.d.url+"/api/automations", automation); status != 201 {
		t.Fatalf("create automation: %d %s", status, body)
	}
	return r
}

// load runs the mixed load until ctx ends or the daemon goes away. Every
// worker stops at its first transport error.
func (r *chaosRig) load(ctx context.Context, cycle int) {
	var wg sync.WaitGroup
	wg.Go(func() { r.sessionTurns(ctx, cycle) })
	wg.Go(func() { r.chatTurns(ctx, cycle) })
	wg.Go(func() { r.automationRuns(ctx) })
	wg.Go(func() { r.waysSets(ctx) })
	wg.Go(func() { r.approvedTurns(ctx, cycle) })
	wg.Wait()
}

// sessions are the rig's three Sessions.
func (r *chaosRig) sessions() []string { return []string{r.session, r.ways, r.asking} }

// wait pauses for d; false when ctx ended.
func (r *chaosRig) wait(ctx context.Context, d time.Duration) bool {
	if d == 0 {
		return true
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// wsTurn sends one command on a fresh /ws connection and reads frames until
// done holds for one; accepted is called with each frame first.
func (r *chaosRig) wsTurn(ctx context.Context, cmd map[string]any, frame func(kind string, raw []byte) (done bool)) error {
	c, _, err := websocket.Dial(ctx, r.d.url+"/ws", nil)
	if err != nil {
		return err
	}
	defer c.CloseNow()
	c.SetReadLimit(4 << 20)
	b, _ := json.Marshal(cmd)
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		return err
	}
	for {
		_, raw, err := c.Read(ctx)
		if err != nil {
			return err
		}
		var f struct{ Kind string }
		if json.Unmarshal(raw, &f) == nil && frame(f.Kind, raw) {
			return nil
		}
	}
}

func (r *chaosRig) sessionTurns(ctx context.Context, cycle int) {
	for i := 0; ctx.Err() == nil; i++ {
		turn := fmt.Sprintf("k%d-t%d", cycle, i)
		r.op("session turn")
		done := false
		err := r.wsTurn(ctx, map[string]any{"cmd": "session", "id": r.session, "turn_id": turn, "input": "write", "target_agent": "coder"},
			func(kind string, raw []byte) bool {
				if kind == "error" {
					r.t.Logf("session turn %s: %s", turn, raw)
					return true
				}
				if !strings.Contains(string(raw), `"turn_id":"`+turn+`"`) {
					return false
				}
				if kind == "session-error" {
					r.t.Logf("session turn %s: %.300s", turn, raw)
				}
				switch kind {
				case "session-accepted":
					r.ack("session turn", turn)
				case "session-done", "session-error", "session-cancelled":
					done = kind == "session-done"
					return true
				}
				return false
			})
		if err != nil || !r.wait(ctx, 20*r.pace) {
			return
		}
		if !done {
			continue
		}
		r.op("git commit")
		status, body, err := post(ctx, http.DefaultClient, r.d.url+"/api/sessions/"+r.session+"/git/commit",
			fmt.Sprintf(`{"message":"chaos %s","stage_all":true}`, turn))
		if err != nil {
			return
		}
		var c events.GitCommitted
		if status/100 == 2 && json.Unmarshal(body, &c) == nil && c.Commit != "" {
			r.ack("git commit", c.Commit)
		}
	}
}

func (r *chaosRig) chatTurns(ctx context.Context, cycle int) {
	r.op("chat")
	status, body, err := post(ctx, http.DefaultClient, r.d.url+"/api/chat", fmt.Sprintf(`{"agent_id":"writer","name":"chaos %d"}`, cycle))
	if err != nil || status != 201 {
		return
	}
	var rec struct{ ID string }
	if json.Unmarshal(body, &rec) != nil || rec.ID == "" {
		return
	}
	r.ack("chat", rec.ID)
	for ctx.Err() == nil {
		r.op("chat turn")
		err := r.wsTurn(ctx, map[string]any{"cmd": "chat-turn", "chat_id": rec.ID, "content": "hello"},
			func(kind string, raw []byte) bool {
				if kind == "chat-start" {
					var f struct {
						TurnID string `json:"turn_id"`
					}
					_ = json.Unmarshal(raw, &f)
					r.ack("chat turn", f.TurnID)
				}
				return kind == "chat-done" || kind == "chat-error"
			})
		if err != nil || !r.wait(ctx, r.pace) {
			return
		}
	}
}

func (r *chaosRig) automationRuns(ctx context.Context) {
	for ctx.Err() == nil {
		r.op("automation run")
		status, body, err := post(ctx, http.DefaultClient, r.d.url+"/api/automations/fan/run", `{"input":"[\"a\",\"b\",\"c\"]"}`)
		if err != nil {
			return
		}
		var res struct {
			RunID string `json:"run_id"`
		}
		if status == 200 && json.Unmarshal(body, &res) == nil && res.RunID != "" {
			r.ack("automation run", res.RunID)
		}
		// Let the run get somewhere before the next one starts.
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// waysSets starts Ways sets of two lanes in the Ways Session, waits until
// its lanes have ended and discards it, over and over.
func (r *chaosRig) waysSets(ctx context.Context) {
	base := r.d.url + "/api/sessions/" + r.ways + "/variants"
	for ctx.Err() == nil {
		r.op("ways set")
		status, body, err := post(ctx, http.DefaultClient, base,
			`{"input":"try","lanes":[{"agent_id":"laner"},{"agent_id":"laner"}]}`)
		if err != nil {
			r.t.Logf("ways start: %v", err)
			return
		}
		var set struct {
			ID string `json:"attempt_set_id"`
		}
		if status != http.StatusAccepted || json.Unmarshal(body, &set) != nil || set.ID == "" {
			r.t.Logf("ways start: %d %.300s", status, body)
			if !r.wait(ctx, 300*time.Millisecond) {
				return
			}
			continue
		}
		r.ack("ways set", set.ID)
		r.mu.Lock()
		r.lastSet = set.ID
		r.mu.Unlock()
		for ctx.Err() == nil { // until both lanes ended
			status, body, err := get(ctx, base+"/status?attempt_set_id="+set.ID)
			if err != nil {
				return
			}
			if status == 200 && strings.Count(string(body), `"state":"running"`)+strings.Count(string(body), `"state":"queued"`) == 0 {
				break
			}
			if !r.wait(ctx, 100*time.Millisecond) {
				return
			}
		}
		r.op("ways discard")
		if status, body, err := post(ctx, http.DefaultClient, base+"/discard", `{"attempt_set_id":"`+set.ID+`"}`); err != nil {
			return
		} else if status == 200 {
			r.ack("ways discard", set.ID)
		} else {
			r.t.Logf("ways discard: %d %.300s", status, body)
		}
	}
}

// discardSet discards the newest Ways set if the kill left it open (its
// lanes ended by the restart), as a user would before starting another; a
// failure, a timeout included, is a finding. (A shim left opening an exec's
// stdout FIFO by the kill used to hold a lane's removal for 30 s, until
// the driver's start-up sweep: runtime/sandbox/containerd/leftovers.go.)
func (r *chaosRig) discardSet() {
	r.mu.Lock()
	set := r.lastSet
	r.mu.Unlock()
	if set == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status, body, err := post(ctx, http.DefaultClient, r.d.url+"/api/sessions/"+r.ways+"/variants/discard", `{"attempt_set_id":"`+set+`"}`)
	switch {
	case err != nil:
		r.t.Fatalf("discard the open Ways set: %v", err)
	case status == 200:
		r.op("ways set discarded after the restart")
	case status == http.StatusConflict: // it was settled before the kill
	default:
		r.finding("ended", "discard of Ways set %s after the restart: %d %s", set, status, body)
	}
}

// approvedTurns runs turns in the asking Session whose MCP call parks until
// the driver allows it on /ws.
func (r *chaosRig) approvedTurns(ctx context.Context, cycle int) {
	for i := 0; ctx.Err() == nil; i++ {
		turn := fmt.Sprintf("k%d-a%d", cycle, i)
		r.op("approval turn")
		c, _, err := websocket.Dial(ctx, r.d.url+"/ws", nil)
		if err != nil {
			return
		}
		c.SetReadLimit(4 << 20)
		send := func(cmd map[string]any) error {
			b, _ := json.Marshal(cmd)
			return c.Write(ctx, websocket.MessageText, b)
		}
		err = send(map[string]any{"cmd": "session", "id": r.asking, "turn_id": turn, "input": "ask"})
		for err == nil {
			var raw []byte
			if _, raw, err = c.Read(ctx); err != nil {
				break
			}
			var f struct {
				Kind       string `json:"kind"`
				TurnID     string `json:"turn_id"`
				ApprovalID string `json:"approval_id"`
			}
			if json.Unmarshal(raw, &f) != nil {
				continue
			}
			if f.Kind == "mcp-approval-required" && f.ApprovalID != "" && strings.Contains(string(raw), turn) {
				r.ack("approval", f.ApprovalID)
				err = send(map[string]any{"cmd": "mcp-approve", "approval_id": f.ApprovalID, "decision": "allow", "persist": "once"})
			}
			if f.Kind == "error" {
				r.t.Logf("approval turn %s: %.300s", turn, raw)
				break
			}
			if f.TurnID == turn && (f.Kind == "session-done" || f.Kind == "session-error" || f.Kind == "session-cancelled") {
				if f.Kind == "session-error" {
					r.t.Logf("approval turn %s: %.300s", turn, raw)
				}
				break
			}
		}
		c.CloseNow()
		if err != nil || !r.wait(ctx, max(20*r.pace, 50*time.Millisecond)) {
			return
		}
	}
}

// chaosJournal indexes the journal feed.
type chaosJournal struct {
	events    int
	ids       map[string]bool   // aggregate IDs, turn IDs and commits seen
	begun     map[string]string // turn or run ID -> kind, for each begun one
	terminals map[string]int    // turn or run ID -> terminal records
	began     map[string]time.Time
	ended     map[string]time.Time
}

func (r *chaosRig) readJournal() chaosJournal {
	r.t.Helper()
	j := chaosJournal{ids: map[string]bool{}, begun: map[string]string{}, terminals: map[string]int{},
		began: map[string]time.Time{}, ended: map[string]time.Time{}}
	// The feed comes in pages: read until one is empty.
	for after, more := uint64(0), true; more; {
		status, body := procDo(r.t, http.MethodGet, fmt.Sprintf("%s/api/events/journal?after=%d&limit=100000", r.d.url, after), "")
		if status != 200 {
			r.t.Fatalf("journal feed: %d", status)
		}
		more = len(body) > 0
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			env, err := journal.DecodeEnvelope(sc.Bytes())
			if err != nil {
				r.t.Fatalf("feed line: %v", err)
			}
			after = env.Seq
			j.add(env)
		}
	}
	return j
}

// add indexes one event.
func (j *chaosJournal) add(env journal.Envelope) {
	j.events++
	j.ids[env.AggregateID] = true
	var p struct {
		TurnID string `json:"turn_id"`
		Commit string `json:"commit"`
		Run    string `json:"run"` // a Ways lane's
	}
	_ = json.Unmarshal(env.Data, &p)
	if p.TurnID != "" {
		j.ids[p.TurnID] = true
	}
	if p.Commit != "" {
		j.ids[p.Commit] = true
	}
	id := p.TurnID
	switch {
	case strings.HasPrefix(env.Type, "automation-run-") || strings.HasPrefix(env.Type, "approval-"):
		id = env.AggregateID
	case strings.HasPrefix(env.Type, "lane-"):
		id = p.Run
	}
	switch env.Type {
	case "turn-accepted", "chat-turn-started", "automation-run-started", "lane-started", "approval-requested":
		j.begun[id] = map[string]string{"turn-accepted": "session turn", "chat-turn-started": "chat turn",
			"automation-run-started": "automation run", "lane-started": "ways lane", "approval-requested": "approval"}[env.Type]
		j.began[id] = env.At
	case "turn-done", "turn-failed", "turn-cancelled", "chat-turn-ended", "automation-run-finished", "lane-ended", "approval-resolved":
		j.terminals[id]++
		j.ended[id] = env.At
	}
}

// settle waits until every begun turn and run has ended and the Session's
// environment is settled, and returns the journal then.
func (r *chaosRig) settle() chaosJournal {
	r.t.Helper()
	var j chaosJournal
	open := 0
	_, err := polltest.Poll(func() error {
		j, open = r.readJournal(), 0
		for id := range j.begun {
			if j.terminals[id] == 0 {
				open++
			}
		}
		if open > 0 {
			return errors.New("still open")
		}
		for _, id := range r.sessions() {
			if !procSettled(procSession(r.t, r.d, id)) {
				return errors.New("still open")
			}
		}
		return nil
	}, polltest.Within(60*time.Second), polltest.Every(200*time.Millisecond))
	if err != nil {
		r.finding("ended", "%d turns or runs still open 60s after the restart", open)
	}
	return j
}

// check runs the checks that follow a restart on a settled daemon.
func (r *chaosRig) check(j chaosJournal) {
	r.t.Helper()
	r.mu.Lock()
	acks := append([]chaosAck(nil), r.acks...)
	r.mu.Unlock()
	for _, a := range acks {
		if !j.ids[a.id] {
			r.finding("acknowledged", "%s %s is not in the journal", a.kind, a.id)
		}
		if a.kind == "git commit" {
			if err := exec.Command("git", "-C", r.dir, "cat-file", "-e", a.id+"^{commit}").Run(); err != nil {
				r.finding("acknowledged", "commit %s is not in the repository: %v", a.id, err)
			}
		}
	}
	for id, kind := range j.begun {
		if n := j.terminals[id]; n != 1 {
			r.finding("ended once", "%s %s has %d terminal records", kind, id, n)
		}
	}
	// Containers: one sandbox per open Session, none of a lane (the set is
	// discarded) or of anything else.
	per := map[string]int{}
	for _, c := range r.containers() {
		labels, _ := c.Labels(procContext(r.t, 10*time.Second))
		if s := labels["lathe.session"]; slices.Contains(r.sessions(), s) {
			per[s]++
		} else {
			r.finding("leaks", "container %s (labels %v) belongs to no open Session", c.ID(), labels)
		}
	}
	for s, n := range per {
		if n > 1 {
			r.finding("leaks", "%d containers for Session %s", n, s)
		}
	}
	if m := procMounts(r.t, r.data); len(m) > 0 {
		r.finding("leaks", "mounts under the data dir: %v", m)
	}
	for _, sub := range []string{"tmp", "trash"} {
		if es, _ := os.ReadDir(filepath.Join(r.data, sub)); len(es) > 0 {
			r.finding("leaks", "%d entries left in %s/", len(es), sub)
		}
	}
}

// containers lists the containers of this daemon (by its owner label, once
// known) in the chaos namespace.
func (r *chaosRig) containers() []client.Container {
	r.t.Helper()
	filter := []string{}
	if r.owner != "" {
		filter = append(filter, "labels.\"lathe.owner\"=="+r.owner)
	}
	cs, err := r.cl.Containers(procContext(r.t, 10*time.Second), filter...)
	if err != nil {
		r.t.Fatal(err)
	}
	return cs
}

// leftovers checks what the kills left in containerd besides containers:
// the last start cleared the previous processes' exec FIFOs and leases.
func (r *chaosRig) leftovers() {
	r.t.Helper()
	if dirs, err := os.ReadDir(containerd.FIFOFolder(r.owner)); len(dirs) > 1 {
		r.finding("leaks", "exec FIFO folders of %d processes: %v", len(dirs), err)
	}
	ls, err := r.cl.LeasesService().List(procContext(r.t, 10*time.Second), `labels."lathe.owner"==`+strconv.Quote(r.owner))
	if err != nil {
		r.t.Fatal(err)
	}
	procs := map[string]bool{}
	for _, l := range ls {
		procs[l.Labels["lathe.process"]] = true
	}
	if len(procs) > 1 {
		r.finding("leaks", "leases of %d processes", len(procs))
	}
}

// readModels returns the JSON of every list route.
func (r *chaosRig) readModels() map[string]string {
	r.t.Helper()
	out := map[string]string{}
	for _, path := range []string{"/api/sessions", "/api/workspaces", "/api/automations", "/api/chat",
		"/api/sessions/" + r.session + "/turns", "/api/sessions/" + r.asking + "/turns", "/api/automations/fan/runs"} {
		status, body := procDo(r.t, http.MethodGet, r.d.url+path, "")
		if status != 200 {
			r.t.Fatalf("GET %s: %d %s", path, status, body)
		}
		out[path] = string(body)
	}
	return out
}

func (r *chaosRig) verify() {
	r.t.Helper()
	if code, out, verr := runLathe(r.t, "journal", "verify", "--data", r.data); code != 0 || !strings.HasPrefix(out, "ok ") {
		r.finding("journal verify", "exit %d\n%s%s", code, out, verr)
	}
}

// cycle runs the load, kills the daemon at a random moment, and checks the
// restarted daemon against a full replay.
func (r *chaosRig) cycle(n int, rng *rand.Rand) time.Duration {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { r.load(ctx, n); close(done) }()
	after := *chaosWindow/10 + time.Duration(rng.Int64N(int64(*chaosWindow*9/10)))
	<-time.After(after) // the random moment of the kill
	killed := time.Now()
	r.d.kill(r.t)
	cancel()
	<-done
	r.verify()

	// A restart from the checkpoint (if one was written) and the tail.
	restarted := time.Now()
	r.d = procStart(r.t, r.data, "--config", r.cfg)
	r.discardSet()
	j := r.settle()
	r.t.Logf("cycle %d: settled %v after the restart", n, time.Since(restarted).Round(time.Millisecond))
	r.check(j)
	for id, kind := range j.begun { // what the kill interrupted
		if j.began[id].Before(killed) && j.ended[id].After(killed) {
			r.op(kind + " interrupted, ended after the restart")
		}
	}
	restored := r.readModels()
	r.d.kill(r.t)

	// A full replay of the same journal.
	if err := os.Remove(filepath.Join(r.data, "projections.checkpoint")); err != nil && !os.IsNotExist(err) {
		r.t.Fatal(err)
	}
	r.d = procStart(r.t, r.data, "--config", r.cfg)
	j2 := r.settle()
	replayed := r.readModels()
	if j2.events != j.events {
		r.op("replay compare skipped (start appended)")
		r.t.Logf("cycle %d: the second start appended %d events; read models not compared", n, j2.events-j.events)
	} else {
		for path, want := range restored {
			if replayed[path] != want {
				r.finding("replay", "cycle %d: %s after the crash restart differs from a full replay:\nrestart %.400s\nreplay  %.400s", n, path, want, replayed[path])
			}
		}
		r.op("replay compared")
	}
	return after
}

func (r *chaosRig) table(kills int, took time.Duration) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: %d SIGKILLs in %v\n%-50s %8s\n", kills, took.Round(time.Second), "operation", "count")
	for _, k := range sortedKeys(r.ops) {
		fmt.Fprintf(&b, "%-50s %8d\n", k, r.ops[k])
	}
	fmt.Fprintf(&b, "%-50s %8s\n", "check", "findings")
	for _, k := range []string{"journal verify", "acknowledged", "ended once", "ended", "leaks", "replay"} {
		fmt.Fprintf(&b, "%-50s %8d\n", k, r.found[k])
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestChaosKill9 is the chaos driver: -chaos.kills SIGKILLs under load.
func TestChaosKill9(t *testing.T) {
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 23))
	r := newChaosRig(t, 200**chaosKills+200, turnProcNamespace)
	start := time.Now()
	for n := range *chaosKills {
		r.cycle(n, rng)
		if t.Failed() {
			break
		}
	}
	took := time.Since(start)
	// The end: the Sessions' deletes leave no container behind.
	began := time.Now()
	r.discardSet()
	for _, id := range r.sessions() {
		if status, body := procDoLong(t, http.MethodDelete, r.d.url+"/api/sessions/"+id+"?force=true", ""); status != 200 {
			r.finding("leaks", "force delete: %d %s", status, body)
		}
	}
	t.Logf("the final delete took %v", time.Since(began).Round(time.Millisecond))
	if cs := r.containers(); len(cs) != 0 {
		r.finding("leaks", "%d containers after the Session's delete", len(cs))
	}
	r.leftovers()
	fmt.Print(r.table(*chaosKills, took))
}
