package daemon

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// TestREADMEFirstTurn runs the README's first turn as it is written: the
// example config (docs/examples/lathe.yaml) and the scripted model's
// script (docs/examples/first-turn.json), decoded as lathe-fakellm decodes
// it, on a real sandbox. Only the model server's port differs (the test
// picks a free one).
func TestREADMEFirstTurn(t *testing.T) {
	examples := filepath.Join("..", "..", "..", "..", "docs", "examples")
	raw, err := os.ReadFile(filepath.Join(examples, "first-turn.json"))
	if err != nil {
		t.Fatal(err)
	}
	var script fakellm.Script
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&script); err != nil {
		t.Fatalf("first-turn.json: %v", err)
	}
	example, _, err := config.Load(filepath.Join(examples, "lathe.yaml"))
	if err != nil {
		t.Fatalf("lathe.yaml: %v", err)
	}
	r := turnDaemon(t, config.KindOpenAI, script, func(c *config.Config) {
		base := c.Providers["fake"].BaseURL // the test's model server
		c.Providers, c.Agents = example.Providers, example.Agents
		p := c.Providers["scripted"]
		if !strings.HasSuffix(p.BaseURL, "/v1") {
			t.Fatalf("the example's base_url %q", p.BaseURL)
		}
		p.BaseURL = base
		c.Providers["scripted"] = p
	})
	if example.Sandbox.DefaultImage != "lathe.local/sandbox:bookworm" {
		t.Errorf("the example's image %q is not the one make containerd-up builds", example.Sandbox.DefaultImage)
	}
	id := r.create(t, "").ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.send(t, map[string]any{"cmd": "session", "id": id, "turn_id": "first", "input": "write a greeting"})
	f := tc.terminal(t, "first")
	if end := f[len(f)-1]; end.Kind != "session-done" || end.Output != "Done: **hello.txt** says hello." {
		t.Fatalf("the first turn ended %+v", end)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "hello.txt")); err != nil || string(b) != "hello from the scripted model\n" {
		t.Errorf("hello.txt = %q, %v", b, err)
	}
}
