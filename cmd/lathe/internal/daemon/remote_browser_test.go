package daemon

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/runtime/git/gittest"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
)

// remoteBrowserNote is what the scripted turn writes in the clone.
const remoteBrowserNote = "written in the remote sandbox\n"

// TestRemoteInChromium (testdata/browser/remote.mjs): under the remote
// sandbox provider on this machine's dockerd, the New Session dialog names
// the template instead of an image field; a turn writes hello.txt in the
// clone, a terminal commits it, the Preview frames a server started in the
// sandbox; Source Control refuses a sync while the clone is dirty (in
// words, commit first) and then syncs to lathe/<id>. The Workspace
// repository then has that branch with the file, and the Workspace
// folder (HEAD, branch, index, files) is as it was.
func TestRemoteInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	host := dockertest.Host()
	dockertest.Docker(t, docker.Options{Host: host}) // skips without an engine
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.Text("Writing the note."),
			fakellm.ToolCall("w", "write_file", `{"path":"hello.txt","content":"written in the remote sandbox\n"}`),
			fakellm.Usage(3, 2, 0),
		}},
		{Steps: []fakellm.Step{fakellm.Text("hello.txt is written."), fakellm.Usage(3, 2, 0)}},
	}}
	r := remoteTurnDaemon(t, host, script)
	commitBase(t, r.dir, map[string]string{"README.md": "the Workspace\n"})
	writeFile(t, filepath.Join(r.dir, "draft.txt"), "uncommitted in the Workspace folder\n")
	before := workspaceState(t, r.dir)

	var id string
	runBrowserSignals(t, node, chromium, "remote.mjs", 6*time.Minute, func(name string) {
		sid, ok := strings.CutPrefix(name, "remote ")
		if !ok {
			return
		}
		id = sid
		t.Cleanup(func() { deleteSession(t, r, id) })
	}, "LATHE_URL="+r.srv.URL, "LATHE_WORKSPACE="+r.dir)

	if id == "" {
		t.Fatal("the script never named its remote Session")
	}
	if got := gittest.Run(t, r.dir, "show", "lathe/"+id+":hello.txt"); got != remoteBrowserNote {
		t.Errorf("hello.txt on lathe/%s = %q, want %q", id, got, remoteBrowserNote)
	}
	if got := workspaceState(t, r.dir); got != before {
		t.Errorf("the Workspace folder changed:\nbefore %s\nafter  %s", before, got)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "hello.txt")); !os.IsNotExist(err) {
		t.Errorf("hello.txt in the Workspace folder: %v", err)
	}
}

// workspaceState is the Workspace folder as the test compares it: the
// current branch, HEAD, the status and the uncommitted file's bytes.
func workspaceState(t *testing.T, dir string) string {
	t.Helper()
	draft, err := os.ReadFile(filepath.Join(dir, "draft.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join([]string{
		gittest.Run(t, dir, "symbolic-ref", "HEAD"), gittest.Run(t, dir, "rev-parse", "HEAD"),
		gittest.Run(t, dir, "status", "--porcelain"), string(draft),
	}, " | ")
}

// TestRemoteRetainedInChromium (testdata/browser/remote_retained.mjs): a
// Ready remote Session reaches dockerd through a relay the test then cuts;
// closing it from the workbench (whose confirmation says the work goes
// home first) retains the runtime; the banner names the host, the runtime
// ID and token and the docker command; the script deletes the container by
// hand on the real engine and confirms, and the banner goes.
func TestRemoteRetainedInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	engine := dockertest.Host()
	dockertest.Docker(t, docker.Options{Host: engine}) // skips without an engine
	sock, ok := strings.CutPrefix(engine, "unix://")
	if !ok {
		t.Skipf("the relay needs a unix:// engine, not %s", engine)
	}
	relay := newSocketRelay(t, sock)
	r := remoteTurnDaemon(t, "unix://"+relay.path, fakellm.Script{})
	commitBase(t, r.dir, map[string]string{"README.md": "the Workspace\n"})
	ss := r.create(t, "")
	ready := r.ready(t, ss.ID)
	container := ready.Environment.RuntimeID
	if container == "" {
		t.Fatalf("a Ready remote Session without a runtime_id: %+v", ready.Environment)
	}
	t.Cleanup(func() { _, _ = dockerCLI(engine, "rm", "-f", container) }) // should the flow stop before its own delete
	relay.cut()

	runBrowser(t, node, chromium, "remote_retained.mjs", 4*time.Minute,
		"LATHE_URL="+r.srv.URL, "LATHE_SESSION="+ss.ID, "LATHE_RELAY=unix://"+relay.path,
		"LATHE_RUNTIME="+container, "LATHE_TOKEN="+ready.Environment.CreationToken, "LATHE_DOCKER="+engine)

	if got := r.get(t, ss.ID).Environment; got.Retained || len(got.RetainedRuntimes) != 0 {
		t.Errorf("after the confirmation: retained %v, %d runtimes", got.Retained, len(got.RetainedRuntimes))
	}
	if out, err := dockerCLI(engine, "ps", "-aq", "--filter", "label=lathe.session="+ss.ID); err != nil || out != "" {
		t.Errorf("containers of the Session after the cleanup: %q %v", out, err)
	}
}

// socketRelay forwards a unix socket to another until cut: then the
// engine behind it cannot be reached (the socket is gone).
type socketRelay struct {
	path string
	ln   net.Listener
	mu   sync.Mutex
	conn []net.Conn
}

func newSocketRelay(t *testing.T, target string) *socketRelay {
	t.Helper()
	dir, err := os.MkdirTemp("", "lathe-relay") // short: a socket path has at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := &socketRelay{path: filepath.Join(dir, "docker.sock")}
	if r.ln, err = net.Listen("unix", r.path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.cut)
	go r.serve(r.ln, target)
	return r
}

func (r *socketRelay) serve(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("unix", target)
		if err != nil {
			c.Close()
			continue
		}
		if !r.track(c, up) {
			return
		}
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

// track keeps the pair for cut; false (closing them) once cut.
func (r *socketRelay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil && r.ln == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	r.conn = append(r.conn, cs...)
	return true
}

// cut closes the listener (removing its socket) and every relayed connection.
func (r *socketRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	for _, c := range r.conn {
		c.Close()
	}
	r.conn = nil
}
