package daemon

// The Source Control and Preview panes end to end, in Debian's Chromium
// driven by playwright-core (testdata/browser/scm_preview.mjs), against a
// whole daemon with real sandboxes in this file's own containerd namespace
// and a real Git repository as the Workspace. The workbench is opened at
// http://localhost:<port>/, the origin the Preview's picker bridge answers.

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/git/gittest"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// scmNamespace is this file's own containerd namespace.
const scmNamespace = "lathe-test-scm"

// The daemon has no commit identity of its own (an empty global git
// config), so the script sees Commit off with the fix, then gives the
// repository one.

// scmWorkspace is a repository on main with a branch "feature", two.txt
// changed in two hunks (lines 2 and 18), other.txt changed, and the
// Preview app committed.
func scmWorkspace(t *testing.T) string {
	t.Helper()
	root := realDir(t, t.TempDir())
	app, err := os.ReadFile(filepath.Join("testdata", "scm_preview_app.py"))
	if err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, root, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(root, "two.txt"), gittest.Lines(20, nil))
	writeFile(t, filepath.Join(root, "other.txt"), "keep\n")
	writeFile(t, filepath.Join(root, "app.py"), string(app))
	gittest.Run(t, root, "add", "-A")
	gittest.Run(t, root, "commit", "-q", "-m", "first")
	gittest.Run(t, root, "branch", "feature")
	writeFile(t, filepath.Join(root, "two.txt"), gittest.Lines(20, map[int]string{2: "two", 18: "eighteen"}))
	writeFile(t, filepath.Join(root, "other.txt"), "changed\n")
	return root
}

func TestScmAndPreviewInChromium(t *testing.T) {
	node, chromium := needBrowser(t)
	containerdtest.Namespace(t, scmNamespace)
	const key = "scm-preview-test-key"
	hostGitIdentity(t, "", "") // no commit identity until the script gives the repository one
	_, srv := newSandboxDaemon(t, scmNamespace, func(cfg *config.Config) { cfg.Server.APIKeys = config.Secrets(key) })
	dir := scmWorkspace(t)
	plain := realDir(t, t.TempDir())
	writeFile(t, filepath.Join(plain, "a.txt"), "a\n")
	runBrowser(t, node, chromium, "scm_preview.mjs", 4*time.Minute,
		"LATHE_URL="+srv.URL, "LATHE_KEY="+key, "LATHE_WORKSPACE="+dir, "LATHE_PLAIN="+plain)
}
