package daemon

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// usageSeen is one JSON object that reports token usage, found by the path
// it sits at in a response or frame.
type usageSeen struct {
	at                        string
	input, output, reasoning  int
	total                     int
	hasTotal, known, hasKnown bool
}

func (u usageSeen) String() string {
	s := fmt.Sprintf("%s: %d in, %d out, %d reasoning", u.at, u.input, u.output, u.reasoning)
	if u.hasTotal {
		s += fmt.Sprintf(", %d total", u.total)
	}
	return s
}

// usagesIn finds every object of raw that carries input_tokens: the flat
// token fields of a frame or a response, or a record's usage.
func usagesIn(t *testing.T, where string, raw []byte) []usageSeen {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v: %s", where, err, raw)
	}
	var out []usageSeen
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if in, ok := v["input_tokens"].(float64); ok {
				num := func(k string) (int, bool) { f, ok := v[k].(float64); return int(f), ok }
				u := usageSeen{at: at, input: int(in)}
				u.output, _ = num("output_tokens")
				u.reasoning, _ = num("reasoning_tokens")
				u.total, u.hasTotal = num("total_tokens")
				u.known, u.hasKnown = v["token_usage_known"].(bool)
				out = append(out, u)
			}
			for k, e := range v {
				walk(at+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", at, i), e)
			}
		}
	}
	walk(where, v)
	return out
}

// TestUsageAgreesEverywhere runs the same scripted inference, with
// reasoning tokens, through every route and frame that reports usage: a
// Session turn (its frame, its record, the Session execute), a Chat turn
// (its frame and its message), a Ways Attempt (Results and the cost
// report), an Agent execute and the token report, and an Automation run
// (its execute answer and its record). Each must report the same counts,
// and every total_tokens must be input + output: reasoning is inside the
// output, never added on top (CONTRACT.md).
func TestUsageAgreesEverywhere(t *testing.T) {
	const in, out, reasoning = 100, 40, 30
	const inferences = 6
	turn := fakellm.Turn{Steps: []fakellm.Step{fakellm.Reasoning("thinking it over"), fakellm.Text("ok"), fakellm.Usage(in, out, reasoning)}}
	script := fakellm.Script{}
	for range inferences {
		script.Turns = append(script.Turns, turn)
	}
	r := newWaysRig(t, script)
	r.gitWorkspace(t)
	id := r.create(t, "").ID
	r.ready(t, id)

	var seen []usageSeen
	saw := func(what string, raw []byte) []usageSeen {
		t.Helper()
		us := usagesIn(t, what, raw)
		if len(us) == 0 {
			t.Errorf("%s reports no usage: %s", what, raw)
		}
		seen = append(seen, us...)
		return us
	}
	ok := func(resp reply, status int, what string) []byte {
		t.Helper()
		if resp.status != status {
			t.Fatalf("%s: %d %s", what, resp.status, resp.body)
		}
		return resp.body
	}

	// A Session turn: its terminal frame and its record; then the
	// synchronous Session execute.
	ctx := testContext(t, 60*time.Second)
	ws := dialWS(t, ctx, r.srv, nil)
	expectFrame(t, ctx, ws, "ready")
	expectFrame(t, ctx, ws, "snapshot")
	tc := &turnConn{c: ws}
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "T1", "input": "hello"})
	for {
		kind, raw := readFrame(t, ctx, ws)
		if kind == "session-done" || kind == "session-error" || kind == "session-cancelled" {
			if kind != "session-done" {
				t.Fatalf("turn: %s", raw)
			}
			saw("session-done frame", raw)
			break
		}
	}
	saw("GET turns", ok(r.do(t, get, "/api/sessions/"+id+"/turns", ""), 200, "turns"))
	saw("POST session execute", ok(r.do(t, post, "/api/sessions/"+id+"/execute", `{"input":"again"}`), 200, "session execute"))

	// A Chat turn: its chat-done frame and the reply's record.
	chat := mustCall(t, r.srv, 201, post, "/api/chat", `{"agent_id":"coder","name":"usage"}`)["id"].(string)
	cc := openChatConn(t, r.srv)
	cc.send(t, map[string]any{"cmd": "chat-turn", "chat_id": chat, "content": "hi"})
	for {
		kind, raw := readFrame(t, ctx, cc.c)
		if kind == "chat-done" || kind == "chat-error" || kind == "chat-stopped" {
			if kind != "chat-done" {
				t.Fatalf("chat turn: %s", raw)
			}
			saw("chat-done frame", raw)
			break
		}
	}
	chatIdle(t, r.srv, chat)
	saw("GET chat", ok(r.do(t, get, "/api/chat/"+chat, ""), 200, "chat"))

	// An Agent execute.
	saw("POST agent execute", ok(r.do(t, post, "/api/agents/coder/execute", `{"input":"x","stateless":true}`), 200, "agent execute"))

	// An Automation run: its execute answer and its record.
	ok(r.do(t, post, "/api/automations", `{"id":"u","name":"U","trigger":{"kind":"manual"},"nodes":[{"id":"ask","kind":"agent","agent_id":"coder","input":"{{trigger}}"}]}`), 201, "create automation")
	saw("POST workflow execute", ok(r.do(t, post, "/api/workflows/u/execute", `{"input":"go"}`), 200, "workflow execute"))
	saw("GET automation runs", ok(r.do(t, get, "/api/automations/u/runs", ""), 200, "runs"))

	// A Ways Attempt: Results (the Attempt and the set) and the cost report.
	r.discardAtEnd(t, id)
	var started struct {
		AttemptSetID string `json:"attempt_set_id"`
	}
	if err := json.Unmarshal(ok(r.do(t, post, "/api/sessions/"+id+"/variants", `{"input":"improve","n":1}`), 202, "variants"), &started); err != nil {
		t.Fatal(err)
	}
	r.waitResults(t, id, "the Attempt succeeded", func(res waysResults) bool { return res.Attempts[0].State == "succeeded" })
	saw("GET variants results", ok(r.do(t, get, "/api/sessions/"+id+"/variants/results", ""), 200, "results"))
	cost := ok(r.do(t, get, "/api/sessions/"+id+"/variants/cost?attempt_set_id="+started.AttemptSetID+"&baseline=0", ""), 200, "cost")
	saw("GET variants cost", cost)
	var rep struct {
		TotalUSD        *float64 `json:"total_usd"`
		ActualCostKnown bool     `json:"actual_cost_known"`
	}
	if json.Unmarshal(cost, &rep) != nil || rep.TotalUSD == nil || !rep.ActualCostKnown {
		t.Errorf("cost of a priced, complete Attempt: %s", cost)
	}

	// Every report agrees: the same counts, total = input + output.
	if n := len(r.llm.Requests()); n != inferences {
		t.Fatalf("%d inferences, want %d: the counts below assume one per route", n, inferences)
	}
	var lines []string
	for _, u := range seen {
		lines = append(lines, u.String())
		if u.hasTotal && u.total != u.input+u.output {
			t.Errorf("%s: total_tokens %d is not input + output (%d)", u.at, u.total, u.input+u.output)
		}
		if u.input != in || u.output != out || u.reasoning != reasoning || (u.hasKnown && !u.known) {
			// Only a sum over several inferences may differ, by a whole
			// number of them.
			k := u.input / in
			if k < 2 || u.input != k*in || u.output != k*out || u.reasoning != k*reasoning {
				t.Errorf("%s: want %d in, %d out, %d reasoning (or a multiple), known", u, in, out, reasoning)
			}
		}
	}
	for _, route := range []string{"session-done frame", "GET turns", "POST session execute", "chat-done frame", "GET chat",
		"POST agent execute", "POST workflow execute", "GET automation runs", "GET variants results", "GET variants cost"} {
		if !strings.Contains("\n"+strings.Join(lines, "\n"), "\n"+route) {
			t.Errorf("no usage seen from %s", route)
		}
	}

	// The token report counts every inference of the Agent.
	report := ok(r.do(t, get, "/api/tokens/report", ""), 200, "token report")
	var tr struct {
		Total struct {
			Requests        int  `json:"requests"`
			InputTokens     int  `json:"input_tokens"`
			OutputTokens    int  `json:"output_tokens"`
			ReasoningTokens int  `json:"reasoning_tokens"`
			TotalTokens     int  `json:"total_tokens"`
			TokenUsageKnown bool `json:"token_usage_known"`
		} `json:"total"`
	}
	if err := json.Unmarshal(report, &tr); err != nil {
		t.Fatal(err)
	}
	if got := tr.Total; got.Requests != inferences || got.InputTokens != inferences*in || got.OutputTokens != inferences*out ||
		got.ReasoningTokens != inferences*reasoning || got.TotalTokens != inferences*(in+out) || !got.TokenUsageKnown {
		t.Errorf("token report total %+v, want %d requests of %d in, %d out (%d reasoning), total %d each", got, inferences, in, out, reasoning, in+out)
	}
	for _, u := range usagesIn(t, "GET tokens report", report) {
		if u.total != u.input+u.output {
			t.Errorf("%s: total_tokens is not input + output", u)
		}
	}
	if t.Failed() {
		t.Logf("usage seen:\n%s", strings.Join(lines, "\n"))
	}
}

// TestWaysCostLowerBound: a lane that fails after a paid step keeps its
// priced subtotal, and every USD figure over it says it is a lower bound
// (CONTRACT.md): the lane's and the set's usd_known, the cost report's
// actual_cost_known and baseline_cost_known are false, while total_usd
// stays given (both models priced) and saved is not claimed.
func TestWaysCostLowerBound(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Model: "m1", Steps: []fakellm.Step{fakellm.ToolCall("c1", "write_file", `{"path":"half.txt","content":"half\n"}`), fakellm.Usage(10, 5, 2)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Fail(500)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("done"), fakellm.Usage(20, 5, 0)}},
	}}
	r := newWaysRig(t, script, func(c *config.Config) { c.Prices["fake/m2"] = config.Price{Input: 1, Output: 1} })
	r.gitWorkspace(t)
	id := r.create(t, "").ID
	r.ready(t, id)
	r.discardAtEnd(t, id)
	set := r.waysStart(t, id, `{"input":"improve a.txt","lanes":[{"model":"m1"},{"model":"m2"}]}`)
	r.waitResults(t, id, "ready", func(res waysResults) bool { return res.State == "ready" })

	type usd struct {
		USD      *float64 `json:"usd"`
		USDKnown bool     `json:"usd_known"`
	}
	var res struct {
		Usage    usd `json:"usage"`
		Attempts []struct {
			State string `json:"state"`
			Usage usd    `json:"usage"`
		} `json:"attempts"`
	}
	if resp := r.do(t, get, "/api/sessions/"+id+"/variants/results", ""); json.Unmarshal(resp.body, &res) != nil || len(res.Attempts) != 2 {
		t.Fatalf("results: %d %s", resp.status, resp.body)
	}
	if a := res.Attempts[0]; a.State != "failed" || a.Usage.USD == nil || *a.Usage.USD <= 0 || a.Usage.USDKnown {
		t.Errorf("the failed lane: %+v, want its priced subtotal with usd_known false", a)
	}
	if a := res.Attempts[1]; a.State != "succeeded" || a.Usage.USD == nil || !a.Usage.USDKnown {
		t.Errorf("the priced, complete lane: %+v", a)
	}
	if u := res.Usage; u.USD == nil || *u.USD <= *res.Attempts[1].Usage.USD || u.USDKnown {
		t.Errorf("the set's usage %+v: want the sum, a lower bound (usd_known false)", u)
	}

	var cost struct {
		Lanes []struct {
			ActualUSD         *float64 `json:"actual_usd"`
			ActualCostKnown   bool     `json:"actual_cost_known"`
			BaselineCostKnown bool     `json:"baseline_cost_known"`
		} `json:"lanes"`
		TotalUSD          *float64 `json:"total_usd"`
		ActualCostKnown   bool     `json:"actual_cost_known"`
		BaselineUSD       *float64 `json:"baseline_usd"`
		BaselineCostKnown bool     `json:"baseline_cost_known"`
		Saved             *float64 `json:"saved"`
	}
	resp := r.do(t, get, "/api/sessions/"+id+"/variants/cost?attempt_set_id="+set+"&baseline=1", "")
	if resp.status != 200 || json.Unmarshal(resp.body, &cost) != nil || len(cost.Lanes) != 2 {
		t.Fatalf("cost: %d %s", resp.status, resp.body)
	}
	if l := cost.Lanes[0]; l.ActualUSD == nil || l.ActualCostKnown || l.BaselineCostKnown {
		t.Errorf("the failed lane's cost: %+v, want a priced lower bound, both flags false", l)
	}
	if l := cost.Lanes[1]; l.ActualUSD == nil || !l.ActualCostKnown || !l.BaselineCostKnown {
		t.Errorf("the complete lane's cost: %+v", l)
	}
	if cost.TotalUSD == nil || cost.ActualCostKnown || cost.BaselineUSD == nil || cost.BaselineCostKnown || cost.Saved != nil {
		t.Errorf("the set's cost: %s; want totals given as lower bounds, their flags false, no saved", resp.body)
	}
}
