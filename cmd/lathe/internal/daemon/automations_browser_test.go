package daemon

// The Automations view end to end: Chromium drives testdata/browser/
// automations.mjs against a whole daemon (no sandboxes needed: the graph's
// nodes are an interrupt and built-in tools). It creates an Automation,
// draws an edge, sees a refused save on its node, runs it, answers its
// Interrupt from another tab (and after a reload), forks the run and
// cancels the fork's Interrupt, and reads the history.

import (
	"testing"
	"time"
)

func TestAutomationsInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	_, srv := newTestDaemon(t, nil)
	runBrowser(t, node, chromium, "automations.mjs", 3*time.Minute, "LATHE_URL="+srv.URL)
}
