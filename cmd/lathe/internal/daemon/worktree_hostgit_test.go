package daemon

// The hostile-input probe's host-side git findings (issue 32, finding 1),
// replayed through the real API against real sandboxes: code a Session's
// sandbox writes into the Workspace's repository (a filter, an fsmonitor,
// a .git pointer of its own) never runs on the host when Lathe adds a
// worktree, merges one home, or checks one before a merge or a delete.

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/runtime/git/gittest"
)

// inSandbox runs the shell command in the Session's sandbox, as its
// Check, and fails the test unless it exits 0.
func inSandbox(t *testing.T, srv *httptest.Server, id, command string) {
	t.Helper()
	mustCall(t, srv, 200, put, "/api/sessions/"+id+"/check", `{"check_command":`+jsonString(command)+`}`)
	out := mustCall(t, srv, 200, post, "/api/sessions/"+id+"/check/run", `{}`)
	if out["exit_code"] != 0.0 {
		t.Fatalf("in the sandbox, %q: %v", command, out)
	}
}

// hostMarker is a path on the host that no sandbox sees, and plantScript
// the shell that writes, at path, a script leaving that marker (and
// passing its input through, as a filter would).
func hostMarker(t *testing.T) string { return filepath.Join(t.TempDir(), "ran-on-the-host") }

func plantScript(path, marker string) string {
	return "printf '#!/bin/sh\\ntouch " + marker + "\\ncat\\n' > " + path + " && chmod +x " + path
}

func noMarker(t *testing.T, marker, when string) {
	t.Helper()
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("%s: a script the sandbox planted ran on the host", when)
	}
}

// TestSharedSessionPlantsNoHostFilter: a shared Session's sandbox sets a
// smudge and a clean filter in the Workspace's .git/config, its script
// under .git, and commits a .gitattributes naming it for *.pwn and a .pwn
// file. Neither the worktree Session created next (git worktree add) nor
// the merge home of a branch that adds another .pwn file runs it on the
// host, and the files are the commits' bytes.
func TestSharedSessionPlantsNoHostFilter(t *testing.T) {
	hostGitIdentity(t, "Host User", "host@example.org")
	_, _, srv := sandboxDaemon(t, worktreeNamespace)
	dir := realDir(t, t.TempDir())
	gittest.Repo(t, dir, map[string]string{"a.txt": "a\n"})
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	marker := hostMarker(t)

	shared := worktreeSession(t, srv, ws, "shared")["id"].(string)
	script := filepath.Join(dir, ".git", "pwn.sh")
	inSandbox(t, srv, shared, "cd "+dir+" && "+plantScript(script, marker)+
		" && git config filter.pwn.smudge "+script+" && git config filter.pwn.clean "+script+
		" && echo '*.pwn filter=pwn' > .gitattributes && echo planted > a.pwn"+
		" && git add -A && git -c user.name=S -c user.email=s@test commit -qm plant")

	wt := worktreeSession(t, srv, ws, "worktree")
	noMarker(t, marker, "adding a worktree")
	if got := readFile(t, filepath.Join(wt["working_dir"].(string), "a.pwn")); got != "planted\n" {
		t.Errorf("a.pwn in the worktree: %q", got)
	}
	id := wt["id"].(string)
	writeFile(t, filepath.Join(wt["working_dir"].(string), "b.pwn"), "the session's\n")
	mustCall(t, srv, 200, post, "/api/sessions/"+id+"/git/commit", `{"message":"add b.pwn","stage_all":true}`)
	mustCall(t, srv, 200, post, "/api/sessions/"+id+"/merge", `{"strategy":"merge"}`)
	noMarker(t, marker, "merging home")
	if got := readFile(t, filepath.Join(dir, "b.pwn")); got != "the session's\n" {
		t.Errorf("b.pwn in the Workspace after the merge: %q", got)
	}
}

// TestWorktreeSessionPointsNowhere: a worktree Session's sandbox makes a
// git directory of its own inside its worktree, with a clean filter and an
// fsmonitor configured, and points its .git file at it. The operator's
// merge answers 409 (uncommitted changes) and the forced delete 409 then
// 200, as before, and neither runs the sandbox's script on the host.
func TestWorktreeSessionPointsNowhere(t *testing.T) {
	hostGitIdentity(t, "Host User", "host@example.org")
	_, _, srv := sandboxDaemon(t, worktreeNamespace)
	dir := realDir(t, t.TempDir())
	gittest.Repo(t, dir, map[string]string{"a.txt": "a\n"})
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	marker := hostMarker(t)

	wt := worktreeSession(t, srv, ws, "worktree")
	id, wd := wt["id"].(string), wt["working_dir"].(string)
	writeFile(t, filepath.Join(wd, "c.txt"), "c\n")
	mustCall(t, srv, 200, post, "/api/sessions/"+id+"/git/commit", `{"message":"add c","stage_all":true}`)
	own := filepath.Join(wd, ".own")
	script := filepath.Join(wd, "pwn.sh")
	// Its own git directory borrows the Workspace's objects and copies the
	// worktree's HEAD and index, so a status there compares a.txt, whose
	// time it changes, through the clean filter.
	inSandbox(t, srv, id, "cd "+wd+" && git init -q --bare "+own+" && "+plantScript(script, marker)+
		" && echo "+filepath.Join(dir, ".git", "objects")+" > "+own+"/objects/info/alternates"+
		" && git rev-parse HEAD > "+own+"/HEAD && cp \"$(git rev-parse --absolute-git-dir)/index\" "+own+"/index"+
		" && git --git-dir="+own+" config core.bare false && git --git-dir="+own+" config filter.pwn.clean "+script+
		" && git --git-dir="+own+" config core.fsmonitor "+script+
		" && echo '* filter=pwn' > .gitattributes && touch -d 2001-01-01 a.txt && echo 'gitdir: "+own+"' > .git")

	r := call(t, srv, post, "/api/sessions/"+id+"/merge", `{"strategy":"merge"}`)
	if r.status != 409 || !strings.Contains(string(r.body), "uncommitted") {
		t.Errorf("merge: %d %s, want 409 naming the uncommitted files", r.status, r.body)
	}
	noMarker(t, marker, "the merge's check")
	r = call(t, srv, del, "/api/sessions/"+id+"?force=true", "")
	if r.status != 409 || !strings.Contains(string(r.body), "pwn.sh") {
		t.Errorf("forced delete: %d %s, want 409 naming the uncommitted files", r.status, r.body)
	}
	noMarker(t, marker, "the delete's check")
}
