package projections

import (
	"fmt"
	"slices"
	"time"

	"lathe/journal"
	"lathe/journal/events"
)

// Task is a command run in a Session's sandbox.
type Task struct {
	ID          string     `json:"id"`
	Command     string     `json:"command"`
	Interactive bool       `json:"interactive"`
	Generation  uint64     `json:"generation"`
	Status      string     `json:"status"` // "running", "detached" or "exited"
	ExitCode    *int       `json:"exit_code"`
	OutputTail  string     `json:"output_tail,omitempty"`
	Error       string     `json:"error,omitempty"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	DurationMS  int64      `json:"duration_ms,omitempty"`
}

// Task statuses.
const (
	TaskRunning = "running"
	// TaskDetached: the daemon restarted while the task ran; the process
	// may still run in the sandbox, but its output no longer reaches the
	// daemon. Error explains it; a kill ends it.
	TaskDetached = "detached"
	TaskExited   = "exited"
)

// TaskModel is the read model of the commands run in the Sessions'
// sandboxes.
type TaskModel struct {
	sh       *shared
	sessions *SessionModel      // for the parked parts (checkpoint.go)
	tasks    map[string][]*Task // session id → tasks, oldest first
}

// A task's events, each a change of its Session.
func init() {
	fold := func(s *Store, env journal.Envelope, p events.Payload) error { return s.part(env, p, s.TaskModel.fold) }
	claimFor("tasks", fold,
		events.TaskStarted{}, events.TaskDetached{}, events.TaskKilled{}, events.TaskExited{})
}

// fold applies a task event of a Session (Store.part checked the Session).
func (m *TaskModel) fold(env journal.Envelope, p events.Payload) error {
	id, at := env.AggregateID, env.At
	switch e := p.(type) {
	case events.TaskStarted:
		m.tasks[id] = append(m.tasks[id], &Task{ID: e.TaskID, Command: e.Command, Interactive: e.Interactive,
			Generation: e.Generation, Status: TaskRunning, StartedAt: at})
	case events.TaskDetached:
		for _, t := range m.tasks[id] {
			if t.ID == e.TaskID && t.Status == TaskRunning {
				t.Status, t.Error = TaskDetached, e.Reason
			}
		}
	case events.TaskKilled:
		// The exit that follows records the end.
	case events.TaskExited:
		for _, t := range m.tasks[id] {
			if t.ID == e.TaskID {
				code := e.ExitCode
				t.Status, t.ExitCode, t.OutputTail, t.Error = TaskExited, &code, e.OutputTail, e.Error
				t.EndedAt, t.DurationMS = &at, e.DurationMS
			}
		}
	default:
		return fmt.Errorf("no task projection for %T", p)
	}
	return nil
}

// tasksOf is a Session's tasks for a reader (the read lock is held): the
// read model's, or a decoded copy of what is still parked. A parked part
// that does not decode reads as empty; the event that unparks it reports
// the fault.
func (m *TaskModel) tasksOf(id string) []*Task {
	if p := m.sessions.parkedOf(id); p != nil {
		tasks, _, _, _ := parked{tasks: p.tasks}.decode(id)
		return tasks
	}
	return m.tasks[id]
}

// Tasks returns a Session's tasks, oldest first.
func (m *TaskModel) Tasks(sessionID string) []Task {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	tasks := m.tasksOf(sessionID)
	out := make([]Task, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, *t)
	}
	return out
}

// Task returns one task of a Session.
func (m *TaskModel) Task(sessionID, taskID string) (Task, bool) {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	for _, t := range m.tasksOf(sessionID) {
		if t.ID == taskID {
			return *t, true
		}
	}
	return Task{}, false
}

// SessionsWithUnexitedTasks returns the IDs of the Sessions that have a
// task that has not exited (running or detached), oldest first, without
// decoding the parked ones' tasks.
func (m *TaskModel) SessionsWithUnexitedTasks() []string {
	m.sh.mu.RLock()
	defer m.sh.mu.RUnlock()
	var ids []string
	for _, ss := range m.sessions.order {
		if ss.parked != nil {
			if ss.parked.unexited {
				ids = append(ids, ss.ID)
			}
			continue
		}
		if unexited(m.tasks[ss.ID]) {
			ids = append(ids, ss.ID)
		}
	}
	return ids
}

// unexited tells whether any of tasks has not exited.
func unexited(tasks []*Task) bool {
	return slices.ContainsFunc(tasks, func(t *Task) bool { return t.Status != TaskExited })
}
