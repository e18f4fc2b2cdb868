package daemon

// The workbench's conversation end to end: Chromium drives
// testdata/browser/conversation.mjs against a whole daemon whose Agent talks
// to the scripted model server (fakellm), with real sandboxes in this file's
// own containerd namespace. A turn the script holds mid-stream is released
// when the browser script prints "SIGNAL release".

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// convNamespace is this file's own containerd namespace.
const convNamespace = "lathe-test-conv"

// convMarkdown is turn 1's answer: Markdown the workbench renders, and
// model output it must not trust (raw HTML, a script, unsafe links).
const convMarkdown = "Done: wrote notes/hello.txt.\n\n## Summary\n\n- wrote **notes/hello.txt**\n- ran `echo`\n\n" +
	"| file | state |\n|---|---|\n| notes/hello.txt | written |\n\n```python\nprint(\"hello, world\")\n```\n\n" +
	"[docs](https://example.com/docs) [bad](javascript:window.__xss=1) <script>window.__xss=1</script>" +
	"<img src=x onerror=\"window.__xss=1\"> <a href=\"javascript:window.__xss=1\">raw</a>\n"

// convOverrideModel is the one-turn model the browser picks; the scripted
// server answers it with a provider error.
const convOverrideModel = "gpt-4o-mini"

func TestConversationInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	release := make(chan struct{})
	var once sync.Once
	// The scripted server serves m1 and the override model: a local
	// OpenAI-compatible server's model list is what it says it serves.
	script := fakellm.Script{Models: []string{"m1", convOverrideModel}, Turns: []fakellm.Turn{
		// 1: reasoning, text, a write_file call, a failing read_file, an
		// edit_file and a failing shell call, then a Markdown answer that
		// tries raw HTML and unsafe links
		{Steps: []fakellm.Step{
			fakellm.Reasoning("plan: write the greeting file"),
			fakellm.Text("Writing "),
			fakellm.Text("the file."),
			fakellm.ToolCall("call_1", "write_file", `{"path":"notes/hello.txt",`, `"content":"hi from the agent\n"}`),
			fakellm.ToolCall("call_2", "read_file", `{"path":"missing.txt"}`), // fails: its card shows the error
			fakellm.ToolCall("call_3", "edit_file", `{"path":"app.py","old_string":"hello","new_string":"hello, world"}`),
			fakellm.ToolCall("call_4", "shell", `{"command":"echo out-$((6*7)); exit 1"}`), // exits 1
			fakellm.Usage(100, 20, 5),
		}},
		{Steps: []fakellm.Step{fakellm.Text(convMarkdown), fakellm.Usage(50, 8, 0)}},
		// 2: held mid-stream across a page reload
		{Steps: []fakellm.Step{fakellm.Text("first half, "), fakellm.Stall(release), fakellm.Text("second half"), fakellm.Usage(10, 4, 0)}},
		// 3: stopped with Esc
		{Steps: []fakellm.Step{fakellm.Text("thinking about it"), fakellm.Stall(nil)}},
		// 4: the one-turn model override, refused by the provider
		{Model: convOverrideModel, Steps: []fakellm.Step{fakellm.Fail(400)}},
	}}
	r := turnDaemonIn(t, convNamespace, config.KindOpenAI, script, nil)
	if err := os.WriteFile(filepath.Join(r.dir, "app.py"), []byte("print(\"hello\")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := r.create(t, "").ID
	r.ready(t, id)

	env := []string{"LATHE_URL=" + r.srv.URL, "LATHE_SESSION=" + id, "LATHE_WORKSPACE=" + r.dir, "LATHE_OVERRIDE_MODEL=" + convOverrideModel}
	runBrowserSignals(t, node, chromium, "conversation.mjs", 3*time.Minute, func(name string) {
		if name == "release" {
			once.Do(func() { close(release) })
		}
	}, env...)

	// The Agent's write went through the sandbox to the Workspace.
	if b, err := os.ReadFile(filepath.Join(r.dir, "notes", "hello.txt")); err != nil || string(b) != "hi from the agent\n" {
		t.Errorf("notes/hello.txt = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "app.py")); err != nil || string(b) != "print(\"hello, world\")\n" {
		t.Errorf("app.py = %q, %v", b, err)
	}
}
