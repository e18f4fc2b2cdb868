package daemon

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/commands/turns"

	"lathe/cmd/lathe/internal/config"
	"lathe/projections"
	"lathe/runtime/llm/fakellm"
)

// TestRefusedPromptNeverReachesAModel: a prompt a UserPromptSubmit hook
// blocked never reaches a model, in its turn or any later one (issue 32,
// finding 3). A guard refuses every prompt holding a secret; after a
// refused prompt, the next turn's model request does not carry it, in a
// Session (single-Agent and lattice), a Ways lane started from the
// Session's conversation, a Chat and a stateful execute. GET …/messages
// leaves it out, the turn record, History and the Session's and the Chat's
// exports keep it as a refused prompt, and a store folded again from the journal (no checkpoint) or restored
// from a checkpoint answers the same. The sandboxes are real.
func TestRefusedPromptNeverReachesAModel(t *testing.T) {
	const secret = "sk-SECRET-42"
	refusal := "blocked by hook `no-secrets`: no secrets to a hosted model"
	text := func(model, s string) fakellm.Turn {
		return fakellm.Turn{Model: model, Steps: []fakellm.Step{fakellm.Text(s), fakellm.Usage(10, 5, 0)}}
	}
	r := newWaysRig(t, fakellm.Script{Turns: []fakellm.Turn{
		text("m1", "hi"), text("m1", "you said hello"), text("lane-m", "lane done"),
		{Model: "plan-m", Steps: []fakellm.Step{planCall(subtask("a", "say hi")), fakellm.Usage(10, 5, 0)}},
		text("w1-m", "w1 done"), text("plan-m", "synthesised"),
		text("chat-m", "hi"), text("chat-m", "again"),
		text("exec-m", "hi"), text("exec-m", "again"),
	}}, func(c *config.Config) {
		agent := func(id, model string) config.Agent {
			return config.Agent{ID: id, Name: id, Provider: "fake", Model: model}
		}
		c.Agents = []config.Agent{agent("coder", "m1"), agent("planner", "plan-m"), agent("w1", "w1-m"), agent("chatter", "chat-m"), agent("runner", "exec-m")}
		c.Lattice = config.Lattice{Coordinator: "planner"}
		c.Hooks = []config.Hook{{Event: "UserPromptSubmit", Name: "no-secrets", Host: true,
			Command: `grep -q ` + secret + ` && { echo "no secrets to a hosted model" >&2; exit 2; }; exit 0`}}
	})
	// lastTo is the last request the model got for model m: it must not
	// carry the secret.
	lastTo := func(t *testing.T, m string) string {
		t.Helper()
		var last fakellm.Request
		for _, req := range r.llm.Requests() {
			if req.Model == m {
				last = req
			}
		}
		if last.Seq == 0 {
			t.Fatalf("no request for %s", m)
		}
		if bytes.Contains(last.Body, []byte(secret)) {
			t.Errorf("the refused prompt reached the model in request %d for %s", last.Seq, m)
		}
		return string(last.Body)
	}
	single, lattice, tc := r.everySessionMode(t)
	refused := func(t *testing.T, session, turn string) {
		t.Helper()
		tc.send(t, map[string]any{"cmd": "session", "id": session, "turn_id": turn, "input": "deploy with " + secret})
		if fs := tc.terminal(t, turn); fs[len(fs)-1].Kind != "session-error" || fs[len(fs)-1].Error != refusal {
			t.Fatalf("the secret's turn: %+v", fs[len(fs)-1])
		}
	}

	t.Run("Session", func(t *testing.T) {
		tc.runDone(t, single, "t1", "hello")
		refused(t, single, "blocked")
		tc.runDone(t, single, "t3", "what did I say?")
		if body := lastTo(t, "m1"); !strings.Contains(body, "hello") || !strings.Contains(body, "what did I say?") {
			t.Errorf("the next turn lacks the conversation: %s", body)
		}
		var msgs struct{ Messages []turns.Message }
		if err := json.Unmarshal(r.do(t, get, "/api/sessions/"+single+"/messages", "").body, &msgs); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range msgs.Messages {
			got = append(got, m.TurnID+":"+m.Role+":"+m.Content)
		}
		if want := "t1:user:hello t1:assistant:hi t3:user:what did I say? t3:assistant:you said hello"; strings.Join(got, " ") != want {
			t.Errorf("messages %q, want %q", got, want)
		}
		var turn projections.Turn
		if err := json.Unmarshal(r.do(t, get, "/api/sessions/"+single+"/turns/blocked", "").body, &turn); err != nil {
			t.Fatal(err)
		}
		if !turn.Refused || turn.Status != projections.TurnError || turn.Error != refusal || !strings.Contains(turn.Input.String(), secret) {
			t.Errorf("the refused turn's record: refused %v, %s %q, input %q", turn.Refused, turn.Status, turn.Error, turn.Input.String())
		}
		var audit struct{ Entries []projections.AuditEntry }
		if err := json.Unmarshal(r.do(t, get, "/api/sessions/"+single+"/audit?limit=500", "").body, &audit); err != nil {
			t.Fatal(err)
		}
		shown := false
		for _, e := range audit.Entries {
			shown = shown || (e.TurnID == "blocked" && e.Type == "turn-failed" && strings.Contains(e.Summary, "refused the prompt: "+refusal))
		}
		if !shown {
			t.Errorf("History does not show the refused prompt: %+v", audit.Entries)
		}
		if md := string(r.do(t, get, "/api/sessions/"+single+"/export?format=markdown", "").body); !strings.Contains(md,
			"**Status:** refused (a hook blocked the prompt; no model saw it): "+refusal) {
			t.Errorf("the export does not show the refused turn as such:\n%s", md)
		}
	})

	t.Run("lattice", func(t *testing.T) {
		refused(t, lattice, "LB")
		tc.send(t, map[string]any{"cmd": "session", "id": lattice, "turn_id": "L2", "input": "build"})
		if fs := tc.terminal(t, "L2"); fs[len(fs)-1].Kind != "session-done" {
			t.Fatalf("lattice turn: %+v", fs[len(fs)-1])
		}
		lastTo(t, "w1-m")
		var first fakellm.Request // the coordinator's plan, which gets the conversation
		for _, req := range r.llm.Requests() {
			if req.Model == "plan-m" && first.Seq == 0 {
				first = req
			}
		}
		if bytes.Contains(first.Body, []byte(secret)) {
			t.Errorf("the refused prompt reached the coordinator's plan")
		}
	})

	t.Run("Ways lane", func(t *testing.T) {
		set := r.waysStart(t, single, `{"input":"carry on","lanes":[{"model":"lane-m"}]}`)
		r.waitResults(t, single, "ready", func(res waysResults) bool { return res.AttemptSetID == set && res.State == "ready" })
		if body := lastTo(t, "lane-m"); !strings.Contains(body, "what did I say?") {
			t.Errorf("the lane did not start from the Session's conversation: %s", body)
		}
	})

	var chat string
	t.Run("Chat", func(t *testing.T) {
		chat = mustCall(t, r.srv, 201, post, "/api/chat", `{"agent_id":"chatter"}`)["id"].(string)
		cc := openChatConn(t, r.srv)
		for _, tr := range []struct{ content, end string }{{"hello", "chat-done"}, {"deploy with " + secret, "chat-error"}, {"again", "chat-done"}} {
			cc.send(t, map[string]any{"cmd": "chat-turn", "chat_id": chat, "content": tr.content})
			if fs := cc.terminal(t); fs[len(fs)-1].Kind != tr.end {
				t.Fatalf("chat turn %q: %+v", tr.content, fs[len(fs)-1])
			}
			chatIdle(t, r.srv, chat)
		}
		lastTo(t, "chat-m")
		var c struct {
			Messages []struct {
				Role, Content string
				Refused       bool
			}
		}
		if err := json.Unmarshal(r.do(t, get, "/api/chat/"+chat, "").body, &c); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range c.Messages {
			s := m.Role + ":" + m.Content
			if m.Refused {
				s += " (refused)"
			}
			got = append(got, s)
		}
		want := []string{"user:hello", "assistant:hi", "user:deploy with " + secret + " (refused)", "user:again", "assistant:again"}
		if strings.Join(got, " | ") != strings.Join(want, " | ") {
			t.Errorf("chat messages %q, want %q", got, want)
		}
		if md := string(r.do(t, get, "/api/chat/"+chat+"/export", "").body); !strings.Contains(md, secret+"\n\n_(refused by a hook: no model saw it)_") {
			t.Errorf("the Chat's export does not show the refused message as such:\n%s", md)
		}
	})

	t.Run("stateful execute", func(t *testing.T) {
		for _, ex := range []struct {
			input  string
			status int
		}{{"hello", 200}, {"deploy with " + secret, 403}, {"again", 200}} {
			if resp := r.do(t, post, "/api/agents/runner/execute", `{"input":"`+ex.input+`"}`); resp.status != ex.status {
				t.Fatalf("execute %q: %d %s", ex.input, resp.status, resp.body)
			}
		}
		if body := lastTo(t, "exec-m"); !strings.Contains(body, "hello") {
			t.Errorf("the execute lacks the Agent's conversation: %s", body)
		}
	})

	// The same answers from the journal alone and from a checkpoint.
	t.Run("replay and checkpoint", func(t *testing.T) {
		rebuilt, _, err := projections.Load(testContext(t, 10*time.Second), r.d.Journal(), "")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "cp")
		if _, err := r.d.Store().WriteCheckpoint(path); err != nil {
			t.Fatal(err)
		}
		restored, n, err := projections.Load(testContext(t, 10*time.Second), r.d.Journal(), path)
		if err != nil || n != 0 {
			t.Fatalf("checkpoint load: replayed %d, %v", n, err)
		}
		live := r.d.Store()
		for name, s := range map[string]*projections.Store{"replayed": rebuilt, "restored": restored} {
			for _, id := range []string{single, lattice} {
				a, _ := json.Marshal(turns.Transcript(live.Turns(id)))
				b, _ := json.Marshal(turns.Transcript(s.Turns(id)))
				if !bytes.Equal(a, b) || bytes.Contains(b, []byte(secret)) {
					t.Errorf("%s transcript of %s:\n%s\nlive\n%s", name, id, b, a)
				}
			}
			if turn, _ := s.Turn(single, "blocked"); !turn.Refused {
				t.Errorf("%s: the refused turn is not marked refused", name)
			}
			lc, _ := live.Chat(chat)
			sc, _ := s.Chat(chat)
			a, _ := json.Marshal(lc.Messages)
			b, _ := json.Marshal(sc.Messages)
			if !bytes.Equal(a, b) || !bytes.Contains(b, []byte(`"refused":true`)) {
				t.Errorf("%s Chat messages:\n%s\nlive\n%s", name, b, a)
			}
		}
	})
}
