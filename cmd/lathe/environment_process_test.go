package main

// Session environments across daemon restarts, with the real binary and the
// real containerd: a graceful restart reattaches the running sandboxes, and
// a restart after SIGKILL finishes the interrupted lifecycle and removes the
// containers no Session owns.
//
// A daemon owns its containerd namespace (at start it removes every managed
// container its journal does not claim), so these tests run in a namespace
// of their own, procNamespace (see containerdtest.Namespace).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/containerd/containerd/v2/client"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox"
	ctrd "lathe/runtime/sandbox/containerd"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

const (
	procNamespace = "lathe-test-process"
	procSettle    = 30 * time.Second
)

func procContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// procTask returns the pid and status of a container's main task, or 0 and
// "" when it has none.
func procTask(t *testing.T, cl *client.Client, id string) (uint32, client.ProcessStatus) {
	t.Helper()
	ctx := procContext(t, 10*time.Second)
	c, err := cl.LoadContainer(ctx, id)
	if err != nil {
		return 0, ""
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return 0, ""
	}
	st, err := task.Status(ctx)
	if err != nil {
		return 0, ""
	}
	return task.Pid(), st.Status
}

// procExecRunning reports whether a process exec'd into the container's
// task (the setup command) runs.
//
// Why the tests wait for it: when the daemon dies while containerd 1.6's
// runc shim is starting an exec, the shim can stay wedged for about 30 s
// (every State call on it times out, as containerd's log shows), and a
// restarted daemon's cold reconstruction blocks in the teardown of that
// sandbox, with no deadline, and every lifecycle command waits for it.
func procExecRunning(t *testing.T, cl *client.Client, id string) bool {
	t.Helper()
	ctx := procContext(t, 10*time.Second)
	c, err := cl.LoadContainer(ctx, id)
	if err != nil {
		return false
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return false
	}
	pids, err := task.Pids(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(pids, func(p client.ProcessInfo) bool { return p.Info != nil })
}

// procDo sends one request with a JSON body ("" for none).
func procDo(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func procSession(t *testing.T, d *daemonProc, id string) projections.Session {
	t.Helper()
	status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+id, "")
	if status != 200 {
		t.Fatalf("GET session %s: %d %s", id, status, body)
	}
	var ss projections.Session
	if err := json.Unmarshal(body, &ss); err != nil {
		t.Fatal(err)
	}
	return ss
}

// procWait polls the Session until cond holds.
func procWait(t *testing.T, d *daemonProc, id, what string, cond func(projections.Session) bool) projections.Session {
	t.Helper()
	var ss projections.Session
	polltest.Check(t, func() error {
		if ss = procSession(t, d, id); !cond(ss) {
			return fmt.Errorf("session %s not %s: %+v\nstderr:\n%s", id, what, ss.Environment, d.stderr.String())
		}
		return nil
	}, polltest.Within(procSettle), polltest.Every(10*time.Millisecond))
	return ss
}

func procSettled(ss projections.Session) bool {
	return ss.Environment.Owner == "" && ss.Environment.State != events.EnvPreparing
}

// procEvents returns the journal events of one aggregate.
func procEvents(t *testing.T, d *daemonProc, id string) []journal.Envelope {
	t.Helper()
	status, body := procDo(t, http.MethodGet, d.url+"/api/events/journal?aggregate="+id, "")
	if status != 200 {
		t.Fatalf("journal feed: %d %s", status, body)
	}
	var out []journal.Envelope
	for line := range bytes.Lines(body) {
		env, err := journal.DecodeEnvelope(line)
		if err != nil {
			t.Fatalf("feed line %q: %v", line, err)
		}
		out = append(out, env)
	}
	return out
}

func procTypes(evs []journal.Envelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// procTransitions reads the environment_transitions of a fresh /ws snapshot.
func procTransitions(t *testing.T, d *daemonProc) []projections.Transition {
	t.Helper()
	ctx := procContext(t, 10*time.Second)
	c, _, err := websocket.Dial(ctx, d.url+"/ws", nil)
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	for {
		_, raw, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read /ws: %v", err)
		}
		var snap projections.Snapshot
		if json.Unmarshal(raw, &snap) == nil && snap.Kind == "snapshot" {
			return snap.EnvironmentTransitions
		}
	}
}

// procCreate registers dir as a Workspace if needed and creates a Session
// with the extra JSON fields; it returns the Session's ID.
func procCreate(t *testing.T, d *daemonProc, dir, extra string) string {
	t.Helper()
	body := `{"working_dir":"` + dir + `","name":"restart","mode":{"kind":"lattice"}`
	if extra != "" {
		body += "," + extra
	}
	status, resp := procDo(t, http.MethodPost, d.url+"/api/sessions", body+"}")
	if status != 201 {
		t.Fatalf("create session: %d %s", status, resp)
	}
	return idOf(t, resp)
}

// procDelete force-deletes a Session.
func procDelete(t *testing.T, d *daemonProc, id string) {
	t.Helper()
	// procDoLong: removing a sandbox whose task a SIGKILLed daemon left
	// mid-exec waits on containerd 1.6's shim, up to ~30 s (a known delay).
	if status, body := procDoLong(t, http.MethodDelete, d.url+"/api/sessions/"+id+"?force=true", ""); status != 200 {
		t.Errorf("force delete %s: %d %s", id, status, body)
	}
}

// procStart is startDaemon for daemons that reconstruct environments before
// they listen: on a timeout it has the daemon dump its goroutines first.
func procStart(t *testing.T, data string, extra ...string) *daemonProc {
	t.Helper()
	l := startLathe(t, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0"}, extra...)...)
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := listeningLine.FindStringSubmatch(l.stderr.String()); m != nil {
			return &daemonProc{lathe: l, url: m[1], data: data}
		}
		select {
		case <-l.exited:
			t.Fatalf("lathe serve exited before listening: %v\n%s", l.err, l.stderr.String())
		case <-tick.C:
		case <-deadline.C:
			_ = l.cmd.Process.Signal(syscall.SIGQUIT)
			l.wait(5 * time.Second)
			t.Fatalf("no listening line within 20s; stderr:\n%s", l.stderr.String())
		}
	}
}

func TestEnvironmentAcrossRestarts(t *testing.T) {
	cl := containerdtest.Namespace(t, procNamespace)
	cfg := writeConfig(t, fmt.Sprintf("sandbox:\n  default_image: %q\n  containerd:\n    address: %q\n    namespace: %q\n",
		containerdtest.Image, containerdtest.Address(), procNamespace))
	// Leftovers of an earlier, crashed run are removed by the first start.

	t.Run("SIGTERMThenReattach", func(t *testing.T) {
		data := t.TempDir()
		dir, _ := filepath.EvalSymlinks(t.TempDir())
		d := procStart(t, data, "--config", cfg)
		// kept is reattached and later killed; closed is closed after the
		// restart; lost dies while the daemon is down; stale's container
		// looks built before the current sandbox security generation.
		kept, closed, lost, stale := procCreate(t, d, dir, ""), procCreate(t, d, dir, ""), procCreate(t, d, dir, ""), procCreate(t, d, dir, "")
		pids := map[string]uint32{}
		before := map[string][]string{}
		for _, id := range []string{kept, closed, lost, stale} {
			ss := procWait(t, d, id, "settled", procSettled)
			if ss.Environment.State != events.EnvReady || ss.Environment.Generation != 1 {
				t.Fatalf("before restart: %+v", ss.Environment)
			}
			pid, st := procTask(t, cl, ctrd.ContainerID(id, 1))
			if st != client.Running {
				t.Fatalf("session %s task %q, want running", id, st)
			}
			pids[id] = pid
			before[id] = procTypes(procEvents(t, d, id))
		}
		d.stop(t)

		for id, pid := range pids {
			if p, st := procTask(t, cl, ctrd.ContainerID(id, 1)); p != pid || st != client.Running {
				t.Fatalf("after SIGTERM the sandbox of %s is pid %d %q, want pid %d still running", id, p, st, pid)
			}
		}
		if err := syscall.Kill(int(pids[lost]), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		ctr, err := cl.LoadContainer(procContext(t, 10*time.Second), ctrd.ContainerID(stale, 1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ctr.SetLabels(procContext(t, 10*time.Second), map[string]string{"lathe.security": ""}); err != nil {
			t.Fatal(err)
		}
		d = procStart(t, data, "--config", cfg)

		// Reconstruction reattaches without an event (in the background,
		// once the daemon listens; the routes that need a sandbox wait).
		for _, id := range []string{kept, closed} {
			ss := procSession(t, d, id)
			if e := ss.Environment; e.State != events.EnvReady || e.Generation != 1 || e.Owner != "" {
				t.Errorf("%s after restart: %+v, want ready generation 1", id, e)
			}
			if p, st := procTask(t, cl, ctrd.ContainerID(id, 1)); p != pids[id] || st != client.Running {
				t.Errorf("%s after restart: sandbox pid %d %q, want the same pid %d", id, p, st, pids[id])
			}
			if after := procTypes(procEvents(t, d, id)); !slices.Equal(after, before[id]) {
				t.Errorf("the reattach of %s appended events: %v", id, after[len(before[id]):])
			}
		}
		// The reattached sandboxes serve the live-checkout routes.
		for _, id := range []string{kept, closed} {
			status, body := procDo(t, http.MethodGet, d.url+"/api/sessions/"+id+"/tree?path=.", "")
			if status == 404 && strings.Contains(string(body), "no route for") {
				break // this build has no file routes yet
			}
			if status != 200 {
				t.Errorf("GET /tree of reattached %s: %d %s, want 200", id, status, body)
			}
		}
		if tr := procTransitions(t, d); slices.ContainsFunc(tr, func(tr projections.Transition) bool { return tr.Session != lost && tr.Session != stale }) {
			t.Errorf("transitions after a reattach: %v", tr)
		}

		// The sandbox that died while the daemon was down, and the one of
		// an older security generation, are recreated under one
		// reconstruction bracket each, in the same generation.
		for _, id := range []string{lost, stale} {
			ss := procWait(t, d, id, "settled", procSettled)
			if e := ss.Environment; e.State != events.EnvReady || e.Generation != 1 {
				t.Errorf("session %s: %+v, want ready again", id, e)
			}
			if p, st := procTask(t, cl, ctrd.ContainerID(id, 1)); p == pids[id] || st != client.Running {
				t.Errorf("recreated sandbox of %s: pid %d %q", id, p, st)
			}
			if after := procTypes(procEvents(t, d, id)); !slices.Equal(after[len(before[id]):],
				[]string{"session-environment-changing", "session-environment-ready", "session-environment-settled"}) {
				t.Errorf("reconstruction of %s appended %v", id, after[len(before[id]):])
			}
		}
		if labels, err := ctr.Labels(procContext(t, 10*time.Second)); err != nil || labels["lathe.security"] == "" {
			t.Errorf("the rebuilt sandbox of %s has labels %v (%v)", stale, labels, err)
		}

		// The reattached sandboxes are the daemon's own: close tears one
		// down, and killing the other is noticed.
		status, body := procDo(t, http.MethodDelete, d.url+"/api/sessions/"+closed, "")
		if status != 200 {
			t.Fatalf("close: %d %s", status, body)
		}
		if _, st := procTask(t, cl, ctrd.ContainerID(closed, 1)); st != "" {
			t.Errorf("closing a reattached session left its sandbox %q", st)
		}
		if err := syscall.Kill(int(pids[kept]), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		ss := procWait(t, d, kept, "out of ready", func(ss projections.Session) bool { return ss.Environment.State != events.EnvReady })
		if e := ss.Environment; e.State != events.EnvFailed || e.Evidence == nil || e.Evidence.Error == "" {
			t.Errorf("after the reattached sandbox died: %+v, want failed with evidence", e)
		}
		for _, id := range []string{kept, closed, lost, stale} {
			procDelete(t, d, id)
		}
		if got := containerdtest.ManagedContainers(t, cl); len(got) != 0 {
			t.Errorf("containers after delete: %v", got)
		}
		d.stop(t)
	})

	t.Run("Kill9MidPrepare", func(t *testing.T) {
		data := t.TempDir()
		dir, _ := filepath.EvalSymlinks(t.TempDir())
		d := procStart(t, data, "--config", cfg)

		// A Session deleted before the crash.
		gone := procCreate(t, d, dir, "")
		if ss := procWait(t, d, gone, "settled", procSettled); ss.Environment.State != events.EnvReady {
			t.Fatalf("session to delete: %+v", ss.Environment)
		}
		procDelete(t, d, gone)

		// A Session preparing a slow setup when the daemon dies. The kill
		// waits until the setup process runs: killing the client while
		// containerd 1.6's shim is still starting an exec can wedge that
		// shim for about 30 s (see the note on procExecRunning).
		id := procCreate(t, d, dir, `"setup_command":"sleep 3","setup_approved":true`)
		ctr := ctrd.ContainerID(id, 1)
		polltest.Until(t, "a setup process in "+ctr, func() bool { return procExecRunning(t, cl, ctr) }, polltest.Within(procSettle))
		if ss := procSession(t, d, id); ss.Environment.State != events.EnvPreparing {
			t.Fatalf("not preparing when killed: %+v", ss.Environment)
		}
		d.kill(t)

		// The deleted Session's teardown "was lost": its container is back,
		// labelled as this daemon's (its data dir's identity).
		owner, err := os.ReadFile(filepath.Join(data, "daemon-id"))
		if err != nil {
			t.Fatal(err)
		}
		drv, err := ctrd.New(procContext(t, 10*time.Second), ctrd.Options{Address: containerdtest.Address(), Namespace: procNamespace, DefaultImage: containerdtest.Image, Owner: strings.TrimSpace(string(owner))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := drv.Prepare(procContext(t, 30*time.Second), sandbox.Spec{SessionID: gone, Generation: 1, WorkingDir: dir}); err != nil {
			t.Fatalf("plant orphan: %v", err)
		}
		drv.Close()
		if got := containerdtest.ManagedContainers(t, cl); !slices.Contains(got, ctrd.ContainerID(gone, 1)) {
			t.Fatalf("orphan not planted: %v", got)
		}

		t0 := time.Now()
		d = procStart(t, data, "--config", cfg)
		// Reconstruction runs once the daemon listens: until it takes the
		// boundary over, the Session shows the prepare the crash cut off.
		ss := procWait(t, d, id, "taken over by reconstruction", func(ss projections.Session) bool {
			return ss.Environment.Owner != events.OwnerPrepare
		})
		if ss.Environment.Owner != events.OwnerReconstruct || ss.Environment.State != events.EnvPreparing {
			t.Errorf("right after restart: %+v, want preparing under reconstruction", ss.Environment)
		} else if tr := procTransitions(t, d); !slices.Contains(tr, projections.Transition{Session: id, Generation: 1}) {
			t.Errorf("snapshot during reconstruction: transitions %v", tr)
		}
		ss = procWait(t, d, id, "settled", procSettled)
		t.Logf("reconstruction settled %s in %v", ss.Environment.State, time.Since(t0))
		if s := ss.Environment.State; s != events.EnvReady && s != events.EnvFailed {
			t.Errorf("after reconstruction: %+v, want ready or failed", ss.Environment)
		}
		if ss.Environment.State == events.EnvReady && !ss.Environment.SetupRan {
			t.Errorf("ready without the approved setup having run: %+v", ss.Environment)
		}
		types := procTypes(procEvents(t, d, id))
		settled := 0
		for _, typ := range types {
			if typ == "session-environment-settled" {
				settled++
			}
		}
		if settled != 1 || types[len(types)-1] != "session-environment-settled" {
			t.Errorf("events %v, want exactly one settlement, last", types)
		}
		want := []string{ctr}
		if ss.Environment.State == events.EnvFailed {
			want = nil
		}
		// Orphans are removed in the background, so that a wedged runtime
		// never holds up the start.
		polltest.Check(t, func() error {
			if got := containerdtest.ManagedContainers(t, cl); !slices.Equal(got, want) {
				return fmt.Errorf("containers after reconstruction %v, want %v (the deleted session's orphan must go)", got, want)
			}
			return nil
		}, polltest.Within(time.Until(t0.Add(procSettle))))
		if tr := procTransitions(t, d); len(tr) != 0 {
			t.Errorf("transitions after settlement: %v", tr)
		}
		procDelete(t, d, id)
		if got := containerdtest.ManagedContainers(t, cl); len(got) != 0 {
			t.Errorf("containers after delete: %v", got)
		}
		d.stop(t)
	})
}
