package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/git/gittest"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
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
		c.Sandbox.Remote.Template = "lathe.local/sandbox:bookworm"
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

// checkBrings checks what the git status of remote Session id says a
// sync brings: the clone's commits beyond base (at commit), newest first.
func checkBrings(t *testing.T, srv *httptest.Server, id, base, commit string, subjects ...string) {
	t.Helper()
	var st struct {
		Sync *struct {
			Branch, Base string
			BaseCommit   string `json:"base_commit"`
			Ahead        int
			Commits      []struct{ Commit, Subject string }
		}
	}
	if err := json.Unmarshal(call(t, srv, get, "/api/sessions/"+id+"/git/status", "").body, &st); err != nil {
		t.Fatal(err)
	}
	s := st.Sync
	if s == nil || s.Branch != "lathe/"+id || s.Base != base || s.BaseCommit != commit || s.Ahead != len(subjects) || len(s.Commits) != len(subjects) {
		t.Fatalf("git status sync = %+v, want beyond %s at %s: %q", s, base, commit, subjects)
	}
	for i, want := range subjects {
		if s.Commits[i].Subject != want {
			t.Errorf("commit %d brought: %+v, want %q", i, s.Commits[i], want)
		}
	}
}

// dockerCLI runs the docker CLI against host and returns its trimmed
// output; a failure is returned, not fatal.
func dockerCLI(host string, args ...string) (string, error) {
	out, err := exec.Command("docker", append([]string{"-H", host}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestRemoteSessionOnDocker: a remote Session on the machine's dockerd:
// the container carries the journaled creation token, the clone holds the
// Workspace's HEAD and its uncommitted changes, sync is 409 while the clone
// is dirty and then brings the commit home as lathe/<id> without touching
// the Workspace, and close brings the rest home and removes the container.
func TestRemoteSessionOnDocker(t *testing.T) {
	host := dockertest.Host()
	dockertest.Docker(t, docker.Options{Host: host}) // skips without an engine
	_, srv := startDaemon(t, 10*time.Second, func(c *config.Config) {
		c.Sandbox.Provider = config.SandboxRemote
		c.Sandbox.Remote.Host = host
		c.Sandbox.Remote.Template = "lathe.local/sandbox:bookworm"
	})
	dir := realDir(t, t.TempDir())
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(dir, "a.txt"), "a\n")
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-q", "-m", "first")
	writeFile(t, filepath.Join(dir, "a.txt"), "a changed\n")
	writeFile(t, filepath.Join(dir, "new.txt"), "new\n")
	hostStatus := gittest.Run(t, dir, "status", "--porcelain")

	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	id := mustCall(t, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"s",`+agentMode+`}`)["id"].(string)
	var env remoteEnv
	env.RuntimeID, env.CreationToken = waitRemoteReady(t, srv, id)
	t.Cleanup(func() { _, _ = dockerCLI(host, "rm", "-f", env.RuntimeID) })
	if label, err := dockerCLI(host, "inspect", "--format", `{{index .Config.Labels "service_creation_token"}}`, env.RuntimeID); err != nil || label != env.CreationToken || label == "" {
		t.Fatalf("container %s token label %q (%v), want %q", env.RuntimeID, label, err, env.CreationToken)
	}
	inClone := func(args ...string) string {
		t.Helper()
		out, err := dockerCLI(host, append([]string{"exec", "-w", dir, env.RuntimeID, "git", "-c", "safe.directory=*", "-c", "user.name=T", "-c", "user.email=t@t"}, args...)...)
		if err != nil {
			t.Fatalf("git %v in the clone: %v: %s", args, err, out)
		}
		return out
	}
	if got := inClone("status", "--porcelain", "--untracked-files=all"); got != "M a.txt\n?? new.txt" {
		t.Errorf("clone status %q", got)
	}
	r := call(t, srv, post, "/api/sessions/"+id+"/sync", "")
	if r.status != 409 {
		t.Fatalf("sync of a dirty clone: %d %s", r.status, r.body)
	}
	inClone("add", "-A")
	inClone("commit", "-q", "-m", "work in the clone")
	hostHead := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD"))
	checkBrings(t, srv, id, "HEAD", hostHead, "work in the clone")
	synced := mustCall(t, srv, 200, post, "/api/sessions/"+id+"/sync", "")
	if want := inClone("rev-parse", "HEAD"); synced["commit"] != want || synced["branch"] != "lathe/"+id {
		t.Errorf("sync = %v, want lathe/%s at %s", synced, id, want)
	}
	if got := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "lathe/"+id)); got != synced["commit"] {
		t.Errorf("lathe/%s = %s", id, got)
	}
	if got := gittest.Run(t, dir, "status", "--porcelain"); got != hostStatus {
		t.Errorf("the Workspace's status changed: %q, want %q", got, hostStatus)
	}
	checkBrings(t, srv, id, "lathe/"+id, synced["commit"].(string))
	inClone("commit", "-q", "--allow-empty", "-m", "after the sync")
	checkBrings(t, srv, id, "lathe/"+id, synced["commit"].(string), "after the sync")

	if out, err := dockerCLI(host, "exec", "-w", dir, env.RuntimeID, "sh", "-c", "echo late > late.txt"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	mustCall(t, srv, 200, "DELETE", "/api/sessions/"+id, "")
	if got := gittest.Run(t, dir, "show", "lathe/"+id+":late.txt"); got != "late\n" {
		t.Errorf("late.txt at home after close: %q", got)
	}
	if out, err := dockerCLI(host, "inspect", env.RuntimeID); err == nil {
		t.Errorf("the container outlived the close: %s", out)
	}

	// A folder that is no Git repository arrives as a copy.
	plain := realDir(t, t.TempDir())
	writeFile(t, filepath.Join(plain, "sub", "p.txt"), "plain\n")
	ws = mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+plain+`"}`)["id"].(string)
	id = mustCall(t, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"p",`+agentMode+`}`)["id"].(string)
	runtimeID, _ := waitRemoteReady(t, srv, id)
	t.Cleanup(func() { _, _ = dockerCLI(host, "rm", "-f", runtimeID) })
	if out, err := dockerCLI(host, "exec", runtimeID, "cat", filepath.Join(plain, "sub", "p.txt")); err != nil || out != "plain" {
		t.Errorf("the copied file: %q %v", out, err)
	}
	mustCall(t, srv, 200, "DELETE", "/api/sessions/"+id+"?force=true", "")
}

// TestRemoteRefusesWorktree: under the remote provider a create with
// isolation worktree is a 400 on both create routes, before anything is
// provisioned (issue 32, finding 5: its work could never be brought home,
// and the container was retained although the engine answered): no
// Session, no branch, no worktree.
func TestRemoteRefusesWorktree(t *testing.T) {
	_, srv := startDaemon(t, 10*time.Second, func(c *config.Config) {
		c.Sandbox.Provider = config.SandboxRemote
		c.Sandbox.Remote.Host = "unix:///nonexistent/lathe-test/docker.sock"
		c.Sandbox.Remote.Template = "lathe.local/sandbox:bookworm"
	})
	dir := realDir(t, t.TempDir())
	gittest.Repo(t, dir, map[string]string{"a.txt": "a\n"})
	before := gittest.State(t, dir) + gittest.Run(t, dir, "for-each-ref") + gittest.Run(t, dir, "worktree", "list", "--porcelain")
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	for _, c := range []struct{ name, path, body string }{
		{"workspace route", "/api/workspaces/" + ws + "/sessions", `{"name":"wt",` + agentMode + `,"isolation":"worktree"}`},
		{"compat route", "/api/sessions", `{"working_dir":` + jsonString(dir) + `,"name":"wt",` + agentMode + `,"isolation":"worktree"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, srv, post, c.path, c.body)
			if r.status != 400 {
				t.Fatalf("create with isolation worktree under remote: %d %s, want 400", r.status, r.body)
			}
			assertErrorBody(t, r, "not supported under the remote sandbox provider")
		})
	}
	if body := call(t, srv, get, "/api/workspaces/"+ws+"/sessions", "").body; strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("a refused create left Sessions: %s", body)
	}
	if after := gittest.State(t, dir) + gittest.Run(t, dir, "for-each-ref") + gittest.Run(t, dir, "worktree", "list", "--porcelain"); after != before {
		t.Errorf("a refused create changed the Workspace's repository:\n%s\n---\n%s", before, after)
	}
}

// TestRemoteRescueOnDocker: a close whose bring-home the host's git
// refuses (a branch lathe blocks lathe/<id>) while the engine answers
// removes the container all the same, keeping the clone, its uncommitted
// work and .git included, as an archive the Session's environment names
// and the blob collector keeps (issue 32, finding 5: never retain a
// runtime when the engine is reachable).
func TestRemoteRescueOnDocker(t *testing.T) {
	host := dockertest.Host()
	dockertest.Docker(t, docker.Options{Host: host}) // skips without an engine
	d, srv := startDaemon(t, 10*time.Second, func(c *config.Config) {
		c.Sandbox.Provider = config.SandboxRemote
		c.Sandbox.Remote.Host = host
		c.Sandbox.Remote.Template = "lathe.local/sandbox:bookworm"
	})
	dir := realDir(t, t.TempDir())
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(dir, "a.txt"), "a\n")
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-q", "-m", "first")
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	id := mustCall(t, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"s",`+agentMode+`}`)["id"].(string)
	runtimeID, _ := waitRemoteReady(t, srv, id)
	t.Cleanup(func() { _, _ = dockerCLI(host, "rm", "-f", runtimeID) })
	if out, err := dockerCLI(host, "exec", "-w", dir, runtimeID, "sh", "-c", "echo late > late.txt"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	gittest.Run(t, dir, "branch", "lathe") // refs/heads/lathe: the host's git cannot write lathe/<id>

	mustCall(t, srv, 200, "DELETE", "/api/sessions/"+id, "")
	var ss struct {
		Environment struct {
			RuntimeID string `json:"runtime_id"`
			Retained  bool
			Rescued   []struct {
				SHA256, Path string
				Size         int64
			}
		}
	}
	if err := json.Unmarshal(call(t, srv, get, "/api/sessions/"+id, "").body, &ss); err != nil {
		t.Fatal(err)
	}
	env := ss.Environment
	if env.Retained || env.RuntimeID != "" || len(env.Rescued) != 1 {
		t.Fatalf("after the close: %+v", env)
	}
	if out, err := dockerCLI(host, "ps", "-aq", "--filter", "label=lathe.session="+id); err != nil || out != "" {
		t.Errorf("containers of the Session after the close: %q %v", out, err)
	}
	rw := env.Rescued[0]
	if _, err := d.cmds.Blobs.Collect(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if b, err := exec.Command("tar", "-xf", rw.Path, "-C", out).CombinedOutput(); err != nil {
		t.Fatalf("extract %+v: %v: %s", rw, err, b)
	}
	if got := readFile(t, filepath.Join(out, "late.txt")); got != "late\n" {
		t.Errorf("late.txt in the rescue: %q", got)
	}
	if got := gittest.Run(t, out, "log", "--format=%s"); got != "first\n" {
		t.Errorf("the rescued clone's history: %q", got)
	}
}
