package commands

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lathe/commands/core"
	"lathe/commands/sessions"
	worktreescmd "lathe/commands/worktrees"

	"lathe/journal/events"
	"lathe/runtime/git/gittest"
	"lathe/runtime/lanefs"
)

// worktreeService is a Service with a worktrees folder, no sandbox
// provider, and a Git Workspace.
func worktreeService(t *testing.T) (*Service, string, string) {
	t.Helper()
	j, store := openJournal(t)
	s := New(j, store, core.Options{Agents: []string{"coder"}, DefaultImage: "img", WorktreesDir: filepath.Join(t.TempDir(), "worktrees")})
	// Where worktrees are overlays (root), none outlives the test.
	t.Cleanup(func() { _ = lanefs.UnmountUnder(s.Sessions.Opts.WorktreesDir) })
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	gittest.Write(t, dir, map[string]string{"a.txt": "a\n"})
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
	ss, err := s.Sessions.CreateSession(ctx, ws, sessions.SessionSpec{Name: "s", Mode: singleAgent(), Isolation: &iso})
	if err != nil {
		t.Fatal(err)
	}
	if ss.Isolation != iso || ss.Branch != "lathe/"+ss.ID || filepath.Dir(ss.WorkingDir) != s.Sessions.Opts.WorktreesDir {
		t.Fatalf("session %+v", ss)
	}
	if b, err := os.ReadFile(filepath.Join(ss.WorkingDir, "a.txt")); err != nil || string(b) != "a\n" {
		t.Fatalf("the worktree holds %q, %v", b, err)
	}
	intents, settled := effectLog(t, s.Sessions.Core)
	for id, in := range intents {
		if in.Kind == events.EffectWorktreeAdd && settled[id].Outcome != events.EffectDone {
			t.Errorf("worktree-add %s settled %+v", id, settled[id])
		}
	}

	// The stop: the intent and the worktree, no Session.
	ghost := "GHOST"
	w, _ := s.Sessions.Store.Workspace(ws)
	ev := events.SessionCreated{Isolation: iso}
	if _, _, err := worktreescmd.AddWorktree(ctx, s.Sessions.Core, ghost, w, &ev); err != nil {
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
	intents, settled = effectLog(t, s.Sessions.Core)
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
		if _, err := s.Sessions.CreateSession(ctx, w.ID, sessions.SessionSpec{Name: "s", Mode: singleAgent(), Isolation: &iso}); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("isolation %q in a plain folder: %v", iso, err)
		}
	}
	shared := events.IsolationShared
	ss, err := s.Sessions.CreateSession(ctx, w.ID, sessions.SessionSpec{Name: "s", Mode: singleAgent(), Isolation: &shared})
	if err != nil || ss.Isolation != shared || ss.WorkingDir != plain || ss.Branch != "" {
		t.Fatalf("shared: %+v %v", ss, err)
	}
	if _, err := s.Worktrees.Merge(ctx, ss.ID, worktreescmd.MergeRequest{Strategy: new(worktreescmd.StrategyMerge)}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("merge of a shared Session: %v", err)
	}
}

// bases lists the shared base checkouts in the worktrees folder.
func bases(t *testing.T, worktrees string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(worktrees, ".bases"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// A base checkout goes with the last worktree on it: two Sessions (one
// soft-closed) share one base, which the first one's delete keeps and the
// second one's removes; a base a stop orphaned (a create cut off, a base
// half made, a collection cut off) goes at the next start's Reconcile,
// and one still in use stays.
func TestWorktreeBasesAreCollected(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bases are the lower layers of overlays, which need root")
	}
	s, ws, dir := worktreeService(t)
	ctx := context.Background()
	wts := s.Sessions.Opts.WorktreesDir
	iso := events.IsolationWorktree
	var ids []string
	for range 2 {
		ss, err := s.Sessions.CreateSession(ctx, ws, sessions.SessionSpec{Name: "s", Mode: singleAgent(), Isolation: &iso})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ss.ID)
	}
	one := bases(t, wts)
	if len(one) != 1 {
		t.Fatalf("two Sessions on one commit have bases %v, want one", one)
	}
	if _, err := s.Sessions.CloseSession(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sessions.DeleteSessionConfirmed(ctx, ids[0], nil); err != nil {
		t.Fatal(err)
	}
	if got := bases(t, wts); len(got) != 1 || got[0] != one[0] {
		t.Fatalf("after the first delete, bases %v, want %v kept for the soft-closed Session", got, one)
	}
	second, _ := s.Sessions.Store.Session(ids[1])
	if b, err := os.ReadFile(filepath.Join(second.WorkingDir, "a.txt")); err != nil || string(b) != "a\n" {
		t.Fatalf("the soft-closed Session's worktree reads %q, %v", b, err)
	}
	if _, err := s.Sessions.DeleteSessionConfirmed(ctx, ids[1], nil); err != nil {
		t.Fatal(err)
	}
	if got := bases(t, wts); len(got) != 0 {
		t.Fatalf("after the last delete, bases %v, want none", got)
	}

	// A Session on a new commit, and what stops left beside it.
	gittest.Write(t, dir, map[string]string{"b.txt": "b\n"})
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "two")
	kept, err := s.Sessions.CreateSession(ctx, ws, sessions.SessionSpec{Name: "kept", Mode: singleAgent(), Isolation: &iso})
	if err != nil {
		t.Fatal(err)
	}
	want := bases(t, wts)
	gittest.Write(t, dir, map[string]string{"c.txt": "c\n"})
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-qm", "three")
	w, _ := s.Sessions.Store.Workspace(ws)
	ev := events.SessionCreated{Isolation: iso}
	if _, _, err := worktreescmd.AddWorktree(ctx, s.Sessions.Core, "GHOST", w, &ev); err != nil { // its Session never appended
		t.Fatal(err)
	}
	for _, p := range []string{"0123456789abcdef.partial-1234/tree/x", "fedcba9876543210.partial-gc/tree/y"} {
		gittest.Write(t, filepath.Join(wts, ".bases"), map[string]string{p: "left by a kill\n"})
	}
	if got := bases(t, wts); len(got) != 4 {
		t.Fatalf("before the restart, bases %v", got)
	}
	if err := s.Effects.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := bases(t, wts); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("after the restart's Reconcile, bases %v, want only %v", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(kept.WorkingDir, "b.txt")); err != nil || string(b) != "b\n" {
		t.Fatalf("the open Session's worktree reads %q, %v", b, err)
	}
	if err := s.Effects.Reconcile(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	if got := bases(t, wts); len(got) != 1 {
		t.Fatalf("after a second Reconcile, bases %v", got)
	}
}
