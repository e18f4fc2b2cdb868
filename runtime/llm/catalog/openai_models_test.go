package catalog

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"lathe/runtime/llm/fakellm"
)

// TestOpenAICompatibleModels: a local OpenAI-compatible server (the
// scripted fakellm standing in for vLLM or llama.cpp) is offered what it
// serves, never the curated OpenAI list; OpenAI's own API keeps the curated
// list; a server that cannot list answers only the current model, with the
// error.
func TestOpenAICompatibleModels(t *testing.T) {
	fake, err := fakellm.NewHandler(fakellm.Script{Models: []string{"Qwen/Qwen2.5-Coder-7B", "llama-3.1-8b"}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusNotFound) }))
	t.Cleanup(down.Close)
	names := func(ml ModelList) []string {
		var out []string
		for _, m := range ml.Models {
			out = append(out, m.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name, base, model string
		source            string
		want              []string
		missing           *bool
		err               string
	}{
		{name: "vLLM lists what it serves", base: srv.URL + "/v1", model: "llama-3.1-8b", source: "live",
			want: []string{"llama-3.1-8b", "Qwen/Qwen2.5-Coder-7B"}, missing: new(false)},
		{name: "a model the server lacks is still first, flagged", base: srv.URL + "/v1/", model: "gpt-5", source: "live",
			want: []string{"gpt-5", "Qwen/Qwen2.5-Coder-7B", "llama-3.1-8b"}, missing: new(true)},
		{name: "OpenAI's API is curated", base: "https://api.openai.com/v1", model: "gpt-4.1", source: "curated", want: Curated(KindOpenAI)},
		{name: "the SDK default is OpenAI's API", base: "", model: "gpt-4.1", source: "curated", want: Curated(KindOpenAI)},
		{name: "a server that cannot list", base: down.URL + "/v1", model: "local", source: "live", want: []string{"local"}, err: "404 Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New([]Provider{{Name: "p", Kind: KindOpenAI, BaseURL: tc.base, APIKeyEnv: "K"}}, []Agent{{ID: "a", Provider: "p", Model: tc.model}},
				Options{LookupEnv: func(string) (string, bool) { return "sk-local", true }})
			ml, err := c.Models(context.Background(), "a")
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			got := names(ml)
			if ml.Source != tc.source || !slices.Equal(got, append([]string{tc.model}, slices.DeleteFunc(slices.Clone(tc.want), func(n string) bool { return n == tc.model })...)) {
				t.Errorf("source %s, models %q; want %s, %q", ml.Source, got, tc.source, tc.want)
			}
			if tc.source == "live" && tc.err == "" && slices.Contains(got, "gpt-5") != (tc.model == "gpt-5") {
				t.Errorf("a local server was offered gpt-5: %q", got)
			}
			if (tc.missing == nil) != (ml.CurrentModelMissing == nil) || tc.missing != nil && *tc.missing != *ml.CurrentModelMissing {
				t.Errorf("current_model_missing %v, want %v", ml.CurrentModelMissing, tc.missing)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) == 0 || auth[0] != "Bearer sk-local" {
		t.Errorf("the /models probes carried %q, want the provider's key", auth)
	}
}

func TestParseModelIDs(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
		err  bool
	}{
		{body: `{"object":"list","data":[{"id":"a"},{"id":"b","owned_by":"x"}]}`, want: []string{"a", "b"}},
		{body: `{"data":[{"id":"a"},{"id":""},{"id":"a"}]}`, want: []string{"a"}},
		{body: `{"data":[]}`, want: []string{}},
		{body: `{"models":[{"name":"a"}]}`, err: true},
		{body: `{"data":{"id":"a"}}`, err: true},
		{body: `<html>`, err: true},
		{body: ``, err: true},
	} {
		got, err := ParseModelIDs([]byte(tc.body))
		if (err != nil) != tc.err || !tc.err && !slices.Equal(got, tc.want) {
			t.Errorf("ParseModelIDs(%s) = %q, %v", tc.body, got, err)
		}
	}
}

func FuzzParseModelIDs(f *testing.F) {
	for _, s := range []string{`{"data":[{"id":"a"}]}`, `{"data":null}`, `{}`, `[]`, `{"data":[{"id":1}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ids, err := ParseModelIDs(body)
		if err != nil {
			if ids != nil {
				t.Fatalf("ids %q with error %v", ids, err)
			}
			return
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if id == "" || seen[id] {
				t.Fatalf("ids %q hold an empty or repeated ID", ids)
			}
			seen[id] = true
		}
	})
}
