package commands

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lathe/journal/events"
	"lathe/runtime/git/gittest"
	"lathe/runtime/lanefs"
)

// worktreeService is a Service with a worktrees folder, no sandbox
// provider, and a Git Workspace.
func worktreeService(t *testing.T) (*Service, string, string) {
	t.Helper()
	j, store := openJournal(t)
	s := New(j, store, Options{Agents: []string{"coder"}, DefaultImage: "img", WorktreesDir: filepath.Join(t.TempDir(), "worktrees")})
	// Where worktrees are overlays (root), none outlives the test.
	t.Cleanup(func() { _ = lanefs.UnmountUnder(s.Sessions.opts.WorktreesDir) })
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	putFile(t, filepath.Join(dir, "a.txt"), "a\n")
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "base")
	w, _, err := s.Sessions.RegisterWorkspace(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, w.ID, dir
}

// A worktree is recorded then made: the create's one commit holds the
// Session, its worktree and the settlement; a stop after the intent leaves
// a worktree whose Session never existed, which Reconcile removes with its
// branch.
func TestWorktreeAddIsRecordedThenActed(t *testing.T) {
	s, ws, dir := worktreeService(t)
	ctx := context.Background()
	iso := events.IsolationWorktree
	ss, err := s.Sessions.CreateSession(ctx, ws, SessionSpec{Name: "s", Mode: singleAgent(), Isolation: &iso})
	if err != nil {
		t.Fatal(err)
	}
	if ss.Isolation != iso || ss.Branch != "lathe/"+ss.ID || filepath.Dir(ss.WorkingDir) != s.Sessions.opts.WorktreesDir {
		t.Fatalf("session %+v", ss)
	}
	if b, err := os.ReadFile(filepath.Join(ss.WorkingDir, "a.txt")); err != nil || string(b) != "a\n" {
		t.Fatalf("the worktree holds %q, %v", b, err)
	}
	intents, settled := effectLog(t, s.Sessions.core)
	for id, in := range intents {
		if in.Kind == events.EffectWorktreeAdd && settled[id].Outcome != events.EffectDone {
			t.Errorf("worktree-add %s settled %+v", id, settled[id])
		}
	}

	// The stop: the intent and the worktree, no Session.
	ghost := "GHOST"
	w, _ := s.Sessions.store.Workspace(ws)
	ev := events.SessionCreated{Isolation: iso}
	if _, _, err := addWorktree(ctx, s.Sessions.core, ghost, w, &ev); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ev.WorkingDir); err != nil {
		t.Fatal(err)
	}
	if err := s.Effects.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ev.WorkingDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the ghost's worktree stayed: %v", err)
	}
	if mounts, _ := lanefs.MountsUnder(ev.WorkingDir); len(mounts) != 0 {
		t.Errorf("the ghost's worktree stayed mounted: %v", mounts)
	}
	if _, err := gittest.Try(dir, "rev-parse", "--verify", "refs/heads/lathe/"+ghost); err == nil {
		t.Error("the ghost's branch stayed")
	}
	if _, err := gittest.Try(dir, "rev-parse", "--verify", "refs/heads/"+ss.Branch); err != nil {
		t.Errorf("the real Session's branch went: %v", err)
	}
	intents, settled = effectLog(t, s.Sessions.core)
	for id, in := range intents {
		if in.Target == ghost && settled[id].Outcome != events.EffectInterrupted {
			t.Errorf("the ghost's intent settled %+v", settled[id])
		}
	}
}

func TestWorktreeIsolationNeedsGit(t *testing.T) {
	s, _, _ := worktreeService(t)
	ctx := context.Background()
	plain, _ := filepath.EvalSymlinks(t.TempDir())
	w, _, err := s.Sessions.RegisterWorkspace(ctx, plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, iso := range []string{events.IsolationWorktree, "copy"} {
		if _, err := s.Sessions.CreateSession(ctx, w.ID, SessionSpec{Name: "s", Mode: singleAgent(), Isolation: &iso}); !errors.Is(err, ErrInvalid) {
			t.Errorf("isolation %q in a plain folder: %v", iso, err)
		}
	}
	shared := events.IsolationShared
	ss, err := s.Sessions.CreateSession(ctx, w.ID, SessionSpec{Name: "s", Mode: singleAgent(), Isolation: &shared})
	if err != nil || ss.Isolation != shared || ss.WorkingDir != plain || ss.Branch != "" {
		t.Fatalf("shared: %+v %v", ss, err)
	}
	if _, err := s.Worktrees.Merge(ctx, ss.ID, MergeRequest{Strategy: ptr(StrategyMerge)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("merge of a shared Session: %v", err)
	}
}
