package daemon

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// TestA2AOfficialJSClient drives the A2A receiver with the official
// @a2a-js/sdk client on its defaults (installed by make test beside the
// browser tests): it finds the card at /.well-known/agent-card.json, learns
// the x-api-key scheme, sends a message, reads the task back, and an error
// reaches it with its reason.
func TestA2AOfficialJSClient(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "browser"))
	if err != nil {
		t.Fatal(err)
	}
	node, lookErr := exec.LookPath("node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk")); err != nil || lookErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the A2A SDK is not installed (run make browser-up): %v %v", err, lookErr)
		}
		t.Skipf("the A2A SDK is not installed (run make browser-up): %v %v", err, lookErr)
	}
	const key = "test-api-key-0123456789"
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.Text("forty-two"), fakellm.Usage(3, 2, 0)}}}})
	defer fake.Close()
	_, srv := newTestDaemon(t, func(c *config.Config) {
		runtimeConfig(config.KindOpenAI, fake.URL())(c)
		c.Server.APIKeys = config.Secrets(key)
		c.A2A.Receivers = []config.A2AReceiver{{ID: "helper", AgentID: "a", Name: "Helper"}}
	})
	cmd := exec.CommandContext(testContext(t, time.Minute), node, "a2a_client.mjs", srv.URL, key)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node a2a_client.mjs: %v\n%s", err, out)
	}
	var got struct {
		Card struct {
			Name            string
			ProtocolVersion string
			SecuritySchemes []string
		}
		Sent struct{ Kind, State, Answer string }
		Got  struct {
			ID    bool
			State string
		}
		Error  string
		Failed string
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Failed != "" {
		t.Fatalf("client: %v %s", err, out)
	}
	if got.Card.Name != "Lathe" || got.Card.ProtocolVersion != "0.3.0" || strings.Join(got.Card.SecuritySchemes, ",") != "apiKey" {
		t.Errorf("card: %+v", got.Card)
	}
	if got.Sent.Kind != "task" || got.Sent.State != "completed" || got.Sent.Answer != "forty-two" || !got.Got.ID || got.Got.State != "completed" {
		t.Errorf("calls: %s", out)
	}
	if !strings.Contains(got.Error, `no A2A receiver "nobody"`) {
		t.Errorf("the SDK's error lacks the reason: %q", got.Error)
	}
}
