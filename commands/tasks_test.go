package commands

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"lathe/commands/core"
	"lathe/commands/sessions"
	"lathe/commands/tasks"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/journal/journaltest"
	"lathe/projections"
)

// The flows that run tasks in a real sandbox are tested through the routes
// in cmd/lathe/internal/daemon/tasks_test.go; these are the decisions.

func TestCheckTask(t *testing.T) {
	for _, tc := range []struct {
		name       string
		req        tasks.TaskRequest
		rows, cols int
		err        string
	}{
		{name: "background", req: tasks.TaskRequest{Command: "make test"}},
		{name: "interactive defaults", req: tasks.TaskRequest{Command: "bash", Interactive: true}, rows: 24, cols: 80},
		{name: "interactive size", req: tasks.TaskRequest{Command: "bash", Interactive: true, Rows: new(50), Cols: new(200)}, rows: 50, cols: 200},
		{name: "one side given", req: tasks.TaskRequest{Command: "bash", Interactive: true, Cols: new(132)}, rows: 24, cols: 132},
		{name: "bounds", req: tasks.TaskRequest{Command: "bash", Interactive: true, Rows: new(1000), Cols: new(1)}, rows: 1000, cols: 1},
		{name: "empty", req: tasks.TaskRequest{}, err: "command must not be empty"},
		{name: "blank", req: tasks.TaskRequest{Command: " \t\n"}, err: "command must not be empty"},
		{name: "NUL", req: tasks.TaskRequest{Command: "a\x00b"}, err: "NUL"},
		{name: "invalid UTF-8", req: tasks.TaskRequest{Command: "a\xffb"}, err: "UTF-8"},
		{name: "too long", req: tasks.TaskRequest{Command: strings.Repeat("x", tasks.MaxTaskCommand+1)}, err: "longer than"},
		{name: "size without interactive", req: tasks.TaskRequest{Command: "ls", Rows: new(10)}, err: "only to interactive"},
		{name: "zero rows", req: tasks.TaskRequest{Command: "bash", Interactive: true, Rows: new(0)}, err: "rows must be 1-1000"},
		{name: "too many cols", req: tasks.TaskRequest{Command: "bash", Interactive: true, Cols: new(1001)}, err: "rows must be 1-1000"},
		{name: "negative", req: tasks.TaskRequest{Command: "bash", Interactive: true, Rows: new(-3), Cols: new(-3)}, err: "rows must be 1-1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, cols, err := tasks.CheckTask(tc.req)
			if tc.err != "" {
				if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrInvalid with %q", err, tc.err)
				}
				return
			}
			if err != nil || rows != tc.rows || cols != tc.cols {
				t.Fatalf("= %d, %d, %v; want %d, %d", rows, cols, err, tc.rows, tc.cols)
			}
		})
	}
}

// newTaskService is a Service on a real journal without a sandbox provider.
func newTaskService(t *testing.T) (*Service, *projections.Store) {
	t.Helper()
	j, store := openJournal(t)
	return New(j, store, core.Options{Agents: []string{"coder"}}), store
}

// openJournal opens a real journal whose commits feed a fresh Store.
func openJournal(t *testing.T) (*journal.Journal, *projections.Store) {
	t.Helper()
	j := journaltest.Open(t)
	store := projections.New()
	j.OnCommit(func(recs []journal.Record) {
		if err := store.Apply(recs); err != nil {
			t.Errorf("apply: %v", err)
		}
	})
	return j, store
}

func TestTasksNeedAReadySandbox(t *testing.T) {
	s, store := newTaskService(t)
	ctx := context.Background()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	w, _, err := s.Sessions.RegisterWorkspace(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := s.Sessions.CreateSession(ctx, w.ID, sessions.SessionSpec{Name: "s", Mode: &events.Mode{Kind: events.ModeSingleAgent, AgentID: "coder"}})
	if err != nil {
		t.Fatal(err)
	}
	if ss.Environment.State != events.EnvUnprepared { // without a provider nothing prepares it
		t.Fatalf("state %s", ss.Environment.State)
	}
	version := func() uint64 { v, _ := s.Turns.Journal.Version(ss.ID); return v }
	before := version()
	if _, err := s.Tasks.StartTask(ctx, ss.ID, tasks.TaskRequest{Command: "echo hi"}); !errors.Is(err, core.ErrConflict) {
		t.Errorf("StartTask without a Ready sandbox: %v, want ErrConflict", err)
	}
	if _, err := s.Tasks.StartTask(ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV", tasks.TaskRequest{Command: "echo hi"}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("StartTask of a missing Session: %v, want ErrNotFound", err)
	}
	if _, err := s.Tasks.StartTask(ctx, ss.ID, tasks.TaskRequest{}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("StartTask with no command: %v, want ErrInvalid", err)
	}
	if v := version(); v != before {
		t.Errorf("refused task starts appended %d events", v-before)
	}
	if _, err := s.Tasks.Terminal(ss.ID, "nope"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Terminal of an unknown task: %v", err)
	}

	// A task the journal shows running but this daemon does not run (it
	// restarted) is recorded as exited, once.
	if err := s.Turns.Append(ctx, []journal.Event{events.New(ss.ID, events.TaskStarted{TaskID: "t1", Command: "sleep 9", Generation: 1})}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tasks.Terminal(ss.ID, "t1"); !errors.Is(err, core.ErrNotFound) || !strings.Contains(err.Error(), "gone") {
		t.Errorf("Terminal of a task from before a restart: %v", err)
	}
	for range 2 {
		if err := s.Tasks.ReconcileTasks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	task, _ := store.Task(ss.ID, "t1")
	if task.Status != projections.TaskExited || task.ExitCode == nil || *task.ExitCode != -1 || !strings.Contains(task.Error, "restarted") {
		t.Errorf("reconciled task = %+v", task)
	}
	if v := version(); v != before+2 {
		t.Errorf("%d events after start and reconcile, want 2", v-before)
	}
}
