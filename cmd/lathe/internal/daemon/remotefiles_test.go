package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/git/gittest"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
)

// startRemote starts a daemon under the remote provider on the machine's
// dockerd (skipping without one) and a Ready Session on a Git Workspace
// with a.txt, sub/b.txt and an uncommitted change; it returns the
// Workspace, the Session and its container.
func startRemote(t testing.TB) (srv *httptest.Server, dir, id, runtimeID string) {
	_, srv = remoteDaemon(t)
	dir = realDir(t, t.TempDir())
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(dir, "a.txt"), "a\n")
	writeFile(t, filepath.Join(dir, "sub", "b.txt"), "b\n")
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-q", "-m", "first")
	writeFile(t, filepath.Join(dir, "a.txt"), "a changed\n")
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	id, runtimeID = remoteReady(t, srv, ws, "")
	return srv, dir, id, runtimeID
}

// dockerTemplate is the sandbox image remote Sessions run in the tests.
const dockerTemplate = "lathe.local/sandbox:bookworm"

// remoteDaemon starts a daemon under the remote provider on the machine's
// dockerd, skipping without one.
func remoteDaemon(t testing.TB) (*Daemon, *httptest.Server) {
	return remoteDaemonOn(t, dockerTemplate)
}

// remoteDaemonOn is remoteDaemon with its Sessions on image template.
func remoteDaemonOn(t testing.TB, template string) (*Daemon, *httptest.Server) {
	host := dockertest.Host()
	dockertest.Docker(t, docker.Options{Host: host}) // skips without an engine
	return startDaemon(t, 10*time.Second, func(c *config.Config) {
		c.Sandbox.Provider = config.SandboxRemote
		c.Sandbox.Remote.Host = host
		c.Sandbox.Remote.Template = template
	})
}

// remoteReady creates a Session on Workspace ws (extra: more fields of the
// create body, after a comma) and waits until it is Ready; the Session is
// force-deleted, and its container removed, when t ends.
func remoteReady(t testing.TB, srv *httptest.Server, ws, extra string) (id, runtimeID string) {
	if extra != "" {
		extra = "," + extra
	}
	id = mustCall(t, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"s",`+agentMode+extra+`}`)["id"].(string)
	t.Cleanup(func() {
		// Through the daemon, before it stops: a container removed behind
		// its back is a lost sandbox it would log about after the test.
		removeRemote(t, srv, id)
		if runtimeID != "" {
			_, _ = dockerCLI(dockertest.Host(), "rm", "-f", runtimeID)
		}
	})
	runtimeID, _ = waitRemoteReady(t, srv, id)
	return id, runtimeID
}

// removeRemote force-deletes the remote Session id, allowing 2 minutes on
// a loaded machine (its work goes home first); a runtime the daemon had to
// retain (the engine too slow to answer) is removed by its label; one
// already gone is no error.
func removeRemote(t testing.TB, srv *httptest.Server, id string) {
	req, err := http.NewRequest("DELETE", srv.URL+"/api/sessions/"+id+"?force=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := sendWithin(t, srv.Client(), req, 2*time.Minute); r.status != 200 && r.status != 404 {
		t.Logf("delete %s: %d %s; removing its container", id, r.status, r.body)
		host := dockertest.Host()
		if cids, err := dockerCLI(host, "ps", "-aq", "--filter", "label=lathe.session="+id); err == nil && cids != "" {
			_, _ = dockerCLI(host, append([]string{"rm", "-f"}, strings.Fields(cids)...)...)
		}
	}
}

// remoteEnv is a remote Session's environment as the daemon shows it.
type remoteEnv struct {
	State, Owner  string
	RuntimeID     string `json:"runtime_id"`
	CreationToken string `json:"creation_token"`
	Evidence      any
}

// remoteState is the Session's environment, and an error until it is
// Ready; a failed environment is fatal.
func remoteState(t testing.TB, srv *httptest.Server, id string) (remoteEnv, error) {
	var ss struct{ Environment remoteEnv }
	if err := json.Unmarshal(call(t, srv, get, "/api/sessions/"+id, "").body, &ss); err != nil {
		return remoteEnv{}, err
	}
	e := ss.Environment
	if e.State == "failed" {
		t.Fatalf("environment failed: %+v", e.Evidence)
	}
	if e.State != "ready" || e.Owner != "" {
		return e, fmt.Errorf("environment %s", e.State)
	}
	return e, nil
}

// waitRemoteReady waits for remote Session id to be Ready (fatal when its
// environment fails) and returns its container and creation token.
func waitRemoteReady(t testing.TB, srv *httptest.Server, id string) (runtimeID, token string) {
	t.Helper()
	var e remoteEnv
	polltest.Check(t, func() (err error) {
		e, err = remoteState(t, srv, id)
		return err
	}, polltest.Within(2*time.Minute))
	return e.RuntimeID, e.CreationToken
}

// treeDigest is every entry below dir with its mode and bytes.
func treeDigest(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			v += " " + hex.EncodeToString(sum[:])
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRemoteSessionFiles: on a remote Session every file route works on
// the clone inside the container (what the container holds is checked
// with docker exec), path escapes are refused, and the host Workspace
// stays byte-identical throughout.
func TestRemoteSessionFiles(t *testing.T) {
	srv, dir, id, cid := startRemote(t)
	host := dockertest.Host()
	inBox := func(script string) string {
		t.Helper()
		out, err := dockerCLI(host, "exec", "-w", dir, cid, "sh", "-c", script)
		if err != nil {
			t.Fatalf("%s: %v: %s", script, err, out)
		}
		return out
	}
	inBox("ln -s ../../etc out-link && ln -s sub/b.txt in-link")
	before := treeDigest(t, dir)
	base := "/api/sessions/" + id

	if got := mustCall(t, srv, 200, get, base+"/file?path=a.txt", ""); got["content"] != "a changed\n" {
		t.Errorf("read a.txt = %v", got)
	}
	if got := mustCall(t, srv, 200, get, base+"/file?path=in-link", ""); got["content"] != "b\n" {
		t.Errorf("read in-link = %v", got)
	}
	mustCall(t, srv, 200, post, base+"/file?path=a.txt", `{"content":"written\n"}`)
	if r := call(t, srv, post, base+"/file?path=a.txt", `{"content":"lost\n","expected_sha256":"`+strings.Repeat("0", 64)+`"}`); r.status != 409 {
		t.Errorf("a write over a stale hash: %d %s, want 409", r.status, r.body)
	}
	mustCall(t, srv, 200, post, base+"/file?path=in-link", `{"content":"through the link\n"}`)
	if got := inBox("cat sub/b.txt; test -L in-link && echo still-a-link"); got != "through the link\nstill-a-link" {
		t.Errorf("a write through in-link: %q", got)
	}
	mustCall(t, srv, 201, post, base+"/files/create", `{"path":"dir","kind":"dir"}`)
	mustCall(t, srv, 201, post, base+"/files/create", `{"path":"dir/new.txt","kind":"file"}`)
	mustCall(t, srv, 200, post, base+"/files/rename", `{"from":"dir/new.txt","to":"moved.txt"}`)
	mustCall(t, srv, 200, post, base+"/files/delete", `{"path":"sub","recursive":true}`)
	if got := inBox("cat a.txt"); got != "written" {
		t.Errorf("a.txt in the clone = %q", got)
	}
	if got := inBox("ls -p | tr '\\n' ' '"); got != "a.txt dir/ in-link moved.txt out-link" {
		t.Errorf("the clone's top = %q", got)
	}
	if got := treeNames(t, srv, base+"/tree?path=."); !strings.HasPrefix(got, ".git:dir dir:dir a.txt:file in-link:symlink moved.txt:file out-link:symlink") {
		t.Errorf("tree . = %s", got)
	}
	for _, tc := range []struct{ method, path, body string }{
		{get, base + "/file?path=out-link/passwd", ""},
		{get, base + "/tree?path=out-link", ""},
		{post, base + "/file?path=out-link/hostname", `{"content":"x"}`},
		{post, base + "/files/create", `{"path":"out-link/x","kind":"file"}`},
		{post, base + "/files/rename", `{"from":"a.txt","to":"out-link/a"}`},
		{post, base + "/files/delete", `{"path":"out-link/hostname"}`},
	} {
		if r := call(t, srv, tc.method, tc.path, tc.body); r.status != 403 && r.status != 400 {
			t.Errorf("%s %s: %d %s, want a refusal", tc.method, tc.path, r.status, r.body)
		}
	}
	if r := call(t, srv, get, base+"/file?path=../x", ""); r.status != 400 && r.status != 403 {
		t.Errorf("read ../x: %d %s", r.status, r.body)
	}
	// A name that is not UTF-8 (Latin-1 é): the tree lists it (JSON shows
	// the byte as U+FFFD), its exact bytes read and write it, and the lossy
	// name is a clear 404, as os answers a containerd Session.
	inBox(`printf latin > "$(printf 'caf\351.txt')"`)
	if got := string(call(t, srv, get, base+"/tree?path=.", "").body); !strings.Contains(got, `"name":"caf\ufffd.txt"`) {
		t.Errorf("tree . with a Latin-1 name: %s", got)
	}
	if got := mustCall(t, srv, 200, get, base+"/file?path=caf%E9.txt", ""); got["content"] != "latin" {
		t.Errorf("read caf%%E9.txt = %v", got)
	}
	mustCall(t, srv, 200, post, base+"/file?path=caf%E9.txt", `{"content":"written"}`)
	if got := inBox(`cat "$(printf 'caf\351.txt')"`); got != "written" {
		t.Errorf("caf\\351.txt in the clone = %q", got)
	}
	if r := call(t, srv, get, base+"/file?path=caf%EF%BF%BD.txt", ""); r.status != 404 {
		t.Errorf("read of the lossy name: %d %s, want 404", r.status, r.body)
	}
	if after := treeDigest(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the host Workspace changed:\nbefore %v\nafter  %v", before, after)
	}
}

// treeNames is the tree route's listing at path, as "name:type" words.
func treeNames(t testing.TB, srv *httptest.Server, path string) string {
	t.Helper()
	var tree struct{ Entries []struct{ Name, Type string } }
	if err := json.Unmarshal(call(t, srv, get, path, "").body, &tree); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range tree.Entries {
		names = append(names, e.Name+":"+e.Type)
	}
	return strings.Join(names, " ")
}

// TestRemoteCheckoutWatcher: a change made inside the sandbox, by no
// route, reaches the clients as checkout-changed.
func TestRemoteCheckoutWatcher(t *testing.T) {
	srv, dir, id, cid := startRemote(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL(srv), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(16 << 20)
	// The watcher's first fingerprint may postdate a change made right at
	// Ready: change again until a notice comes, each time with a fresh
	// content, under one overall deadline.
	notices := make(chan struct{}, 1)
	go func() {
		for {
			_, raw, err := c.Read(ctx)
			if err != nil {
				return
			}
			var f struct{ Kind, Session string }
			if json.Unmarshal(raw, &f) == nil && f.Kind == "checkout-changed" && f.Session == id {
				notices <- struct{}{}
				return
			}
		}
	}()
	for i := 0; ; i++ {
		if out, err := dockerCLI(dockertest.Host(), "exec", "-w", dir, cid, "sh", "-c", fmt.Sprintf("echo %d > made-inside.txt", i)); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		select {
		case <-notices:
			return
		case <-ctx.Done():
			t.Fatal("no checkout-changed for changes inside the sandbox")
		case <-time.After(3 * time.Second):
		}
	}
}
