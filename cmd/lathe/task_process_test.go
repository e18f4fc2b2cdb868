package main

// Tasks and terminals across a daemon restart, with the real binary and the
// real containerd: the sandbox is reattached, its processes still run, and
// the tasks whose daemon-side end (PTY, output stream) was lost say so
// ("detached") instead of claiming an exit; a kill ends them in the sandbox.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// taskProcNamespace is this file's own containerd namespace: a daemon owns
// its namespace.
const taskProcNamespace = "lathe-test-process-tasks"

// procTasks lists a Session's tasks.
func procTasks(t *testing.T, d *daemonProc, id string) map[string]projections.Task {
	t.Helper()
	status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+id+"/tasks", "")
	if status != 200 {
		t.Fatalf("GET tasks: %d %s", status, body)
	}
	var list []projections.Task
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]projections.Task{}
	for _, tk := range list {
		out[tk.ID] = tk
	}
	return out
}

// procStartTask starts a task and returns its ID.
func procStartTask(t *testing.T, d *daemonProc, id, command string, interactive bool) string {
	t.Helper()
	status, body := procDo(t, http.MethodPost, d.url+"/api/sessions/"+id+"/tasks", fmt.Sprintf(`{"command":%q,"interactive":%v}`, command, interactive))
	if status != 201 {
		t.Fatalf("start task %q: %d %s", command, status, body)
	}
	return idOf(t, body)
}

// procRunTask runs a background task to its end and returns its exit code.
func procRunTask(t *testing.T, d *daemonProc, id, command string) int {
	t.Helper()
	tid := procStartTask(t, d, id, command, false)
	var code int
	procPoll(t, "task "+command+" exited", func() bool {
		tk := procTasks(t, d, id)[tid]
		if tk.Status == projections.TaskExited {
			code = *tk.ExitCode
		}
		return tk.Status == projections.TaskExited
	})
	return code
}

// procPoll polls cond until it holds, for at most procSettle.
func procPoll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	polltest.Until(t, what, cond, polltest.Within(procSettle), polltest.Every(10*time.Millisecond))
}

// procAlive is the check, run in the sandbox, that the process whose pid
// the file names runs (and is not a zombie).
func procAlive(pidFile string) string {
	return fmt.Sprintf(`p=$(cat %s) && [ -e /proc/$p ] && [ "$(cut -d' ' -f3 /proc/$p/stat)" != Z ]`, pidFile)
}

func TestTerminalsAcrossRestart(t *testing.T) {
	containerdtest.Namespace(t, taskProcNamespace)
	cfg := writeConfig(t, fmt.Sprintf("sandbox:\n  default_image: %q\n  containerd:\n    address: %q\n    namespace: %q\n",
		containerdtest.Image, containerdtest.Address(), taskProcNamespace))
	data := t.TempDir()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	d := procStart(t, data, "--config", cfg)
	id := procCreate(t, d, dir, "")
	if ss := procWait(t, d, id, "settled", procSettled); ss.Environment.State != events.EnvReady {
		t.Fatalf("environment %+v", ss.Environment)
	}
	term := procStartTask(t, d, id, "echo $$ > term.pid; exec sleep 300", true)
	bg := procStartTask(t, d, id, "echo $$ > bg.pid; exec sleep 300", false)
	for _, f := range []string{"term.pid", "bg.pid"} {
		procPoll(t, f+" written", func() bool {
			b, err := os.ReadFile(filepath.Join(dir, f))
			return err == nil && strings.HasSuffix(string(b), "\n")
		})
	}

	d.stop(t)
	d = procStart(t, data, "--config", cfg)

	// Both lost their daemon-side end; their processes still run.
	tasks := procTasks(t, d, id)
	for _, tid := range []string{term, bg} {
		tk := tasks[tid]
		if tk.Status != projections.TaskDetached || tk.ExitCode != nil || !strings.Contains(tk.Error, "the daemon restarted; the process may still be running") {
			t.Errorf("task %s after the restart: status %q, exit %v, error %q; want detached, no exit code", tid, tk.Status, tk.ExitCode, tk.Error)
		}
	}
	if code := procRunTask(t, d, id, procAlive("term.pid")+" && "+procAlive("bg.pid")); code != 0 {
		t.Fatalf("the detached processes do not run (check exit %d)", code)
	}
	status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+id+"/terminals/"+term+"/ws", "")
	if status != 404 || !strings.Contains(string(body), "detached") {
		t.Errorf("attach to a detached terminal: %d %s", status, body)
	}

	// Kill ends the terminal's process in the sandbox and records it.
	status, body = procDo(t, http.MethodPost, d.url+"/api/sessions/"+id+"/tasks/"+term+"/kill", "")
	var killed projections.Task
	if status != 200 || json.Unmarshal(body, &killed) != nil || killed.Status != projections.TaskExited || !strings.Contains(killed.Error, "killed after the daemon restarted") {
		t.Fatalf("kill the detached terminal: %d %s", status, body)
	}
	if code := procRunTask(t, d, id, procAlive("term.pid")); code == 0 {
		t.Error("the killed terminal's process still runs")
	}
	if code := procRunTask(t, d, id, procAlive("bg.pid")); code != 0 {
		t.Error("killing one task ended another")
	}
	if status, body := procDo(t, http.MethodPost, d.url+"/api/sessions/"+id+"/tasks/"+term+"/kill", ""); status != 409 || !strings.Contains(string(body), "already exited") {
		t.Errorf("kill twice: %d %s", status, body)
	}

	// A second restart leaves the other detached task as it is, once; a
	// rebuild, which ends its sandbox, ends it.
	d.stop(t)
	d = procStart(t, data, "--config", cfg)
	if tk := procTasks(t, d, id)[bg]; tk.Status != projections.TaskDetached {
		t.Errorf("background task after a second restart: %+v", tk)
	}
	if status, body := procDo(t, http.MethodPost, d.url+"/api/sessions/"+id+"/environment/rebuild", ""); status != 200 {
		t.Fatalf("rebuild: %d %s", status, body)
	}
	procPoll(t, "the detached task ended with its sandbox", func() bool {
		tk := procTasks(t, d, id)[bg]
		return tk.Status == projections.TaskExited && strings.Contains(tk.Error, "the sandbox stopped while the task was detached")
	})
	var trail []string
	for _, env := range procEvents(t, d, id) {
		if strings.HasPrefix(env.Type, "session-task-") {
			trail = append(trail, env.Type)
		}
	}
	want := []string{"session-task-started", "session-task-started", "session-task-detached", "session-task-detached",
		"session-task-started", "session-task-exited", "session-task-killed", "session-task-exited",
		"session-task-started", "session-task-exited", "session-task-started", "session-task-exited",
		"session-task-exited"}
	if !slices.Equal(trail, want) {
		t.Errorf("task events\n got %q\nwant %q", trail, want)
	}
	procDelete(t, d, id)
	d.stop(t)
}
