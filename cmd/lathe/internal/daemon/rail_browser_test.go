package daemon

import (
	"net/http"
	"testing"
	"time"
)

// TestRailInChromium (testdata/browser/rail.mjs, issue 26 defect 5): at
// 1440, 1024, 800 and 390 px, every screen (home, a Session, its History,
// Automations, the screen after leaving Automations, Chats, the shared
// files, MCP) reaches the rail, and a Session opens from it; then the
// screens of the 390 px dead end again with the rail collapsed at 1440 px.
func TestRailInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	_, srv := newTestDaemon(t, nil)
	dir := realDir(t, t.TempDir())
	ws := mustCall(t, srv, http.StatusCreated, post, "/api/workspaces", `{"path":`+quote(dir)+`,"name":"rail"}`)
	env := []string{"LATHE_URL=" + srv.URL}
	for _, name := range []string{"alpha", "beta"} {
		s := mustCall(t, srv, http.StatusCreated, post, "/api/workspaces/"+ws["id"].(string)+"/sessions", `{"name":"`+name+`",`+agentMode+`}`)
		env = append(env, "LATHE_"+name+"="+s["id"].(string))
	}
	runBrowser(t, node, chromium, "rail.mjs", 2*time.Minute, env...)
}
