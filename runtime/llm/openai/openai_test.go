package openai_test

import (
	"encoding/json"
	"testing"

	"lathe/runtime/llm"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/llm/llmtest"
	"lathe/runtime/llm/openai"
)

func newProvider(url string) llm.Provider { return openai.New(openai.Config{BaseURL: url + "/v1"}) }

func TestSuite(t *testing.T) {
	llmtest.Suite(t, newProvider, llmtest.Protocol{ReasoningTokens: true})
}

func TestRequestWireShape(t *testing.T) {
	srv, _, err := llmtest.Run(t, llmtest.Context(t), newProvider, llmtest.BasicRequest(),
		fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("ok")}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/chat/completions" || !reqs[0].Stream || !reqs[0].IncludeUsage {
		t.Fatalf("requests %+v", reqs)
	}
	if h := reqs[0].Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization %q sent without a key", h)
	}
	var body struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Messages  []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := reqs[0].JSON(&body); err != nil {
		t.Fatal(err)
	}
	m := body.Messages
	if body.Model != "fake-model" || body.MaxTokens != 256 || len(m) != 5 ||
		m[0].Role != "system" || m[0].Content != "You are terse." ||
		m[1].Role != "user" || m[2].Role != "assistant" || m[2].Content != "Reading." ||
		len(m[2].ToolCalls) != 1 || m[2].ToolCalls[0].ID != "call_0" || m[2].ToolCalls[0].Type != "function" ||
		m[2].ToolCalls[0].Function.Arguments != `{"path":"a.go"}` ||
		m[3].Role != "tool" || m[3].ToolCallID != "call_0" || m[3].Content != "package a" {
		t.Fatalf("body %s", reqs[0].Body)
	}
	if len(body.Tools) != 1 || body.Tools[0].Type != "function" || body.Tools[0].Function.Name != "read" ||
		body.Tools[0].Function.Description != "Read a file." || !json.Valid(body.Tools[0].Function.Parameters) {
		t.Fatalf("tools %s", reqs[0].Body)
	}
}

func TestAPIKeyAndMaxCompletionTokens(t *testing.T) {
	newp := func(url string) llm.Provider {
		return openai.New(openai.Config{BaseURL: url, APIKey: "sk-test", MaxCompletionTokens: true})
	}
	srv, _, err := llmtest.Run(t, llmtest.Context(t), newp, llm.Request{Model: "m", MaxOutputTokens: 9,
		Messages: []llm.Message{{Role: llm.RoleUser, Text: "hi"}}}, fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("ok")}})
	if err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	var body map[string]any
	r.JSON(&body)
	if r.Path != "/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" || body["max_completion_tokens"] != 9.0 || body["max_tokens"] != nil {
		t.Fatalf("path %s auth %q body %s", r.Path, r.Header.Get("Authorization"), r.Body)
	}
}

func TestReasoningField(t *testing.T) {
	_, evs, err := llmtest.Run(t, llmtest.Context(t), newProvider, llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Text: "hi"}}},
		fakellm.Turn{ReasoningKey: "reasoning", Steps: []fakellm.Step{fakellm.Reasoning("hmm"), fakellm.Text("ok")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 2 || evs[0] != (llm.ReasoningDelta{Text: "hmm"}) || evs[1] != (llm.TextDelta{Text: "ok"}) {
		t.Fatalf("events %#v", evs)
	}
}
