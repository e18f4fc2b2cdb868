package catalog

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHasModel(t *testing.T) {
	names := []string{"llama3:latest", "qwen2.5-coder:7b"}
	for model, want := range map[string]bool{
		"llama3": true, "llama3:latest": true, "qwen2.5-coder:7b": true, "qwen2.5-coder": false, "qwen2.5-coder:14b": false,
	} {
		if got := hasModel(names, model); got != want {
			t.Errorf("hasModel(%q) = %v", model, got)
		}
	}
}

func TestProbeTimeoutAndRedaction(t *testing.T) {
	stall := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-stall }))
	defer hs.Close()
	defer close(stall)
	base := strings.Replace(hs.URL, "http://", "http://user:hunter2@", 1)
	c := New([]Provider{{Name: "local", Kind: KindOllama, BaseURL: base}},
		[]Agent{{ID: "a", Provider: "local", Model: "m"}}, Options{ProbeTimeout: 100 * time.Millisecond})
	start := time.Now()
	h := c.Health(context.Background())
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("health took %s", d)
	}
	body, _ := json.Marshal(h)
	if h.OK || !strings.Contains(string(body), "within 100ms") || strings.Contains(string(body), "hunter2") {
		t.Fatalf("health %s", body)
	}
	if _, err := c.Models(context.Background(), "a"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("models err %v", err)
	}
}

func TestAgentsCopyAndPrices(t *testing.T) {
	deps := []string{"x"}
	c := New([]Provider{{Name: "p", Kind: KindOpenAI}}, []Agent{{ID: "a", Provider: "p", Model: "m", Dependencies: deps}},
		Options{Prices: map[string]Price{"p/m": {Input: 0, Output: 0}}, LookupEnv: func(string) (string, bool) { return "", false }})
	deps[0] = "changed"
	a, ok := c.Agent("a")
	if !ok || a.Dependencies[0] != "x" || a.Price == nil || a.Price.Input != 0 {
		t.Fatalf("agent %+v", a)
	}
	if c.PriceOf("p", "other") != nil {
		t.Fatal("unknown price must be nil")
	}
	if got := c.Providers(); len(got) != 1 || got[0].APIKeySet {
		t.Fatalf("providers %+v", got)
	}
}

// TestAgentRecordsNameAgentID: the Agent records of this package name the
// Agent agent_id on the wire, never id (defect 1).
func TestAgentRecordsNameAgentID(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
	}{
		{name: "AgentView", v: AgentView{ID: "coder"}},
		{name: "AgentHealth", v: AgentHealth{ID: "coder"}},
		{name: "ModelList", v: ModelList{AgentID: "coder"}},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["id"]; ok || m["agent_id"] != "coder" {
			t.Errorf("%s encodes as %s, want agent_id and no id", tc.name, b)
		}
	}
}

// An outside Agent's view has its kind and resolved acp block, never its
// env; a built-in one's kind is lathe.
func TestAgentViewKind(t *testing.T) {
	c := New([]Provider{{Name: "p", Kind: KindOllama}}, []Agent{
		{ID: "a", Provider: "p", Model: "m"},
		{ID: "b", Provider: "p", Model: "m", Kind: "acp", ACP: &ACP{Preset: "codex", Package: "x@1.0.0", Command: "x", Env: map[string]string{"SECRETISH": "v"}, Protocol: "responses"}},
	}, Options{})
	b, err := json.Marshal(c.Agents())
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, `"kind":"lathe"`) || !strings.Contains(s, `"kind":"acp","acp":{"preset":"codex","package":"x@1.0.0","command":"x","args":[],"protocol":"responses"}`) || strings.Contains(s, "SECRETISH") {
		t.Errorf("views: %s", s)
	}
}
