package daemon

// The hostile-input probe's sandbox escape, replayed through the real API
// against real containerd: a task plants a set-user-ID shell and a block
// device in the Workspace. Neither may reach the host, and what the task
// writes belongs to the Workspace's owner.

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"lathe/runtime/sandbox/sandboxtest"
)

// escapeNamespace is this file's own containerd namespace.
const escapeNamespace = "lathe-test-escape"

func TestSandboxEscape(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a Workspace another owner needs root")
	}
	_, d, srv := sandboxDaemon(t, escapeNamespace)
	for _, tc := range []struct {
		name  string
		owner int
	}{
		// Container root is the owner: the user's repository never fills
		// with root-owned files.
		{"NobodyOwned", 65534},
		// Container root is host root: only the seccomp profile stands
		// between a chmod and a set-user-ID root shell.
		{"RootOwned", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testEscape(t, d, srv, tc.owner)
		})
	}
}

func testEscape(t *testing.T, d *Daemon, srv *httptest.Server, owner int) {
	r := escapeRig(t, d, srv, owner)
	id := r.readySession(t)
	cmd := "cd " + r.dir + " && cp /bin/dash rootsh && chmod 4755 rootsh ; mknod vda b 254 0 ; chmod 666 vda; touch owned"
	body, _ := json.Marshal(map[string]string{"command": cmd})
	task := r.exited(t, id, r.startTask(t, id, string(body)).ID)
	if !strings.Contains(task.OutputTail, "chmod: changing permissions of 'rootsh': Operation not permitted") ||
		!strings.Contains(task.OutputTail, "mknod: vda: Operation not permitted") {
		t.Errorf("the task's output does not show both refusals: %q", task.OutputTail)
	}

	// On the host: no set-id bit, no device node, every file the owner's.
	sandboxtest.CheckWorkspace(t, r.dir, owner, owner)
	for _, name := range []string{"rootsh", "owned"} {
		if _, err := os.Stat(filepath.Join(r.dir, name)); err != nil {
			t.Errorf("the task left no %s: %v", name, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(r.dir, "vda")); !os.IsNotExist(err) {
		t.Errorf("vda exists on the host (%v)", err)
	}

	// The planted shell, run by another unprivileged user, stays that user.
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Log("no setpriv: not running the planted shell")
		return
	}
	const other = "54321"
	out, err := exec.Command(setpriv, "--reuid="+other, "--regid="+other, "--clear-groups",
		filepath.Join(r.dir, "rootsh"), "-p", "-c", "id -u; id -g").CombinedOutput()
	if err != nil || string(out) != other+"\n"+other+"\n" {
		t.Errorf("the planted shell run by uid %s: %q, %v", other, out, err)
	}
}

// escapeRig is a taskRig whose Workspace is a directory owned by owner,
// reachable by every user so that another one can try what was planted.
func escapeRig(t *testing.T, d *Daemon, srv *httptest.Server, owner int) *taskRig {
	t.Helper()
	base := realDir(t, t.TempDir())
	dir := filepath.Join(base, "ws")
	for _, p := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, owner, owner); err != nil {
		t.Fatal(err)
	}
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	return &taskRig{sessionRig: sessionRig{srv: srv, name: "escape", ws: ws, dir: dir}, d: d}
}
