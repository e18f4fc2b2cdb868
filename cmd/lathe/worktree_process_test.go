package main

// A merge home cut off by kill -9, with the real binary: the Workspace
// folder is as it was or merged, never half (docs/design/git.md).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"lathe/runtime/git/gittest"
	"lathe/runtime/lanefs"
	"lathe/runtime/polltest"
)

// gitIn runs the host's git in dir for the test's fixtures.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestKill9DuringMergeLeavesTheWorkspaceWholeOrMerged(t *testing.T) {
	const files = 3000
	for attempt := 1; ; attempt++ {
		half := killDuringMerge(t, files)
		if half || attempt == 4 {
			if !half {
				t.Logf("no kill landed mid-merge in %d attempts; each restart still found a whole folder", attempt)
			}
			return
		}
	}
}

// killDuringMerge kills the daemon while a merge of n files writes the
// Workspace folder, restarts it, and checks the folder. It reports whether
// the kill left the folder half written (which the restart must repair).
func killDuringMerge(t *testing.T, n int) (half bool) {
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, ws, "init", "-q", "-b", "main")
	gitIn(t, ws, "config", "user.name", "Owner")
	gitIn(t, ws, "config", "user.email", "owner@test")
	pad := strings.Repeat("x", 8<<10)
	for i := range n {
		p := filepath.Join(ws, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.txt", i))
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("base %d\n%s\n", i, pad)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, ws, "add", "-A")
	gitIn(t, ws, "commit", "-qm", "base")

	data := t.TempDir()
	// A killed daemon leaves its worktrees' overlays mounted (a restart
	// finds them so); none outlives the test.
	t.Cleanup(func() { _ = lanefs.UnmountUnder(data) })
	d := startDaemon(t, data)
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status, body, err := post(ctx, client, d.url+"/api/workspaces", `{"path":"`+ws+`"}`)
	if err != nil || status != 201 {
		t.Fatalf("register workspace: %d %s %v", status, body, err)
	}
	status, body, err = post(ctx, client, d.url+"/api/workspaces/"+idOf(t, body)+"/sessions",
		`{"name":"wt","mode":{"kind":"lattice"},"setup_command":"make deps","isolation":"worktree"}`)
	if err != nil || status != 201 {
		t.Fatalf("create worktree session: %d %s %v", status, body, err)
	}
	var ss struct {
		ID, Isolation, Branch string
		WorkingDir            string `json:"working_dir"`
	}
	_ = json.Unmarshal(body, &ss)
	if ss.Isolation != "worktree" || ss.Branch != "lathe/"+ss.ID || strings.HasPrefix(ss.WorkingDir, ws) {
		t.Fatalf("session = %+v", ss)
	}
	// The Session's agent changes every file and commits.
	for i := range n {
		p := filepath.Join(ss.WorkingDir, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.txt", i))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("session %d\n%s\n", i, pad)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, ss.WorkingDir, "commit", "-qam", "session work")
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("untracked, mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := gittest.State(t, ws)
	old := strings.TrimSpace(gitIn(t, ws, "rev-parse", "HEAD"))

	// Kill as soon as the merge has written a file of the folder.
	go func() { _, _, _ = post(ctx, client, d.url+"/api/sessions/"+ss.ID+"/merge", `{"strategy":"merge"}`) }()
	probe := filepath.Join(ws, "d00", "f0000.txt")
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(probe); err == nil && strings.HasPrefix(string(b), "session") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the merge never started writing the folder")
		}
		runtime.Gosched() // a tight poll, bounded by the deadline: the kill must land mid-write
	}
	d.kill(t)
	written := 0
	for i := range n {
		b, _ := os.ReadFile(filepath.Join(ws, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.txt", i)))
		if strings.HasPrefix(string(b), "session") {
			written++
		}
	}
	head := strings.TrimSpace(gitIn(t, ws, "rev-parse", "HEAD"))
	half = written > 0 && written < n && head == old
	t.Logf("killed with %d of %d files written, HEAD moved: %v", written, n, head != old)

	d = startDaemon(t, data)
	defer d.stop(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the restarted daemon's log:\n%s\ngit status:\n%s", d.stderr.String(), gitIn(t, ws, "status", "--short"))
		}
	})
	// The poll runs git status in the folder, as an editor would while the
	// restart recovers the merge: its reads may meet a file being replaced.
	polltest.Check(t, func() error {
		now, err := gittest.TryState(ws)
		if err != nil || now == before {
			return err
		}
		if head, err := gittest.Try(ws, "rev-parse", "HEAD"); err != nil || strings.TrimSpace(head) == old {
			return fmt.Errorf("HEAD still at the old commit and the folder differs from before (%v)", err)
		}
		if st, err := gittest.Try(ws, "status", "--porcelain=v1", "--untracked-files=all"); err != nil || st != "?? notes.txt\n" {
			return fmt.Errorf("merged HEAD but status %q (%v)", st, err)
		}
		for i := range n {
			b, _ := os.ReadFile(filepath.Join(ws, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.txt", i)))
			if !strings.HasPrefix(string(b), "session") {
				return fmt.Errorf("merged HEAD but file %d is not the Session's", i)
			}
		}
		return nil
	}, polltest.Within(time.Minute))
	if b, err := os.ReadFile(filepath.Join(ws, "notes.txt")); err != nil || string(b) != "untracked, mine\n" {
		t.Fatalf("the untracked file did not survive: %q %v", b, err)
	}
	return half
}
