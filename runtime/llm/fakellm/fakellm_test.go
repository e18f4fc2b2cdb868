package fakellm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/runtime/llm/fakellm"
)

var update = flag.Bool("update", false, "rewrite golden files")

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fullTurn exercises every non-fault step.
func fullTurn() fakellm.Turn {
	return fakellm.Turn{Steps: []fakellm.Step{
		fakellm.Reasoning("Let me "),
		fakellm.Reasoning("think."),
		fakellm.Text("Reading "),
		fakellm.Text("two files."),
		fakellm.ToolCall("call_a", "read", `{"pa`, `th":"a.go"`, `}`),
		fakellm.ToolCall("call_b", "read", `{"path":`, `"b.go"}`),
		fakellm.Usage(120, 45, 7),
	}}
}

func post(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const oaStreamBody = `{"model":"m1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
const anStreamBody = `{"model":"claude-x","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestOpenAIStreamGolden(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{fullTurn()}})
	defer s.Close()
	resp := post(t, testContext(t), s.URL()+"/v1/chat/completions", oaStreamBody)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "openai_stream.golden", body)

	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Model != "m1" || !reqs[0].Stream || !reqs[0].IncludeUsage || reqs[0].Turn != 0 {
		t.Fatalf("recorded %+v", reqs)
	}
}

// oaChunk is what a client decodes from each data line.
type oaChunk struct {
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens            int `json:"prompt_tokens"`
		CompletionTokens        int `json:"completion_tokens"`
		CompletionTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

// readSSEData returns the data payloads of an SSE body, and the read error.
func readSSEData(r io.Reader) (data []string, events []string, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, d)
		}
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, e)
		}
	}
	return data, events, sc.Err()
}

func TestOpenAIStreamDecodes(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{fullTurn()}})
	defer s.Close()
	resp := post(t, testContext(t), s.URL()+"/chat/completions", oaStreamBody)
	data, _, err := readSSEData(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if data[len(data)-1] != "[DONE]" {
		t.Fatalf("last data %q", data[len(data)-1])
	}
	var text, reasoning strings.Builder
	type call struct{ id, name, args string }
	calls := map[int]*call{}
	var finish string
	var usage bool
	for _, d := range data[:len(data)-1] {
		var c oaChunk
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		if c.Usage != nil {
			usage = true
			if len(c.Choices) != 0 || c.Usage.PromptTokens != 120 || c.Usage.CompletionTokens != 45 || c.Usage.CompletionTokensDetails.ReasoningTokens != 7 {
				t.Fatalf("usage chunk %s", d)
			}
			continue
		}
		ch := c.Choices[0]
		if ch.Delta.Content != nil {
			text.WriteString(*ch.Delta.Content)
		}
		if ch.Delta.ReasoningContent != nil {
			reasoning.WriteString(*ch.Delta.ReasoningContent)
		}
		for _, tc := range ch.Delta.ToolCalls {
			if calls[tc.Index] == nil {
				calls[tc.Index] = &call{}
			}
			if tc.ID != "" {
				calls[tc.Index].id, calls[tc.Index].name = tc.ID, tc.Function.Name
			}
			calls[tc.Index].args += tc.Function.Arguments
		}
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
	}
	if text.String() != "Reading two files." || reasoning.String() != "Let me think." || finish != "tool_calls" || !usage {
		t.Fatalf("text %q reasoning %q finish %q usage %v", text.String(), reasoning.String(), finish, usage)
	}
	if len(calls) != 2 || *calls[0] != (call{"call_a", "read", `{"path":"a.go"}`}) || *calls[1] != (call{"call_b", "read", `{"path":"b.go"}`}) {
		t.Fatalf("calls %+v %+v", calls[0], calls[1])
	}
}

func TestOpenAIUsageOmitted(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		turn       fakellm.Turn
	}{
		{"not requested", `{"model":"m","stream":true}`, fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("x"), fakellm.Usage(1, 2, 0)}}},
		{"not scripted", oaStreamBody, fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("x")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{tc.turn}})
			defer s.Close()
			data, _, err := readSSEData(post(t, testContext(t), s.URL()+"/v1/chat/completions", tc.body).Body)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range data {
				var c oaChunk
				json.Unmarshal([]byte(d), &c)
				if c.Usage != nil {
					t.Fatalf("usage sent: %s", d)
				}
			}
		})
	}
}

func TestOpenAIReasoningKey(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{ReasoningKey: "reasoning", Steps: []fakellm.Step{fakellm.Reasoning("hmm")}}}})
	defer s.Close()
	data, _, _ := readSSEData(post(t, testContext(t), s.URL()+"/v1/chat/completions", oaStreamBody).Body)
	if !strings.Contains(strings.Join(data, "\n"), `"delta":{"reasoning":"hmm"}`) {
		t.Fatalf("no reasoning delta in %q", data)
	}
}

func TestOpenAINonStreaming(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{fullTurn()}})
	defer s.Close()
	resp := post(t, testContext(t), s.URL()+"/v1/chat/completions", `{"model":"m1"}`)
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
				ToolCalls        []struct {
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	m := out.Choices[0].Message
	if out.Object != "chat.completion" || m.Content != "Reading two files." || m.ReasoningContent != "Let me think." ||
		len(m.ToolCalls) != 2 || m.ToolCalls[1].Function.Arguments != `{"path":"b.go"}` || out.Usage.PromptTokens != 120 ||
		out.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("got %+v", out)
	}
}

func TestAnthropicStreamGolden(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{fullTurn()}})
	defer s.Close()
	resp := post(t, testContext(t), s.URL()+"/v1/messages", anStreamBody)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "anthropic_stream.golden", body)
}

func TestAnthropicStreamDecodes(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{fullTurn()}})
	defer s.Close()
	data, events, err := readSSEData(post(t, testContext(t), s.URL()+"/v1/messages", anStreamBody).Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(data) {
		t.Fatalf("%d events, %d data lines", len(events), len(data))
	}
	type block struct{ typ, id, name, text string }
	var blocks []*block
	var inTokens, outTokens int
	var stop string
	for i, d := range data {
		var e struct {
			Type    string `json:"type"`
			Index   int    `json:"index"`
			Message struct {
				Usage struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
			} `json:"message"`
			ContentBlock struct{ Type, ID, Name string } `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				Thinking    string `json:"thinking"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
			Usage struct {
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(d), &e); err != nil {
			t.Fatalf("event %q: %v", d, err)
		}
		if e.Type != events[i] {
			t.Fatalf("event name %q, data type %q", events[i], e.Type)
		}
		switch e.Type {
		case "message_start":
			inTokens = e.Message.Usage.InputTokens
		case "content_block_start":
			if e.Index != len(blocks) {
				t.Fatalf("block index %d, want %d", e.Index, len(blocks))
			}
			blocks = append(blocks, &block{typ: e.ContentBlock.Type, id: e.ContentBlock.ID, name: e.ContentBlock.Name})
		case "content_block_delta":
			b := blocks[e.Index]
			b.text += e.Delta.Text + e.Delta.Thinking + e.Delta.PartialJSON
		case "message_delta":
			stop, outTokens = e.Delta.StopReason, e.Usage.OutputTokens
		}
	}
	want := []block{{"thinking", "", "", "Let me think."}, {"text", "", "", "Reading two files."},
		{"tool_use", "call_a", "read", `{"path":"a.go"}`}, {"tool_use", "call_b", "read", `{"path":"b.go"}`}}
	if len(blocks) != len(want) {
		t.Fatalf("%d blocks", len(blocks))
	}
	for i := range want {
		if *blocks[i] != want[i] {
			t.Errorf("block %d: %+v, want %+v", i, *blocks[i], want[i])
		}
	}
	if inTokens != 120 || outTokens != 45 || stop != "tool_use" || events[len(events)-1] != "message_stop" {
		t.Fatalf("in %d out %d stop %q last %q", inTokens, outTokens, stop, events[len(events)-1])
	}
}

func TestFail(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Fail(503)}},
		{Steps: []fakellm.Step{fakellm.RateLimited("2")}},
		{Steps: []fakellm.Step{fakellm.Fail(529)}},
	}})
	defer s.Close()
	ctx := testContext(t)
	r := post(t, ctx, s.URL()+"/v1/chat/completions", oaStreamBody)
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != 503 || !strings.Contains(string(b), `"type":"server_error"`) {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	r = post(t, ctx, s.URL()+"/v1/chat/completions", oaStreamBody)
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "2" {
		t.Fatalf("%d %v", r.StatusCode, r.Header)
	}
	r = post(t, ctx, s.URL()+"/v1/messages", anStreamBody)
	b, _ = io.ReadAll(r.Body)
	if r.StatusCode != 529 || string(b) != `{"error":{"message":"fakellm: scripted status 529","type":"overloaded_error"},"type":"error"}` {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	// The script is used up: the next request is a 500 naming the model.
	r = post(t, ctx, s.URL()+"/v1/chat/completions", oaStreamBody)
	b, _ = io.ReadAll(r.Body)
	if r.StatusCode != 500 || !strings.Contains(string(b), "no scripted turn left") {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
}

func TestMalformed(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Text("a"), fakellm.Malformed(), fakellm.Text("b")}},
		{Steps: []fakellm.Step{fakellm.Text("a"), fakellm.Malformed()}},
	}})
	defer s.Close()
	for _, url := range []string{s.URL() + "/v1/chat/completions", s.URL() + "/v1/messages"} {
		data, _, err := readSSEData(post(t, testContext(t), url, oaStreamBody).Body)
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for _, d := range data {
			if d != "[DONE]" && !json.Valid([]byte(d)) {
				bad++
			}
		}
		if bad != 1 {
			t.Fatalf("%s: %d malformed events in %q", url, bad, data)
		}
	}
}

func TestDrop(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Text("partial"), fakellm.Drop(), fakellm.Text("never")}},
		{Steps: []fakellm.Step{fakellm.Text("partial"), fakellm.Drop(), fakellm.Usage(1, 1, 0)}},
	}})
	defer s.Close()
	for _, url := range []string{s.URL() + "/v1/chat/completions", s.URL() + "/v1/messages"} {
		data, _, err := readSSEData(post(t, testContext(t), url, oaStreamBody).Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%s: err %v", url, err)
		}
		joined := strings.Join(data, "\n")
		if !strings.Contains(joined, "partial") || strings.Contains(joined, "never") || strings.Contains(joined, "[DONE]") {
			t.Fatalf("%s: data %q", url, data)
		}
	}
}

func TestStall(t *testing.T) {
	release := make(chan struct{})
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Text("before"), fakellm.Stall(release), fakellm.Text("after")}},
		{Steps: []fakellm.Step{fakellm.Text("before"), fakellm.Stall(nil), fakellm.Text("after")}},
	}})
	defer s.Close()

	// Released: the stream carries on.
	resp := post(t, testContext(t), s.URL()+"/v1/chat/completions", oaStreamBody)
	br := bufio.NewReader(resp.Body)
	readUntil(t, br, "before")
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "after") || !strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("after release: %q %v", rest, err)
	}

	// Not released: the client gives up and the read returns promptly.
	ctx, cancel := context.WithCancel(testContext(t))
	resp = post(t, ctx, s.URL()+"/v1/messages", anStreamBody)
	br = bufio.NewReader(resp.Body)
	readUntil(t, br, "before")
	start := time.Now()
	cancel()
	if _, err := io.ReadAll(br); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancel took %v", d)
	}
}

func readUntil(t *testing.T, br *bufio.Reader, s string) {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading for %q: %v", s, err)
		}
		if strings.Contains(line, s) {
			return
		}
	}
}

func TestModelMatching(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Model: "big", Steps: []fakellm.Step{fakellm.Text("from big")}},
		{Steps: []fakellm.Step{fakellm.Text("from any")}},
	}})
	defer s.Close()
	ctx := testContext(t)
	d1, _, _ := readSSEData(post(t, ctx, s.URL()+"/v1/chat/completions", `{"model":"small","stream":true}`).Body)
	d2, _, _ := readSSEData(post(t, ctx, s.URL()+"/v1/chat/completions", `{"model":"big","stream":true}`).Body)
	if !strings.Contains(strings.Join(d1, ""), "from any") || !strings.Contains(strings.Join(d2, ""), "from big") {
		t.Fatalf("small got %q, big got %q", d1, d2)
	}
	if s.Remaining() != 0 {
		t.Fatalf("remaining %d", s.Remaining())
	}
	reqs := s.Requests()
	if reqs[0].Turn != 1 || reqs[1].Turn != 0 || reqs[1].Seq != 2 {
		t.Fatalf("requests %+v", reqs)
	}
}

func TestTagsAndModels(t *testing.T) {
	s := fakellm.New(fakellm.Script{Models: []string{"qwen2.5-coder:7b", "llama3:8b"}})
	defer s.Close()
	resp, err := http.Get(s.URL() + "/api/tags")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tags struct {
		Models []struct{ Name, Model string } `json:"models"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tags); err != nil {
		t.Fatal(err)
	}
	if len(tags.Models) != 2 || tags.Models[0].Name != "qwen2.5-coder:7b" || tags.Models[1].Model != "llama3:8b" {
		t.Fatalf("tags %+v", tags)
	}
	resp2, err := http.Get(s.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.NewDecoder(resp2.Body).Decode(&models); err != nil || len(models.Data) != 2 {
		t.Fatalf("models %+v %v", models, err)
	}
}

func TestValidate(t *testing.T) {
	for _, sc := range []fakellm.Script{
		{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.Text("x"), fakellm.Fail(500)}}}},
		{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.Fail(200)}}}},
		{Turns: []fakellm.Turn{{Steps: []fakellm.Step{{Kind: "nope"}}}}},
		{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.ToolCall("", "x")}}}},
		{Turns: []fakellm.Turn{{ReasoningKey: "thoughts"}}},
		{Turns: []fakellm.Turn{{Steps: []fakellm.Step{{Kind: fakellm.KindUsage, Stamp: true}}}}},
	} {
		if err := sc.Validate(); !errors.Is(err, fakellm.ErrInvalidScript) {
			t.Errorf("%+v: %v", sc, err)
		}
	}
}

func TestScriptJSON(t *testing.T) {
	var sc fakellm.Script
	err := json.Unmarshal([]byte(`{"models":["m"],"turns":[{"steps":[
		{"kind":"text","text":"hi"},
		{"kind":"tool_call","id":"c1","name":"ls","args_chunks":["{","}"]},
		{"kind":"usage","input_tokens":3,"output_tokens":4,"reasoning_tokens":1},
		{"kind":"stall","stall_ms":5},
		{"kind":"text","text":"t","stamp":true}]}]}`), &sc)
	if err != nil || sc.Validate() != nil {
		t.Fatal(err, sc.Validate())
	}
	steps := sc.Turns[0].Steps
	if steps[1].ArgsChunks[1] != "}" || steps[2].Reasoning != 1 || steps[3].StallMS != 5 || !steps[4].Stamp {
		t.Fatalf("%+v", steps)
	}
}

// TestStamp plays stamped deltas, paced by a pause, on each protocol and
// checks that every stamp is the send time: after the request went out,
// before the client read the delta, and the pause apart.
func TestStamp(t *testing.T) {
	turn := fakellm.Turn{Steps: []fakellm.Step{
		fakellm.Stamped("a;"),
		fakellm.Pause(20),
		fakellm.Stamped("b;"),
		{Kind: fakellm.KindReasoning, Text: "r;", Stamp: true},
		fakellm.Text("plain"),
	}}
	for _, tc := range []struct {
		name, path, body string
		// deltas returns the text and reasoning deltas of one SSE data line.
		deltas func(t *testing.T, data string) []string
	}{
		{"openai", "/v1/chat/completions", oaStreamBody, func(t *testing.T, data string) []string {
			var c oaChunk
			if data == "[DONE]" || json.Unmarshal([]byte(data), &c) != nil || len(c.Choices) == 0 {
				return nil
			}
			var out []string
			for _, p := range []*string{c.Choices[0].Delta.Content, c.Choices[0].Delta.ReasoningContent} {
				if p != nil && *p != "" {
					out = append(out, *p)
				}
			}
			return out
		}},
		{"anthropic", "/v1/messages", anStreamBody, func(t *testing.T, data string) []string {
			var e struct {
				Delta struct{ Text, Thinking string } `json:"delta"`
			}
			if json.Unmarshal([]byte(data), &e) != nil {
				t.Fatalf("event %q", data)
			}
			if d := e.Delta.Text + e.Delta.Thinking; d != "" {
				return []string{d}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{turn}})
			defer s.Close()
			before := time.Now()
			br := bufio.NewReader(post(t, testContext(t), s.URL()+tc.path, tc.body).Body)
			var texts []string
			var sent []time.Time
			for {
				line, err := br.ReadString('\n')
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				read := time.Now()
				data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "data: ")
				if !ok {
					continue
				}
				for _, d := range tc.deltas(t, data) {
					if d == "plain" {
						texts = append(texts, d)
						continue
					}
					text, at, err := fakellm.SplitStamp(d)
					if err != nil {
						t.Fatal(err)
					}
					if at.Before(before) || at.After(read) {
						t.Errorf("delta %q stamped %v, outside [%v, %v]", d, at, before, read)
					}
					texts, sent = append(texts, text), append(sent, at)
				}
			}
			if strings.Join(texts, "") != "a;b;r;plain" {
				t.Fatalf("deltas %q", texts)
			}
			if gap := sent[1].Sub(sent[0]); gap < 20*time.Millisecond {
				t.Errorf("stamps %v apart across a 20ms pause", gap)
			}
		})
	}
}

func TestSplitStamp(t *testing.T) {
	for _, tc := range []struct {
		delta, text string
		ns          int64
		ok          bool
	}{
		{"x;1700000000123456789", "x;", 1700000000123456789, true},
		{"0000000000000000042", "", 42, true},
		{"7;" + "0000000000000000042", "7;", 42, true},
		{"", "", 0, false},
		{"123", "", 0, false},
		{"x;170000000012345678x", "", 0, false},
		{"x;-700000000123456789", "", 0, false},
		{"x;9999999999999999999", "", 0, false}, // beyond int64
	} {
		text, at, err := fakellm.SplitStamp(tc.delta)
		if tc.ok != (err == nil) || (tc.ok && (text != tc.text || at.UnixNano() != tc.ns)) {
			t.Errorf("SplitStamp(%q) = %q, %d, %v", tc.delta, text, at.UnixNano(), err)
		}
		if err != nil && !errors.Is(err, fakellm.ErrNoStamp) {
			t.Errorf("SplitStamp(%q): %v, want ErrNoStamp", tc.delta, err)
		}
	}
}

func TestStampNonStreaming(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.Text("say "), fakellm.Stamped("at ")}}}})
	defer s.Close()
	before := time.Now()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(post(t, testContext(t), s.URL()+"/v1/chat/completions", `{"model":"m"}`).Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	text, at, err := fakellm.SplitStamp(out.Choices[0].Message.Content)
	if err != nil || text != "say at " || at.Before(before) || at.After(time.Now()) {
		t.Fatalf("content %q: %q %v %v", out.Choices[0].Message.Content, text, at, err)
	}
}

func TestContainsMatching(t *testing.T) {
	s := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Contains: "main task", Steps: []fakellm.Step{fakellm.Text("from main")}},
		{Contains: "title generator", Steps: []fakellm.Step{fakellm.Text("a title")}},
	}})
	defer s.Close()
	ctx := testContext(t)
	d1, _, _ := readSSEData(post(t, ctx, s.URL()+"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"you are a title generator"}]}`).Body)
	d2, _, _ := readSSEData(post(t, ctx, s.URL()+"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"the main task"}]}`).Body)
	if !strings.Contains(strings.Join(d1, ""), "a title") || !strings.Contains(strings.Join(d2, ""), "from main") {
		t.Fatalf("title got %q, main got %q", d1, d2)
	}
}
