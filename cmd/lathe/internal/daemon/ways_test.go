package daemon

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
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
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

const waysNamespace = "lathe-test-ways"

// waysResults is the part of GET variants/results the tests read.
type waysResults struct {
	AttemptSetID    string `json:"attempt_set_id"`
	State           string `json:"state"`
	CheckConfigured bool   `json:"check_configured"`
	Settled         bool   `json:"settled"`
	Keep            *struct {
		Index int    `json:"index"`
		Phase string `json:"phase"`
	} `json:"keep"`
	Attempts []struct {
		Index        int      `json:"index"`
		State        string   `json:"state"`
		Model        string   `json:"model"`
		Output       string   `json:"output"`
		Error        string   `json:"error"`
		Interrupted  bool     `json:"interrupted"`
		ChangedFiles []string `json:"changed_files"`
		NotKeepable  string   `json:"not_keepable"`
		Verdict      *struct {
			Passed       bool     `json:"passed"`
			TouchedTests []string `json:"touched_tests"`
		} `json:"verdict"`
		Usage struct {
			InputTokens     int      `json:"input_tokens"`
			TokenUsageKnown bool     `json:"token_usage_known"`
			USD             *float64 `json:"usd"`
			USDKnown        bool     `json:"usd_known"`
		} `json:"usage"`
	} `json:"attempts"`
}

type waysRig struct {
	*envRig
	d   *Daemon
	llm *fakellm.Server
}

// newWaysRig starts a daemon with real sandboxes whose Agent coder talks
// to the scripted model (model m1 priced), then applies mutate.
func newWaysRig(t testing.TB, script fakellm.Script, mutate ...func(*config.Config)) *waysRig {
	t.Helper()
	return newWaysRigWith(t, script, nil, mutate...)
}

// newWaysRigWith is newWaysRig with daemon options.
func newWaysRigWith(t testing.TB, script fakellm.Script, opts []Option, mutate ...func(*config.Config)) *waysRig {
	t.Helper()
	fake := fakellm.New(script)
	t.Cleanup(fake.Close)
	t.Setenv(testRuntimeKeyEnv, "k")
	cl := containerdtest.Namespace(t, waysNamespace)
	d, srv := newSandboxDaemon(t, waysNamespace, func(c *config.Config) {
		c.Providers = map[string]config.Provider{"fake": {Kind: config.KindOpenAI, BaseURL: fake.URL() + "/v1", APIKeyEnv: testRuntimeKeyEnv}}
		c.Agents = []config.Agent{{ID: "coder", Name: "Coder", Provider: "fake", Model: "m1", Prompt: "you code"}}
		c.Prices = map[string]config.Price{"fake/m1": {Input: 1, Output: 2}, "fake/mj": {Input: 1, Output: 1}}
		for _, m := range mutate {
			m(c)
		}
	}, opts...)
	return &waysRig{envRig: newEnvRig(t, srv, cl), d: d, llm: fake}
}

// gitWorkspace makes the rig's Workspace a repository with a commit, a
// staged change and an untracked file.
func (r *waysRig) gitWorkspace(t *testing.T) {
	t.Helper()
	gittest.Run(t, r.dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(r.dir, "a.txt"), "a\n")
	gittest.Run(t, r.dir, "add", "-A")
	gittest.Run(t, r.dir, "-c", "user.name=T", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
	write(t, filepath.Join(r.dir, "a.txt"), "a staged\n")
	gittest.Run(t, r.dir, "add", "a.txt")
	write(t, filepath.Join(r.dir, "untracked.txt"), "u\n")
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *waysRig) results(t testing.TB, id string) waysResults {
	t.Helper()
	resp := r.do(t, get, "/api/sessions/"+id+"/variants/results", "")
	var out waysResults
	if resp.status != 200 || json.Unmarshal(resp.body, &out) != nil {
		t.Fatalf("results: %d %s", resp.status, resp.body)
	}
	return out
}

// waitResults polls Results until cond holds.
func (r *waysRig) waitResults(t testing.TB, id, what string, cond func(waysResults) bool) waysResults {
	t.Helper()
	return r.waitResultsFor(t, envSettle, id, what, cond)
}

func (r *waysRig) waitResultsFor(t testing.TB, within time.Duration, id, what string, cond func(waysResults) bool) waysResults {
	t.Helper()
	var res waysResults
	polltest.Check(t, func() error {
		if res = r.results(t, id); !cond(res) {
			return fmt.Errorf("results not %s: %+v", what, res)
		}
		return nil
	}, polltest.Within(within), polltest.Every(20*time.Millisecond))
	return res
}

// discardAtEnd discards the Session's unresolved set when the test ends
// (before its Sessions are deleted, which a set refuses).
func (r *waysRig) discardAtEnd(t testing.TB, id string) {
	t.Cleanup(func() {
		resp := call(t, r.srv, get, "/api/sessions/"+id+"/variants/results", "")
		var res waysResults
		if resp.status == 200 && json.Unmarshal(resp.body, &res) == nil && !res.Settled && res.Keep == nil {
			call(t, r.srv, post, "/api/sessions/"+id+"/variants/discard", `{"attempt_set_id":"`+res.AttemptSetID+`"}`)
		}
	})
}

// rawFrames lists the raw frames of kind the log holds.
func (l *envFrameLog) rawFrames(kind string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, f := range l.frames {
		if f.Kind == kind {
			out = append(out, f.Raw)
		}
	}
	return out
}

// waitRaw waits until the log holds at least n frames of kind whose raw
// text contains sub.
func (l *envFrameLog) waitRaw(t *testing.T, kind, sub string, n int) []string {
	t.Helper()
	var got []string
	polltest.Check(t, func() error {
		got = nil
		for _, raw := range l.rawFrames(kind) {
			if strings.Contains(raw, sub) {
				got = append(got, raw)
			}
		}
		if len(got) < n {
			return fmt.Errorf("fewer than %d %s frames with %q: %v", n, kind, sub, got)
		}
		return nil
	}, polltest.Within(envSettle), polltest.Every(10*time.Millisecond))
	return got
}

// laneLeftovers lists what a set left behind: lane containers, copies, the
// snapshot ref.
func (r *waysRig) laneLeftovers(t testing.TB, set string, lanes int) []string {
	t.Helper()
	var left []string
	for i := range lanes {
		left = append(left, containerdtest.SessionContainers(t, r.cl, set+"-"+string(rune('0'+i)))...)
	}
	if _, err := os.Stat(filepath.Join(r.d.dataDir, "ways", set)); err == nil {
		left = append(left, "copies of "+set)
	}
	if out, err := gittest.Try(r.dir, "for-each-ref", "refs/lathe/ways/"); err != nil || out != "" {
		left = append(left, "refs: "+out)
	}
	return left
}

// TestWays runs a set end to end against real sandboxes and the scripted
// model: two lanes on two models, isolation from the primary checkout and
// from each other, the Workspace suspended for every Session, Verify, Keep
// (as working-tree changes, the lane's turn in the history), then a second
// set discarded mid-lane with nothing left behind.
func TestWays(t *testing.T) {
	release := make(chan struct{})
	script := fakellm.Script{Turns: []fakellm.Turn{
		// Lane 0 (model m1): writes a file, then, once released, looks
		// at the checkout: it must see neither the primary's later
		// files nor lane 1's write.
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("lane zero writes"),
			fakellm.ToolCall("c1", "write_file", `{"path":"lane0.txt","content":"from lane 0\n"}`), fakellm.Usage(10, 5, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Stall(release),
			fakellm.ToolCall("c2", "shell", `{"command":"ls; cat a.txt"}`), fakellm.Usage(10, 5, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("lane zero done"), fakellm.Usage(10, 5, 0)}},
		// Lane 1 (model m2, no price): rewrites a.txt and adds a test.
		{Model: "m2", Steps: []fakellm.Step{
			fakellm.ToolCall("d1", "shell", `{"command":"printf 'lane 1 wins\\n' > a.txt && mkdir -p tests && echo ok > tests/a_test.sh"}`), fakellm.Usage(20, 5, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("lane one done"), fakellm.Usage(20, 5, 0)}},
		// The second set's lane stalls until discarded.
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("working"), fakellm.Stall(nil)}},
	}}
	r := newWaysRig(t, script)
	r.gitWorkspace(t)
	id := r.create(t, "").ID
	r.ready(t, id)
	sibling := r.create(t, "").ID
	r.ready(t, sibling)
	r.discardAtEnd(t, id)
	indexBefore := gittest.Run(t, r.dir, "diff", "--cached")
	headBefore := gittest.Run(t, r.dir, "rev-parse", "HEAD")

	// Bad input changes nothing.
	for _, tc := range []struct {
		body   string
		status int
	}{
		{`{}`, 400},
		{`{"input":"x","n":0}`, 400},
		{`{"input":"x","n":9}`, 400},
		{`{"input":"x","n":2,"lanes":[{}]}`, 400},
		{`{"input":"x","lanes":[{"agent_id":"nobody"}]}`, 400},
	} {
		if resp := r.do(t, post, "/api/sessions/"+id+"/variants", tc.body); resp.status != tc.status {
			t.Errorf("POST variants %s: %d %s, want %d", tc.body, resp.status, resp.body, tc.status)
		}
	}
	if resp := r.do(t, post, "/api/sessions/nope/variants", `{"input":"x"}`); resp.status != 404 {
		t.Errorf("unknown session: %d %s", resp.status, resp.body)
	}
	if resp := r.do(t, get, "/api/sessions/"+id+"/variants/results", ""); resp.status != 404 {
		t.Errorf("results before any set: %d %s", resp.status, resp.body)
	}

	mustCall(t, r.srv, 200, put, "/api/sessions/"+id+"/check", `{"check_command":"test -f a.txt"}`)
	resp := r.do(t, post, "/api/sessions/"+id+"/variants", `{"input":"improve a.txt","lanes":[{"model":"m1"},{"model":"m2"}]}`)
	if resp.status != 202 {
		t.Fatalf("POST variants: %d %s", resp.status, resp.body)
	}
	var started struct {
		AttemptSetID string `json:"attempt_set_id"`
		Attempts     []struct {
			Index        int
			Run          string
			Model, Agent string
		}
	}
	if err := json.Unmarshal(resp.body, &started); err != nil || len(started.Attempts) != 2 || started.Attempts[1].Model != "m2" || started.Attempts[0].Agent != "coder" {
		t.Fatalf("started: %s", resp.body)
	}
	set := started.AttemptSetID

	// The set owns the Workspace: frames, the snapshot, and 409 on every
	// primary surface of both Sessions, turns and a second set included.
	r.log.waitRaw(t, "workspace-attempt-changing", set, 1)
	r.log.waitRaw(t, "lane-started", set, 2)
	r.log.waitRaw(t, "tool-call", `"workflow":"`+started.Attempts[0].Run+`"`, 1)
	// The lane's stream: its run key as the workflow, its set named.
	if tok := r.log.waitRaw(t, "token", `"workflow":"`+started.Attempts[0].Run+`"`, 1)[0]; !strings.Contains(tok, `"attempt_set_id":"`+set+`"`) {
		t.Errorf("a lane's token frame without its set: %s", tok)
	}
	if ls := r.log.waitRaw(t, "lane-started", `"index":1`, 1)[0]; !strings.Contains(ls, `"model":"m2"`) || !strings.Contains(ls, `"session":"`+id+`"`) ||
		!strings.Contains(ls, `"run":"`+started.Attempts[1].Run+`"`) || !strings.Contains(ls, `"agent":"coder"`) {
		t.Errorf("lane-started: %s", ls)
	}
	snap := envSnapshot(t, r.srv)
	if len(snap.AttemptOwnerships) != 1 || snap.AttemptOwnerships[0].AttemptSetID != set || snap.AttemptOwnerships[0].Session != id {
		t.Errorf("snapshot ownerships: %+v", snap.AttemptOwnerships)
	}
	lanesLive := 0
	for _, run := range snap.Runs {
		if run.Kind == "attempt" && run.AttemptSetID == set {
			lanesLive++
		}
	}
	if lanesLive == 0 {
		t.Errorf("snapshot runs list no live lane: %+v", snap.Runs)
	}
	for _, sid := range []string{id, sibling} {
		for _, c := range []struct{ method, path, body string }{
			{get, "/tree?path=.", ""},
			{get, "/file?path=a.txt", ""},
			{get, "/git/status", ""},
			{post, "/tasks", `{"command":"true"}`},
			{post, "/execute", `{"input":"hi"}`},
			{post, "/environment/rebuild", ""},
			{post, "/rewind", `{"keep":0}`},
		} {
			if resp := r.do(t, c.method, "/api/sessions/"+sid+c.path, c.body); resp.status != 409 {
				t.Errorf("%s %s while the set owns the Workspace: %d %s, want 409", c.method, c.path, resp.status, resp.body)
			}
		}
	}
	if resp := r.do(t, post, "/api/sessions/"+id+"/variants", `{"input":"again"}`); resp.status != 409 {
		t.Errorf("a second set while one is unresolved: %d %s", resp.status, resp.body)
	}

	// Lane 1 ends; the primary gets a file lane 0 must not see; lane 0 goes on.
	r.waitResults(t, id, "lane 1 succeeded", func(res waysResults) bool { return res.Attempts[1].State == "succeeded" })
	write(t, filepath.Join(r.dir, "primary-later.txt"), "p\n")
	if resp := r.do(t, post, "/api/sessions/"+id+"/variants/verify", `{"attempt_set_id":"`+set+`"}`); resp.status != 409 {
		t.Errorf("verify before every lane is terminal: %d %s", resp.status, resp.body)
	}
	close(release)
	res := r.waitResults(t, id, "ready", func(res waysResults) bool { return res.State == "ready" })
	if res.Attempts[0].State != "succeeded" || !slices.Equal(res.Attempts[0].ChangedFiles, []string{"lane0.txt"}) ||
		!slices.Equal(res.Attempts[1].ChangedFiles, []string{"a.txt", "tests/a_test.sh"}) || res.Attempts[1].Output != "lane one done" {
		t.Fatalf("results: %+v", res)
	}
	if u := res.Attempts[0].Usage; u.InputTokens != 30 || !u.TokenUsageKnown || u.USD == nil || !u.USDKnown {
		t.Errorf("lane 0 usage (priced model): %+v", u)
	}
	if u := res.Attempts[1].Usage; u.InputTokens != 40 || u.USDKnown {
		t.Errorf("lane 1 usage (unpriced model): %+v; an unknown price must stay unknown", u)
	}
	a, _ := r.d.Store().AttemptSet(set)
	var seen string
	for _, c := range a.Attempts[0].Turn.ToolCalls {
		if c.Name == "shell" {
			seen = c.Result.String()
		}
	}
	if !strings.Contains(seen, "a staged") || !strings.Contains(seen, "untracked.txt") || !strings.Contains(seen, "lane0.txt") ||
		strings.Contains(seen, "primary-later") || strings.Contains(seen, "lane 1 wins") {
		t.Errorf("lane 0 saw (it must see the snapshot and its own write only):\n%s", seen)
	}
	for _, f := range []string{"lane0.txt", filepath.Join("tests", "a_test.sh")} {
		if _, err := os.Stat(filepath.Join(r.dir, f)); !os.IsNotExist(err) {
			t.Errorf("a lane's write %s reached the primary checkout: %v", f, err)
		}
	}

	// Reads: status, one file before and after, bad indexes and stale IDs.
	st := mustCall(t, r.srv, 200, get, "/api/sessions/"+id+"/variants/status?attempt_set_id="+set, "")
	if n := len(st["attempts"].([]any)); n != 2 {
		t.Errorf("status: %v", st)
	}
	diff := mustCall(t, r.srv, 200, get, "/api/sessions/"+id+"/variants/diff?attempt_set_id="+set+"&index=1&path=a.txt", "")
	if diff["before"] != "a staged\n" || diff["after"] != "lane 1 wins\n" {
		t.Errorf("diff: %v", diff)
	}
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/variants/diff?attempt_set_id=" + set + "&index=2&path=a.txt", 400},
		{"/variants/diff?attempt_set_id=" + set + "&index=0&path=../x", 400},
		{"/variants/status?attempt_set_id=01NOSUCHSET", 404},
		{"/variants/status", 400},
	} {
		if resp := r.do(t, get, "/api/sessions/"+id+c.path, ""); resp.status != c.status {
			t.Errorf("GET %s: %d %s, want %d", c.path, resp.status, resp.body, c.status)
		}
	}

	// Keep needs a passing Check when one is configured.
	if resp := r.do(t, post, "/api/sessions/"+id+"/variants/adopt", `{"attempt_set_id":"`+set+`","index":1}`); resp.status != 409 {
		t.Errorf("keep before verify: %d %s", resp.status, resp.body)
	}
	if resp := r.do(t, post, "/api/sessions/"+id+"/variants/adopt", `{"attempt_set_id":"`+set+`","index":5}`); resp.status != 400 {
		t.Errorf("keep of an index out of range: %d %s", resp.status, resp.body)
	}
	mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/verify", `{"attempt_set_id":"`+set+`"}`)
	r.log.waitRaw(t, "lane-verified", set, 2)
	res = r.results(t, id)
	if v := res.Attempts[1].Verdict; v == nil || !v.Passed || !slices.Equal(v.TouchedTests, []string{"tests/a_test.sh"}) {
		t.Errorf("lane 1 verdict: %+v", v)
	}

	kept := mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/adopt", `{"attempt_set_id":"`+set+`","index":1}`)
	if kept["state"] != "kept" || kept["settled"] != true {
		t.Errorf("keep: %v", kept)
	}
	r.log.waitRaw(t, "workspace-attempt-settled", set, 1)
	b, _ := os.ReadFile(filepath.Join(r.dir, "a.txt"))
	if string(b) != "lane 1 wins\n" {
		t.Errorf("a.txt after Keep = %q", b)
	}
	if got := gittest.Run(t, r.dir, "diff", "--cached"); got != indexBefore {
		t.Errorf("Keep changed the index:\n%s", got)
	}
	if got := gittest.Run(t, r.dir, "rev-parse", "HEAD"); got != headBefore {
		t.Errorf("Keep committed: HEAD %s", got)
	}
	turns := mustCallList(t, r, "/api/sessions/"+id+"/turns")
	if len(turns) != 1 || turns[0].Output.String() != "lane one done" || turns[0].Source != "ways" || !slices.Equal(turns[0].ChangedPaths, []string{"a.txt", "tests/a_test.sh"}) {
		t.Errorf("the Session's history after Keep: %+v", turns)
	}
	// Keep settles first and removes the lanes after, off the user's path.
	polltest.Check(t, func() error {
		if left := r.laneLeftovers(t, set, 2); len(left) != 0 {
			return fmt.Errorf("Keep left behind: %v", left)
		}
		return nil
	}, polltest.Within(envSettle), polltest.Every(20*time.Millisecond))
	for _, sid := range []string{id, sibling} {
		if resp := r.do(t, get, "/api/sessions/"+sid+"/git/status", ""); resp.status != 200 {
			t.Errorf("git status after settlement: %d %s", resp.status, resp.body)
		}
	}
	// A retry of the same Keep answers the kept set; another index and a
	// Discard are refused.
	mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/adopt", `{"attempt_set_id":"`+set+`","index":1}`)
	if resp := r.do(t, post, "/api/sessions/"+id+"/variants/adopt", `{"attempt_set_id":"`+set+`","index":0}`); resp.status != 409 {
		t.Errorf("keep of another index: %d %s", resp.status, resp.body)
	}
	if resp := r.do(t, post, "/api/sessions/"+id+"/variants/discard", `{"attempt_set_id":"`+set+`"}`); resp.status != 409 {
		t.Errorf("discard after keep: %d %s", resp.status, resp.body)
	}

	// A second set, discarded while its lane runs: nothing is left.
	resp = r.do(t, post, "/api/sessions/"+id+"/variants", `{"input":"again","n":1}`)
	if resp.status != 202 {
		t.Fatalf("second set: %d %s", resp.status, resp.body)
	}
	var second struct {
		AttemptSetID string `json:"attempt_set_id"`
	}
	_ = json.Unmarshal(resp.body, &second)
	r.waitResults(t, id, "running", func(res waysResults) bool {
		return res.AttemptSetID == second.AttemptSetID && res.Attempts[0].State == "running"
	})
	if resp := r.do(t, get, "/api/sessions/"+id+"/variants/status?attempt_set_id="+set, ""); resp.status != 409 {
		t.Errorf("a stale set ID: %d %s", resp.status, resp.body)
	}
	// Restoring the kept turn's files is a primary-surface write: refused
	// while the second set owns the Workspace.
	if resp := r.do(t, post, "/api/sessions/"+id+"/turns/"+turns[0].TurnID+"/restore", `{"side":"before"}`); resp.status != 409 || !strings.Contains(string(resp.body), "owns workspace") {
		t.Errorf("restore while a set owns the Workspace: %d %s", resp.status, resp.body)
	}
	// The Session's audit trail holds both sets.
	trail := r.do(t, get, "/api/sessions/"+id+"/audit?kind=attempt&limit=1000", "")
	if trail.status != 200 || !strings.Contains(string(trail.body), "started 2 Way(s)") || !strings.Contains(string(trail.body), second.AttemptSetID) {
		t.Errorf("the audit trail of the Ways: %d %s", trail.status, trail.body)
	}
	discarded := mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/discard", `{"attempt_set_id":"`+second.AttemptSetID+`"}`)
	if discarded["state"] != "discarded" {
		t.Errorf("discard: %v", discarded)
	}
	res = r.results(t, id)
	if res.Attempts[0].State != "cancelled" {
		t.Errorf("the discarded lane: %+v", res.Attempts[0])
	}
	if left := r.laneLeftovers(t, second.AttemptSetID, 1); len(left) != 0 {
		t.Errorf("Discard left behind: %v", left)
	}
	if snap := envSnapshot(t, r.srv); len(snap.AttemptOwnerships) != 0 {
		t.Errorf("ownerships after settlement: %+v", snap.AttemptOwnerships)
	}
}

// envSnapshot dials /ws and returns its snapshot.
func envSnapshot(t *testing.T, srv *httptest.Server) projections.Snapshot {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	c := dialWS(t, ctx, srv, nil)
	defer c.Close(websocket.StatusNormalClosure, "")
	expectFrame(t, ctx, c, "ready")
	var snap projections.Snapshot
	if err := json.Unmarshal(expectFrame(t, ctx, c, "snapshot"), &snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

func mustCallList(t *testing.T, r *waysRig, path string) []projections.Turn {
	t.Helper()
	resp := r.do(t, get, path, "")
	var out struct{ Turns []projections.Turn }
	if resp.status != 200 || json.Unmarshal(resp.body, &out) != nil {
		t.Fatalf("GET %s: %d %s", path, resp.status, resp.body)
	}
	return out.Turns
}

// TestWaysJudgePlanProbeCost: the control calls against the scripted
// model (each with its control_usage), the price report with an unknown
// price kept unknown, and the trajectories' alignment.
func TestWaysJudgePlanProbeCost(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Model: "m1", Steps: []fakellm.Step{fakellm.ToolCall("a", "read_file", `{"path":"a.txt"}`), fakellm.Usage(100, 10, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.ToolCall("b", "write_file", `{"path":"one.txt","content":"1\n"}`), fakellm.Usage(100, 10, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("one"), fakellm.Usage(100, 10, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.ToolCall("a", "read_file", `{"path":"a.txt"}`), fakellm.Usage(50, 5, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.ToolCall("b", "shell", `{"command":"echo 2 > two.txt"}`), fakellm.Usage(50, 5, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("two"), fakellm.Usage(50, 5, 0)}},
		// Plan, then a judge that answers prose (refused), then one that calls the tool.
		{Model: "mj", Steps: []fakellm.Step{fakellm.ToolCall("p", "submit_steps", `{"steps":["read a.txt","write the file"]}`), fakellm.Usage(7, 3, 0)}},
		{Model: "mj", Steps: []fakellm.Step{fakellm.Text("Attempt 1 is clearly the best."), fakellm.Usage(8, 4, 0)}},
		{Model: "mj", Steps: []fakellm.Step{fakellm.ToolCall("j", "submit_ranking", `{"ranking":[{"index":1,"rank":1,"reason":"shorter"},{"index":0,"rank":2,"reason":"longer"}]}`), fakellm.Usage(9, 5, 0)}},
		{Model: "mp1", Steps: []fakellm.Step{fakellm.ToolCall("r", "report_status", `{"ok":true,"note":"fine"}`), fakellm.Usage(1, 1, 0)}},
		{Model: "mp2", Steps: []fakellm.Step{fakellm.Text("I cannot call tools"), fakellm.Usage(1, 1, 0)}},
	}}
	r := newWaysRig(t, script, func(c *config.Config) {
		c.Agents = append(c.Agents, config.Agent{ID: "judge", Name: "Judge", Provider: "fake", Model: "mj"})
	})
	r.gitWorkspace(t)
	// The approved setup command runs again in each lane's fresh sandbox.
	id := r.create(t, `"setup_command":"echo ran >> setup.log","setup_approved":true,"setup_reviewed":true`).ID
	r.ready(t, id)
	r.discardAtEnd(t, id)

	plan := mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/plan", `{"task":"add a file","agent_id":"judge"}`)
	if !strings.Contains(plan["instruction"].(string), "1. read a.txt\n2. write the file") || plan["control_usage"].(map[string]any)["input_tokens"] != 7.0 {
		t.Errorf("plan: %v", plan)
	}
	resp := r.do(t, post, "/api/sessions/"+id+"/variants", `{"input":"add a file","lanes":[{"model":"m1"},{"model":"m2"}]}`)
	var started struct {
		AttemptSetID string `json:"attempt_set_id"`
	}
	if resp.status != 202 || json.Unmarshal(resp.body, &started) != nil {
		t.Fatalf("start: %d %s", resp.status, resp.body)
	}
	set := started.AttemptSetID
	if resp := r.do(t, post, "/api/sessions/"+id+"/variants/judge", `{"attempt_set_id":"`+set+`","agent_id":"judge"}`); resp.status != 409 {
		t.Errorf("judge while lanes run: %d %s", resp.status, resp.body)
	}
	res := r.waitResults(t, id, "ready", func(res waysResults) bool { return res.State == "ready" })
	for _, a := range res.Attempts {
		if !slices.Contains(a.ChangedFiles, "setup.log") {
			t.Errorf("Attempt %d changed %v: the setup command did not run again in its sandbox", a.Index, a.ChangedFiles)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, "setup.log")); string(b) != "ran\n" {
		t.Errorf("the primary's setup.log = %q: a lane's setup reached it", b)
	}

	// A judge that answers in prose is refused, its usage shown.
	resp = r.do(t, post, "/api/sessions/"+id+"/variants/judge", `{"attempt_set_id":"`+set+`","agent_id":"judge"}`)
	if resp.status/100 != 5 || !strings.Contains(string(resp.body), `"control_usage":{"input_tokens":8`) {
		t.Errorf("a prose judgment: %d %s", resp.status, resp.body)
	}
	judged := mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/judge", `{"attempt_set_id":"`+set+`","agent_id":"judge"}`)
	ranking := judged["judgment"].(map[string]any)["ranking"].([]any)
	if len(ranking) != 2 || ranking[0].(map[string]any)["index"] != 1.0 || judged["control_usage"].(map[string]any)["input_tokens"] != 9.0 {
		t.Errorf("judgment: %v", judged)
	}
	if res := r.results(t, id); res.Attempts[0].Usage.InputTokens != 300 || res.Attempts[1].Usage.InputTokens != 150 {
		t.Errorf("the judge's usage leaked into the Attempts: %+v", res.Attempts)
	}

	probe := mustCall(t, r.srv, 200, get, "/api/variants/probe?provider=fake&models=mp1,mp2", "")
	results := probe["results"].([]any)
	if len(results) != 2 || results[0].(map[string]any)["ok"] != true || results[1].(map[string]any)["ok"] != false ||
		results[1].(map[string]any)["control_usage"] == nil {
		t.Errorf("probe: %v", probe)
	}
	if resp := r.do(t, get, "/api/variants/probe?provider=nobody&models=x", ""); resp.status != 404 {
		t.Errorf("probe of an unknown provider: %d %s", resp.status, resp.body)
	}

	cost := mustCall(t, r.srv, 200, get, "/api/sessions/"+id+"/variants/cost?attempt_set_id="+set+"&baseline=0", "")
	if cost["actual_cost_known"] != false || cost["total_usd"] != nil || cost["baseline_cost_known"] != true || cost["saved"] != nil {
		t.Errorf("cost on the priced baseline (lane 1's price unknown): %v", cost)
	}
	lanes := cost["lanes"].([]any)
	if l1 := lanes[1].(map[string]any); l1["actual_usd"] != nil || l1["baseline_usd"] == nil {
		t.Errorf("lane 1: %v", l1)
	}
	cost = mustCall(t, r.srv, 200, get, "/api/sessions/"+id+"/variants/cost?attempt_set_id="+set+"&baseline=1", "")
	if cost["baseline_cost_known"] != false || cost["baseline_usd"] != nil {
		t.Errorf("cost on an unpriced baseline: %v", cost)
	}

	traj := mustCall(t, r.srv, 200, get, "/api/sessions/"+id+"/variants/trajectories?attempt_set_id="+set+"&baseline=0", "")
	l1 := traj["lanes"].([]any)[1].(map[string]any)
	if l1["agreed"] != 1.0 || len(l1["rows"].([]any)) != 3 {
		t.Errorf("lane 1's alignment to lane 0: %v", l1)
	}
}
