package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/projections"
	"lathe/runtime/git/gittest"
)

// A worktree Session's branch of 50,000 new files merges, and squashes,
// through POST /merge (issue 32, finding 6: its file list, megabytes of
// it, once exceeded the journal's event size limit and the merge failed
// with a 500 "event too large"): the Workspace folder holds the files,
// the answer lists every one, and the audit trail reads the count back.
func TestWorktreeMerge50kFiles(t *testing.T) {
	const n = 50_000
	hostGitIdentity(t, "Host User", "host@example.org")
	_, _, srv := sandboxDaemon(t, worktreeNamespace)
	within := func(method, path, body string) reply {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return sendWithin(t, srv.Client(), req, 5*time.Minute) // 50,000 files to write or remove
	}
	for _, strategy := range []string{"merge", "squash"} {
		t.Run(strategy, func(t *testing.T) {
			dir := realDir(t, t.TempDir())
			gittest.Repo(t, dir, map[string]string{"README": "base\n"})
			ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
			ss := mustCall(t, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"wt",`+agentMode+`,"isolation":"worktree"}`)
			id, wd := ss["id"].(string), ss["working_dir"].(string)
			t.Cleanup(func() {
				if r := within(del, "/api/sessions/"+id+"?force=true", ""); r.status != http.StatusOK {
					t.Errorf("delete session %s: %d %s", id, r.status, r.body)
				}
			})
			filesAwaitState(t, srv, id, "ready", time.Minute)
			for i := range n { // one git add of a generated tree
				p := filepath.Join(wd, strategy, fmt.Sprintf("d%03d", i/500), fmt.Sprintf("f%05d.txt", i))
				if i%500 == 0 {
					mkdir(t, filepath.Dir(p))
				}
				if err := os.WriteFile(p, []byte(fmt.Sprintf("%s %d\n", strategy, i)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			gittest.Run(t, wd, "add", "-A")
			gittest.Run(t, wd, "commit", "-qm", fmt.Sprintf("add %d files", n))

			r := within(post, "/api/sessions/"+id+"/merge", `{"strategy":"`+strategy+`"}`)
			if r.status != 200 {
				t.Fatalf("merge of %d files: %d %.300s", n, r.status, r.body)
			}
			var m struct {
				Commit string
				Files  []struct{ Path, Status string }
			}
			if err := json.Unmarshal(r.body, &m); err != nil || len(m.Files) != n || m.Files[0].Status != "A" {
				t.Fatalf("merge answered %d file(s) (%v)", len(m.Files), err)
			}
			if head := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD")); head != m.Commit {
				t.Errorf("the Workspace's HEAD is %s, the merge answered %s", head, m.Commit)
			}
			last := filepath.Join(dir, strategy, fmt.Sprintf("d%03d", (n-1)/500), fmt.Sprintf("f%05d.txt", n-1))
			if b, err := os.ReadFile(last); err != nil || string(b) != fmt.Sprintf("%s %d\n", strategy, n-1) {
				t.Errorf("the Workspace folder's last merged file: %q %v", b, err)
			}
			var page struct{ Entries []projections.AuditEntry }
			if err := json.Unmarshal(call(t, srv, get, "/api/sessions/"+id+"/audit", "").body, &page); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("(%s, %d file(s)) as %.12s", strategy, n, m.Commit)
			var summaries []string
			for _, e := range page.Entries {
				if e.Type == "session-merged" {
					summaries = append(summaries, e.Summary)
				}
			}
			if len(summaries) != 1 || !strings.HasSuffix(summaries[0], want) {
				t.Errorf("the audit trail's session-merged entries %q, want one ending %q", summaries, want)
			}
		})
	}
}
