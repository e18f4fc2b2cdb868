package daemon

// Worktree Sessions against a real daemon, real sandboxes (containerd,
// namespace worktreeNamespace) and real git: two Sessions editing one path
// in parallel, git inside the sandbox, every merge refusal with the
// Workspace folder compared byte for byte, the merge home, and the forced
// delete that keeps an unmerged branch.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/git/gittest"
	"lathe/runtime/lanefs"
	"lathe/runtime/llm/fakellm"
)

const worktreeNamespace = "lathe-test-worktree"

// worktreeSession creates a Session with isolation worktree, waits until
// it is Ready, and force-deletes it (discarding what it must) at the end.
func worktreeSession(t *testing.T, srv *httptest.Server, ws, isolation string) map[string]any {
	t.Helper()
	ss := mustCall(t, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"wt",`+agentMode+`,"isolation":"`+isolation+`"}`)
	id := ss["id"].(string)
	t.Cleanup(func() {
		r := call(t, srv, del, "/api/sessions/"+id+"?force=true", "")
		if r.status == http.StatusConflict {
			var body struct{ Files []string }
			_ = json.Unmarshal(r.body, &body)
			files, _ := json.Marshal(body.Files)
			r = call(t, srv, del, "/api/sessions/"+id+"?force=true", `{"discard_files":`+string(files)+`}`)
		}
		if r.status != http.StatusOK && r.status != http.StatusNotFound {
			t.Errorf("delete session %s: %d %s", id, r.status, r.body)
		}
	})
	filesAwaitState(t, srv, id, "ready", time.Minute)
	return ss
}

func readVia(t *testing.T, srv *httptest.Server, id, p string) string {
	t.Helper()
	return str(t, call(t, srv, get, "/api/sessions/"+id+"/file?path="+p, "").body, "content")
}

func TestWorktreeSessions(t *testing.T) {
	hostGitIdentity(t, "Host User", "host@example.org")
	_, _, srv := sandboxDaemon(t, worktreeNamespace)
	dir := realDir(t, t.TempDir())
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(dir, "a.txt"), "base\n")
	writeFile(t, filepath.Join(dir, "b.txt"), "b\n")
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "base")
	writeFile(t, filepath.Join(dir, "notes.txt"), "untracked, the user's\n")
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)

	plain := realDir(t, t.TempDir())
	plainWS := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+plain+`"}`)["id"].(string)
	r := call(t, srv, post, "/api/workspaces/"+plainWS+"/sessions", `{"name":"x",`+agentMode+`,"isolation":"worktree"}`)
	if r.status != 400 || !strings.Contains(string(r.body), "needs a Git Workspace") {
		t.Fatalf("worktree in a plain folder: %d %s", r.status, r.body)
	}
	if r := call(t, srv, post, "/api/workspaces/"+ws+"/sessions", `{"name":"x",`+agentMode+`,"isolation":"copy"}`); r.status != 400 {
		t.Fatalf("isolation copy: %d %s", r.status, r.body)
	}

	sa, sb := worktreeSession(t, srv, ws, "worktree"), worktreeSession(t, srv, ws, "worktree")
	shared := worktreeSession(t, srv, ws, "shared")
	a, b, s := sa["id"].(string), sb["id"].(string), shared["id"].(string)
	for _, ss := range []map[string]any{sa, sb} {
		wd := ss["working_dir"].(string)
		if on, _ := lanefs.Mounted(wd); os.Geteuid() == 0 && !on {
			t.Errorf("the worktree %s is not an overlay on a shared base", wd)
		}
		if ss["isolation"] != "worktree" || ss["branch"] != "lathe/"+ss["id"].(string) || strings.HasPrefix(wd, dir) {
			t.Fatalf("worktree session = %v", ss)
		}
	}
	if shared["isolation"] != "shared" || shared["working_dir"] != dir || shared["branch"] != nil {
		t.Fatalf("shared session = %v", shared)
	}

	// Two Sessions write one path at once; neither sees the other's, nor
	// does the Workspace folder.
	var wg sync.WaitGroup
	for id, content := range map[string]string{a: "from A\n", b: "from B\n"} {
		wg.Go(func() {
			if r := call(t, srv, post, "/api/sessions/"+id+"/file?path=a.txt", `{"content":`+jsonString(content)+`}`); r.status != 200 {
				t.Errorf("write in %s: %d %s", id, r.status, r.body)
			}
		})
	}
	wg.Wait()
	for id, want := range map[string]string{a: "from A\n", b: "from B\n", s: "base\n"} {
		if got := readVia(t, srv, id, "a.txt"); got != want {
			t.Errorf("session %s reads a.txt = %q, want %q", id, got, want)
		}
	}

	// git works inside the sandbox: commit through Source Control, and
	// the Workspace's .git config and hooks are read-only there.
	for _, id := range []string{a, b} {
		mustCall(t, srv, 200, post, "/api/sessions/"+id+"/git/commit", `{"message":"edit a","stage_all":true}`)
	}
	check := func(id, command string) map[string]any {
		t.Helper()
		mustCall(t, srv, 200, put, "/api/sessions/"+id+"/check", `{"check_command":`+jsonString(command)+`}`)
		return mustCall(t, srv, 200, post, "/api/sessions/"+id+"/check/run", `{}`)
	}
	if out := check(a, "git log --format=%s | head -1"); out["exit_code"] != 0.0 || !strings.Contains(out["output_tail"].(string), "edit a") {
		t.Errorf("git log inside: %v", out)
	}
	for _, p := range []string{".git/config", ".git/hooks/post-checkout", ".git/HEAD", ".git/index"} {
		if out := check(a, "echo '#' >> "+filepath.Join(dir, p)); out["exit_code"] == 0.0 {
			t.Errorf("the sandbox wrote the Workspace's %s: %v", p, out)
		}
	}
	st := mustCall(t, srv, 200, get, "/api/sessions/"+a+"/git/status", "")
	if w, _ := json.Marshal(st["worktree"]); string(w) != `{"ahead":1,"base_branch":"main","behind":0,"files":[{"path":"a.txt","status":"M"}]}` {
		t.Errorf("worktree status = %s", w)
	}

	// Each refusal changes nothing in the Workspace folder.
	refuse := func(name, id, body string, status int, files []string, setup, undo func()) {
		t.Run(name, func(t *testing.T) {
			if setup != nil {
				setup()
			}
			before := gittest.State(t, dir)
			r := call(t, srv, post, "/api/sessions/"+id+"/merge", body)
			var got struct {
				Error string
				Files []string
			}
			_ = json.Unmarshal(r.body, &got)
			if r.status != status || got.Error == "" || files != nil && !slices.Equal(got.Files, files) {
				t.Errorf("merge: %d %s; want %d naming %v", r.status, r.body, status, files)
			}
			if after := gittest.State(t, dir); after != before {
				t.Errorf("a refused merge changed the Workspace folder:\n%s\n---\n%s", before, after)
			}
			if undo != nil {
				undo()
			}
		})
	}
	wsFile := func(p string) string { return filepath.Join(dir, p) }
	refuse("shared session", s, `{"strategy":"merge"}`, 400, nil, nil, nil)
	refuse("no strategy", a, `{}`, 400, nil, nil, nil)
	refuse("rebase", a, `{"strategy":"rebase"}`, 400, nil, nil, nil)
	refuse("uncommitted in the worktree", a, `{"strategy":"merge"}`, 409, []string{"c.txt"},
		func() { writeFile(t, filepath.Join(sa["working_dir"].(string), "c.txt"), "c\n") }, nil)
	mustCall(t, srv, 200, post, "/api/sessions/"+a+"/git/commit", `{"message":"add c","stage_all":true}`)
	refuse("dirty in the Workspace", a, `{"strategy":"merge"}`, 409, []string{"a.txt"},
		func() { writeFile(t, wsFile("a.txt"), "the user's edit\n") }, func() { gittest.Run(t, dir, "checkout", "--", "a.txt") })
	refuse("would overwrite an untracked file", a, `{"strategy":"squash"}`, 409, []string{"c.txt"},
		func() { writeFile(t, wsFile("c.txt"), "the user's own c\n") }, func() { _ = os.Remove(wsFile("c.txt")) })
	other := filepath.Join(t.TempDir(), "other")
	refuse("branch checked out in another worktree", a, `{"strategy":"merge"}`, 409, []string{other},
		func() { gittest.Run(t, dir, "worktree", "add", "-q", "--force", other, "main") },
		func() { gittest.Run(t, dir, "worktree", "remove", "--force", other) })

	// The merge home; the shared Session sees it, the untracked file stays.
	m := mustCall(t, srv, 200, post, "/api/sessions/"+a+"/merge", `{"strategy":"merge","message":"Merge A"}`)
	if head := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD")); m["commit"] != head || m["branch"] != "main" {
		t.Fatalf("merge = %v, HEAD %s", m, head)
	}
	if got := readVia(t, srv, s, "a.txt") + readVia(t, srv, s, "c.txt"); got != "from A\nc\n" {
		t.Errorf("the shared Session reads %q after the merge", got)
	}
	st = mustCall(t, srv, 200, get, "/api/sessions/"+a+"/git/status", "")
	if w, _ := json.Marshal(st["worktree"]); string(w) != `{"ahead":0,"base_branch":"main","behind":0,"files":[]}` {
		t.Errorf("worktree status after the merge = %s", w)
	}
	refuse("nothing left to merge", a, `{"strategy":"merge"}`, 409, nil, nil, nil)
	refuse("conflict", b, `{"strategy":"merge"}`, 409, []string{"a.txt"}, nil, nil)

	// Soft-close keeps the worktree; a forced delete with uncommitted work
	// refuses until discard_files names it exactly, then keeps the
	// unmerged branch.
	bDir := sb["working_dir"].(string)
	mustCall(t, srv, 200, del, "/api/sessions/"+b, "")
	if _, err := os.Stat(filepath.Join(bDir, "a.txt")); err != nil {
		t.Fatalf("soft-close removed the worktree: %v", err)
	}
	writeFile(t, filepath.Join(bDir, "wip.txt"), "unsaved work\n")
	for _, body := range []string{"", `{"discard_files":["other.txt"]}`} {
		r := call(t, srv, del, "/api/sessions/"+b+"?force=true", body)
		if r.status != 409 || !strings.Contains(string(r.body), `"files":["wip.txt"]`) {
			t.Fatalf("delete with uncommitted work (%s): %d %s", body, r.status, r.body)
		}
		if _, err := os.Stat(filepath.Join(bDir, "wip.txt")); err != nil {
			t.Fatalf("a refused delete lost the work: %v", err)
		}
	}
	gone := mustCall(t, srv, 200, del, "/api/sessions/"+b+"?force=true", `{"discard_files":["wip.txt"]}`)
	if gone["kept_branch"] != "lathe/"+b {
		t.Errorf("delete of an unmerged branch = %v", gone)
	}
	if _, err := os.Stat(bDir); !os.IsNotExist(err) {
		t.Errorf("the worktree folder stayed: %v", err)
	}
	if _, err := gittest.Try(dir, "rev-parse", "--verify", "refs/heads/lathe/"+b); err != nil {
		t.Errorf("the unmerged branch went: %v", err)
	}
	gone = mustCall(t, srv, 200, del, "/api/sessions/"+a+"?force=true", "")
	if _, kept := gone["kept_branch"]; kept {
		t.Errorf("a merged branch was kept: %v", gone)
	}
	if _, err := gittest.Try(dir, "rev-parse", "--verify", "refs/heads/lathe/"+a); err == nil {
		t.Error("the merged branch stayed")
	}
	if b, err := os.ReadFile(wsFile("notes.txt")); err != nil || string(b) != "untracked, the user's\n" {
		t.Errorf("the untracked Workspace file: %q %v", b, err)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// repo50k is a committed repository of 50,000 small files.
func repo50k(b *testing.B) string {
	b.Helper()
	root := realDir(b, b.TempDir())
	gittest.Repo(b, root, gittest.Spread(50_000))
	return root
}

// BenchmarkWorktreeCreateToReady50k measures Create → Ready of a worktree
// Session and of a shared one on a 50,000-file repository in the same
// run, and `git worktree add` alone, the worktree's added cost.
func BenchmarkWorktreeCreateToReady50k(b *testing.B) {
	_, _, srv := sandboxDaemon(b, worktreeNamespace)
	root := repo50k(b)
	ws := mustCall(b, srv, 201, post, "/api/workspaces", `{"path":"`+root+`"}`)["id"].(string)
	var took = map[string][]time.Duration{}
	for b.Loop() {
		for _, iso := range []string{"shared", "worktree"} {
			t0 := time.Now()
			// The worktree's checkout is in the create: allow it the time a
			// loaded machine takes.
			req, _ := http.NewRequest(post, srv.URL+"/api/workspaces/"+ws+"/sessions", strings.NewReader(`{"name":"bench",`+agentMode+`,"isolation":"`+iso+`"}`))
			req.Header.Set("Content-Type", "application/json")
			r := sendWithin(b, srv.Client(), req, 5*time.Minute)
			if r.status != 201 {
				b.Fatalf("create: %d %s", r.status, r.body)
			}
			id := str(b, r.body, "id")
			filesAwaitState(b, srv, id, "ready", 5*time.Minute)
			took[iso] = append(took[iso], time.Since(t0))
			b.StopTimer()
			if r := sendWithin(b, srv.Client(), mustRequest(b, del, srv.URL+"/api/sessions/"+id+"?force=true"), 5*time.Minute); r.status != 200 {
				b.Fatalf("delete: %d %s", r.status, r.body)
			}
			b.StartTimer()
		}
		wt := filepath.Join(b.TempDir(), "wt")
		t0 := time.Now()
		gittest.Run(b, root, "-c", "checkout.workers=4", "-c", "checkout.thresholdForParallelism=100", // as Lathe runs it
			"worktree", "add", "-q", "-b", "bench-"+fmt.Sprint(len(took["add"])), wt)
		took["add"] = append(took["add"], time.Since(t0))
		gittest.Run(b, root, "worktree", "remove", "--force", wt)
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	// The first worktree at a commit makes its base (docs/design/git.md).
	first := float64(took["worktree"][0].Microseconds()) / 1000
	shared, worktree, add := p50(took["shared"]), p50(took["worktree"]), p50(took["add"])
	b.ReportMetric(first, "worktree-first-ms")
	b.ReportMetric(shared, "shared-p50-ms")
	b.ReportMetric(worktree, "worktree-p50-ms")
	b.ReportMetric(add, "worktree-add-p50-ms")
	b.ReportMetric(worktree/shared, "worktree/shared")
}

// BenchmarkMerge1000Files measures POST /merge of a change to 1,000 files
// of a 1,000-file repository: the plan, every refusal check, the commit
// and the Workspace folder's update.
func BenchmarkMerge1000Files(b *testing.B) {
	_, _, srv := sandboxDaemon(b, worktreeNamespace)
	root := realDir(b, b.TempDir())
	for i := range 1000 {
		writeFile(b, filepath.Join(root, fmt.Sprintf("d%02d", i/50), fmt.Sprintf("f%04d.txt", i)), fmt.Sprintf("file %d\n", i))
	}
	gittest.Run(b, root, "init", "-q", "-b", "main")
	gittest.Run(b, root, "config", "user.name", "Bench")
	gittest.Run(b, root, "config", "user.email", "bench@test")
	gittest.Run(b, root, "add", "-A")
	gittest.Run(b, root, "commit", "-q", "-m", "base")
	ws := mustCall(b, srv, 201, post, "/api/workspaces", `{"path":"`+root+`"}`)["id"].(string)
	var took []time.Duration
	round := 0
	for b.Loop() {
		b.StopTimer()
		round++
		ss := mustCall(b, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"bench",`+agentMode+`,"setup_command":"make deps","isolation":"worktree"}`)
		wd := ss["working_dir"].(string)
		for i := range 1000 {
			writeFile(b, filepath.Join(wd, fmt.Sprintf("d%02d", i/50), fmt.Sprintf("f%04d.txt", i)), fmt.Sprintf("file %d, round %d\n", i, round))
		}
		gittest.Run(b, wd, "commit", "-q", "-am", "change 1000 files")
		b.StartTimer()
		t0 := time.Now()
		m := mustCall(b, srv, 200, post, "/api/sessions/"+ss["id"].(string)+"/merge", `{"strategy":"merge"}`)
		took = append(took, time.Since(t0))
		if n := len(m["files"].([]any)); n != 1000 {
			b.Fatalf("merged %d files", n)
		}
		b.StopTimer()
		mustCall(b, srv, 200, del, "/api/sessions/"+ss["id"].(string)+"?force=true", "")
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
}

// A turn in a worktree Session edits the worktree, never the Workspace
// folder; its code record, History and restore work on the worktree.
func TestWorktreeTurnAndRestore(t *testing.T) {
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{
			fakellm.ToolCall("w", "write_file", `{"path":"added.txt","content":"new\n"}`),
			fakellm.ToolCall("e", "edit_file", `{"path":"tracked.txt","old_string":"one","new_string":"uno"}`),
			fakellm.Usage(1, 1, 0),
		}},
		{Steps: []fakellm.Step{fakellm.Text("edited"), fakellm.Usage(1, 1, 0)}},
	}}
	r := turnDaemonIn(t, worktreeNamespace, config.KindOpenAI, script, nil)
	commitBase(t, r.dir, map[string]string{"tracked.txt": "one\n"})
	before := gittest.State(t, r.dir)
	ss := r.create(t, `"isolation":"worktree"`)
	r.ready(t, ss.ID)
	if ss.Isolation != "worktree" || ss.WorkingDir == r.dir {
		t.Fatalf("session %+v", ss)
	}
	tc := openTurnConn(t, r)
	tc.runDone(t, ss.ID, "edit", "go")
	if got := readFile(t, filepath.Join(ss.WorkingDir, "tracked.txt")) + readFile(t, filepath.Join(ss.WorkingDir, "added.txt")); got != "uno\nnew\n" {
		t.Errorf("the worktree after the turn: %q", got)
	}
	if after := gittest.State(t, r.dir); after != before {
		t.Errorf("a worktree Session's turn changed the Workspace folder:\n%s\n---\n%s", before, after)
	}
	base := "/api/sessions/" + ss.ID + "/turns/"
	ch := expectStatus(t, r.do(t, get, base+"edit/changes", ""), 200)
	if !strings.Contains(string(ch.body), `"added.txt"`) || !strings.Contains(string(ch.body), `"tracked.txt"`) {
		t.Errorf("changes: %s", ch.body)
	}
	if list := expectStatus(t, r.do(t, get, "/api/sessions/"+ss.ID+"/turns", ""), 200); !strings.Contains(string(list.body), `"edit"`) {
		t.Errorf("history: %s", list.body)
	}
	expectStatus(t, r.do(t, post, base+"edit/restore", `{"side":"before"}`), 200)
	if got := readFile(t, filepath.Join(ss.WorkingDir, "tracked.txt")); got != "one\n" {
		t.Errorf("tracked.txt after restore: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ss.WorkingDir, "added.txt")); !os.IsNotExist(err) {
		t.Errorf("added.txt after restore: %v", err)
	}
	if after := gittest.State(t, r.dir); after != before {
		t.Errorf("restore changed the Workspace folder")
	}
}

func mustRequest(tb testing.TB, method, url string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return req
}
