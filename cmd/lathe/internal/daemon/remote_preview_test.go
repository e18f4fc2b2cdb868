package daemon

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lathe/runtime/git/gittest"
	"lathe/runtime/sandbox/sandboxtest"
)

// TestRemotePreview: the Preview of remote Sessions, whose apps run in
// clones on the engine and are reached through each sandbox's relay: two
// sibling Sessions on one port, forwarding, server-sent events as they
// flush, WebSocket upgrades both ways, and the legacy path proxy.
func TestRemotePreview(t *testing.T) {
	r := newRemotePreviewRig(t)
	a := startRemotePreviewApp(t, r, "A")
	page := "<!doctype html>\n<html><head><title>B</title></head><body>static site of B</body></html>\n"
	b := startRemoteApp(t, r, map[string]string{"site/index.html": page}, func(dir string) string {
		return fmt.Sprintf("exec python3 -m http.server %d --bind 127.0.0.1 --directory %s/site", previewPort, dir)
	}, "/")
	hostA, hostB := r.host(a.id, previewPort), r.host(b.id, previewPort)

	t.Run("siblings on one port", func(t *testing.T) { testPreviewSiblings(t, r, hostA, hostB) })
	t.Run("server-sent events flush", func(t *testing.T) { testPreviewSSE(t, r, hostA) })
	t.Run("websocket", func(t *testing.T) { testPreviewWebSocket(t, r, hostA) })
	t.Run("legacy path proxy", func(t *testing.T) { testLegacyProxy(t, r, a, b) })
}

// newRemotePreviewRig starts a daemon whose Sessions run on the machine's
// engine (sandbox.provider remote).
func newRemotePreviewRig(tb testing.TB) *previewRig {
	d, srv := remoteDaemon(tb)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return &previewRig{d: d, srv: srv, client: loopbackClient(srv), listen: port}
}

// startRemotePreviewApp runs testdata/preview_app.py NAME on previewPort
// in a remote Session.
func startRemotePreviewApp(tb testing.TB, r *previewRig, name string) previewApp {
	tb.Helper()
	script, err := os.ReadFile(filepath.Join("testdata", "preview_app.py"))
	if err != nil {
		tb.Fatal(err)
	}
	return startRemoteApp(tb, r, map[string]string{"preview_app.py": string(script)}, func(dir string) string {
		return fmt.Sprintf("exec python3 %s/preview_app.py %d %s/markers %s", dir, previewPort, dir, name)
	}, "/hello")
}

// startRemoteApp makes a Workspace holding files, creates a remote Session
// on it (its clone carries them), starts command(dir) as a task and
// returns once GET probe answers through the Preview.
func startRemoteApp(t testing.TB, r *previewRig, files map[string]string, command func(dir string) string, probe string) previewApp {
	t.Helper()
	dir := realDir(t, t.TempDir())
	gittest.Repo(t, dir, files)
	ws := mustCall(t, r.srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	id, _ := remoteReady(t, r.srv, ws, fmt.Sprintf(`"exposed_ports":[%d]`, previewPort))
	mustCall(t, r.srv, 201, post, "/api/sessions/"+id+"/tasks", fmt.Sprintf(`{"command":%q}`, command(dir)))
	sandboxtest.WaitFor(t, time.Minute, func() bool {
		return r.send(t, get, r.host(id, previewPort), probe, "").status == 200
	})
	return previewApp{id: id, dir: dir}
}
