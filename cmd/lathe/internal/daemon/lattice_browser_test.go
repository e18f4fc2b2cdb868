package daemon

import (
	"sync"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
)

// TestLatticeInChromium: a two-Worker lattice turn with one dependency in
// the workbench (testdata/browser/lattice.mjs): the plan, each Worker's
// stream and state, a reload mid-turn, and the Worker picker.
func TestLatticeInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	release := make(chan struct{})
	var once sync.Once
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Model: "plan-m", Steps: []fakellm.Step{planCall(subtask("a", "write a"), subtask("b", "use a", "a")), fakellm.Usage(10, 5, 0)}},
		{Model: "w1-m", Steps: []fakellm.Step{fakellm.Text("a is done"), fakellm.Usage(3, 2, 0)}},
		{Model: "w2-m", Steps: []fakellm.Step{fakellm.Text("b sees "), fakellm.Stall(release), fakellm.Text("alpha"), fakellm.Usage(4, 3, 0)}},
		{Model: "plan-m", Steps: []fakellm.Step{fakellm.Text("Done: a and b are built."), fakellm.Usage(20, 6, 0)}},
		{Model: "w2-m", Steps: []fakellm.Step{fakellm.Text("just me"), fakellm.Usage(1, 1, 0)}},
	}}
	r := turnDaemonIn(t, latticeNamespace, config.KindOpenAI, script, latticeTeam)
	id := r.create(t, `"mode":{"kind":"lattice"}`).ID
	r.ready(t, id)
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the Session's delete: a held turn refuses it
	runBrowserSignals(t, node, chromium, "lattice.mjs", 3*time.Minute, func(name string) {
		if name == "release" {
			once.Do(func() { close(release) })
		}
	}, "LATHE_URL="+r.srv.URL, "LATHE_SESSION="+id)
}
