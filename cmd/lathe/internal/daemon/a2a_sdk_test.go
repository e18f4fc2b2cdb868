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

// TestA2AOfficialJSClient drives the A2A receiver with both lines of the
// official @a2a-js/sdk client on their defaults (installed by make test
// beside the browser tests): 0.3.14, which speaks A2A 0.3, and 1.3.0 (npm
// alias a2a-sdk-1), which speaks 1.0 and refused a 0.3-only card (issue
// 35). Each finds the card at /.well-known/agent-card.json, picks its own
// protocol's interface, sends a message, reads the task back, and an
// error reaches it with its reason; with server.api_keys set (its fetch
// adds the key, the scheme on the card) and without.
func TestA2AOfficialJSClient(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "browser"))
	if err != nil {
		t.Fatal(err)
	}
	node, lookErr := exec.LookPath("node")
	for _, sdk := range []string{"@a2a-js/sdk", "a2a-sdk-1"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", sdk)); err != nil || lookErr != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the A2A SDK %s is not installed (run make browser-up): %v %v", sdk, err, lookErr)
			}
			t.Skipf("the A2A SDK %s is not installed (run make browser-up): %v %v", sdk, err, lookErr)
		}
	}
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	for _, c := range []struct {
		name, script, version, key, schemes string
	}{
		{"0.3.14 with a key", "a2a_client.mjs", "0.3", "test-api-key-0123456789", "apiKey"},
		{"0.3.14 without", "a2a_client.mjs", "0.3", "", ""},
		{"1.3.0 with a key", "a2a_client_1.mjs", "1.0", "test-api-key-0123456789", "apiKey"},
		{"1.3.0 without", "a2a_client_1.mjs", "1.0", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Steps: []fakellm.Step{fakellm.Text("forty-two"), fakellm.Usage(3, 2, 0)}}}})
			defer fake.Close()
			_, srv := newTestDaemon(t, func(cfg *config.Config) {
				runtimeConfig(config.KindOpenAI, fake.URL())(cfg)
				if c.key != "" {
					cfg.Server.APIKeys = config.Secrets(c.key)
				}
				cfg.A2A.Receivers = []config.A2AReceiver{{ID: "helper", AgentID: "a", Name: "Helper"}}
			})
			args := []string{c.script, srv.URL}
			if c.key != "" {
				args = append(args, c.key)
			}
			cmd := exec.CommandContext(testContext(t, time.Minute), node, args...)
			cmd.Dir = dir
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node %s: %v\n%s", c.script, err, out)
			}
			var got struct {
				Card struct {
					Name            string
					SecuritySchemes []string
				}
				// Version is the protocol the client speaks to the
				// interface it picked.
				Version string
				Sent    struct {
					Task          bool
					State, Answer string
				}
				Got struct {
					ID    bool
					State string
				}
				Error  string
				Failed string
			}
			if err := json.Unmarshal(out, &got); err != nil || got.Failed != "" {
				t.Fatalf("client: %v %s", err, out)
			}
			if got.Card.Name != "Lathe" || strings.Join(got.Card.SecuritySchemes, ",") != c.schemes || got.Version != c.version {
				t.Errorf("card, version: %s", out)
			}
			completed := map[string]string{"0.3": "completed", "1.0": "TASK_STATE_COMPLETED"}[c.version]
			if !got.Sent.Task || got.Sent.State != completed || got.Sent.Answer != "forty-two" || !got.Got.ID || got.Got.State != completed {
				t.Errorf("calls: %s", out)
			}
			if !strings.Contains(got.Error, `no A2A receiver "nobody"`) {
				t.Errorf("the SDK's error lacks the reason: %q", got.Error)
			}
		})
	}
}
