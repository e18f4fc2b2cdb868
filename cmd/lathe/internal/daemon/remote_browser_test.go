package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/git/gittest"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
)

// remoteBrowserNamespace is TestRemoteInChromium's containerd namespace
// (the rig's; its Sessions run on the Docker engine).
const remoteBrowserNamespace = "lathe-test-remote-browser"

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
	r := turnDaemonIn(t, remoteBrowserNamespace, config.KindOpenAI, script, func(c *config.Config) {
		c.Sandbox.Provider = config.SandboxRemote
		c.Sandbox.Remote.Host = host
		c.Sandbox.Remote.Template = "lathe.local/sandbox:bookworm"
	})
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
