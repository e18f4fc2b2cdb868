package daemon

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/polltest"
)

// TestRemoteEngineUnreachable: under the remote provider with an engine
// that cannot be reached, the daemon serves; the probe says images are
// not the Session's choice and names the template; an image is refused
// before anything is provisioned; Sessions end failed with evidence naming
// the host; and Ways, sync and a cleanup confirmation that matches nothing
// are conflicts.
func TestRemoteEngineUnreachable(t *testing.T) {
	const host = "unix:///nonexistent/lathe-test/docker.sock"
	_, srv := startDaemon(t, 10*time.Second, func(c *config.Config) {
		c.Sandbox.Provider = config.SandboxRemote
		c.Sandbox.Remote.Host = host
	})
	dir := realDir(t, t.TempDir())
	probe := mustCall(t, srv, 200, get, "/api/fs/project?path="+dir, "")
	if probe["supports_session_image"] != false || probe["template"] != "lathe.local/sandbox:bookworm" {
		t.Errorf("probe under remote: supports_session_image %v, template %v", probe["supports_session_image"], probe["template"])
	}
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	r := call(t, srv, post, "/api/workspaces/"+ws+"/sessions", `{"name":"img",`+agentMode+`,"image":"debian:bookworm"}`)
	if r.status != 400 {
		t.Fatalf("create with an image under remote: %d %s, want 400", r.status, r.body)
	}
	assertErrorBody(t, r, "remote sandbox provider")
	if body := call(t, srv, get, "/api/workspaces/"+ws+"/sessions", "").body; strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("a refused create left Sessions: %s", body)
	}

	id := mustCall(t, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"s",`+agentMode+`}`)["id"].(string)
	polltest.Check(t, func() error {
		var ss struct {
			Environment struct {
				State    string
				Owner    string
				Evidence *struct{ Error, Fix string }
			}
		}
		if err := json.Unmarshal(call(t, srv, get, "/api/sessions/"+id, "").body, &ss); err != nil {
			return err
		}
		e := ss.Environment
		if e.State != "failed" || e.Owner != "" || e.Evidence == nil {
			return fmt.Errorf("environment %+v", e)
		}
		if !strings.Contains(e.Evidence.Error, host) || !strings.Contains(e.Evidence.Fix, host) {
			return fmt.Errorf("evidence %+v does not name %s", *e.Evidence, host)
		}
		return nil
	}, polltest.Within(30*time.Second))

	for _, c := range []struct {
		name, path, body, err string
		status                int
	}{
		{"sync", "/api/sessions/" + id + "/sync", "", "not ready", 409},
		{"ways", "/api/sessions/" + id + "/variants", `{"input":"x","n":2}`, "local container runtime", 409},
		{"cleanup unmatched", "/api/sessions/" + id + "/environment/confirm-runtime-cleanup", `{"runtime_id":"c1","confirmed":true}`, "no retained runtime", 409},
		{"cleanup malformed", "/api/sessions/" + id + "/environment/confirm-runtime-cleanup", `{"runtime_id":"c1"}`, "confirmed must be true", 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, srv, post, c.path, c.body)
			if r.status != c.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, c.status)
			}
			assertErrorBody(t, r, c.err)
		})
	}
}
