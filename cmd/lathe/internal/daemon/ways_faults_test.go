package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lathe/journal"
	"lathe/runtime/llm/fakellm"
)

// TestWaysFailedLane: a lane whose model fails mid-turn ends failed with
// the provider's error and the usage of the steps it paid for before the
// failure (a known subtotal: the counts kept, token_usage_known false as
// for a failed Session turn); the other lane still succeeds, and the set
// stays resolvable: the failed lane cannot be kept, the good one can.
func TestWaysFailedLane(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		// Lane 0 (m1): one paid step that writes a file, then the provider fails.
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("starting"),
			fakellm.ToolCall("c1", "write_file", `{"path":"half.txt","content":"half\n"}`), fakellm.Usage(10, 5, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Fail(500)}},
		// Lane 1 (m2): succeeds.
		{Model: "m2", Steps: []fakellm.Step{fakellm.ToolCall("d1", "write_file", `{"path":"a.txt","content":"lane 1 wins\n"}`), fakellm.Usage(20, 5, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("lane one done"), fakellm.Usage(20, 5, 0)}},
	}}
	r, id := newWaysSession(t, script)
	set := r.waysStart(t, id, `{"input":"improve a.txt","lanes":[{"model":"m1"},{"model":"m2"}]}`)
	res := r.waitResults(t, id, "ready", func(res waysResults) bool { return res.State == "ready" })

	failed, good := res.Attempts[0], res.Attempts[1]
	if failed.State != "failed" || !strings.Contains(failed.Error, "500") || failed.Interrupted {
		t.Errorf("the lane whose model failed: %+v, want failed with the provider's error", failed)
	}
	if u := failed.Usage; u.InputTokens != 10 || u.TokenUsageKnown || u.USD == nil || *u.USD <= 0 {
		t.Errorf("the failed lane's usage %+v: want the paid step's tokens and price kept, marked a subtotal (token_usage_known false)", u)
	}
	if failed.NotKeepable == "" {
		t.Errorf("the failed lane is offered for Keep: %+v", failed)
	}
	if good.State != "succeeded" || good.Output != "lane one done" || !slices.Equal(good.ChangedFiles, []string{"a.txt"}) || good.Error != "" {
		t.Errorf("the other lane: %+v", good)
	}
	if u := good.Usage; u.InputTokens != 40 || !u.TokenUsageKnown {
		t.Errorf("the other lane's usage: %+v", u)
	}
	// Every count of the paid step is kept, and the set's total is a
	// subtotal too.
	type usage struct {
		InputTokens     int  `json:"input_tokens"`
		OutputTokens    int  `json:"output_tokens"`
		TokenUsageKnown bool `json:"token_usage_known"`
	}
	var usages struct {
		Usage    usage `json:"usage"`
		Attempts []struct {
			Usage usage `json:"usage"`
		} `json:"attempts"`
	}
	if resp := r.do(t, get, "/api/sessions/"+id+"/variants/results", ""); json.Unmarshal(resp.body, &usages) != nil ||
		usages.Attempts[0].Usage != (usage{10, 5, false}) || usages.Usage != (usage{50, 15, false}) {
		t.Errorf("usage in Results: %s", resp.body)
	}

	r.refuses(t, id, []waysBadCall{
		{"keep the failed lane", post, "/variants/adopt", `{"attempt_set_id":"` + set + `","index":0}`, 409, "Attempt 0 is failed, not succeeded"},
	})
	kept := mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/adopt", `{"attempt_set_id":"`+set+`","index":1}`)
	if kept["state"] != "kept" || kept["settled"] != true {
		t.Fatalf("keep of the good lane: %v", kept)
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, "a.txt")); string(b) != "lane 1 wins\n" {
		t.Errorf("a.txt after Keep = %q", b)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "half.txt")); !os.IsNotExist(err) {
		t.Errorf("the failed lane's write reached the checkout: %v", err)
	}
	// Results keep the failed lane's error as the history of the set.
	if after := r.results(t, id); after.Attempts[0].State != "failed" || after.Attempts[0].Error != failed.Error || after.State != "kept" {
		t.Errorf("results after Keep: %+v", after)
	}
}

// TestWaysBadInput: each bad call of the list gets its status and
// an {error} that says why, and changes nothing: no event is appended and
// Results read the same. Unknown Session, unknown and stale set, n out of
// range, lanes of the wrong length, an index out of range, Verify, Judge
// and Keep before every lane is terminal, Keep of an empty, a failed-Check
// and an unverified Attempt, Judge with fewer than two survivors.
func TestWaysBadInput(t *testing.T) {
	release := make(chan struct{})
	script := fakellm.Script{Turns: []fakellm.Turn{
		// Lane 0 (m1) waits until released, then writes good.txt.
		{Model: "m1", Steps: []fakellm.Step{fakellm.Stall(release),
			fakellm.ToolCall("a", "write_file", `{"path":"good.txt","content":"good\n"}`), fakellm.Usage(1, 1, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("good"), fakellm.Usage(1, 1, 0)}},
		// Lane 1 (m2) writes bad.txt, which fails the Check.
		{Model: "m2", Steps: []fakellm.Step{fakellm.ToolCall("b", "write_file", `{"path":"bad.txt","content":"bad\n"}`), fakellm.Usage(1, 1, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("bad"), fakellm.Usage(1, 1, 0)}},
		// Lane 2 (m3) changes nothing.
		{Model: "m3", Steps: []fakellm.Step{fakellm.Text("nothing to change"), fakellm.Usage(1, 1, 0)}},
		// The second set's lane.
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("again"), fakellm.Usage(1, 1, 0)}},
	}}
	r, id := newWaysSession(t, script)
	mustCall(t, r.srv, 200, put, "/api/sessions/"+id+"/check", `{"check_command":"test ! -e bad.txt"}`)
	const unknownSet = "01JZZZZZZZZZZZZZZZZZZZZZZZ"
	r.refuses(t, id, []waysBadCall{
		{"n of 0", post, "/variants", `{"input":"x","n":0}`, 400, "n must be an integer from 1 to 8, not 0"},
		{"n of 9", post, "/variants", `{"input":"x","n":9}`, 400, "n must be an integer from 1 to 8, not 9"},
		{"lanes shorter than n", post, "/variants", `{"input":"x","n":3,"lanes":[{},{}]}`, 400, "lanes lists 2 lanes for n = 3"},
		{"more lanes than 8", post, "/variants", `{"input":"x","lanes":[{},{},{},{},{},{},{},{},{}]}`, 400, "n must be an integer from 1 to 8, not 9"},
		{"results before any set", get, "/variants/results", "", 404, "has no Ways set"},
		{"status of an unknown set", get, "/variants/status?attempt_set_id=" + unknownSet, "", 404, "has no Ways set"},
		{"keep of an unknown set", post, "/variants/adopt", `{"attempt_set_id":"` + unknownSet + `","index":0}`, 404, "has no Ways set"},
		{"discard of an unknown set", post, "/variants/discard", `{"attempt_set_id":"` + unknownSet + `"}`, 404, "has no Ways set"},
		{"discard without a set", post, "/variants/discard", `{}`, 400, "attempt_set_id is required"},
	})
	for _, c := range []struct{ method, path, body string }{
		{post, "/variants", `{"input":"x"}`},
		{get, "/variants/results", ""},
		{get, "/variants/status?attempt_set_id=" + unknownSet, ""},
		{post, "/variants/verify", `{"attempt_set_id":"` + unknownSet + `"}`},
		{post, "/variants/adopt", `{"attempt_set_id":"` + unknownSet + `","index":0}`},
		{post, "/variants/discard", `{"attempt_set_id":"` + unknownSet + `"}`},
	} {
		r.refuses(t, "nosuchsession", []waysBadCall{{"unknown session " + c.path, c.method, c.path, c.body, 404, `session "nosuchsession"`}})
	}

	set := r.waysStart(t, id, `{"input":"add a file","lanes":[{"model":"m1"},{"model":"m2"},{"model":"m3"}]}`)
	r.waitResults(t, id, "lanes 1 and 2 ended, lane 0 running", func(res waysResults) bool {
		return res.Attempts[0].State == "running" && res.Attempts[1].State == "succeeded" && res.Attempts[2].State == "succeeded"
	})
	setArg := `{"attempt_set_id":"` + set + `"`
	r.refuses(t, id, []waysBadCall{
		{"verify while a lane runs", post, "/variants/verify", setArg + `}`, 409, "Verify runs once every Attempt is terminal"},
		{"judge while a lane runs", post, "/variants/judge", setArg + `,"agent_id":"coder"}`, 409, "Judge needs every Attempt terminal"},
		{"keep while a lane runs", post, "/variants/adopt", setArg + `,"index":1}`, 409, "Keep needs every Attempt terminal"},
		{"a second set", post, "/variants", `{"input":"again"}`, 409, "owns workspace \"" + r.ws + "\" until it is kept or discarded"},
	})
	close(release)
	r.waitResults(t, id, "ready", func(res waysResults) bool { return res.State == "ready" })
	r.refuses(t, id, []waysBadCall{
		{"keep of an unverified Attempt", post, "/variants/adopt", setArg + `,"index":0}`, 409, "Attempt 0 is not verified; run Verify first"},
		{"keep of index 3 of 3", post, "/variants/adopt", setArg + `,"index":3}`, 400, "index 3 is out of range: the set has Attempts 0 to 2"},
		{"keep of index -1", post, "/variants/adopt", setArg + `,"index":-1}`, 400, "index -1 is out of range"},
		{"diff of index 3", get, "/variants/diff?attempt_set_id=" + set + "&index=3&path=good.txt", "", 400, "index 3 is out of range"},
		{"cost on baseline 7", get, "/variants/cost?attempt_set_id=" + set + "&baseline=7", "", 400, "index 7 is out of range"},
		{"trajectories on baseline 3", get, "/variants/trajectories?attempt_set_id=" + set + "&baseline=3", "", 400, "index 3 is out of range"},
	})
	mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/verify", setArg+`}`)
	r.refuses(t, id, []waysBadCall{
		{"keep of an Attempt that failed its Check", post, "/variants/adopt", setArg + `,"index":1}`, 409, "Attempt 1 failed its Check (exit 1)"},
		{"keep of an empty Attempt", post, "/variants/adopt", setArg + `,"index":2}`, 409, "Attempt 2 changed no file"},
		{"judge with one survivor", post, "/variants/judge", setArg + `,"agent_id":"coder"}`, 409, "Judge needs at least two passing, non-empty survivors; 1 survive"},
	})

	// Keep lane 0; a newer set makes this one stale.
	mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/adopt", setArg+`,"index":0}`)
	newer := r.waysStart(t, id, `{"input":"again","n":1,"lanes":[{"model":"m1"}]}`)
	r.waitResults(t, id, "the newer set ready", func(res waysResults) bool { return res.AttemptSetID == newer && res.State == "ready" })
	stale := `is stale: session "` + id + `" started a newer one`
	r.refuses(t, id, []waysBadCall{
		{"status of a stale set", get, "/variants/status?attempt_set_id=" + set, "", 409, stale},
		{"diff of a stale set", get, "/variants/diff?attempt_set_id=" + set + "&index=0&path=good.txt", "", 409, stale},
		{"verify of a stale set", post, "/variants/verify", setArg + `}`, 409, stale},
		{"judge of a stale set", post, "/variants/judge", setArg + `,"agent_id":"coder"}`, 409, stale},
		{"keep of a stale set", post, "/variants/adopt", setArg + `,"index":0}`, 409, stale},
		{"discard of a stale set", post, "/variants/discard", setArg + `}`, 409, stale},
		{"cost of a stale set", get, "/variants/cost?attempt_set_id=" + set, "", 409, stale},
		{"trajectories of a stale set", get, "/variants/trajectories?attempt_set_id=" + set, "", 409, stale},
	})
	if res := r.results(t, id); res.AttemptSetID != newer || res.State != "ready" {
		t.Errorf("the newer set after stale calls: %+v", res)
	}
}

// waysBadCall is a call to a Session's route that must be refused.
type waysBadCall struct {
	name, method, path, body string
	status                   int
	errText                  string
}

// refuses makes each call on Session session and requires its status, an
// {error} containing its errText, no event appended to the journal, and
// the same Results as before.
func (r *waysRig) refuses(t *testing.T, session string, calls []waysBadCall) {
	t.Helper()
	for _, c := range calls {
		before, results := r.d.Journal().Last(), r.do(t, get, "/api/sessions/"+session+"/variants/results", "")
		resp := r.do(t, c.method, "/api/sessions/"+session+c.path, c.body)
		var body struct {
			Error *string `json:"error"`
		}
		if resp.status != c.status || json.Unmarshal(resp.body, &body) != nil || body.Error == nil || !strings.Contains(*body.Error, c.errText) {
			t.Errorf("%s: %s %s %s = %d %s, want %d with an error containing %q", c.name, c.method, c.path, c.body, resp.status, resp.body, c.status, c.errText)
		}
		if after := r.d.Journal().Last(); after != before {
			t.Errorf("%s changed the journal: %v", c.name, r.appendedSince(t, before))
		}
		if again := r.do(t, get, "/api/sessions/"+session+"/variants/results", ""); again.status != results.status || string(again.body) != string(results.body) {
			t.Errorf("%s changed the Results:\n%s\nwas\n%s", c.name, again.body, results.body)
		}
	}
}

// appendedSince lists the types of the events after seq.
func (r *waysRig) appendedSince(t *testing.T, seq uint64) []string {
	t.Helper()
	var types []string
	err := r.d.Journal().Scan(context.Background(), seq, 0, func(_ uint64, raw []byte) error {
		env, err := journal.DecodeEnvelope(raw)
		types = append(types, env.Type+" of "+env.AggregateID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// TestWaysKeepOverOutsideEdits: a file the kept Attempt changed that a
// writer outside Lathe changed too while the set owned the Workspace
// refuses Keep (409 naming it, nothing applied or appended), since applying
// would overwrite that edit; once the edit is undone Keep works, and an
// outside edit to a file the Attempt did not touch survives it.
func TestWaysKeepOverOutsideEdits(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Model: "m1", Steps: []fakellm.Step{fakellm.ToolCall("c1", "write_file", `{"path":"a.txt","content":"the lane's a\n"}`), fakellm.Usage(1, 1, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("done"), fakellm.Usage(1, 1, 0)}},
	}}
	r, id := newWaysSession(t, script)
	set := r.waysStart(t, id, `{"input":"improve a.txt","n":1,"lanes":[{"model":"m1"}]}`)
	r.waitResults(t, id, "ready", func(res waysResults) bool { return res.State == "ready" })

	a := filepath.Join(r.dir, "a.txt")
	before, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "edited outside Lathe\n")
	write(filepath.Join(r.dir, "notes.txt"), "my notes\n")
	r.refuses(t, id, []waysBadCall{
		{"keep over an outside edit of a file the Attempt changed", post, "/variants/adopt", `{"attempt_set_id":"` + set + `","index":0}`, 409, "the checkout changed 1 of the files Attempt 0 changed since the set started (a.txt)"},
	})
	if b, _ := os.ReadFile(a); string(b) != "edited outside Lathe\n" {
		t.Errorf("a refused Keep touched a.txt: %q", b)
	}

	write(a, string(before))
	if kept := mustCall(t, r.srv, 200, post, "/api/sessions/"+id+"/variants/adopt", `{"attempt_set_id":"`+set+`","index":0}`); kept["state"] != "kept" {
		t.Fatalf("keep after the edit was undone: %v", kept)
	}
	if b, _ := os.ReadFile(a); string(b) != "the lane's a\n" {
		t.Errorf("a.txt after Keep = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, "notes.txt")); string(b) != "my notes\n" {
		t.Errorf("an outside edit of a file the Attempt did not touch, after Keep: %q", b)
	}
}
