package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/git/gittest"
	"lathe/runtime/llm/fakellm"
)

// worktreeBrowserNamespace is TestWorktreeInChromium's containerd namespace.
const worktreeBrowserNamespace = "lathe-test-worktree-browser"

// TestWorktreeInChromium (testdata/browser/worktree.mjs): beside a shared
// Session, the New Session dialog makes a worktree Session by default; a
// turn edits there without the Workspace folder seeing it; Source Control
// commits, shows one commit ahead of main with its files, refuses a merge
// over an untracked file in the Workspace folder (naming it, changing
// nothing), then merges; the shared Session's editor shows the change; the
// delete confirmation says the worktree folder goes, and it does.
func TestWorktreeInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.Text("Fixing add."),
			fakellm.ToolCall("e", "edit_file", `{"path":"calc.py","old_string":"a - b","new_string":"a + b"}`),
			fakellm.ToolCall("w", "write_file", `{"path":"NEWS.md","content":"add adds now\n"}`),
			fakellm.Usage(3, 2, 0),
		}},
		{Steps: []fakellm.Step{fakellm.Text("add adds, and NEWS.md says so."), fakellm.Usage(3, 2, 0)}},
	}}
	r := turnDaemonIn(t, worktreeBrowserNamespace, config.KindOpenAI, script, nil)
	commitBase(t, r.dir, map[string]string{"calc.py": "def add(a, b):\n    return a - b\n"})
	gittest.Run(t, r.dir, "config", "user.name", "Worktree Tester") // the worktree commits with the repository's config
	gittest.Run(t, r.dir, "config", "user.email", "worktree@example.org")
	shared := r.create(t, "").ID
	r.ready(t, shared)

	var id, worktree string
	runBrowserSignals(t, node, chromium, "worktree.mjs", 5*time.Minute, func(name string) {
		sid, ok := strings.CutPrefix(name, "worktree ")
		if !ok {
			return
		}
		id = sid
		t.Cleanup(func() { deleteSession(t, r, id) }) // should the flow stop before its own delete
		rec := mustCall(t, r.srv, http.StatusOK, get, "/api/sessions/"+id, "")
		worktree, _ = rec["working_dir"].(string)
		if rec["isolation"] != "worktree" || rec["branch"] != "lathe/"+id {
			t.Errorf("the dialog's Session: isolation %v, branch %v", rec["isolation"], rec["branch"])
		}
		if worktree == "" || worktree == r.dir || strings.HasPrefix(worktree, r.dir+string(filepath.Separator)) {
			t.Errorf("the worktree %q is not outside the Workspace folder %s", worktree, r.dir)
		}
	}, "LATHE_URL="+r.srv.URL, "LATHE_SHARED="+shared, "LATHE_WORKSPACE="+r.dir)

	if id == "" {
		t.Fatal("the script never named its worktree Session")
	}
	if got := gittest.Run(t, r.dir, "show", "HEAD:calc.py"); !strings.Contains(got, "a + b") {
		t.Errorf("main's calc.py after the merge:\n%s", got)
	}
	if got := gittest.Run(t, r.dir, "show", "HEAD:NEWS.md"); got != "add adds now\n" {
		t.Errorf("main's NEWS.md after the merge = %q", got)
	}
	if got := gittest.Run(t, r.dir, "status", "--porcelain"); got != "" {
		t.Errorf("the Workspace folder is not clean after the merge:\n%s", got)
	}
	if _, err := os.Stat(worktree); !os.IsNotExist(err) {
		t.Errorf("the worktree folder %s after the delete: %v", worktree, err)
	}
}

// deleteSession force-deletes a Session the browser made, allowing a minute
// (containerd's shim can hold a task's removal); gone already is fine.
func deleteSession(t *testing.T, r *turnRig, id string) {
	t.Helper()
	req, err := http.NewRequest(del, r.srv.URL+"/api/sessions/"+id+"?force=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp := sendWithin(t, r.srv.Client(), req, time.Minute); resp.status != http.StatusOK && resp.status != http.StatusNotFound {
		t.Errorf("cleanup: delete session %s: %d %s", id, resp.status, resp.body)
	}
}
