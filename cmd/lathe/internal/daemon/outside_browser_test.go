package daemon

import (
	"sync"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// TestOutsideAgentInChromium: the real Claude Code in the workbench
// (testdata/browser/outside.mjs): a turn's header names the agent, its
// reported version and the model, and its plan is a checklist, live and
// after a reload; a Ways lane card of Claude Code names the same.
func TestOutsideAgentInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	release := make(chan struct{})
	var once sync.Once
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Model: "m1", Steps: []fakellm.Step{todoWrite("toolu_p1", "in_progress"), fakellm.Usage(50, 10, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Stall(release), todoWrite("toolu_p2", "completed"), fakellm.Usage(60, 10, 0)}},
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("Planned and done."), fakellm.Usage(70, 4, 0)}},
		// The Ways set: Claude Code's lane, then the built-in loop's.
		{Model: "m1", Steps: []fakellm.Step{fakellm.Text("claude lane done"), fakellm.Usage(30, 3, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.ToolCall("d1", "write_file", `{"path":"a.txt","content":"built-in\n"}`), fakellm.Usage(20, 5, 0)}},
		{Model: "m2", Steps: []fakellm.Step{fakellm.Text("built-in lane done"), fakellm.Usage(20, 5, 0)}},
	}}
	install := sharedAgents(t, "claude-code")
	r := newWaysRigWith(t, script, []Option{install}, func(c *config.Config) {
		c.Agents = append(c.Agents, config.Agent{ID: "claude", Name: "Claude Code", Kind: "acp", ACP: &config.ACP{Preset: "claude-code"}, Provider: "fake", Model: "m1"})
	})
	r.gitWorkspace(t)
	id := r.create(t, `"mode":{"kind":"single_agent","agent_id":"claude"}`).ID
	r.ready(t, id)
	r.discardAtEnd(t, id)
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the Session's delete: a held turn refuses it
	runBrowserSignals(t, node, chromium, "outside.mjs", 5*time.Minute, func(name string) {
		if name == "release" {
			once.Do(func() { close(release) })
		}
	}, "LATHE_URL="+r.srv.URL, "LATHE_SESSION="+id)
}
