package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// rpcReply is a JSON-RPC 2.0 response.
type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
}

type a2aTaskJSON struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string `json:"state"`
		Message *struct {
			Role  string `json:"role"`
			Parts []struct {
				Kind string `json:"kind"`
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"artifacts"`
	History  []json.RawMessage `json:"history"`
	Metadata map[string]any    `json:"metadata"`
}

// TestA2AInbound: the agent card lists one skill per receiver; message/send
// runs the receiver's Agent and answers a completed task with its answer
// as status message and artifact; tasks/get reads the journaled task back;
// an unknown receiver, an unknown task, a malformed request and an
// unsupported method are JSON-RPC errors.
func TestA2AInbound(t *testing.T) {
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Text("forty-two"), fakellm.Usage(3, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Fail(500)}},
		{Steps: []fakellm.Step{fakellm.Text("forty-three"), fakellm.Usage(3, 2, 0)}},
	}})
	defer fake.Close()
	_, srv := newTestDaemon(t, func(c *config.Config) {
		runtimeConfig(config.KindOpenAI, fake.URL())(c)
		c.A2A.Receivers = []config.A2AReceiver{
			{ID: "helper", AgentID: "a", Name: "Helper", Description: "Answers questions"},
			{ID: "other", AgentID: "b", Name: "Other", Description: "Budgeted"},
		}
	})
	send := func(body string, header ...string) (rpcReply, a2aTaskJSON) {
		t.Helper()
		r := call(t, srv, post, "/a2a/tasks", body, header...)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Fatalf("POST /a2a/tasks: %d %v %s", r.status, r.header, r.body)
		}
		var rep rpcReply
		if err := json.Unmarshal(r.body, &rep); err != nil || rep.JSONRPC != "2.0" {
			t.Fatalf("not a JSON-RPC response: %v %s", err, r.body)
		}
		var task a2aTaskJSON
		if rep.Result != nil {
			if err := json.Unmarshal(rep.Result, &task); err != nil {
				t.Fatal(err)
			}
		}
		return rep, task
	}

	card := mustCall(t, srv, 200, get, "/.well-known/agent-card.json", "")
	if old := mustCall(t, srv, 200, get, "/.well-known/agent.json", ""); old["name"] != card["name"] || card["securitySchemes"] != nil {
		t.Fatalf("the older card path, or security without keys: %v", card)
	}
	skills, _ := card["skills"].([]any)
	if card["name"] != "Lathe" || !strings.HasSuffix(card["url"].(string), "/a2a/tasks") || len(skills) != 2 ||
		skills[0].(map[string]any)["id"] != "helper" || skills[1].(map[string]any)["name"] != "Other" || card["version"] == nil || card["capabilities"] == nil {
		t.Fatalf("agent card: %v", card)
	}
	// One card for both protocol lines (issue 35): 0.3's url and
	// protocolVersion, and 1.0's supportedInterfaces, 1.0 first.
	var interfaces []string
	for _, i := range card["supportedInterfaces"].([]any) {
		i := i.(map[string]any)
		interfaces = append(interfaces, fmt.Sprint(i["protocolBinding"], " ", i["protocolVersion"], " ", i["url"] == card["url"]))
	}
	if card["protocolVersion"] != "0.3" || card["preferredTransport"] != "JSONRPC" || strings.Join(interfaces, ",") != "JSONRPC 1.0 true,JSONRPC 0.3 true" {
		t.Fatalf("the card's interfaces: %v %v", card["protocolVersion"], interfaces)
	}

	msg := `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"What is six times seven?"}],"metadata":{"receiver_id":"helper"}}}}`
	rep, task := send(msg)
	if rep.Error != nil || task.Kind != "task" || task.Status.State != "completed" || task.Status.Message == nil ||
		task.Status.Message.Parts[0].Text != "forty-two" || len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Text != "forty-two" ||
		len(task.History) != 2 || task.Metadata["receiver_id"] != "helper" || rep.ID != float64(7) {
		t.Fatalf("message/send: %+v %s", rep.Error, rep.Result)
	}
	msgs, system, tools := wireMessages(t, config.KindOpenAI, fake.Requests()[0])
	if strings.Join(msgs, "|") != "user:What is six times seven?" || system != "be brief" || tools {
		t.Fatalf("the Agent's request: %v %q %v", msgs, system, tools)
	}
	_, got := send(`{"jsonrpc":"2.0","id":"g","method":"tasks/get","params":{"id":"` + task.ID + `"}}`)
	if got.ID != task.ID || got.Status.State != "completed" || got.Artifacts[0].Parts[0].Text != "forty-two" || got.ContextID != task.ContextID {
		t.Fatalf("tasks/get: %+v", got)
	}
	_, short := send(`{"jsonrpc":"2.0","id":"g","method":"tasks/get","params":{"id":"` + task.ID + `","historyLength":1}}`)
	if len(short.History) != 1 {
		t.Fatalf("historyLength 1: %d messages", len(short.History))
	}

	// A model failure ends the task failed, with why.
	rep, failed := send(strings.Replace(msg, `"helper"`, `"other"`, 1))
	if rep.Error != nil || failed.Status.State != "failed" || failed.Status.Message == nil ||
		failed.Status.Message.Parts[0].Text != "the Agent's model provider failed" {
		t.Fatalf("failed task: %+v %s", rep.Error, rep.Result)
	}

	for _, c := range []struct {
		name, body string
		code       int
		data       string
	}{
		{"unknown receiver", strings.Replace(msg, `"helper"`, `"nobody"`, 1), -32602, `no A2A receiver "nobody"`},
		{"no receiver with two", strings.Replace(msg, `,"metadata":{"receiver_id":"helper"}`, "", 1), -32602, "receiver_id is required"},
		{"receiver not a string", strings.Replace(msg, `"helper"`, `5`, 1), -32602, "receiver_id"},
		{"no message", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`, -32602, "params.message"},
		{"empty text", strings.Replace(msg, "What is six times seven?", " ", 1), -32602, "must not be empty"},
		{"file part", strings.Replace(msg, `{"kind":"text","text":"What is six times seven?"}`, `{"kind":"file","file":{"uri":"http://x/y"}}`, 1), -32005, "text and data"},
		// Issue 23, finding 1: a message too deep to replay once stored.
		{"message nested 9,000 deep", strings.Replace(msg, `{"kind":"text","text":"What is six times seven?"}`,
			`{"kind":"text","text":"What is six times seven?"},{"kind":"data","data":{"x":`+strings.Repeat("[", 9000)+strings.Repeat("]", 9000)+`}}`, 1), -32602, "nests too deeply"},
		{"unknown task", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"nope"}}`, -32001, "nope"},
		{"malformed JSON", `{"jsonrpc":"2.0","id":1,"method":`, -32700, ""},
		// An error the SDK raises says why in its message too.
		{"an unknown part kind", strings.Replace(msg, `"kind":"text"`, `"kind":"weird"`, 1), -32700, "unknown part kind weird"},
		{"not JSON-RPC 2.0", `{"jsonrpc":"1.0","id":1,"method":"tasks/get"}`, -32600, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{}}`, -32601, ""},
		{"params of the wrong shape", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":[1]}`, -32602, ""},
		{"cancel", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"x"}}`, -32002, ""},
	} {
		rep, _ := send(c.body)
		if rep.Error == nil || rep.Error.Code != c.code || (c.data != "" && !strings.Contains(rep.Error.Data["error"].(string), c.data)) ||
			(c.data != "" && !strings.Contains(rep.Error.Message, c.data)) {
			t.Errorf("%s: %+v %s, want code %d with %q", c.name, rep.Error, rep.Result, c.code, c.data)
		}
	}
	a2aInbound10(t, srv, task.ID)
	if n := len(fake.Requests()); n != 3 {
		t.Fatalf("the model saw %d requests; refused tasks must not run", n)
	}
}

// a2aInbound10 drives the A2A 1.0 binding of /a2a/tasks, which a request
// naming A2A-Version 1.0 (header or query) reaches (issue 35): SendMessage
// answers the completed task in 1.0's shape, GetTask reads back a task
// sent in 0.3 (id03), 0.3's method names are not 1.0's, and a version
// neither binding speaks is VersionNotSupported.
func a2aInbound10(t *testing.T, srv *httptest.Server, id03 string) {
	t.Helper()
	rpc := func(body string, header ...string) (rpcReply, http.Header) {
		t.Helper()
		r := call(t, srv, post, "/a2a/tasks", body, header...)
		var rep rpcReply
		if r.status != 200 || json.Unmarshal(r.body, &rep) != nil || rep.JSONRPC != "2.0" {
			t.Fatalf("POST /a2a/tasks: %d %s", r.status, r.body)
		}
		return rep, r.header
	}
	type task10 struct {
		ID     string `json:"id"`
		Status struct {
			State   string `json:"state"`
			Message struct {
				Role  string              `json:"role"`
				Parts []map[string]string `json:"parts"`
			} `json:"message"`
		} `json:"status"`
		Artifacts []struct {
			Parts []map[string]string `json:"parts"`
		} `json:"artifacts"`
		History []struct {
			Role string `json:"role"`
		} `json:"history"`
	}
	send := `{"jsonrpc":"2.0","id":"s","method":"SendMessage","params":{"message":{"messageId":"m10","role":"ROLE_USER","parts":[{"text":"And six times seven plus one?"}],"metadata":{"receiver_id":"helper"}}}}`
	rep, _ := rpc(send, "A2A-Version", "1.0")
	var sent struct{ Task task10 }
	if rep.Error != nil || json.Unmarshal(rep.Result, &sent) != nil || sent.Task.Status.State != "TASK_STATE_COMPLETED" ||
		sent.Task.Status.Message.Role != "ROLE_AGENT" || sent.Task.Status.Message.Parts[0]["text"] != "forty-three" ||
		len(sent.Task.Artifacts) != 1 || sent.Task.Artifacts[0].Parts[0]["text"] != "forty-three" || len(sent.Task.History) != 2 || sent.Task.History[0].Role != "ROLE_USER" {
		t.Fatalf("SendMessage: %+v %s", rep.Error, rep.Result)
	}
	for _, c := range []struct {
		name, id string
		header   []string
		path     string
	}{
		{"the 1.0 task, by header", sent.Task.ID, []string{"A2A-Version", "1.0"}, "/a2a/tasks"},
		{"the 0.3 task, a patch version", id03, []string{"A2A-Version", "1.0.2"}, "/a2a/tasks"},
		{"by query", sent.Task.ID, nil, "/a2a/tasks?A2A-Version=1.0"},
	} {
		r := call(t, srv, post, c.path, `{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"`+c.id+`"}}`, c.header...)
		var rep rpcReply
		var got task10
		if json.Unmarshal(r.body, &rep) != nil || rep.Error != nil || json.Unmarshal(rep.Result, &got) != nil ||
			got.ID != c.id || got.Status.State != "TASK_STATE_COMPLETED" || got.History[0].Role != "ROLE_USER" {
			t.Errorf("GetTask, %s: %d %s", c.name, r.status, r.body)
		}
	}
	for _, c := range []struct {
		name, body string
		header     []string
		code       int
		reason     string
	}{
		{"0.3's method under 1.0", strings.Replace(send, "SendMessage", "message/send", 1), []string{"A2A-Version", "1.0"}, -32601, ""},
		{"1.0's method under 0.3", send, nil, -32601, ""},
		{"an unknown receiver", strings.Replace(send, `"helper"`, `"nobody"`, 1), []string{"A2A-Version", "1.0"}, -32602, `no A2A receiver "nobody"`},
		{"an unknown task", `{"jsonrpc":"2.0","id":3,"method":"GetTask","params":{"id":"nope"}}`, []string{"A2A-Version", "1.0"}, -32001, "nope"},
		{"listing", `{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{}}`, []string{"A2A-Version", "1.0"}, -32004, "not listed"},
		{"version 2.0", send, []string{"A2A-Version", "2.0"}, -32009, `A2A-Version "2.0" is not supported`},
	} {
		rep, _ := rpc(c.body, c.header...)
		if rep.Error == nil || rep.Error.Code != c.code || !strings.Contains(rep.Error.Message, c.reason) {
			t.Errorf("%s: %+v %s, want code %d with %q", c.name, rep.Error, rep.Result, c.code, c.reason)
		}
	}
	if rep, _ := rpc(`{"jsonrpc":"2.0","id":"v","method":"GetTask","params":{"id":"x"}}`, "A2A-Version", "0.9"); rep.ID != "v" {
		t.Errorf("a refused version's reply does not carry the request's id: %+v", rep)
	}
}

// TestA2ACardDeclaresSecurity: with keys set, the card says how to
// authenticate (x-api-key, bearer) and the calls work with either.
func TestA2ACardDeclaresSecurity(t *testing.T) {
	const key, token = "test-api-key-0123456789", "test-bearer-0123456789"
	_, srv := newTestDaemon(t, func(c *config.Config) {
		c.Server.APIKeys, c.Server.BearerTokens = config.Secrets(key), config.Secrets(token)
		c.A2A.Receivers = []config.A2AReceiver{{ID: "helper", AgentID: "coder", Name: "Helper"}}
	})
	r := call(t, srv, get, "/.well-known/agent-card.json", "", "X-Api-Key", key)
	var card struct {
		SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
		Security        []map[string][]string     `json:"security"`
		// 1.0's
		SecurityRequirements []struct {
			Schemes map[string][]string `json:"schemes"`
		} `json:"securityRequirements"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &card) != nil {
		t.Fatalf("card: %d %s", r.status, r.body)
	}
	if s := card.SecuritySchemes["apiKey"]; s["type"] != "apiKey" || s["in"] != "header" || s["name"] != "x-api-key" {
		t.Errorf("apiKey scheme: %v", s)
	}
	if s := card.SecuritySchemes["bearer"]; s["type"] != "http" || s["scheme"] != "bearer" {
		t.Errorf("bearer scheme: %v", s)
	}
	if len(card.Security) != 2 || card.Security[0]["apiKey"] == nil || card.Security[1]["bearer"] == nil {
		t.Errorf("security: %v", card.Security)
	}
	if r := card.SecurityRequirements; len(r) != 2 || r[0].Schemes["apiKey"] == nil || r[1].Schemes["bearer"] == nil {
		t.Errorf("securityRequirements (1.0): %v", r)
	}
	if r := call(t, srv, post, "/a2a/tasks", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, "Authorization", "Bearer "+token); r.status != 200 {
		t.Errorf("a call with the bearer token: %d %s", r.status, r.body)
	}
	// The card is behind the API's authentication, as every route but the
	// health probes (docs/design/http.md "A2A card"): a peer without a
	// credential gets 401 with the challenge and how to authenticate.
	for _, path := range []string{"/.well-known/agent-card.json", "/.well-known/agent.json"} {
		for _, c := range []struct {
			name   string
			header []string
			status int
			errors string
		}{
			{"no credential", nil, 401, "send an x-api-key or Authorization: Bearer header"},
			{"a wrong key", []string{"X-Api-Key", "not-the-key-0123456789"}, 401, "the x-api-key is not accepted"},
			{"the key", []string{"X-Api-Key", key}, 200, ""},
			{"the bearer token", []string{"Authorization", "Bearer " + token}, 200, ""},
		} {
			r := call(t, srv, get, path, "", c.header...)
			if r.status != c.status || !strings.Contains(string(r.body), c.errors) ||
				(c.status == 401 && r.header.Get("WWW-Authenticate") == "") || (c.status == 200 && !strings.Contains(string(r.body), `"securitySchemes"`)) {
				t.Errorf("GET %s with %s: %d %s %q", path, c.name, r.status, r.body, r.header.Get("WWW-Authenticate"))
			}
		}
	}
}

// TestA2ATaskTelemetry: an inbound A2A task counts in /metrics (tokens,
// cost, time to first token, scope a2a) and exports an invoke_agent trace
// with a chat span per inference, as a Chat turn or an execute does
// (issue 35).
func TestA2ATaskTelemetry(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	rc := newOTLPReceiver(t)
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.Text("forty-two"), fakellm.Usage(30, 4, 0)}}}})
	defer fake.Close()
	_, srv := newTestDaemon(t, func(c *config.Config) {
		runtimeConfig(config.KindOpenAI, fake.URL())(c)
		c.Telemetry.OTLPEndpoint = rc.srv.URL
		c.A2A.Receivers = []config.A2AReceiver{{ID: "helper", AgentID: "a", Name: "Helper"}}
	})
	r := call(t, srv, post, "/a2a/tasks", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"What is six times seven?"}]}}}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"completed"`) {
		t.Fatalf("message/send: %d %s", r.status, r.body)
	}
	var names []string
	var conversation, scope string
	for _, s := range rc.await(t, 2) {
		names = append(names, s.Name)
		for _, a := range s.Attributes {
			switch {
			case s.Name != "chat m1" && a.Key == "gen_ai.conversation.id":
				conversation = a.Value.GetStringValue()
			case a.Key == "lathe.scope":
				scope = a.Value.GetStringValue()
			}
		}
	}
	sort.Strings(names)
	if !slices.Equal(names, []string{"chat m1", "invoke_agent A"}) || scope != "a2a" || conversation == "" {
		t.Errorf("spans %v, scope %q, conversation %q", names, scope, conversation)
	}
	metrics := string(call(t, srv, get, "/metrics", "").body)
	for _, want := range []string{`lathe_tokens_total{agent="a",direction="input"} 30`, `lathe_tokens_total{agent="a",direction="output"} 4`,
		`lathe_time_to_first_token_seconds_count{agent="a",scope="a2a"} 1`, `lathe_inference_seconds_count{agent="a"} 1`, `lathe_cost_usd_total{agent="a"} 0.03`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, `agent="a"`))
		}
	}
}
