package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"lathe/commands/core"
	"lathe/commands/environments"

	"github.com/oklog/ulid/v2"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/agent/tools"
	"lathe/runtime/sandbox"
	"lathe/runtime/terminal"
)

// Task bounds.
const (
	MaxTaskCommand = 16 << 10
	// maxSessionTasks bounds the live tasks of one Session: running ones
	// and exited terminals still kept for their scrollback.
	maxSessionTasks = 32
	// exitedRetention is how long an exited interactive task's terminal
	// stays attachable, for its scrollback and exit, while its sandbox runs.
	exitedRetention  = 5 * time.Minute
	taskStartTimeout = 30 * time.Second
)

// TaskRequest is the body of POST /api/sessions/{id}/tasks. Rows and Cols
// apply to interactive tasks only; each defaults to 24x80's part.
type TaskRequest struct {
	Command     string `json:"command"`
	Interactive bool   `json:"interactive"`
	Rows        *int   `json:"rows"`
	Cols        *int   `json:"cols"`
}

// taskRegistry is the live task state of every Session: the processes
// running in its sandbox, and exited terminals kept for a while for their
// scrollback. The journal holds the durable record (TaskStarted/TaskExited).
type taskRegistry struct {
	mu   sync.Mutex
	live map[string]map[string]*liveTask // session id → task id → task
}

// liveTask is one task's runtime half.
type liveTask struct {
	id, session string
	sb          sandbox.Sandbox
	term        *terminal.Terminal // interactive tasks
	proc        sandbox.Process    // background tasks
	tail        *core.Tail
	started     time.Time
	exited      bool // guarded by taskRegistry.mu
}

func (r *taskRegistry) get(session, id string) *liveTask {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live[session][id]
}

// reserve checks there is room for one more task in the Session, evicting
// the oldest exited terminal if need be.
func (r *taskRegistry) reserve(session string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.live[session]
	if len(m) < maxSessionTasks {
		return nil
	}
	var oldest *liveTask
	for _, lt := range m {
		if lt.exited && (oldest == nil || lt.started.Before(oldest.started)) {
			oldest = lt
		}
	}
	if oldest == nil {
		return fmt.Errorf("%w: session already runs %d tasks; wait for one to exit", core.ErrConflict, maxSessionTasks)
	}
	delete(m, oldest.id)
	return nil
}

func (r *taskRegistry) add(lt *liveTask) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live == nil {
		r.live = map[string]map[string]*liveTask{}
	}
	if r.live[lt.session] == nil {
		r.live[lt.session] = map[string]*liveTask{}
	}
	r.live[lt.session][lt.id] = lt
}

func (r *taskRegistry) remove(lt *liveTask) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.live[lt.session]; m[lt.id] == lt {
		delete(m, lt.id)
		if len(m) == 0 {
			delete(r.live, lt.session)
		}
	}
}

// markExited notes that the task's process has ended.
func (r *taskRegistry) markExited(lt *liveTask) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lt.exited = true
}

// CheckTask validates a task request and returns the terminal size.
func CheckTask(req TaskRequest) (rows, cols int, err error) {
	switch {
	case strings.TrimSpace(req.Command) == "":
		return 0, 0, fmt.Errorf("%w: command must not be empty", core.ErrInvalid)
	case len(req.Command) > MaxTaskCommand:
		return 0, 0, fmt.Errorf("%w: command is longer than %d bytes", core.ErrInvalid, MaxTaskCommand)
	case strings.ContainsRune(req.Command, 0):
		return 0, 0, fmt.Errorf("%w: command must not contain NUL", core.ErrInvalid)
	case !utf8.ValidString(req.Command):
		return 0, 0, fmt.Errorf("%w: command must be valid UTF-8", core.ErrInvalid)
	case !req.Interactive && (req.Rows != nil || req.Cols != nil):
		return 0, 0, fmt.Errorf("%w: rows and cols apply only to interactive tasks", core.ErrInvalid)
	case !req.Interactive:
		return 0, 0, nil
	}
	rows, cols = terminal.DefaultRows, terminal.DefaultCols
	if req.Rows != nil {
		rows = *req.Rows
	}
	if req.Cols != nil {
		cols = *req.Cols
	}
	if err := terminal.CheckSize(rows, cols); err != nil {
		return 0, 0, fmt.Errorf("%w: rows must be 1-%d and cols 1-%d (got rows %d, cols %d)", core.ErrInvalid, terminal.MaxRows, terminal.MaxCols, rows, cols)
	}
	return rows, cols, nil
}

// StartTask runs a command in the Session's Ready sandbox with `bash -lc`,
// on a terminal when interactive, and records TaskStarted. It never
// prepares an environment: a Session that is not Ready is ErrConflict, a
// missing one ErrNotFound. The exit is recorded as TaskExited, with the
// last 16 KiB of output, whenever and however the process ends.
func (s *Tasks) StartTask(ctx context.Context, sessionID string, req TaskRequest) (projections.Task, error) {
	rows, cols, err := CheckTask(req)
	if err != nil {
		return projections.Task{}, err
	}
	if _, _, err := s.ReadySandbox(sessionID); err != nil {
		return projections.Task{}, err
	}
	// The lifecycle lock orders the task's events with the lifecycle
	// owners' brackets, whose appends expect the Session's version.
	release, err := s.OwnForTask(ctx, sessionID)
	if err != nil {
		return projections.Task{}, err
	}
	defer release()
	sb, ss, err := s.ReadySandbox(sessionID)
	if err != nil {
		return projections.Task{}, err
	}
	if err := s.tasks.reserve(sessionID); err != nil {
		return projections.Task{}, err
	}

	lt := &liveTask{id: ulid.Make().String(), session: sessionID, sb: sb, tail: core.NewTail(environments.TailBytes), started: time.Now()}
	// Recorded, then acted (commands/startup/effects.go): a stop between the start
	// and task-started leaves the intent, and the next start kills what
	// carries the task's ID (reconcileTaskStart).
	fx, err := s.Intend(ctx, events.EffectTaskStart, sessionID, lt.id, "")
	if err != nil {
		return projections.Task{}, err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), taskStartTimeout)
	defer cancel()
	args := []string{"bash", "-lc", req.Command}
	// The task's processes, and what they start, carry its ID, so that a
	// kill finds them all, also after a daemon restart lost their handle.
	env := []string{taskEnv + "=" + lt.id}
	var kill func()
	if req.Interactive {
		lt.term, err = terminal.Start(sctx, sb, terminal.Spec{Args: args, Env: env, Rows: rows, Cols: cols, Tee: lt.tail})
		kill = func() { _ = lt.term.Signal(context.Background(), syscall.SIGKILL) }
	} else {
		lt.proc, err = sb.Exec(sctx, sandbox.ExecSpec{Args: args, Env: env, Stdout: lt.tail, Stderr: lt.tail})
		kill = func() { _ = lt.proc.Signal(context.Background(), syscall.SIGKILL) }
	}
	if err != nil {
		if serr := fx.Settle(ctx, err); serr != nil {
			s.Log.Warn("settle a failed task start", "session", sessionID, "err", serr)
		}
		if errors.Is(err, sandbox.ErrNotFound) {
			return projections.Task{}, fmt.Errorf("%w: the sandbox of session %q is gone: %v", core.ErrConflict, sessionID, err)
		}
		if errors.Is(err, sandbox.ErrUnavailable) {
			return projections.Task{}, fmt.Errorf("%w: start task: %v", core.ErrUnavailable, err)
		}
		return projections.Task{}, fmt.Errorf("start task: %w", err)
	}
	err = fx.Settle(ctx, nil, events.New(sessionID, events.TaskStarted{
		TaskID: lt.id, Command: req.Command, Interactive: req.Interactive, Generation: ss.Environment.Generation,
	}))
	if err != nil {
		kill()
		return projections.Task{}, err
	}
	s.tasks.add(lt)
	go s.awaitTask(lt)
	t, _ := s.Store.Task(sessionID, lt.id)
	return t, nil
}

// awaitTask records a task's exit exactly once. The append waits for the
// Session's lifecycle lock, so that a close, rebuild or loss of the sandbox,
// which ends its tasks, is recorded first and never sees its expectation
// broken by the exits it causes.
func (s *Tasks) awaitTask(lt *liveTask) {
	ctx := context.Background()
	var code int
	var werr error
	if lt.term != nil {
		code, werr = lt.term.Wait(ctx)
	} else {
		code, werr = lt.proc.Wait(ctx)
	}
	took := time.Since(lt.started)
	goneAtExit := s.sandboxGone(lt)

	release, _ := s.Own(ctx, lt.session, true) // fails only when ctx ends
	gone := goneAtExit || (s.sandboxGone(lt) && (code < 0 || code >= 128))
	note := ""
	switch {
	case werr != nil:
		code, note = -1, "the task's exit status is unknown: "+werr.Error()
	case gone:
		note = "the sandbox stopped while the task ran (environment closed, rebuilt or lost); the exit code is not the command's own"
	}
	if _, ok := s.Store.Session(lt.session); ok { // a deleted Session keeps no record
		err := s.Append(ctx, []journal.Event{events.New(lt.session, events.TaskExited{
			TaskID: lt.id, ExitCode: code, OutputTail: lt.tail.String(), DurationMS: took.Milliseconds(), Error: note,
		})})
		if err != nil {
			// Only when the daemon is closing: ReconcileTasks records it at the next start.
			s.Log.Warn("record task exit", "session", lt.session, "task", lt.id, "err", err)
		}
	}
	release()

	s.tasks.markExited(lt)
	if lt.term == nil || gone || s.sandboxGone(lt) {
		s.tasks.remove(lt)
		return
	}
	time.AfterFunc(exitedRetention, func() { s.tasks.remove(lt) })
}

// sandboxGone reports whether a task's sandbox is no longer the Session's
// live one.
func (s *Tasks) sandboxGone(lt *liveTask) bool {
	return s.LiveSandbox(lt.session) != lt.sb || environments.IsDone(lt.sb)
}

// Terminal returns the terminal of a Session's interactive task, for the
// terminal WebSocket: ErrNotFound for an unknown task, a background task,
// or one whose terminal is gone (its sandbox stopped, or it exited more than
// a few minutes ago). An exited terminal still replays its scrollback.
func (s *Tasks) Terminal(sessionID, taskID string) (*terminal.Terminal, error) {
	lt := s.tasks.get(sessionID, taskID)
	if lt == nil || s.LiveSandbox(sessionID) != lt.sb {
		if t, ok := s.Store.Task(sessionID, taskID); ok {
			if t.Status == projections.TaskDetached {
				return nil, fmt.Errorf("%w: the terminal of task %q is %s", core.ErrNotFound, taskID, detachedReason)
			}
			return nil, fmt.Errorf("%w: the terminal of task %q is gone (the task exited, or its sandbox stopped)", core.ErrNotFound, taskID)
		}
		return nil, fmt.Errorf("%w: terminal %q of session %q", core.ErrNotFound, taskID, sessionID)
	}
	if lt.term == nil {
		return nil, fmt.Errorf("%w: task %q is a background task and has no terminal", core.ErrNotFound, taskID)
	}
	return lt.term, nil
}

// detachedReason is what a detached task says about itself.
const detachedReason = "detached: the daemon restarted; the process may still be running in the sandbox, but its output and terminal no longer reach Lathe; kill it to end it"

// ReconcileTasks settles the tasks the journal shows running (or detached)
// that this daemon does not run: one whose sandbox generation was
// reattached may still run there, and is recorded detached (once); one
// whose sandbox is gone is recorded exited, its exit code unknown. Call it
// once at start-up, after Reconstruct.
func (s *Tasks) ReconcileTasks(ctx context.Context) error {
	for _, id := range s.Store.SessionsWithUnexitedTasks() {
		sb := s.LiveSandbox(id)
		for _, t := range s.Store.Tasks(id) {
			if t.Status == projections.TaskExited || s.tasks.get(id, t.ID) != nil {
				continue
			}
			var ev events.Payload
			switch {
			case sb != nil && !environments.IsDone(sb) && sb.Generation() == t.Generation:
				go s.awaitDetached(id, t.ID, sb)
				if t.Status == projections.TaskDetached {
					continue
				}
				ev = events.TaskDetached{TaskID: t.ID, Reason: detachedReason}
			default:
				ev = events.TaskExited{TaskID: t.ID, ExitCode: -1, DurationMS: time.Since(t.StartedAt).Milliseconds(),
					Error: "the daemon restarted while the task ran, and its sandbox is gone; its exit code is unknown"}
			}
			if err := s.Append(ctx, []journal.Event{events.New(id, ev)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// awaitDetached records the exit of a detached task when its sandbox ends
// (a close, rebuild, or loss), unless a kill recorded it first. Like
// awaitTask it waits for the Session's lifecycle lock, so the bracket that
// ended the sandbox is recorded first.
func (s *Tasks) awaitDetached(sessionID, taskID string, sb sandbox.Sandbox) {
	<-sb.Done()
	ctx := context.Background()
	release, err := s.Own(ctx, sessionID, true)
	if err != nil {
		return
	}
	defer release()
	t, ok := s.Store.Task(sessionID, taskID)
	if !ok || t.Status != projections.TaskDetached {
		return
	}
	err = s.Append(ctx, []journal.Event{events.New(sessionID, events.TaskExited{TaskID: taskID, ExitCode: -1,
		DurationMS: time.Since(t.StartedAt).Milliseconds(),
		Error:      "the sandbox stopped while the task was detached (environment closed, rebuilt or lost); its exit code is unknown"})})
	if err != nil {
		s.Log.Warn("record a detached task's end", "session", sessionID, "task", taskID, "err", err)
	}
}

// taskEnv names the environment variable every task process carries, set
// to its task ID.
const taskEnv = "LATHE_TASK_ID"

// KillTask ends a running or detached task in the Session's Ready sandbox:
// every process carrying its ID gets SIGKILL, and TaskKilled records it. A
// running task's exit then follows from its process; a detached one, whose
// process this daemon does not hold, is recorded exited at once, its own
// exit code unseen. An exited task is ErrConflict.
func (s *Tasks) KillTask(ctx context.Context, sessionID, taskID string) (projections.Task, error) {
	release, err := s.OwnReady(ctx, sessionID)
	if err != nil {
		return projections.Task{}, err
	}
	defer release()
	sb, _, err := s.ReadySandbox(sessionID)
	if err != nil {
		return projections.Task{}, err
	}
	t, ok := s.Store.Task(sessionID, taskID)
	switch {
	case !ok:
		return projections.Task{}, fmt.Errorf("%w: task %q of session %q", core.ErrNotFound, taskID, sessionID)
	case t.Status == projections.TaskExited:
		return t, fmt.Errorf("%w: task %q already exited", core.ErrConflict, taskID)
	case t.Generation != sb.Generation():
		return t, fmt.Errorf("%w: task %q ran in an earlier sandbox of the session, which is gone", core.ErrConflict, taskID)
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), taskStartTimeout)
	defer cancel()
	n, err := killCarriers(kctx, sb, taskID)
	if err != nil {
		return t, environments.SandboxError(sessionID, err)
	}
	detached := t.Status == projections.TaskDetached
	evs := []journal.Event{events.New(sessionID, events.TaskKilled{TaskID: taskID, Processes: n, Detached: detached})}
	if detached {
		evs = append(evs, events.New(sessionID, events.TaskExited{TaskID: taskID, ExitCode: -1, DurationMS: time.Since(t.StartedAt).Milliseconds(),
			Error: "killed after the daemon restarted; its own exit code was not seen"}))
	}
	if err := s.Append(context.WithoutCancel(ctx), evs); err != nil {
		return t, err
	}
	if lt := s.tasks.get(sessionID, taskID); lt != nil {
		// The process handle ends too, even if it cleared its environment.
		if lt.term != nil {
			_ = lt.term.Signal(kctx, syscall.SIGKILL)
		} else {
			_ = lt.proc.Signal(kctx, syscall.SIGKILL)
		}
	}
	t, _ = s.Store.Task(sessionID, taskID)
	return t, nil
}

// killCarriers sends SIGKILL to every process in sb that carries the task
// ID in its environment (LATHE_TASK_ID) and says how many it killed.
func killCarriers(ctx context.Context, sb sandbox.Sandbox, taskID string) (int, error) {
	return tools.KillCarriers(ctx, sb, taskEnv+"="+taskID)
}

// reconcileTaskStart settles a task start a stop cut off before its
// task-started: the journal never knew the task, so whatever of it started
// in the Session's sandbox is killed, not left running unseen.
// reconcilers settle a task start a stop cut off.
func (s *Tasks) Reconcilers() map[string]core.ReconcileEffect {
	return map[string]core.ReconcileEffect{events.EffectTaskStart: s.reconcileTaskStart}
}

func (s *Tasks) reconcileTaskStart(ctx context.Context, in events.EffectIntended) (string, []journal.Event) {
	sb := s.LiveSandbox(in.Target)
	if sb == nil || environments.IsDone(sb) {
		return "the daemon stopped while starting the task; its sandbox is gone, and the task with it", nil
	}
	kctx, cancel := context.WithTimeout(ctx, taskStartTimeout)
	defer cancel()
	n, err := killCarriers(kctx, sb, in.Detail.String())
	if err != nil {
		return "the daemon stopped while starting the task, and killing what it started failed: " + err.Error(), nil
	}
	return fmt.Sprintf("the daemon stopped while starting the task; %d of its processes were killed", n), nil
}

// Tasks starts Session tasks and terminals (commands/tasks/tasks.go).
type Tasks struct {
	*environments.Sandboxes
	tasks taskRegistry
}

// NewTasks returns the task and terminal commands.
func NewTasks(sb *environments.Sandboxes) *Tasks { return &Tasks{Sandboxes: sb} }
