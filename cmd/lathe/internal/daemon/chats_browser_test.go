package daemon

// Chats and the shared file store in the workbench end to end: Chromium
// drives testdata/browser/chats.mjs against a whole daemon (no sandboxes)
// whose Agent talks to the scripted model server: a Chat turn with an
// uploaded attachment, a fork from a message, search, and the Files view.

import (
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

func TestChatsInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	t.Setenv(testRuntimeKeyEnv, "sk-test")
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.Text("The notes say "), fakellm.Text("SECRET-42"), fakellm.Usage(12, 6, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("Secret"), fakellm.Usage(5, 1, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("partial answer"), fakellm.Stall(nil)}}, // stopped
		// Sent during the fork's record reads: on entering it, after a
		// reconnect, after a turn's end (its turn first).
		{Steps: []fakellm.Step{fakellm.Text("Reply 1"), fakellm.Usage(3, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("Reply 2"), fakellm.Usage(3, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("First reply"), fakellm.Usage(3, 2, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("Reply 3"), fakellm.Usage(3, 2, 0)}},
	}})
	defer fake.Close()
	_, srv := newTestDaemon(t, runtimeConfig(config.KindOpenAI, fake.URL()))

	runBrowser(t, node, chromium, "chats.mjs", 3*time.Minute, "LATHE_URL="+srv.URL)

	// The attachment's text went to the model with the first turn; the
	// fork (from before that turn) kept the attachment, not yet used, so
	// its turn carried its own message with the file, under its system
	// override.
	reqs := fake.Requests()
	if len(reqs) != 7 {
		t.Fatalf("the model saw %d requests, want 7", len(reqs))
	}
	if u := lastUser(t, reqs[0]); !strings.HasPrefix(u, "What do the notes say?") || !strings.Contains(u, "SECRET-42 is the code") {
		t.Errorf("the first turn's message: %q", u)
	}
	if msgs, system, _ := wireMessages(t, config.KindOpenAI, reqs[1]); len(msgs) != 1 || !strings.HasPrefix(msgs[0], "user:And in one word?") ||
		!strings.Contains(msgs[0], "SECRET-42 is the code") || system != "Answer in one word." {
		t.Errorf("the fork's turn: %q, system prompt %q", msgs, system)
	}
	// Each message sent while the fork's record was held back went once.
	for i, want := range []string{"Sent during read 1", "Sent during read 2", "First of two", "Sent during read 3"} {
		if u := lastUser(t, reqs[3+i]); !strings.HasPrefix(u, want) {
			t.Errorf("request %d: the user's message is %q, want %q", 3+i, u, want)
		}
	}
}
