package daemon

// The Ways panel end to end in Debian's Chromium, driven by playwright-core
// (testdata/browser/ways.mjs), against a whole daemon with real sandboxes
// and the scripted model: a plan preview, two lanes on two models
// streaming side by side, the primary surfaces suspended with the reason,
// a lane's diff, the cost table, a reload mid-set, and Keep.

import (
	"testing"
	"time"

	"lathe/runtime/llm/fakellm"
)

func TestWaysInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Model: "m1", Steps: []fakellm.Step{fakellm.ToolCall("p", "submit_steps", `{"steps":["read a.txt","rewrite it"]}`), fakellm.Usage(5, 5, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("Lane zero reads. "), fakellm.ToolCall("a", "read_file", `{"path":"a.txt"}`), fakellm.Usage(10, 5, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.ToolCall("b", "write_file", `{"path":"zero.txt","content":"zero\n"}`), fakellm.Usage(10, 5, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("Lane zero wrote zero.txt."), fakellm.Usage(10, 5, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("Lane one rewrites. "), fakellm.ToolCall("c", "write_file", `{"path":"a.txt","content":"rewritten by lane one\n"}`), fakellm.Usage(20, 5, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("Lane one rewrote a.txt."), fakellm.Usage(20, 5, 0)}},
	}}
	r := newWaysRig(t, script)
	r.gitWorkspace(t)
	id := r.create(t, "").ID
	r.ready(t, id)
	r.discardAtEnd(t, id)
	runBrowser(t, node, chromium, "ways.mjs", 4*time.Minute, "LATHE_URL="+r.srv.URL, "LATHE_SESSION="+id, "LATHE_WORKSPACE="+r.dir)
}
