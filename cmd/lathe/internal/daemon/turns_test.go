package daemon

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/cmd/lathe/internal/config"
	"lathe/projections"
	"lathe/runtime/git/gittest"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/containerd/containerdtest"

	"github.com/containerd/containerd/v2/client"
)

const turnNamespace = "lathe-test-turns"

// turnFrame is the part of a /ws frame the turn tests look at.
type turnFrame struct {
	Kind            string          `json:"kind"`
	Session         string          `json:"session"`
	Workflow        string          `json:"workflow"`
	Agent           string          `json:"agent"`
	TurnID          string          `json:"turn_id"`
	Delta           string          `json:"delta"`
	CallID          string          `json:"call_id"`
	Occurrence      int             `json:"occurrence"`
	Name            string          `json:"name"`
	Phase           string          `json:"phase"`
	Arguments       json.RawMessage `json:"arguments"`
	Result          *string         `json:"result"`
	IsError         bool            `json:"is_error"`
	Error           string          `json:"error"`
	Output          string          `json:"output"`
	InputTokens     *int            `json:"input_tokens"`
	OutputTokens    *int            `json:"output_tokens"`
	ReasoningTokens *int            `json:"reasoning_tokens"`
	TokenUsageKnown *bool           `json:"token_usage_known"`
	Budget          string          `json:"budget"`
	Interrupted     bool            `json:"interrupted"`
	Rejected        bool            `json:"rejected"`
	StopReason      string          `json:"stop_reason"`
	// An approval frame's (mcp-approval-required).
	ApprovalID  string `json:"approval_id"`
	Server      string `json:"server"`
	ToolDisplay string `json:"tool_display"`
}

func (f turnFrame) terminal() bool {
	return f.Kind == "session-done" || f.Kind == "session-cancelled" || f.Kind == "session-error"
}

// line renders a frame for the golden sequence: stable fields only.
func (f turnFrame) line() string {
	switch f.Kind {
	case "token", "reasoning":
		return fmt.Sprintf("%s agent=%s %q", f.Kind, f.Agent, f.Delta)
	case "tool-call":
		s := fmt.Sprintf("tool-call %s %s#%d %s", f.Phase, f.CallID, f.Occurrence, f.Name)
		if f.Phase == "start" {
			return s + " " + string(f.Arguments)
		}
		return fmt.Sprintf("%s error=%v %q", s, f.IsError, *f.Result)
	case "session-done", "session-cancelled", "session-error":
		known := "?"
		if f.TokenUsageKnown != nil {
			known = fmt.Sprint(*f.TokenUsageKnown)
		}
		s := fmt.Sprintf("%s tokens=%d/%d/%d known=%s", f.Kind, deref(f.InputTokens), deref(f.OutputTokens), deref(f.ReasoningTokens), known)
		if f.Output != "" {
			s += fmt.Sprintf(" output=%q", f.Output)
		}
		if f.Error != "" {
			s += fmt.Sprintf(" error=%q", f.Error)
		}
		return s
	}
	return f.Kind
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// goldenLines renders the frames of a turn of Session id for a golden
// sequence. Adjacent deltas of one kind may arrive merged (the daemon
// coalesces a backlog), so the golden sequence holds them merged.
func goldenLines(t testing.TB, id string, frames []turnFrame) []string {
	t.Helper()
	var lines []string
	var kept []turnFrame
	for _, f := range frames {
		if n := len(kept); n > 0 && (f.Kind == "token" || f.Kind == "reasoning") && kept[n-1].Kind == f.Kind {
			kept[n-1].Delta += f.Delta
			lines[n-1] = kept[n-1].line()
			continue
		}
		kept = append(kept, f)
		if f.Kind != "token" && f.Kind != "reasoning" && f.Session != "" && f.Session != id {
			t.Errorf("frame %s names session %q", f.Kind, f.Session)
		}
		lines = append(lines, f.line())
	}
	return lines
}

// turnConn is a /ws connection that sorts frames by turn.
type turnConn struct {
	c    *websocket.Conn
	snap projections.Snapshot
}

// runDone runs turn in session id on tc and requires it to end done.
func (tc *turnConn) runDone(t *testing.T, id, turn, input string) {
	t.Helper()
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": turn, "input": input})
	if f := tc.terminal(t, turn); f[len(f)-1].Kind != "session-done" {
		t.Fatalf("turn %s: %+v", turn, f[len(f)-1])
	}
}

// commitBase makes dir a Git repository whose first commit holds files.
func commitBase(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "base")
}

func openTurnConn(t testing.TB, r *turnRig) *turnConn {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	c := dialWS(t, ctx, r.srv, nil)
	expectFrame(t, ctx, c, "ready")
	tc := &turnConn{c: c}
	if err := json.Unmarshal(expectFrame(t, ctx, c, "snapshot"), &tc.snap); err != nil {
		t.Fatal(err)
	}
	return tc
}

func (tc *turnConn) send(t testing.TB, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeText(t, testContext(t, 5*time.Second), tc.c, string(b))
}

// until reads frames of turn (other turns' and event frames are skipped)
// until stop returns true for one; it returns them all.
func (tc *turnConn) until(t *testing.T, turn string, stop func(turnFrame) bool) []turnFrame {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	var got []turnFrame
	for {
		kind, raw := readFrame(t, ctx, tc.c)
		if kind == "event" || strings.HasPrefix(kind, "session-environment") {
			continue // their "session" is a record, not an ID
		}
		var f turnFrame
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		if f.TurnID != turn {
			continue
		}
		got = append(got, f)
		if stop(f) {
			return got
		}
	}
}

func (tc *turnConn) terminal(t *testing.T, turn string) []turnFrame {
	t.Helper()
	return tc.until(t, turn, turnFrame.terminal)
}

type turnRig struct {
	*envRig
	llm    *fakellm.Server
	daemon *Daemon
}

// turnScript is what the scripted model answers, request by request, in
// the order the subtests send their turns.
func turnDaemon(t testing.TB, kind string, script fakellm.Script, mutate func(*config.Config), opts ...Option) *turnRig {
	t.Helper()
	return turnDaemonIn(t, turnNamespace, kind, script, mutate, opts...)
}

// turnDaemonIn is turnDaemon with its sandboxes in containerd namespace ns.
func turnDaemonIn(t testing.TB, ns, kind string, script fakellm.Script, mutate func(*config.Config), opts ...Option) *turnRig {
	t.Helper()
	cl := containerdtest.Namespace(t, ns)
	return newTurnRig(t, ns, cl, kind, script, mutate, opts...)
}

// remoteTurnDaemon is turnDaemonIn on the remote provider at host (the
// template lathe.local/sandbox:bookworm), with no containerd: its test
// also runs as an ordinary user who cannot reach containerd (make
// test-podman, on rootless Podman).
func remoteTurnDaemon(t testing.TB, host string, script fakellm.Script) *turnRig {
	t.Helper()
	return newTurnRig(t, "lathe-test-remote", nil, config.KindOpenAI, script, func(c *config.Config) {
		c.Sandbox.Provider = config.SandboxRemote
		c.Sandbox.Remote.Host = host
		c.Sandbox.Remote.Template = "lathe.local/sandbox:bookworm"
	})
}

func newTurnRig(t testing.TB, ns string, cl *client.Client, kind string, script fakellm.Script, mutate func(*config.Config), opts ...Option) *turnRig {
	t.Helper()
	fake := fakellm.New(script)
	t.Cleanup(fake.Close)
	t.Setenv(testRuntimeKeyEnv, "k")
	d, srv := newSandboxDaemon(t, ns, func(c *config.Config) {
		base := fake.URL()
		if kind == config.KindOpenAI {
			base += "/v1"
		}
		c.Providers = map[string]config.Provider{"fake": {Kind: kind, BaseURL: base, APIKeyEnv: testRuntimeKeyEnv}}
		c.Agents = []config.Agent{
			{ID: "coder", Name: "Coder", Provider: "fake", Model: "m1", Prompt: "you code"},
			{ID: "tight", Name: "Tight", Provider: "fake", Model: "m1", Budget: config.Budget{MaxOutputTokens: 10}},
			{ID: "pricey", Name: "Pricey", Provider: "fake", Model: "m1", Budget: config.Budget{MaxUSD: 0.05}},
		}
		c.Prices = map[string]config.Price{"fake/m1": {Input: 1, Output: 2}}
		if mutate != nil {
			mutate(c)
		}
	}, opts...)
	return &turnRig{envRig: newEnvRig(t, srv, cl), llm: fake, daemon: d}
}

// TestSessionTurnToolLoop runs one coding turn end to end on each streaming
// protocol: the model writes a file and runs a command in the sandbox, and
// the frames are compared with a golden sequence.
func TestSessionTurnToolLoop(t *testing.T) {
	for _, kind := range []string{config.KindOpenAI, config.KindAnthropic} {
		t.Run(kind, func(t *testing.T) { testSessionTurnToolLoop(t, kind) })
	}
}

func testSessionTurnToolLoop(t *testing.T, kind string) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.Reasoning("plan: write, then check"),
			fakellm.Text("Writing "),
			fakellm.Text("the file."),
			fakellm.ToolCall("call_1", "write_file", `{"path":"notes/hello.txt",`, `"content":"hi from the agent\n"}`),
			fakellm.Usage(100, 20, 5),
		}},
		{Steps: []fakellm.Step{
			fakellm.ToolCall("call_1", "shell", `{"command":"cat notes/hello.txt && ls notes"}`), // a reused call ID
			fakellm.Usage(150, 10, 0),
		}},
		{Steps: []fakellm.Step{fakellm.Text("Done: the file says hi."), fakellm.Usage(200, 8, 0)}},
	}}
	r := turnDaemon(t, kind, script, nil)
	id := r.create(t, "").ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "t-1", "input": "write hello", "display_input": "write hello (typed)"})
	frames := tc.terminal(t, "t-1")

	lines := goldenLines(t, id, frames)
	checkGolden(t, "turn_tool_loop_"+kind+".golden", strings.Join(lines, "\n")+"\n")

	// The tools ran in the sandbox, on the Workspace checkout.
	b, err := os.ReadFile(filepath.Join(r.dir, "notes", "hello.txt"))
	if err != nil || string(b) != "hi from the agent\n" {
		t.Errorf("notes/hello.txt = %q, %v", b, err)
	}
	// The journal keeps the turn's decisions, never one event per token.
	evs := r.events(t, id)
	turnEvents := slices.DeleteFunc(slices.Clone(evs), func(e string) bool {
		return !strings.HasPrefix(e, "turn-") && !strings.HasPrefix(e, "tool-call-")
	})
	wantEvents := []string{"turn-accepted", "turn-started", "turn-output", "turn-usage", "tool-call-started", "tool-call-finished",
		"turn-output", "turn-usage", "tool-call-started", "tool-call-finished", "turn-output", "turn-usage", "turn-done"}
	if !slices.Equal(turnEvents, wantEvents) {
		t.Errorf("journaled turn events %v,\nwant %v", turnEvents, wantEvents)
	}
	// The second request carried the tool result back with the history.
	reqs := r.llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model requests %d, want 3", len(reqs))
	}
	if !strings.Contains(string(reqs[2].Body), `hi from the agent\nhello.txt`) || !strings.Contains(string(reqs[0].Body), `"tools"`) {
		t.Errorf("the last request lacks the shell result or the first lacks tools: %s", reqs[2].Body)
	}

	// A repeat of the finished identity answers the same outcome, runs nothing.
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "t-1", "input": "write hello"})
	again := tc.terminal(t, "t-1")
	if len(again) != 2 || again[0].Kind != "session-accepted" || again[1].line() != frames[len(frames)-1].line() {
		t.Errorf("repeat of a finished turn: %v", again)
	}
	if n := len(r.llm.Requests()); n != 3 {
		t.Errorf("the repeat reached the model: %d requests", n)
	}
	// Stop of a finished turn is rejected, and is not terminal.
	tc.send(t, map[string]any{"cmd": "session-stop", "id": id, "turn_id": "t-1"})
	if f := tc.until(t, "t-1", func(turnFrame) bool { return true }); f[0].Kind != "session-stop-rejected" || f[0].Error == "" {
		t.Errorf("stop of a finished turn: %+v", f[0])
	}
	// The durable turn record.
	var turn projections.Turn
	if resp := r.do(t, get, "/api/sessions/"+id+"/turns/t-1", ""); resp.status != 200 || json.Unmarshal(resp.body, &turn) != nil {
		t.Fatalf("GET turn: %d %s", resp.status, resp.body)
	}
	if turn.Status != projections.TurnDone || turn.Output.String() != "Done: the file says hi." || len(turn.ToolCalls) != 2 ||
		turn.ToolCalls[1].Occurrence != 2 || turn.Usage.InputTokens != 450 || !turn.Usage.TokenUsageKnown ||
		!turn.Usage.CostKnown || turn.Usage.CostUSD <= 0 {
		t.Errorf("turn record: %+v", turn)
	}
}

func TestSessionTurnFaults(t *testing.T) {
	release, resume := make(chan struct{}), make(chan struct{})
	script := fakellm.Script{Turns: []fakellm.Turn{
		// stop: a stalled stream is abandoned at once
		{Steps: []fakellm.Step{fakellm.Text("thinking about it"), fakellm.Stall(nil)}},
		// reattach: a second client joins mid-stream
		{Steps: []fakellm.Step{fakellm.Text("first half, "), fakellm.Stall(release), fakellm.Text("second half"), fakellm.Usage(10, 4, 0)}},
		// drop: the provider breaks off mid-stream
		{Steps: []fakellm.Step{fakellm.Text("partial "), fakellm.Usage(7, 2, 0), fakellm.Drop()}},
		// budget: Agent "tight" allows 10 output tokens
		{Steps: []fakellm.Step{fakellm.Text("far too long"), fakellm.Usage(5, 50, 0)}},
		// budget in USD: Agent "pricey" allows 0.05 USD; 100k input tokens at 1 USD/M cost 0.1
		{Steps: []fakellm.Step{fakellm.Text("expensive"), fakellm.Usage(100_000, 1, 0)}},
		// execute
		{Steps: []fakellm.Step{fakellm.Text("executed"), fakellm.Usage(3, 1, 0)}},
		// stall: the provider goes silent past turns.stall_timeout_seconds
		{Steps: []fakellm.Step{fakellm.Text("and then"), fakellm.Stall(nil)}},
		// malformed: the provider sends broken JSON after paid usage
		{Steps: []fakellm.Step{fakellm.Text("so far "), fakellm.Malformed()}},
		// disconnect: the client goes away mid-turn; the turn goes on
		{Steps: []fakellm.Step{fakellm.Text("still "), fakellm.Stall(resume), fakellm.Text("here"), fakellm.Usage(1, 2, 0)}},
		// attachments: two turns that use them
		{Steps: []fakellm.Step{fakellm.Text("read them"), fakellm.Usage(1, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("read it again"), fakellm.Usage(1, 1, 0)}},
	}}
	r := turnDaemon(t, config.KindOpenAI, script, func(c *config.Config) { c.Turns.StallTimeoutSeconds = 1 })
	id := r.create(t, "").ID
	r.ready(t, id)
	tc := openTurnConn(t, r)

	t.Run("stop", func(t *testing.T) {
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "stop-me", "input": "go"})
		tc.until(t, "stop-me", func(f turnFrame) bool { return f.Kind == "token" })
		// Another turn while this one runs is refused, without a trace.
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "intruder", "input": "me too"})
		if f := tc.terminal(t, "intruder"); f[0].Kind != "session-error" || !f[0].Rejected {
			t.Errorf("second turn: %+v", f)
		}
		if resp := r.do(t, put, "/api/sessions/"+id+"/environment", `{"setup_reviewed":true}`); resp.status != 409 {
			t.Errorf("environment change during a turn: %d %s", resp.status, resp.body)
		}
		tc.send(t, map[string]any{"cmd": "session-stop", "id": id, "turn_id": "stop-me"})
		f := tc.terminal(t, "stop-me")
		if last := f[len(f)-1]; last.Kind != "session-cancelled" || last.TokenUsageKnown == nil || *last.TokenUsageKnown {
			t.Errorf("stop: %+v, want session-cancelled with usage marked a subtotal", last)
		}
		if resp := r.do(t, get, "/api/sessions/"+id+"/turns/intruder", ""); resp.status != 404 {
			t.Errorf("the refused turn left a record: %d", resp.status)
		}
	})

	t.Run("reattach", func(t *testing.T) {
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "long", "idempotency_key": "k-long", "input": "go"})
		tc.until(t, "long", func(f turnFrame) bool { return f.Kind == "token" })
		late := openTurnConn(t, r)
		var run *projections.Run
		for i := range late.snap.Runs {
			if late.snap.Runs[i].TurnID == "long" {
				run = &late.snap.Runs[i]
			}
		}
		if run == nil || run.Kind != "session" || run.Workflow != id || len(run.Agents) != 1 || run.Agents[0].Text != "first half, " {
			t.Fatalf("snapshot runs %+v, want the live turn with its buffer", late.snap.Runs)
		}
		// A repeat of the running identity (by idempotency key) reattaches.
		late.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "other-id", "idempotency_key": "k-long", "input": "go"})
		if f := late.until(t, "long", func(turnFrame) bool { return true }); f[0].Kind != "session-accepted" {
			t.Errorf("reattach: %+v", f[0])
		}
		close(release)
		rest := late.terminal(t, "long")
		var text strings.Builder
		for _, f := range rest {
			if f.Kind == "token" {
				text.WriteString(f.Delta)
			}
		}
		if text.String() != "second half" || rest[len(rest)-1].Kind != "session-done" {
			t.Errorf("after the snapshot: %q then %s, want exactly the rest", text.String(), rest[len(rest)-1].Kind)
		}
		if n := len(r.llm.Requests()); n != 2 {
			t.Errorf("model requests %d, want 2 (the reattach ran nothing)", n)
		}
	})

	t.Run("drop", func(t *testing.T) {
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "dropped", "input": "go"})
		f := tc.terminal(t, "dropped")
		last := f[len(f)-1]
		if last.Kind != "session-error" || last.TokenUsageKnown == nil || *last.TokenUsageKnown || last.Error == "" {
			t.Errorf("drop: %+v", last)
		}
	})

	t.Run("budget", func(t *testing.T) {
		tight := r.create(t, `"mode":{"kind":"single_agent","agent_id":"tight"}`).ID
		r.ready(t, tight)
		tc.send(t, map[string]any{"cmd": "session", "id": tight, "turn_id": "b", "input": "go"})
		f := tc.terminal(t, "b")
		if last := f[len(f)-1]; last.Kind != "session-error" || last.Budget != "max_output_tokens" || !strings.Contains(last.Error, "max_output_tokens") || deref(last.OutputTokens) != 50 {
			t.Errorf("budget: %+v", last)
		}
	})

	t.Run("budget-usd", func(t *testing.T) {
		pricey := r.create(t, `"mode":{"kind":"single_agent","agent_id":"pricey"}`).ID
		r.ready(t, pricey)
		tc.send(t, map[string]any{"cmd": "session", "id": pricey, "turn_id": "usd", "input": "go"})
		f := tc.terminal(t, "usd")
		if last := f[len(f)-1]; last.Kind != "session-error" || last.Budget != "max_usd" || deref(last.InputTokens) != 100_000 {
			t.Errorf("USD budget: %+v", last)
		}
	})

	t.Run("execute", func(t *testing.T) {
		resp := r.do(t, post, "/api/sessions/"+id+"/execute", `{"input":"run it","stateless":true}`)
		var body executeJSON
		if resp.status != 200 || json.Unmarshal(resp.body, &body) != nil || body.Output != "executed" || body.Status != "done" || body.tokens() != "3/1/0/4/true" {
			t.Errorf("execute: %d %s", resp.status, resp.body)
		}
	})

	t.Run("stall", func(t *testing.T) {
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "silent", "input": "go"})
		f := tc.terminal(t, "silent")
		if last := f[len(f)-1]; last.Kind != "session-error" || !strings.Contains(last.Error, "sent nothing for 1s") {
			t.Errorf("stall: %+v", last)
		}
	})

	t.Run("malformed", func(t *testing.T) {
		tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "garbled", "input": "go"})
		f := tc.terminal(t, "garbled")
		if last := f[len(f)-1]; last.Kind != "session-error" || last.TokenUsageKnown == nil || *last.TokenUsageKnown || !strings.Contains(last.Error, "malformed") {
			t.Errorf("malformed stream: %+v", last)
		}
	})

	t.Run("disconnect", func(t *testing.T) {
		gone := openTurnConn(t, r)
		gone.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "orphan", "input": "go"})
		gone.until(t, "orphan", func(f turnFrame) bool { return f.Kind == "token" })
		gone.c.CloseNow()
		close(resume)
		f := tc.terminal(t, "orphan")
		if last := f[len(f)-1]; last.Kind != "session-done" || last.Output != "still here" {
			t.Errorf("a turn whose client went away: %+v", last)
		}
	})

	t.Run("attachments", func(t *testing.T) {
		base := "/api/sessions/" + id + "/attachments"
		ref := func(name, scope, body string) string {
			r := expectStatus(t, upload(t, r.srv, base+"?scope="+scope, filePart{field: "file", filename: name, contentType: "text/plain", body: body}), 201)
			return str(t, r.body, "reference_id")
		}
		once, always, gone := ref("once.txt", "this_turn", "ONCE-TEXT"), ref("always.txt", "session", "ALWAYS-TEXT"), ref("gone.txt", "this_turn", "x")
		expectStatus(t, r.do(t, del, base+"/"+gone, ""), 200)
		send := func(turn string, refs ...string) turnFrame {
			t.Helper()
			tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": turn, "input": "use the files", "reference_ids": refs})
			f := tc.terminal(t, turn)
			return f[len(f)-1]
		}
		before := len(r.llm.Requests())
		for _, c := range []struct {
			name, turn, want string
			refs             []string
		}{
			{"named twice", "a-twice", "twice", []string{once, once}},
			{"unknown", "a-unknown", "not found", []string{once, unknownID}},
			{"deleted", "a-deleted", "deleted", []string{gone}},
		} {
			if f := send(c.turn, c.refs...); !f.Rejected || !strings.Contains(f.Error, c.want) {
				t.Errorf("%s: %+v, want a refusal naming %q", c.name, f, c.want)
			}
		}
		if f := send("a-1", once, always); f.Kind != "session-done" {
			t.Fatalf("turn with attachments: %+v", f)
		}
		// The model got both texts; the one-turn relation is now consumed, the
		// session one pinned by the turn and still offered.
		reqs := r.llm.Requests()
		if body := string(reqs[len(reqs)-1].Body); len(reqs) != before+1 || !strings.Contains(body, "ONCE-TEXT") || !strings.Contains(body, "ALWAYS-TEXT") {
			t.Errorf("the model request lacks the attachment texts: %s", body)
		}
		if f := send("a-2", once); !f.Rejected || !strings.Contains(f.Error, "consumed") {
			t.Errorf("reusing a consumed attachment: %+v", f)
		}
		if f := send("a-3", always); f.Kind != "session-done" {
			t.Errorf("a session attachment serves every turn: %+v", f)
		}
		var a projections.Attachment
		if resp := r.do(t, get, base+"/"+always, ""); json.Unmarshal(resp.body, &a) != nil || !slices.Equal(a.UsedBy, []string{"a-1", "a-3"}) || a.Consumed {
			t.Errorf("session attachment after two turns: %+v", a)
		}
		if resp := r.do(t, get, base+"/"+once, ""); json.Unmarshal(resp.body, &a) != nil || !a.Consumed || a.ConsumedTurnID != "a-1" {
			t.Errorf("one-turn attachment after its turn: %+v", a)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		for _, c := range []struct {
			body   string
			status int
		}{
			{`{"input":"  "}`, 400},
			{`{}`, 400},
			{`{"input":"x","bogus":1}`, 400},
		} {
			if resp := r.do(t, post, "/api/sessions/"+id+"/execute", c.body); resp.status != c.status {
				t.Errorf("execute %s: %d %s, want %d", c.body, resp.status, resp.body, c.status)
			}
		}
		if resp := r.do(t, post, "/api/sessions/NOPE/execute", `{"input":"x"}`); resp.status != 404 {
			t.Errorf("execute on an unknown session: %d", resp.status)
		}
		idle := r.create(t, `"setup_command":"true"`).ID // awaits approval: not Ready
		if resp := r.do(t, post, "/api/sessions/"+idle+"/execute", `{"input":"x"}`); resp.status != 409 {
			t.Errorf("execute on a session that is not ready: %d %s", resp.status, resp.body)
		}
	})
}

type executeJSON struct {
	execJSON
	Status string `json:"status"`
	TurnID string `json:"turn_id"`
}

// TestSessionTurnLastTurnFlags runs a turn in a Git Workspace: the files it
// changed, and only those, carry the status's last_turn flag.
func TestSessionTurnLastTurnFlags(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.ToolCall("w", "write_file", `{"path":"added.txt","content":"new\n"}`),
			fakellm.ToolCall("e", "edit_file", `{"path":"tracked.txt","old_string":"one","new_string":"uno"}`),
			fakellm.Usage(1, 1, 0),
		}},
		{Steps: []fakellm.Step{fakellm.Text("edited"), fakellm.Usage(1, 1, 0)}},
	}}
	r := turnDaemon(t, config.KindOpenAI, script, nil)
	commitBase(t, r.dir, map[string]string{"tracked.txt": "one\n", "user.txt": "mine\n"})
	// The user's own edit, before the turn: not the turn's.
	if err := os.WriteFile(filepath.Join(r.dir, "user.txt"), []byte("mine, edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := r.create(t, "").ID
	r.ready(t, id)
	openTurnConn(t, r).runDone(t, id, "edit", "edit")
	resp := r.do(t, get, "/api/sessions/"+id+"/git/status", "")
	var st struct {
		LastTurnKnown bool `json:"last_turn_known"`
		Files         []struct {
			Path     string `json:"path"`
			LastTurn bool   `json:"last_turn"`
		} `json:"files"`
	}
	if resp.status != 200 || json.Unmarshal(resp.body, &st) != nil || !st.LastTurnKnown {
		t.Fatalf("git status: %d %s", resp.status, resp.body)
	}
	flags := map[string]bool{}
	for _, f := range st.Files {
		flags[f.Path] = f.LastTurn
	}
	if want := map[string]bool{"added.txt": true, "tracked.txt": true, "user.txt": false}; !maps.Equal(flags, want) {
		t.Errorf("last_turn flags %v, want %v", flags, want)
	}
	var turn projections.Turn
	if resp := r.do(t, get, "/api/sessions/"+id+"/turns/edit", ""); json.Unmarshal(resp.body, &turn) != nil || !slices.Equal(turn.ChangedPaths, []string{"added.txt", "tracked.txt"}) {
		t.Errorf("turn changed paths %v", turn.ChangedPaths)
	}
}
