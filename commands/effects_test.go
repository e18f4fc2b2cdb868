package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/commands/core"
	"lathe/commands/files"
	"lathe/commands/sessions"
	"lathe/commands/tasks"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent/tools"
	"lathe/runtime/git/gittest"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/helper"
)

// readySession creates a Session on a fake driver and waits until it is
// Ready.
func readySession(t *testing.T) (*Service, *projections.Store, projections.Session) {
	t.Helper()
	return readySessionOn(t, &fakeDriver{})
}

func readySessionOn(t *testing.T, drv *fakeDriver) (*Service, *projections.Store, projections.Session) {
	t.Helper()
	s, store, w := newServiceWith(t, func(context.Context) (sandbox.Driver, error) { return drv, nil })
	ss, err := s.Sessions.CreateSession(context.Background(), w.ID, sessions.SessionSpec{Name: "s", Mode: singleAgent()})
	if err != nil {
		t.Fatal(err)
	}
	polltest.Check(t, func() error {
		if ss, _ = store.Session(ss.ID); ss.Environment.State != events.EnvReady || ss.Environment.Owner != "" {
			return fmt.Errorf("the Session is not Ready: %+v", ss.Environment)
		}
		return nil
	}, polltest.Within(10*time.Second))
	return s, store, ss
}

// effectLog reads the effect aggregate: intents by ID and settlements.
func effectLog(t *testing.T, s *core.Core) (intents map[string]events.EffectIntended, settled map[string]events.EffectSettled) {
	t.Helper()
	intents, settled = map[string]events.EffectIntended{}, map[string]events.EffectSettled{}
	err := s.Journal.ScanAggregate(context.Background(), events.EffectsID, 0, 0, func(_ uint64, raw []byte) error {
		_, p, err := events.DecodeStored(raw)
		switch e := p.(type) {
		case events.EffectIntended:
			intents[e.Intent] = e
		case events.EffectSettled:
			settled[e.Intent] = e
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return intents, settled
}

// Record, then act: a write and each tree change is an intent, then its
// event with the settlement; a refused change settles failed. A stop
// between the intent and the settlement is settled by Reconcile, once: a
// write that landed is recorded as written.
func TestFileEffectsAreRecordedThenActed(t *testing.T) {
	s, _, ss := readySession(t)
	ctx := context.Background()
	gittest.Write(t, ss.WorkingDir, map[string]string{"a.txt": "old"})
	if _, err := s.Files.Write(ctx, ss.ID, files.FileWrite{Path: "a.txt", Content: new("new")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Files.Create(ctx, ss.ID, "dir", files.KindDir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Files.Create(ctx, ss.ID, "dir", files.KindDir); err == nil {
		t.Fatal("creating an existing folder succeeded")
	}
	if _, err := s.Files.Rename(ctx, ss.ID, "a.txt", "dir/b.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Files.Delete(ctx, ss.ID, "dir", true); err != nil {
		t.Fatal(err)
	}
	intents, settled := effectLog(t, s.Files.Core)
	if len(intents) != 4 || len(settled) != 4 {
		t.Fatalf("%d intents, %d settlements, want 4 each (the refused create records nothing)", len(intents), len(settled))
	}
	for id, in := range intents {
		if st := settled[id]; st.Outcome != events.EffectDone {
			t.Errorf("intent %+v settled %+v", in, st)
		}
	}

	// Two writes a stop cut off after their intents: one landed, one not.
	landed := events.EffectIntended{Intent: "01LANDED", Kind: events.EffectFileWrite, Target: ss.ID, Detail: events.NewText("c.txt"), SHA256: files.HashOf([]byte("landed"))}
	lost := events.EffectIntended{Intent: "01LOST", Kind: events.EffectFileWrite, Target: ss.ID, Detail: events.NewText("d.txt"), SHA256: files.HashOf([]byte("lost"))}
	exec := events.EffectIntended{Intent: "01EXEC", Kind: events.EffectAgentExecute, Target: "coder"}
	for _, in := range []events.EffectIntended{landed, lost, exec} {
		if err := s.Files.Append(ctx, []journal.Event{events.New(events.EffectsID, in)}); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Write(t, ss.WorkingDir, map[string]string{"c.txt": "landed"})
	gittest.Write(t, ss.WorkingDir, map[string]string{"d.txt": "something else"})
	before, _ := s.Files.Journal.Version(ss.ID)
	for range 2 {
		if err := s.Effects.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, settled = effectLog(t, s.Files.Core)
	for _, in := range []events.EffectIntended{landed, lost, exec} {
		if st, ok := settled[in.Intent]; !ok || st.Outcome != events.EffectInterrupted || st.Error == "" {
			t.Errorf("intent %s: settled %+v %v, want interrupted with what was found", in.Intent, st, ok)
		}
	}
	if after, _ := s.Files.Journal.Version(ss.ID); after != before+1 {
		t.Errorf("the Session got %d events from reconciliation, want 1 (the landed write)", after-before)
	}
}

// Git operations and task starts are recorded, then acted too. A Git
// operation a stop cut off is settled interrupted; a task start cut off
// before its task-started kills whatever carries the task's ID in the
// Session's sandbox, so no process runs that the journal never knew.
func TestGitAndTaskEffectsAreRecordedThenActed(t *testing.T) {
	var mu sync.Mutex
	var killed []string
	drv := &fakeDriver{exec: func(spec sandbox.ExecSpec) string {
		mu.Lock()
		defer mu.Unlock()
		// the sandbox helper's kill: PATH sandbox-helper kill entry KEY=value
		if len(spec.Args) == 5 && spec.Args[1] == helper.Subcommand && spec.Args[2] == tools.KillCommand && spec.Args[3] == "entry" {
			killed = append(killed, spec.Args[4])
			return "2\n"
		}
		return ""
	}}
	s, _, ss := readySessionOn(t, drv)
	ctx := context.Background()
	task, err := s.Tasks.StartTask(ctx, ss.ID, tasks.TaskRequest{Command: "sleep 1"})
	if err != nil {
		t.Fatal(err)
	}
	intents, settled := effectLog(t, s.Files.Core)
	var started events.EffectIntended
	for _, in := range intents {
		if in.Kind == events.EffectTaskStart {
			started = in
		}
	}
	if started.Detail.String() != task.ID || settled[started.Intent].Outcome != events.EffectDone {
		t.Fatalf("task start intent %+v settled %+v, want the task %s's intent settled done", started, settled[started.Intent], task.ID)
	}

	cutGit := events.EffectIntended{Intent: "01GIT", Kind: events.EffectGit, Target: ss.ID, Detail: events.NewText("git-committed")}
	cutTask := events.EffectIntended{Intent: "01TASK", Kind: events.EffectTaskStart, Target: ss.ID, Detail: events.NewText("01ORPHANTASK")}
	for _, in := range []events.EffectIntended{cutGit, cutTask} {
		if err := s.Files.Append(ctx, []journal.Event{events.New(events.EffectsID, in)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Effects.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	_, settled = effectLog(t, s.Files.Core)
	for _, in := range []events.EffectIntended{cutGit, cutTask} {
		if st := settled[in.Intent]; st.Outcome != events.EffectInterrupted || st.Error == "" {
			t.Errorf("intent %s settled %+v, want interrupted with what was found", in.Intent, st)
		}
	}
	if st := settled[cutTask.Intent]; !strings.Contains(st.Error, "2 of its processes were killed") {
		t.Errorf("the cut task start settled %q, want the kill reported", st.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(killed, "LATHE_TASK_ID=01ORPHANTASK") {
		t.Errorf("killed %v, want the orphaned task's carriers killed", killed)
	}
}
