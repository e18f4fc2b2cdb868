package ollama_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"lathe/runtime/llm"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/llm/llmtest"
	"lathe/runtime/llm/ollama"
)

func newProvider(url string) llm.Provider { return ollama.New(ollama.Config{BaseURL: url}) }

func TestSuite(t *testing.T) {
	llmtest.Suite(t, newProvider, llmtest.Protocol{ReasoningTokens: true})
}

func TestStreamUsesV1(t *testing.T) {
	srv, _, err := llmtest.Run(t, llmtest.Context(t), newProvider, llm.Request{Model: "qwen2.5-coder:7b",
		Messages: []llm.Message{{Role: llm.RoleUser, Text: "hi"}}}, fakellm.Turn{Steps: []fakellm.Step{fakellm.Text("ok")}})
	if err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests()[0]; r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "" {
		t.Fatalf("path %s auth %q", r.Path, r.Header.Get("Authorization"))
	}
}

func TestModels(t *testing.T) {
	srv := fakellm.New(fakellm.Script{Models: []string{"qwen2.5-coder:7b", "llama3:8b"}})
	defer srv.Close()
	models, err := ollama.New(ollama.Config{BaseURL: srv.URL() + "/"}).Models(llmtest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 2 || models[0].Name != "qwen2.5-coder:7b" || models[1].Model != "llama3:8b" || models[0].Digest == "" {
		t.Fatalf("models %+v", models)
	}
}

func TestModelsErrors(t *testing.T) {
	closed := fakellm.New(fakellm.Script{})
	closedURL := closed.URL()
	closed.Close()
	if _, err := ollama.New(ollama.Config{BaseURL: closedURL}).Models(llmtest.Context(t)); !errors.Is(err, llm.ErrUnavailable) {
		t.Errorf("refused: %v", err)
	}
	for _, tc := range []struct {
		status int
		body   string
		want   error
	}{
		{503, "", llm.ErrUnavailable},
		{200, `{"models":[`, llm.ErrUnavailable}, // cut short: io.ErrUnexpectedEOF
		{200, `{"models":"x"}`, llm.ErrMalformed},
	} {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
		}))
		_, err := ollama.New(ollama.Config{BaseURL: hs.URL}).Models(llmtest.Context(t))
		hs.Close()
		if !errors.Is(err, tc.want) {
			t.Errorf("%d %q: %v, want %v", tc.status, tc.body, err, tc.want)
		}
	}
}
