package daemon

// A Workspace may not reach the daemon's data dir (CONTRACT.md "Workspaces
// and the data dir"): its sandbox would read the cookie secret and write
// the journal. Every route that registers one, or creates a Session in
// one, answers 400; the config file a Workspace holds reads as empty in
// its sandbox.

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// configNamespace is TestConfigFileMasked's containerd namespace.
const configNamespace = "lathe-test-config"

func TestWorkspaceReachingTheDataDir(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	data := realDir(t, d.dataDir)
	link := filepath.Join(t.TempDir(), "data")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	inside := mkdir(t, data, "made-here", "x") // not a folder the daemon sweeps at start (ways/ is)
	for _, tc := range []struct{ name, path string }{
		{"Equal", data},
		{"EqualUncleaned", data + "/./"},
		{"ThroughALink", link},
		{"Inside", inside},
		{"InsideThroughALink", filepath.Join(link, "made-here", "x")},
		{"Contains", filepath.Dir(data)},
		{"Root", "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, srv, post, "/api/workspaces", `{"path":"`+tc.path+`"}`)
			if r.status != http.StatusBadRequest {
				t.Fatalf("POST /api/workspaces %s: %d %s, want 400", tc.path, r.status, r.body)
			}
			assertErrorBody(t, r, "data dir")
			r = call(t, srv, post, "/api/sessions", `{"name":"s","working_dir":"`+tc.path+`",`+agentMode+`}`)
			if r.status != http.StatusBadRequest {
				t.Fatalf("POST /api/sessions %s: %d %s, want 400", tc.path, r.status, r.body)
			}
			assertErrorBody(t, r, "data dir")
		})
	}
	if r := call(t, srv, get, "/api/workspaces", ""); strings.Contains(string(r.body), data) {
		t.Errorf("a refused Workspace was registered: %s", r.body)
	}

	// A Workspace registered before the check (an older daemon's journal)
	// gets no Session either, by either route.
	id := ulid.Make().String()
	ev := events.New(id, events.WorkspaceRegistered{Path: filepath.Dir(data), Name: "old"})
	if _, err := d.journal.Append(context.Background(), []journal.Event{ev}, journal.Expectation{AggregateID: id}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "the old Workspace is listed", func() bool {
		return call(t, srv, get, "/api/workspaces/"+id, "").status == http.StatusOK
	})
	r := call(t, srv, post, "/api/workspaces/"+id+"/sessions", `{"name":"s",`+agentMode+`}`)
	if r.status != http.StatusBadRequest {
		t.Fatalf("a Session in the old Workspace: %d %s, want 400", r.status, r.body)
	}
	assertErrorBody(t, r, "data dir")
	r = call(t, srv, post, "/api/sessions", `{"name":"s","working_dir":"`+filepath.Dir(data)+`",`+agentMode+`}`)
	if r.status != http.StatusBadRequest {
		t.Fatalf("a Session at the old Workspace's path: %d %s, want 400", r.status, r.body)
	}
	assertErrorBody(t, r, "data dir")

	// Beside it, a Workspace is fine.
	mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+realDir(t, t.TempDir())+`"}`)
}

// TestConfigFileMasked: the daemon's config file, kept in a Workspace
// (it may hold API keys), reads as empty in that Workspace's sandbox; the
// file beside it reads as it is, and the config stays whole on the host.
func TestConfigFileMasked(t *testing.T) {
	cl := containerdtest.Namespace(t, configNamespace)
	dir := realDir(t, t.TempDir())
	const secret = "api_keys: [sk-config-secret]\n"
	file := filepath.Join(mkdir(t, dir, "etc"), "lathe.yaml")
	for path, body := range map[string]string{file: secret, filepath.Join(dir, "etc", "other"): "visible\n"} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d, srv := newSandboxDaemon(t, configNamespace, nil, WithConfigFile(file))
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	r := &taskRig{sessionRig: sessionRig{srv: srv, cl: cl, name: "config", ws: ws, dir: dir}, d: d}
	id := r.readySession(t)
	task := r.exited(t, id, r.startTask(t, id, `{"command":"cat etc/lathe.yaml; cat `+file+`; cat etc/other"}`).ID)
	if task.OutputTail != "visible\n" {
		t.Errorf("the sandbox read %q, want only the other file's line", task.OutputTail)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != secret {
		t.Errorf("the config on the host: %q, %v", b, err)
	}
}
