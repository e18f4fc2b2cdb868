package daemon

// The Ways panel end to end in Debian's Chromium, driven by playwright-core
// (testdata/browser/ways.mjs), against a whole daemon with real sandboxes
// and the scripted model: a plan preview, two lanes on two models
// streaming side by side, the primary surfaces and the composer suspended
// with the reason, a lane's diff, the cost table, a reload mid-set, and
// Keep; then a second set whose every view follows it, ranked by the judge
// Agent chosen in the panel, and discarded.

import (
	"slices"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
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
		// The second set, and its judge.
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("Second zero. "), fakellm.ToolCall("s0", "write_file", `{"path":"two.txt","content":"zero\n"}`), fakellm.Usage(10, 5, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("Second zero wrote two.txt."), fakellm.Usage(10, 5, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("Second one. "), fakellm.ToolCall("s1", "write_file", `{"path":"two.txt","content":"one\n"}`), fakellm.Usage(20, 5, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("Second one wrote two.txt."), fakellm.Usage(20, 5, 0)}},
		{Model: "mj", Steps: []fakellm.Step{fakellm.ToolCall("j", "submit_ranking", `{"ranking":[{"index":1,"rank":1,"reason":"the judge prefers this one"},{"index":0,"rank":2,"reason":"longer"}]}`), fakellm.Usage(9, 5, 0)}},
	}}
	r := newWaysRig(t, script, func(c *config.Config) {
		c.Agents = append(c.Agents, config.Agent{ID: "judge", Name: "Judge", Provider: "fake", Model: "mj"})
	})
	r.gitWorkspace(t)
	id := r.create(t, "").ID
	r.ready(t, id)
	r.discardAtEnd(t, id)
	runBrowser(t, node, chromium, "ways.mjs", 5*time.Minute, "LATHE_URL="+r.srv.URL, "LATHE_SESSION="+id, "LATHE_WORKSPACE="+r.dir)
	models := []string{}
	for _, q := range r.llm.Requests() {
		models = append(models, q.Model)
	}
	if !slices.Contains(models, "mj") {
		t.Errorf("the judge chosen in the panel never ran: the model saw %v", models)
	}
}
