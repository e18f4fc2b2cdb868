package daemon

// Environment lifecycle tests against the real containerd: a whole daemon
// (bbolt journal, projections, commands, HTTP and /ws) whose Sessions get
// real sandboxes, in this package's own containerd namespace (envNamespace;
// see containerdtest.Namespace for why each test package has its own).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/polltest"
	ctrd "lathe/runtime/sandbox/containerd"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

const (
	// envImage is the sandbox image the daemon defaults to.
	envImage = containerdtest.Image
	// envNamespace is this package's own containerd namespace.
	envNamespace = "lathe-test-daemon"
	// envSettle bounds how long an environment may take to settle.
	envSettle = 30 * time.Second
)

// envKill kills the main task of a Session generation's container with
// SIGKILL, behind the daemon's back.
func envKill(t *testing.T, cl *client.Client, sessionID string, gen uint64) {
	t.Helper()
	if err := containerdtest.Kill(testContext(t, 10*time.Second), cl, ctrd.ContainerID(sessionID, gen)); err != nil {
		t.Fatal(err)
	}
}

// ---------------------------------------------------------------------------
// daemon

// newSandboxDaemon is newTestDaemon with real sandboxes: containerd at
// containerdtest.Address() in namespace ns, the sandbox image as default.
func newSandboxDaemon(t testing.TB, ns string, mutate func(*config.Config), opts ...Option) (*Daemon, *httptest.Server) {
	t.Helper()
	return startDaemon(t, 30*time.Second, func(cfg *config.Config) {
		cfg.Sandbox.DefaultImage = containerdtest.Image
		cfg.Sandbox.Containerd.Address = containerdtest.Address()
		cfg.Sandbox.Containerd.Namespace = ns
		if mutate != nil {
			mutate(cfg)
		}
	}, opts...)
}

// sandboxDaemon readies containerd namespace ns for the test or benchmark
// (containerdtest.Namespace) and starts a daemon with real sandboxes in it. It
// returns the namespace's client too.
func sandboxDaemon(t testing.TB, ns string) (*client.Client, *Daemon, *httptest.Server) {
	t.Helper()
	cl := containerdtest.Namespace(t, ns)
	d, srv := newSandboxDaemon(t, ns, nil)
	return cl, d, srv
}

// sessionRig is one test's view of a daemon: its own Workspace, and the
// Sessions it creates, force-deleted when the test ends.
type sessionRig struct {
	srv  *httptest.Server
	cl   *client.Client // when set, deleting a Session must leave none of its containers
	name string         // the name of the Sessions it creates
	ws   string         // Workspace ID
	dir  string         // Workspace path
}

func newSessionRig(t testing.TB, srv *httptest.Server, cl *client.Client, name string) sessionRig {
	t.Helper()
	dir := realDir(t, t.TempDir())
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	return sessionRig{srv: srv, cl: cl, name: name, ws: ws, dir: dir}
}

// create creates a Session with the extra JSON fields (`"k":v,...` or "";
// agentMode unless they name a mode) and deletes it with force=true when
// the test ends.
func (r *sessionRig) create(t testing.TB, extra string) projections.Session {
	t.Helper()
	body := `{"name":"` + r.name + `"`
	if !strings.Contains(extra, `"mode":`) {
		body += "," + agentMode
	}
	if extra != "" {
		body += "," + extra
	}
	resp := call(t, r.srv, post, "/api/workspaces/"+r.ws+"/sessions", body+"}")
	if resp.status != 201 {
		t.Fatalf("create session: %d %s", resp.status, resp.body)
	}
	ss := decodeSession(t, resp.body)
	t.Cleanup(func() {
		req, err := http.NewRequest(del, r.srv.URL+"/api/sessions/"+ss.ID+"?force=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp := sendWithin(t, r.srv.Client(), req, time.Minute); resp.status != 200 && resp.status != 404 {
			t.Errorf("cleanup: delete session %s: %d %s", ss.ID, resp.status, resp.body)
		}
		if r.cl != nil {
			if left := containerdtest.SessionContainers(t, r.cl, ss.ID); len(left) != 0 {
				t.Errorf("cleanup: containers %v remain after deleting session %s", left, ss.ID)
			}
		}
	})
	return ss
}

func decodeSession(t testing.TB, body []byte) projections.Session {
	t.Helper()
	var ss projections.Session
	if err := json.Unmarshal(body, &ss); err != nil || ss.ID == "" {
		t.Fatalf("not a session (%v): %s", err, body)
	}
	return ss
}

// do sends a request and returns the reply.
func (r *sessionRig) do(t testing.TB, method, path, body string) reply {
	t.Helper()
	return call(t, r.srv, method, path, body)
}

// lifecycle sends a synchronous lifecycle request, requires 200 and
// returns the Session it answers with.
func (r *sessionRig) lifecycle(t testing.TB, method, path, body string) projections.Session {
	t.Helper()
	resp := r.do(t, method, path, body)
	if resp.status != 200 {
		t.Fatalf("%s %s %s: %d %s", method, path, body, resp.status, resp.body)
	}
	return decodeSession(t, resp.body)
}

// events returns the journal event types of one aggregate.
func (r *sessionRig) events(t testing.TB, id string) []string {
	t.Helper()
	resp := r.do(t, get, "/api/events/journal?aggregate="+id, "")
	if resp.status != 200 {
		t.Fatalf("journal feed: %d %s", resp.status, resp.body)
	}
	var types []string
	for _, env := range feed(t, resp.body) {
		types = append(types, env.Type)
	}
	return types
}

// envRig is one test's view of a sandbox daemon: a sessionRig that checks
// no container outlives a deleted Session, and its own /ws connection.
type envRig struct {
	sessionRig
	log *envFrameLog
}

func newEnvRig(t testing.TB, srv *httptest.Server, cl *client.Client) *envRig {
	t.Helper()
	return &envRig{sessionRig: newSessionRig(t, srv, cl, "env"), log: watchEnvFrames(t, srv)}
}

// get reads the Session record.
func (r *envRig) get(t testing.TB, id string) projections.Session {
	t.Helper()
	resp := call(t, r.srv, get, "/api/sessions/"+id, "")
	if resp.status != 200 {
		t.Fatalf("GET session %s: %d %s", id, resp.status, resp.body)
	}
	return decodeSession(t, resp.body)
}

// wait polls the Session until cond holds, failing after envSettle.
func (r *envRig) wait(t testing.TB, id, what string, cond func(projections.Session) bool) projections.Session {
	t.Helper()
	var ss projections.Session
	polltest.Check(t, func() error {
		if ss = r.get(t, id); !cond(ss) {
			return fmt.Errorf("session %s not %s: environment %+v", id, what, ss.Environment)
		}
		return nil
	}, polltest.Within(envSettle), polltest.Every(10*time.Millisecond))
	return ss
}

// settled waits until no lifecycle owner holds the Session's boundary and
// it is not preparing.
func (r *envRig) settled(t testing.TB, id string) projections.Session {
	t.Helper()
	return r.wait(t, id, "settled", func(ss projections.Session) bool {
		return ss.Environment.Owner == "" && ss.Environment.State != events.EnvPreparing
	})
}

// ready waits until the Session settles and requires it Ready.
func (r *envRig) ready(t testing.TB, id string) projections.Session {
	t.Helper()
	ss := r.settled(t, id)
	if ss.Environment.State != events.EnvReady {
		t.Fatalf("session %s settled %s, want ready: %+v", id, ss.Environment.State, ss.Environment)
	}
	return ss
}

// containers lists the Session's containers.
func (r *envRig) containers(t testing.TB, id string) []string {
	t.Helper()
	return containerdtest.SessionContainers(t, r.cl, id)
}

// liveStatus is the status of a live-checkout route of the Session, or 0
// when this build has no such route yet.
func (r *envRig) liveStatus(t *testing.T, id string) int {
	t.Helper()
	resp := r.do(t, get, "/api/sessions/"+id+"/tree?path=.", "")
	if resp.status == 404 && strings.Contains(string(resp.body), "no route for") {
		return 0
	}
	return resp.status
}

// ---------------------------------------------------------------------------
// /ws

// envFrame is one /ws frame about a Session: an environment bracket frame,
// or an event frame (Kind "event") with the record it carries.
type envFrame struct {
	Kind       string
	Session    string
	Generation *uint64
	Type       string
	Record     *projections.Session
	Raw        string
}

// label is the frame's kind, or "event:<type>" for an event frame.
func (f envFrame) label() string {
	if f.Kind == "event" {
		return "event:" + f.Type
	}
	return f.Kind
}

// envFrameLog collects every frame of one /ws connection.
type envFrameLog struct {
	snapshot projections.Snapshot
	mu       sync.Mutex
	frames   []envFrame
	err      error
	changed  chan struct{} // closed and replaced on each frame
}

// watchEnvFrames connects to /ws, reads ready and the snapshot, then
// collects frames in the background until the test ends.
func watchEnvFrames(t testing.TB, srv *httptest.Server) *envFrameLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dctx := testContext(t, 10*time.Second)
	c := dialWS(t, dctx, srv, nil)
	expectFrame(t, dctx, c, "ready")
	l := &envFrameLog{changed: make(chan struct{})}
	if err := json.Unmarshal(expectFrame(t, dctx, c, "snapshot"), &l.snapshot); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			_, raw, err := c.Read(ctx)
			l.mu.Lock()
			if err != nil {
				l.err = err
			} else {
				l.frames = append(l.frames, parseEnvFrame(raw))
			}
			close(l.changed)
			l.changed = make(chan struct{})
			l.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return l
}

func parseEnvFrame(raw []byte) envFrame {
	var head struct {
		Kind        string          `json:"kind"`
		Session     json.RawMessage `json:"session"`
		Generation  *uint64         `json:"generation"`
		Type        string          `json:"type"`
		AggregateID string          `json:"aggregate_id"`
	}
	_ = json.Unmarshal(raw, &head)
	f := envFrame{Kind: head.Kind, Generation: head.Generation, Type: head.Type, Raw: string(raw)}
	if head.Kind == "event" {
		f.Session = head.AggregateID
		if len(head.Session) > 0 && string(head.Session) != "null" {
			var ss projections.Session
			if json.Unmarshal(head.Session, &ss) == nil {
				f.Record = &ss
			}
		}
	} else {
		_ = json.Unmarshal(head.Session, &f.Session)
	}
	return f
}

// of returns the frames about Session id so far.
func (l *envFrameLog) of(id string) []envFrame {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []envFrame
	for _, f := range l.frames {
		if f.Session == id {
			out = append(out, f)
		}
	}
	return out
}

// waitFor waits until cond holds for the frames about Session id and
// returns them.
func (l *envFrameLog) waitFor(t *testing.T, id, what string, cond func([]envFrame) bool) []envFrame {
	t.Helper()
	deadline := time.NewTimer(envSettle)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		changed, err := l.changed, l.err
		l.mu.Unlock()
		fs := l.of(id)
		if cond(fs) {
			return fs
		}
		if err != nil {
			t.Fatalf("/ws closed (%v) before %s; frames of %s: %v", err, what, id, envLabels(fs))
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %s within %v; frames of %s: %v", what, envSettle, id, envLabels(fs))
		}
	}
}

// waitLabel waits for a frame with the label among those after the first
// skip frames of Session id, and returns the frames from skip on.
func (l *envFrameLog) waitLabel(t *testing.T, id string, skip int, label string) []envFrame {
	t.Helper()
	fs := l.waitFor(t, id, label+" frame", func(fs []envFrame) bool {
		return len(fs) > skip && slices.ContainsFunc(fs[skip:], func(f envFrame) bool { return f.label() == label })
	})
	return fs[skip:]
}

func envLabels(fs []envFrame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.label()
		if f.Generation != nil {
			out[i] += fmt.Sprintf("{generation:%d}", *f.Generation)
		}
	}
	return out
}

// brackets keeps only the bracket frames, with their generation.
func envBrackets(fs []envFrame) []string {
	var out []string
	for _, l := range envLabels(fs) {
		if strings.HasPrefix(l, "session-environment-") {
			out = append(out, l)
		}
	}
	return out
}

// envSnapshotTransitions dials /ws anew and returns the snapshot's
// environment_transitions of Session id.
func envSnapshotTransitions(t *testing.T, srv *httptest.Server, id string) []projections.Transition {
	t.Helper()
	snap := envSnapshot(t, srv) // ways_test.go
	if snap.EnvironmentTransitions == nil {
		t.Fatalf("snapshot without an environment_transitions array")
	}
	var out []projections.Transition
	for _, tr := range snap.EnvironmentTransitions {
		if tr.Session == id {
			out = append(out, tr)
		}
	}
	return out
}

// ---------------------------------------------------------------------------

// TestEnvironmentLifecycle runs the environment lifecycle of Sessions on one
// daemon with real sandboxes, each subtest with its own Sessions.
func TestEnvironmentLifecycle(t *testing.T) {
	cl, _, srv := sandboxDaemon(t, envNamespace)
	start := time.Now()
	t.Cleanup(func() { t.Logf("lifecycle subtests took %v", time.Since(start)) })

	t.Run("group", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    func(t *testing.T, r *envRig)
		}{
			{"CreateReachesReady", testEnvCreateReachesReady},
			{"OpenBracketInSnapshotAndConcurrentChanges", testEnvOpenBracket},
			{"SetupAwaitsApproval", testEnvSetupAwaitsApproval},
			{"SetupApprovedRuns", testEnvSetupApprovedRuns},
			{"SetupVetoedByReview", testEnvSetupVetoed},
			{"SetupFails", testEnvSetupFails},
			{"ChangeValidation", testEnvChangeValidation},
			{"ChangeAndRebuild", testEnvChangeAndRebuild},
			{"ChangeToAMissingImage", testEnvChangeToMissingImage},
			{"ClosedSessionRefusesChanges", testEnvClosedRefusesChanges},
			{"ConfirmRuntimeCleanup", testEnvConfirmRuntimeCleanup},
			{"CloseAndReopen", testEnvCloseAndReopen},
			{"ForceDelete", testEnvForceDelete},
			{"SandboxKilledBehindTheDaemon", testEnvSandboxKilled},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.f(t, newEnvRig(t, srv, cl))
			})
		}
	})
}

func testEnvCreateReachesReady(t *testing.T, r *envRig) {
	t0 := time.Now()
	created := r.create(t, "")
	if e := created.Environment; e.State != events.EnvPreparing || e.Owner != events.OwnerPrepare || e.Generation != 1 || e.Image != envImage {
		t.Errorf("201 environment = %+v, want preparing (owner prepare) generation 1 of %s", e, envImage)
	}
	ss := r.ready(t, created.ID)
	t.Logf("create to ready: %v", time.Since(t0))
	if e := ss.Environment; e.Generation != 1 || e.Evidence != nil || e.SetupRan || e.SetupSkipped != "" {
		t.Errorf("ready environment = %+v", e)
	}
	if got := r.containers(t, ss.ID); !slices.Equal(got, []string{ctrd.ContainerID(ss.ID, 1)}) {
		t.Errorf("containers = %v, want exactly generation 1", got)
	}
	fs := r.log.waitLabel(t, ss.ID, 0, "event:session-environment-settled")
	want := []string{"event:session-created", "session-environment-changing{generation:1}", "event:session-environment-changing",
		"event:session-environment-ready", "session-environment-settled", "event:session-environment-settled"}
	if got := envLabels(fs); !slices.Equal(got, want) {
		t.Errorf("frames = %v\nwant     %v", got, want)
	}
	for _, f := range fs {
		if f.Kind == "session-environment-settled" && f.Generation != nil {
			t.Errorf("settled frame carries a generation: %s", f.Raw)
		}
		if f.Type == "session-environment-ready" && (f.Record == nil || f.Record.Environment.State != events.EnvReady) {
			t.Errorf("ready event frame's record is not ready: %s", f.Raw)
		}
	}
	if got := envSnapshotTransitions(t, r.srv, ss.ID); len(got) != 0 {
		t.Errorf("snapshot after settlement lists %v", got)
	}
	if st := r.liveStatus(t, ss.ID); st != 0 && st != 200 {
		t.Errorf("a live-checkout route answers %d on a ready session, want 200", st)
	}
}

// testEnvOpenBracket holds brackets open with a slow approved setup: the /ws
// snapshot lists them; an operator's change supersedes the create's
// background preparation in the same bracket, and a second operator change
// is refused while one runs.
func testEnvOpenBracket(t *testing.T, r *envRig) {
	created := r.create(t, `"setup_command":"sleep 30","setup_approved":true`)
	id := created.ID
	// The create's bracket stays open for the whole setup.
	if got := envSnapshotTransitions(t, r.srv, id); !slices.Equal(got, []projections.Transition{{Session: id, Generation: 1}}) {
		t.Errorf("snapshot during preparation: transitions %v, want {%s 1}", got, id)
	}
	if st := r.liveStatus(t, id); st != 0 && st != 409 {
		t.Errorf("live-checkout route while preparing: %d, want 409", st)
	}
	// The first review right after create: the new plan supersedes the
	// running preparation (its setup is stopped and its sandbox removed)
	// and is prepared in the same bracket.
	ss := r.lifecycle(t, put, "/api/sessions/"+id+"/environment", `{"setup_reviewed":true,"setup_command":"sleep 1","setup_approved":true}`)
	if e := ss.Environment; e.State != events.EnvReady || e.Generation != 2 || !e.SetupRan || e.Owner != "" {
		t.Errorf("PUT during the create's preparation answered %+v, want ready generation 2 with its setup run", e)
	}
	wantEvents := []string{"session-created", "session-environment-changing", "session-environment-changing", "session-environment-planned",
		"session-environment-changing", "session-environment-ready", "session-environment-settled"}
	if got := r.events(t, id); !slices.Equal(got, wantEvents) {
		t.Errorf("events = %v\nwant     %v (one bracket, one settlement)", got, wantEvents)
	}
	if got := r.containers(t, id); !slices.Equal(got, []string{ctrd.ContainerID(id, 2)}) {
		t.Errorf("containers after superseding = %v, want only generation 2", got)
	}
	if got := envSnapshotTransitions(t, r.srv, id); len(got) != 0 {
		t.Errorf("snapshot after the superseding PUT: transitions %v", got)
	}

	// A rebuild supersedes the create's preparation the same way.
	second := r.create(t, `"setup_command":"sleep 3","setup_approved":true`).ID
	ss = r.lifecycle(t, post, "/api/sessions/"+second+"/environment/rebuild", "")
	if e := ss.Environment; e.State != events.EnvReady || e.Generation != 2 || !e.SetupRan {
		t.Errorf("rebuild during the create's preparation answered %+v, want ready generation 2", e)
	}
	if got := r.events(t, second); !slices.Equal(got, wantEvents) {
		t.Errorf("rebuild events = %v\nwant           %v", got, wantEvents)
	}
	if got := r.containers(t, second); !slices.Equal(got, []string{ctrd.ContainerID(second, 2)}) {
		t.Errorf("containers after the superseding rebuild = %v, want only generation 2", got)
	}

	// A slow PUT holds its bracket: a second PUT or a rebuild is refused.
	done := make(chan reply, 1)
	go func() {
		done <- call(t, r.srv, put, "/api/sessions/"+id+"/environment",
			`{"setup_reviewed":true,"setup_command":"sleep 2","setup_approved":true}`)
	}()
	r.wait(t, id, "owned by the change", func(ss projections.Session) bool { return ss.Environment.Owner == events.OwnerChange })
	if got := envSnapshotTransitions(t, r.srv, id); len(got) != 1 || got[0].Generation < 2 || got[0].Generation > 3 {
		t.Errorf("snapshot during PUT: transitions %v, want one for generation 2 or 3", got)
	}
	resp := r.do(t, put, "/api/sessions/"+id+"/environment", `{"setup_reviewed":true}`)
	if resp.status != 409 {
		t.Errorf("concurrent PUT: %d %s, want 409", resp.status, resp.body)
	} else {
		assertErrorBody(t, resp, "another environment change")
	}
	if resp := r.do(t, post, "/api/sessions/"+id+"/environment/rebuild", ""); resp.status != 409 {
		t.Errorf("rebuild during PUT: %d %s, want 409", resp.status, resp.body)
	}
	first := <-done
	if first.status != 200 {
		t.Fatalf("slow PUT: %d %s", first.status, first.body)
	}
	ss = decodeSession(t, first.body)
	if e := ss.Environment; e.State != events.EnvReady || e.Generation != 3 || !e.SetupRan || e.Owner != "" {
		t.Errorf("slow PUT answered %+v, want ready generation 3 with its setup run", e)
	}
	if got := envSnapshotTransitions(t, r.srv, id); len(got) != 0 {
		t.Errorf("snapshot after the PUT: transitions %v", got)
	}
	if got := r.containers(t, id); !slices.Equal(got, []string{ctrd.ContainerID(id, 3)}) {
		t.Errorf("containers after PUT = %v, want only generation 3", got)
	}
}

func testEnvSetupAwaitsApproval(t *testing.T, r *envRig) {
	created := r.create(t, `"setup_command":"echo approved > approved.txt"`)
	id := created.ID
	if e := created.Environment; e.State != events.EnvAwaitingApproval || e.Owner != "" || e.SetupApproved || e.SetupReviewed {
		t.Fatalf("unreviewed setup: environment %+v, want awaiting_approval", e)
	}
	// It stays there: nothing prepares an unreviewed environment.
	if ss := r.get(t, id); ss.Environment.State != events.EnvAwaitingApproval || ss.Environment.Owner != "" {
		t.Errorf("environment moved to %+v", ss.Environment)
	}
	if got := r.containers(t, id); len(got) != 0 {
		t.Errorf("containers %v for an environment awaiting approval", got)
	}
	if got := r.events(t, id); !slices.Equal(got, []string{"session-created"}) {
		t.Errorf("events %v, want only session-created", got)
	}
	if st := r.liveStatus(t, id); st != 0 && st != 409 {
		t.Errorf("live-checkout route while awaiting approval: %d, want 409", st)
	}
	resp := r.do(t, post, "/api/sessions/"+id+"/environment/rebuild", "")
	if resp.status != 409 {
		t.Errorf("rebuild awaiting approval: %d %s, want 409", resp.status, resp.body)
	} else {
		assertErrorBody(t, resp, "awaits review")
	}
	// The review approves the exact command: the next generation runs it.
	ss := r.lifecycle(t, put, "/api/sessions/"+id+"/environment",
		`{"setup_reviewed":true,"setup_command":"echo approved > approved.txt","setup_approved":true}`)
	if e := ss.Environment; e.State != events.EnvReady || e.Generation != 2 || !e.SetupRan || !e.SetupApproved || !e.SetupReviewed {
		t.Errorf("approved by review: %+v", e)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "approved.txt")); err != nil || string(b) != "approved\n" {
		t.Errorf("approved.txt = %q, %v", b, err)
	}
}

func testEnvSetupApprovedRuns(t *testing.T, r *envRig) {
	const setup = "echo hi > marker.txt; echo to stdout; echo to stderr >&2"
	created := r.create(t, `"setup_command":"`+setup+`","setup_approved":true`)
	if created.Environment.State != events.EnvPreparing {
		t.Errorf("approved setup at create: %+v, want preparing", created.Environment)
	}
	ss := r.ready(t, created.ID)
	if e := ss.Environment; !e.SetupRan || e.SetupSkipped != "" || e.SetupCommand != setup || !e.SetupApproved {
		t.Errorf("environment %+v, want setup_ran", e)
	}
	// The setup's output is kept on success too, with the reason in words.
	bothStreams := func(out string) bool {
		return strings.Contains(out, "to stdout\n") && strings.Contains(out, "to stderr\n")
	}
	if e := ss.Environment; !bothStreams(e.SetupOutput) || e.Reason != projections.ReasonCreated {
		t.Errorf("setup_output %q, reason %q; want both streams and %q", e.SetupOutput, e.Reason, projections.ReasonCreated)
	}
	ss = r.lifecycle(t, post, "/api/sessions/"+created.ID+"/environment/rebuild", "")
	if e := ss.Environment; e.Reason != projections.ReasonRebuilt || !bothStreams(e.SetupOutput) || e.Generation != 2 {
		t.Errorf("after a rebuild: reason %q, setup_output %q, generation %d", e.Reason, e.SetupOutput, e.Generation)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "marker.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("marker.txt in the Workspace = %q, %v; want the setup's output", b, err)
	}
}

func testEnvSetupVetoed(t *testing.T, r *envRig) {
	created := r.create(t, `"setup_command":"touch vetoed.txt","setup_reviewed":true,"setup_approved":false`)
	ss := r.ready(t, created.ID)
	if e := ss.Environment; e.SetupRan || e.SetupSkipped == "" || e.SetupApproved || !e.SetupReviewed || e.SetupCommand != "touch vetoed.txt" {
		t.Errorf("vetoed setup: environment %+v, want ready with setup_skipped", e)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "vetoed.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the vetoed command ran: %v", err)
	}
}

func testEnvSetupFails(t *testing.T, r *envRig) {
	created := r.create(t, `"setup_command":"echo boom; exit 3","setup_approved":true`)
	ss := r.settled(t, created.ID)
	e := ss.Environment
	if e.State != events.EnvFailed || e.Evidence == nil {
		t.Fatalf("failing setup: environment %+v, want failed with evidence", e)
	}
	if e.Evidence.ExitCode == nil || *e.Evidence.ExitCode != 3 {
		t.Errorf("evidence exit code %v, want 3", e.Evidence.ExitCode)
	}
	if !strings.Contains(e.Evidence.OutputTail, "boom") || !strings.Contains(e.Evidence.Error, "3") || e.SetupOutput != e.Evidence.OutputTail {
		t.Errorf("evidence %+v, want the output tail with boom and an error naming code 3", *e.Evidence)
	}
	if got := r.containers(t, ss.ID); len(got) != 0 {
		t.Errorf("containers %v remain after a failed setup", got)
	}
	if st := r.liveStatus(t, ss.ID); st != 0 && st != 409 {
		t.Errorf("live-checkout route on a failed environment: %d, want 409", st)
	}
	fs := r.log.waitLabel(t, ss.ID, 0, "event:session-environment-settled")
	if got, want := envBrackets(fs), []string{"session-environment-changing{generation:1}", "session-environment-settled"}; !slices.Equal(got, want) {
		t.Errorf("bracket frames %v, want %v", got, want)
	}
	// The failure is an outcome, not a refusal: a rebuild answers 200 and
	// fails again with fresh evidence.
	ss = r.lifecycle(t, post, "/api/sessions/"+ss.ID+"/environment/rebuild", "")
	if e := ss.Environment; e.State != events.EnvFailed || e.Generation != 2 || e.Evidence == nil || e.Evidence.ExitCode == nil || *e.Evidence.ExitCode != 3 {
		t.Errorf("rebuild of the failing plan: %+v", e)
	}
}

func testEnvChangeValidation(t *testing.T, r *envRig) {
	created := r.create(t, `"setup_command":"make deps"`) // awaits approval: no sandbox needed
	id := created.ID
	path := "/api/sessions/" + id + "/environment"
	for _, tc := range []struct{ name, body, err string }{
		{"no body", "", ""},
		{"empty object", `{}`, "setup_reviewed must be true"},
		{"not reviewed", `{"setup_reviewed":false}`, "setup_reviewed must be true"},
		{"reviewed null", `{"setup_reviewed":null}`, "setup_reviewed must be true"},
		{"command without approval", `{"setup_reviewed":true,"setup_command":"make deps"}`, "setup_approved must be stated"},
		{"reviewed as string", `{"setup_reviewed":"true"}`, ""},
		{"approved as string", `{"setup_reviewed":true,"setup_command":"x","setup_approved":"yes"}`, ""},
		{"image as number", `{"setup_reviewed":true,"image":5}`, ""},
		{"empty image", `{"setup_reviewed":true,"image":""}`, "image"},
		{"image with spaces", `{"setup_reviewed":true,"image":"a b"}`, "image"},
		{"command with NUL", `{"setup_reviewed":true,"setup_command":"a\u0000b","setup_approved":true}`, "NUL"},
		{"unknown field", `{"setup_reviewed":true,"sandbox":"x"}`, ""},
		{"not JSON", `setup_reviewed=true`, ""},
		{"array", `[true]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := r.do(t, put, path, tc.body)
			if resp.status != 400 {
				t.Fatalf("PUT %s: %d %s, want 400", tc.body, resp.status, resp.body)
			}
			var body struct{ Error string }
			if json.Unmarshal(resp.body, &body) != nil || body.Error == "" {
				t.Errorf("400 without an error message: %s", resp.body)
			}
			if tc.err != "" && !strings.Contains(body.Error, tc.err) {
				t.Errorf("error %q, want it to mention %q", body.Error, tc.err)
			}
		})
	}
	if got := r.events(t, id); !slices.Equal(got, []string{"session-created"}) {
		t.Errorf("rejected PUTs appended events: %v", got)
	}
	// An unknown Session is 404 once the consent is well formed; malformed
	// consent is 400 whatever the Session.
	resp := r.do(t, put, "/api/sessions/"+unknownID+"/environment", `{"setup_reviewed":true}`)
	if resp.status != 404 {
		t.Errorf("PUT on an unknown session: %d %s, want 404", resp.status, resp.body)
	}
	if resp := r.do(t, put, "/api/sessions/"+unknownID+"/environment", `{}`); resp.status != 400 {
		t.Errorf("malformed PUT on an unknown session: %d %s, want 400", resp.status, resp.body)
	}
	if resp := r.do(t, post, "/api/sessions/"+unknownID+"/environment/rebuild", ""); resp.status != 404 {
		t.Errorf("rebuild of an unknown session: %d %s, want 404", resp.status, resp.body)
	}
}

func testEnvChangeAndRebuild(t *testing.T, r *envRig) {
	id := r.create(t, "").ID
	r.ready(t, id)
	base := len(r.log.waitLabel(t, id, 0, "event:session-environment-settled"))
	path := "/api/sessions/" + id + "/environment"

	// Plain change: generation 2, answered once ready.
	ss := r.lifecycle(t, put, path, `{"setup_reviewed":true}`)
	if e := ss.Environment; e.State != events.EnvReady || e.Generation != 2 || e.Owner != "" || e.Image != envImage || e.SetupReviewed != true {
		t.Errorf("PUT answered %+v, want ready generation 2", e)
	}
	if got := r.containers(t, id); !slices.Equal(got, []string{ctrd.ContainerID(id, 2)}) {
		t.Errorf("containers after PUT = %v, want only generation 2", got)
	}
	fs := r.log.waitLabel(t, id, base, "event:session-environment-settled")
	if got, want := envBrackets(fs), []string{"session-environment-changing{generation:1}", "session-environment-changing{generation:2}", "session-environment-settled"}; !slices.Equal(got, want) {
		t.Errorf("PUT bracket frames %v, want %v", got, want)
	}
	base += len(fs)

	// An approved setup runs in the new generation, in the Workspace.
	ss = r.lifecycle(t, put, path, `{"setup_reviewed":true,"image":"`+envImage+`","setup_command":"echo put > put.txt","setup_approved":true}`)
	if e := ss.Environment; e.State != events.EnvReady || e.Generation != 3 || !e.SetupRan {
		t.Errorf("PUT with approved setup: %+v", e)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "put.txt")); err != nil || string(b) != "put\n" {
		t.Errorf("put.txt = %q, %v", b, err)
	}
	// A reviewed veto keeps the command text without running it.
	if err := os.Remove(filepath.Join(r.dir, "put.txt")); err != nil {
		t.Fatal(err)
	}
	ss = r.lifecycle(t, put, path, `{"setup_reviewed":true,"setup_command":"echo put > put.txt","setup_approved":false}`)
	if e := ss.Environment; e.State != events.EnvReady || e.Generation != 4 || e.SetupRan || e.SetupSkipped == "" || e.SetupApproved {
		t.Errorf("PUT with a vetoed setup: %+v", e)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "put.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("vetoed setup ran: %v", err)
	}

	// Rebuild reproduces the persisted plan as the next generation.
	ss = r.lifecycle(t, post, path+"/rebuild", "")
	if e := ss.Environment; e.State != events.EnvReady || e.Generation != 5 || e.SetupCommand != "echo put > put.txt" || e.SetupApproved || e.SetupSkipped == "" {
		t.Errorf("rebuild answered %+v, want ready generation 5 with the vetoed plan", e)
	}
	if got := r.containers(t, id); !slices.Equal(got, []string{ctrd.ContainerID(id, 5)}) {
		t.Errorf("containers after rebuild = %v, want only generation 5", got)
	}
	fs = r.log.waitFor(t, id, "three more settlements", func(fs []envFrame) bool {
		n := 0
		for _, f := range fs[base:] {
			if f.Kind == "session-environment-settled" {
				n++
			}
		}
		return n == 3
	})
	want := []string{}
	for gen := 2; gen <= 4; gen++ {
		want = append(want, fmt.Sprintf("session-environment-changing{generation:%d}", gen),
			fmt.Sprintf("session-environment-changing{generation:%d}", gen+1), "session-environment-settled")
	}
	if got := envBrackets(fs[base:]); !slices.Equal(got, want) {
		t.Errorf("bracket frames of two PUTs and a rebuild:\n%v\nwant %v", got, want)
	}
}

func testEnvChangeToMissingImage(t *testing.T, r *envRig) {
	id := r.create(t, "").ID
	r.ready(t, id)
	const missing = "lathe.invalid/no-such-image:1"
	t0 := time.Now()
	ss := r.lifecycle(t, put, "/api/sessions/"+id+"/environment", `{"setup_reviewed":true,"image":"`+missing+`"}`)
	t.Logf("missing image failed in %v", time.Since(t0))
	e := ss.Environment
	if e.State != events.EnvFailed || e.Generation != 2 || e.Image != missing || e.Owner != "" || e.Evidence == nil {
		t.Fatalf("PUT with a missing image: %+v, want failed generation 2 with evidence", e)
	}
	if !strings.Contains(e.Evidence.Error, missing) || !strings.Contains(e.Evidence.Error, "sandbox image unavailable") {
		t.Errorf("evidence error %q, want it to name the image as unavailable", e.Evidence.Error)
	}
	if got := r.containers(t, id); len(got) != 0 {
		t.Errorf("containers %v after a failed change (the old generation must be gone too)", got)
	}
	if st := r.liveStatus(t, id); st != 0 && st != 409 {
		t.Errorf("live-checkout route on a failed environment: %d, want 409", st)
	}
	// The operator fixes the plan: back to ready.
	ss = r.lifecycle(t, put, "/api/sessions/"+id+"/environment", `{"setup_reviewed":true,"image":"`+envImage+`"}`)
	if e := ss.Environment; e.State != events.EnvReady || e.Generation != 3 || e.Evidence != nil {
		t.Errorf("PUT back to the good image: %+v", e)
	}
}

func testEnvClosedRefusesChanges(t *testing.T, r *envRig) {
	id := r.create(t, "").ID
	r.ready(t, id)
	if ss := r.lifecycle(t, del, "/api/sessions/"+id, ""); ss.Status != projections.StatusClosed {
		t.Fatalf("close: %+v", ss)
	}
	evs := r.events(t, id)
	for _, rq := range []struct{ method, path, body string }{
		{put, "/api/sessions/" + id + "/environment", `{"setup_reviewed":true}`},
		{post, "/api/sessions/" + id + "/environment/rebuild", ""},
	} {
		resp := r.do(t, rq.method, rq.path, rq.body)
		if resp.status != 409 {
			t.Errorf("%s %s on a closed session: %d %s, want 409", rq.method, rq.path, resp.status, resp.body)
			continue
		}
		assertErrorBody(t, resp, "closed")
	}
	if got := r.events(t, id); !slices.Equal(got, evs) {
		t.Errorf("refused changes appended %v", got[len(evs):])
	}
	if got := r.containers(t, id); len(got) != 0 {
		t.Errorf("closed session keeps containers %v", got)
	}
}

func testEnvConfirmRuntimeCleanup(t *testing.T, r *envRig) {
	id := r.create(t, `"setup_command":"make deps"`).ID
	path := "/api/sessions/" + id + "/environment/confirm-runtime-cleanup"
	for _, tc := range []struct{ name, body, err string }{
		{"neither", `{}`, "exactly one"},
		{"both", `{"runtime_id":"r1","confirmed":true,"creation_token":"tok","confirmed_all_matching_sandboxes_deleted":true}`, "exactly one"},
		{"runtime id alone", `{"runtime_id":"r1"}`, "confirmed must be true"},
		{"confirmed alone", `{"confirmed":true}`, "runtime_id must be non-empty"},
		{"not confirmed", `{"runtime_id":"r1","confirmed":false}`, "confirmed must be true"},
		{"empty runtime id", `{"runtime_id":" ","confirmed":true}`, "runtime_id must be non-empty"},
		{"token alone", `{"creation_token":"tok"}`, "confirmed_all_matching_sandboxes_deleted must be true"},
		{"token not confirmed", `{"creation_token":"tok","confirmed_all_matching_sandboxes_deleted":false}`, "must be true"},
		{"mixed halves", `{"runtime_id":"r1","confirmed_all_matching_sandboxes_deleted":true}`, "exactly one"},
		{"wrong type", `{"runtime_id":7,"confirmed":true}`, ""},
		{"unknown field", `{"runtime_id":"r1","confirmed":true,"force":true}`, ""},
		{"no body", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := r.do(t, post, path, tc.body)
			if resp.status != 400 {
				t.Fatalf("%s: %d %s, want 400", tc.body, resp.status, resp.body)
			}
			var body struct{ Error string }
			if json.Unmarshal(resp.body, &body) != nil || body.Error == "" {
				t.Errorf("400 without an error message: %s", resp.body)
			}
			if tc.err != "" && !strings.Contains(body.Error, tc.err) {
				t.Errorf("error %q, want it to mention %q", body.Error, tc.err)
			}
		})
	}
	for _, body := range []string{
		`{"runtime_id":"r1","confirmed":true}`,
		`{"creation_token":"tok","confirmed_all_matching_sandboxes_deleted":true}`,
	} {
		resp := r.do(t, post, path, body)
		if resp.status != 409 {
			t.Errorf("valid confirmation under containerd %s: %d %s, want 409", body, resp.status, resp.body)
			continue
		}
		assertErrorBody(t, resp, "local container runtime retains no remote runtime")
		// A missing Session is 404 for a well-formed confirmation.
		if resp := r.do(t, post, "/api/sessions/"+unknownID+"/environment/confirm-runtime-cleanup", body); resp.status != 404 {
			t.Errorf("valid confirmation for an unknown session: %d %s, want 404", resp.status, resp.body)
		}
	}
	if resp := r.do(t, post, "/api/sessions/"+unknownID+"/environment/confirm-runtime-cleanup", `{}`); resp.status != 400 {
		t.Errorf("malformed confirmation for an unknown session: %d %s, want 400", resp.status, resp.body)
	}
	if got := r.events(t, id); !slices.Equal(got, []string{"session-created"}) {
		t.Errorf("confirmations appended events: %v", got)
	}
}

func testEnvCloseAndReopen(t *testing.T, r *envRig) {
	id := r.create(t, "").ID
	r.ready(t, id)
	base := len(r.log.waitLabel(t, id, 0, "event:session-environment-settled"))

	ss := r.lifecycle(t, del, "/api/sessions/"+id, "")
	if ss.Status != projections.StatusClosed || ss.Environment.State != events.EnvUnprepared || ss.Environment.Owner != "" || ss.Environment.Generation != 1 {
		t.Errorf("close answered status %s environment %+v, want closed and unprepared", ss.Status, ss.Environment)
	}
	if got := r.containers(t, id); len(got) != 0 {
		t.Errorf("containers %v remain after close", got)
	}
	fs := r.log.waitLabel(t, id, base, "event:session-closed")
	want := []string{"session-environment-changing{generation:1}", "event:session-environment-changing", "event:session-environment-stopped",
		"session-environment-settled", "event:session-environment-settled", "event:session-closed"}
	if got := envLabels(fs); !slices.Equal(got, want) {
		t.Errorf("close frames %v\nwant         %v", got, want)
	}
	base += len(fs)
	if st := r.liveStatus(t, id); st != 0 && st != 409 {
		t.Errorf("live-checkout route on a closed session: %d, want 409", st)
	}
	// Closing again is a no-op.
	r.lifecycle(t, del, "/api/sessions/"+id, "")

	ss = r.lifecycle(t, post, "/api/sessions/"+id+"/reopen", "")
	if ss.Status != projections.StatusOpen || ss.Environment.State != events.EnvPreparing {
		t.Errorf("reopen answered status %s environment %+v, want open and preparing", ss.Status, ss.Environment)
	}
	ss = r.ready(t, id)
	if ss.Environment.Reason != projections.ReasonReopened {
		t.Errorf("reopened environment's reason %q, want %q", ss.Environment.Reason, projections.ReasonReopened)
	}
	if ss.Environment.Generation != 1 {
		t.Errorf("reopened generation %d, want 1 (the persisted plan)", ss.Environment.Generation)
	}
	if got := r.containers(t, id); !slices.Equal(got, []string{ctrd.ContainerID(id, 1)}) {
		t.Errorf("containers after reopen = %v", got)
	}
	fs = r.log.waitLabel(t, id, base, "event:session-environment-settled")
	if got, want := envBrackets(fs), []string{"session-environment-changing{generation:1}", "session-environment-settled"}; !slices.Equal(got, want) {
		t.Errorf("reopen bracket frames %v, want %v", got, want)
	}
}

func testEnvForceDelete(t *testing.T, r *envRig) {
	id := r.create(t, "").ID
	r.ready(t, id)
	base := len(r.log.waitLabel(t, id, 0, "event:session-environment-settled"))
	resp := r.do(t, del, "/api/sessions/"+id+"?force=true", "")
	if resp.status != 200 {
		t.Fatalf("force delete: %d %s", resp.status, resp.body)
	}
	if got := r.containers(t, id); len(got) != 0 {
		t.Errorf("containers %v remain after force delete", got)
	}
	fs := r.log.waitLabel(t, id, base, "event:session-deleted")
	want := []string{"session-environment-changing{generation:1}", "event:session-environment-changing", "event:session-environment-stopped",
		"session-environment-settled", "event:session-environment-settled", "event:session-deleted"}
	if got := envLabels(fs); !slices.Equal(got, want) {
		t.Errorf("delete frames %v\nwant          %v", got, want)
	}
	if last := fs[len(fs)-1]; last.Record != nil {
		t.Errorf("session-deleted frame still carries the record: %s", last.Raw)
	}
	if resp := r.do(t, get, "/api/sessions/"+id, ""); resp.status != 404 {
		t.Errorf("GET after delete: %d, want 404", resp.status)
	}
	for _, rq := range []struct{ method, path, body string }{
		{put, "/api/sessions/" + id + "/environment", `{"setup_reviewed":true}`},
		{post, "/api/sessions/" + id + "/environment/rebuild", ""},
		{post, "/api/sessions/" + id + "/reopen", ""},
		{del, "/api/sessions/" + id + "?force=true", ""},
	} {
		if resp := r.do(t, rq.method, rq.path, rq.body); resp.status != 404 {
			t.Errorf("%s %s after delete: %d %s, want 404", rq.method, rq.path, resp.status, resp.body)
		}
	}
	if got := envSnapshotTransitions(t, r.srv, id); len(got) != 0 {
		t.Errorf("deleted session still owns a transition: %v", got)
	}
}

func testEnvSandboxKilled(t *testing.T, r *envRig) {
	id := r.create(t, "").ID
	r.ready(t, id)
	envKill(t, r.cl, id, 1)
	ss := r.wait(t, id, "failed", func(ss projections.Session) bool { return ss.Environment.State != events.EnvReady })
	if e := ss.Environment; e.State != events.EnvFailed || e.Evidence == nil || !strings.Contains(e.Evidence.Error, "stopped unexpectedly") || e.Evidence.Fix == "" {
		t.Fatalf("after kill -9 of the sandbox: %+v, want failed with evidence", e)
	}
	if e := ss.Environment.Evidence; !strings.Contains(e.Error, "exit") {
		t.Errorf("evidence %q does not say how the sandbox ended", e.Error)
	}
	if got := r.containers(t, id); len(got) != 0 {
		t.Errorf("the dead sandbox's container remains: %v", got)
	}
	if st := r.liveStatus(t, id); st != 0 && st != 409 {
		t.Errorf("live-checkout route after the sandbox died: %d, want 409", st)
	}
	ss = r.lifecycle(t, post, "/api/sessions/"+id+"/environment/rebuild", "")
	if e := ss.Environment; e.State != events.EnvReady || e.Generation != 2 || e.Evidence != nil {
		t.Errorf("rebuild after the crash: %+v", e)
	}
}

// TestEnvironmentWithoutContainerd: with nothing at the configured address,
// preparing fails fast with evidence that names the fix.
func TestEnvironmentWithoutContainerd(t *testing.T) {
	t.Parallel()
	_, srv := newSandboxDaemon(t, "lathe-test-nowhere", func(c *config.Config) {
		c.Sandbox.Containerd.Address = filepath.Join(t.TempDir(), "no-containerd.sock")
	})
	r := newEnvRig(t, srv, nil)
	t0 := time.Now()
	id := r.create(t, "").ID
	ss := r.settled(t, id)
	took := time.Since(t0)
	check := func(what string, ss projections.Session, gen uint64) {
		t.Helper()
		e := ss.Environment
		if e.State != events.EnvFailed || e.Generation != gen || e.Evidence == nil {
			t.Fatalf("%s: environment %+v, want failed generation %d with evidence", what, e, gen)
		}
		if !strings.Contains(e.Evidence.Fix, "make containerd-up") || !strings.Contains(e.Evidence.Error, "unavailable") {
			t.Errorf("%s: evidence %+v, want an unavailable error and a fix naming make containerd-up", what, *e.Evidence)
		}
	}
	check("create", ss, 1)
	if took > 3*time.Second {
		t.Errorf("failing without containerd took %v", took)
	}
	fs := r.log.waitLabel(t, id, 0, "event:session-environment-settled")
	if got, want := envBrackets(fs), []string{"session-environment-changing{generation:1}", "session-environment-settled"}; !slices.Equal(got, want) {
		t.Errorf("bracket frames %v, want %v", got, want)
	}
	check("PUT", r.lifecycle(t, put, "/api/sessions/"+id+"/environment", `{"setup_reviewed":true}`), 2)
	check("rebuild", r.lifecycle(t, post, "/api/sessions/"+id+"/environment/rebuild", ""), 3)
	if ss := r.lifecycle(t, del, "/api/sessions/"+id, ""); ss.Status != projections.StatusClosed {
		t.Errorf("close of a failed session: %+v", ss)
	}
}
