package transport

import (
	"net/http"
	"net/url"

	taskscmd "lathe/commands/tasks"

	"github.com/julienschmidt/httprouter"

	"lathe/projections"
)

// taskView is a task as the tasks routes answer it: the durable record,
// and for a live interactive task where to attach and who watches.
type taskView struct {
	projections.Task
	TerminalURL     string `json:"terminal_url,omitempty"`
	AttachedClients *int   `json:"attached_clients,omitempty"`
}

// listTasks answers the Session's tasks, oldest first. It is a
// live-checkout route: 404 for a missing Session, 409 unless Ready.
func (s *taskRoutes) listTasks(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id := p.ByName("id")
	if _, _, err := s.sandboxes.Sandbox(id); err != nil {
		fail(w, err)
		return
	}
	tasks := s.read.Tasks(id)
	out := make([]taskView, len(tasks))
	for i, t := range tasks {
		out[i] = s.taskView(id, t)
	}
	writeJSON(w, http.StatusOK, out)
}

// startTask runs {command, interactive?, rows?, cols?} in the Session's
// Ready sandbox and answers 201 with the task.
func (s *taskRoutes) startTask(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	var req taskscmd.TaskRequest
	if err := decodeJSON(r, &req); err != nil {
		fail(w, err)
		return
	}
	id := p.ByName("id")
	t, err := s.cmds.StartTask(r.Context(), id, req)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.taskView(id, t))
}

// killTask is POST /api/sessions/:id/tasks/:tid/kill: it ends a running
// or detached task in the sandbox and answers the task.
func (s *taskRoutes) killTask(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id := p.ByName("id")
	t, err := s.cmds.KillTask(r.Context(), id, p.ByName("tid"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.taskView(id, t))
}

func (s *taskRoutes) taskView(sessionID string, t projections.Task) taskView {
	v := taskView{Task: t}
	if !t.Interactive {
		return v
	}
	if term, err := s.cmds.Terminal(sessionID, t.ID); err == nil {
		v.TerminalURL = terminalPath(sessionID, t.ID)
		n := term.Subscribers()
		v.AttachedClients = &n
	}
	return v
}

// terminalPath is the terminal WebSocket of a task.
func terminalPath(sessionID, taskID string) string {
	return "/api/sessions/" + url.PathEscape(sessionID) + "/terminals/" + url.PathEscape(taskID) + "/ws"
}
