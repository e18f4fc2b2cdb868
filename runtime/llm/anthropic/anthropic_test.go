package anthropic_test

import (
	"testing"

	"lathe/runtime/llm"
	"lathe/runtime/llm/anthropic"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/llm/llmtest"
)

func newProvider(url string) llm.Provider {
	return anthropic.New(anthropic.Config{BaseURL: url, APIKey: "sk-ant-test"})
}

func TestSuite(t *testing.T) {
	llmtest.Suite(t, newProvider, llmtest.Protocol{InputBeforeOutput: true, OutputTokensBeforeEnd: 1})
}

func TestRequestWireShape(t *testing.T) {
	req := llmtest.BasicRequest()
	req.ThinkingBudget = 1024
	req.MaxOutputTokens = 4096
	srv, _, err := llmtest.Run(t, llmtest.Context(t), newProvider, req, fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("ok")}})
	if err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if r.Path != "/v1/messages" || !r.Stream || r.Header.Get("X-Api-Key") != "sk-ant-test" || r.Header.Get("Anthropic-Version") == "" {
		t.Fatalf("request %s %v", r.Path, r.Header)
	}
	var body struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		System    []struct{ Type, Text string }
		Thinking  struct {
			Type         string `json:"type"`
			BudgetTokens int    `json:"budget_tokens"`
		} `json:"thinking"`
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string         `json:"type"`
				Text      string         `json:"text"`
				ID        string         `json:"id"`
				Name      string         `json:"name"`
				Input     map[string]any `json:"input"`
				ToolUseID string         `json:"tool_use_id"`
				Content   any            `json:"content"`
			} `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			InputSchema struct {
				Type       string         `json:"type"`
				Properties map[string]any `json:"properties"`
				Required   []string       `json:"required"`
			} `json:"input_schema"`
		} `json:"tools"`
	}
	if err := r.JSON(&body); err != nil {
		t.Fatal(err)
	}
	m := body.Messages
	// user, assistant(text+tool_use), user(tool_result + text)
	if body.Model != "fake-model" || body.MaxTokens != 4096 || len(body.System) != 1 || body.System[0].Text != "You are terse." ||
		body.Thinking.Type != "enabled" || body.Thinking.BudgetTokens != 1024 || len(m) != 3 ||
		m[1].Role != "assistant" || len(m[1].Content) != 2 || m[1].Content[1].Type != "tool_use" || m[1].Content[1].ID != "call_0" ||
		m[1].Content[1].Input["path"] != "a.go" ||
		m[2].Role != "user" || len(m[2].Content) != 2 || m[2].Content[0].Type != "tool_result" || m[2].Content[0].ToolUseID != "call_0" ||
		m[2].Content[1].Text != "Now a.go and b.go" {
		t.Fatalf("body %s", r.Body)
	}
	if len(body.Tools) != 1 || body.Tools[0].Name != "read" || body.Tools[0].InputSchema.Type != "object" ||
		body.Tools[0].InputSchema.Properties["path"] == nil || len(body.Tools[0].InputSchema.Required) != 1 {
		t.Fatalf("tools %s", r.Body)
	}
}
