package daemon

import (
	"testing"
	"time"
)

// The History view in Chromium: the trail, time travel by entry and by
// scrubber, the kind filter, the audit head and export
// (testdata/browser/history.mjs). The Session needs no sandbox.
func TestHistoryInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	_, srv := newTestDaemon(t, nil)
	dir := realDir(t, t.TempDir())
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	s := mustCall(t, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"first",`+agentMode+`,"setup_command":"make deps"}`)["id"].(string)
	mustCall(t, srv, 200, patch, "/api/sessions/"+s, `{"name":"second"}`)
	mustCall(t, srv, 200, patch, "/api/sessions/"+s, `{"name":"third"}`)
	runBrowser(t, node, chromium, "history.mjs", 2*time.Minute, "LATHE_URL="+srv.URL, "LATHE_SESSION="+s)
}
