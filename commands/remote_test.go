package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/commands/agentrun"
	"lathe/commands/core"
	"lathe/commands/environments"
	"lathe/commands/sessions"
	"lathe/commands/ways"

	"lathe/journal"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/blobs"
	"lathe/runtime/git"
	"lathe/runtime/git/gittest"
	"lathe/runtime/hooks"
	"lathe/runtime/polltest"
	"lathe/runtime/remotefs/remotefstest"
	"lathe/runtime/sandbox"
)

// hostDriver stands in for a remote engine: each sandbox is a directory of
// its own on this host, reached at the Session's WorkingDir path (every
// path naming WorkingDir is rewritten to it), so a test sees what a
// clone inside a remote container would hold. removeErr fails removals.
type hostDriver struct {
	root string
	mu   sync.Mutex
	// specs are the specs of every Prepare, in order.
	specs     []sandbox.Spec
	removeErr error
	// made are the sandboxes Prepare made, which Attach finds while they
	// are not torn down.
	made []*hostSandbox
}

func (d *hostDriver) Prepare(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	dir := filepath.Join(d.root, fmt.Sprintf("%s-g%d", spec.SessionID, spec.Generation))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	sb := &hostSandbox{fakeSandbox: fakeSandbox{id: spec.SessionID, gen: spec.Generation, done: make(chan struct{})},
		d: d, dir: dir, workingDir: spec.WorkingDir}
	sb.Root = func(p string) string { return strings.ReplaceAll(p, spec.WorkingDir, dir) }
	d.mu.Lock()
	d.specs = append(d.specs, spec)
	d.made = append(d.made, sb)
	d.mu.Unlock()
	return sb, nil
}

func (d *hostDriver) Attach(context.Context) ([]sandbox.Sandbox, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []sandbox.Sandbox
	for _, sb := range d.made {
		if !environments.IsDone(sb) {
			out = append(out, sb)
		}
	}
	return out, nil
}

func (d *hostDriver) Remove(context.Context, string, uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.removeErr
}

func (d *hostDriver) setRemoveErr(err error) {
	d.mu.Lock()
	d.removeErr = err
	d.mu.Unlock()
}

func (d *hostDriver) lastSpec() sandbox.Spec {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.specs[len(d.specs)-1]
}

type hostSandbox struct {
	fakeSandbox
	d               *hostDriver
	dir, workingDir string

	remotefstest.Helper // the sandbox helper's file streams, on dir
}

func (h *hostSandbox) RuntimeID() string { return "c-" + filepath.Base(h.dir) }

func (h *hostSandbox) Exec(ctx context.Context, spec sandbox.ExecSpec) (sandbox.Process, error) {
	at := func(s string) string { return strings.ReplaceAll(s, h.workingDir, h.dir) }
	spec.Dir = at(spec.Dir)
	if spec.Dir == "" {
		spec.Dir = h.dir
	}
	spec.Args = append([]string{}, spec.Args...)
	for i := range spec.Args {
		spec.Args[i] = at(spec.Args[i])
	}
	spec.Env = append([]string{}, spec.Env...)
	for i := range spec.Env {
		spec.Env[i] = at(spec.Env[i])
	}
	return git.Host{}.Exec(ctx, spec)
}

func (h *hostSandbox) Teardown(ctx context.Context) error {
	if err := h.d.Remove(ctx, h.id, h.gen); err != nil {
		return err
	}
	if err := os.RemoveAll(h.dir); err != nil {
		return err
	}
	h.Kill()
	return h.fakeSandbox.Teardown(ctx)
}

// remoteRig is a Service under the remote provider on a hostDriver, with a
// Git Workspace that has a commit, a staged change and an untracked file,
// and holds the daemon's config file, lathe.yaml, which no clone gets.
type remoteRig struct {
	s     *Service
	opts  core.Options
	j     *journal.Journal
	store *projections.Store
	d     *hostDriver
	w     projections.Workspace
}

func newRemoteRig(t *testing.T, gitRepo bool, with ...func(*core.Options)) *remoteRig {
	t.Helper()
	j, store := openJournal(t)
	d := &hostDriver{root: t.TempDir()}
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	opts := core.Options{Agents: []string{"coder"}, DefaultImage: "img", RemoteSandbox: true,
		RemoteHost: "ssh://builder@gpu-box", RemoteTemplate: "lathe.local/sandbox:bookworm",
		Connect:    func(context.Context) (sandbox.Driver, error) { return d, nil },
		ConfigFile: filepath.Join(dir, "lathe.yaml")}
	for _, f := range with {
		f(&opts)
	}
	s := New(j, store, opts)
	if gitRepo {
		gittest.Run(t, dir, "init", "-q", "-b", "main")
	}
	gittest.Write(t, dir, map[string]string{"a.txt": "a\n"})
	if gitRepo {
		gittest.Run(t, dir, "add", "-A")
		gittest.Run(t, dir, "commit", "-q", "-m", "first")
		gittest.Write(t, dir, map[string]string{"a.txt": "a changed\n"})
		gittest.Write(t, dir, map[string]string{"new.txt": "new\n"})
	}
	gittest.Write(t, dir, map[string]string{"lathe.yaml": "api_keys: [secret]\n"})
	w, _, err := s.Sessions.RegisterWorkspace(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &remoteRig{s: s, opts: opts, j: j, store: store, d: d, w: w}
}

func (r *remoteRig) ready(t *testing.T) projections.Session {
	t.Helper()
	ctx := context.Background()
	ss, err := r.s.Sessions.CreateSession(ctx, r.w.ID, sessions.SessionSpec{Name: "remote", Mode: singleAgent()})
	if err != nil {
		t.Fatal(err)
	}
	return r.settledReady(t, ss.ID)
}

func (r *remoteRig) settledReady(t *testing.T, id string) projections.Session {
	t.Helper()
	polltest.Check(t, func() error {
		got, _ := r.store.Session(id)
		if got.Environment.State != events.EnvReady || got.Environment.Owner != "" {
			return fmt.Errorf("environment %s (%+v)", got.Environment.State, got.Environment.Evidence)
		}
		return nil
	}, polltest.Within(30*time.Second))
	ss, _ := r.store.Session(id)
	return ss
}

// clone is the directory standing in for the Session's live clone.
func (r *remoteRig) clone(t *testing.T, id string) string {
	t.Helper()
	sb, _, err := r.s.Environments.Sandbox(id)
	if err != nil {
		t.Fatal(err)
	}
	return sb.(*hostSandbox).dir
}

// TestRemoteLifecycle: a remote Session's provisioning journals a fresh
// token before the engine is asked and shows runtime_id and the token;
// the clone holds the Workspace's HEAD and uncommitted changes; sync
// brings committed work home as lathe/<id> without touching the
// Workspace; close brings uncommitted work home as one more commit, and
// reopen starts from that branch.
func TestRemoteLifecycle(t *testing.T) {
	r := newRemoteRig(t, true)
	ctx := context.Background()
	hostStatus := gittest.Run(t, r.w.Path, "status", "--porcelain")
	ss := r.ready(t)
	spec := r.d.lastSpec()
	env := ss.Environment
	if spec.CreationToken == "" || env.CreationToken != spec.CreationToken || env.RuntimeID == "" || spec.Image != "lathe.local/sandbox:bookworm" {
		t.Fatalf("spec token %q image %q, environment token %q runtime %q", spec.CreationToken, spec.Image, env.CreationToken, env.RuntimeID)
	}
	clone := r.clone(t, ss.ID)
	if got := gittest.Run(t, clone, "status", "--porcelain", "--untracked-files=all"); got != " M a.txt\n?? new.txt\n" {
		t.Fatalf("clone status %q", got)
	}

	if _, err := r.s.Environments.Sync(ctx, ss.ID); !errors.Is(err, core.ErrConflict) || !strings.Contains(err.Error(), "uncommitted") {
		t.Fatalf("sync of a dirty clone: %v, want a conflict", err)
	}
	gittest.Run(t, clone, "add", "-A")
	gittest.Run(t, clone, "commit", "-q", "-m", "work in the clone")
	res, err := r.s.Environments.Sync(ctx, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "lathe/" + ss.ID; res.Branch != want || strings.TrimSpace(gittest.Run(t, r.w.Path, "rev-parse", want)) != res.Commit {
		t.Fatalf("sync = %+v", res)
	}
	if got := gittest.Run(t, r.w.Path, "status", "--porcelain"); got != hostStatus {
		t.Errorf("the Workspace's status changed: %q, want %q", got, hostStatus)
	}
	if got, _ := r.store.Session(ss.ID); got.Environment.Synced == nil || got.Environment.Synced.Commit != res.Commit {
		t.Errorf("synced = %+v", got.Environment.Synced)
	}

	gittest.Write(t, clone, map[string]string{"late.txt": "late\n"})
	closed, err := r.s.Sessions.CloseSession(ctx, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if closed.Environment.RuntimeID != "" || closed.Environment.Retained || closed.Environment.Synced == nil || !closed.Environment.Synced.Uncommitted {
		t.Fatalf("closed environment %+v", closed.Environment.RemoteRuntime)
	}
	if got := gittest.Run(t, r.w.Path, "show", "lathe/"+ss.ID+":late.txt"); got != "late\n" {
		t.Errorf("late.txt at home: %q", got)
	}
	if got := gittest.Run(t, r.w.Path, "status", "--porcelain"); got != hostStatus {
		t.Errorf("the Workspace's status changed at close: %q", got)
	}

	if _, err := r.s.Sessions.ReopenSession(ctx, ss.ID); err != nil {
		t.Fatal(err)
	}
	r.settledReady(t, ss.ID)
	again := r.clone(t, ss.ID)
	if got := strings.TrimSpace(gittest.Run(t, again, "symbolic-ref", "--short", "HEAD")); got != "lathe/"+ss.ID {
		t.Errorf("reopened clone on %q", got)
	}
	if _, err := os.Stat(filepath.Join(again, "late.txt")); err != nil {
		t.Errorf("the reopened clone lacks the work brought home: %v", err)
	}
	if got, _ := r.store.Session(ss.ID); got.Environment.CreationToken == spec.CreationToken {
		t.Error("the reopen reused the creation token")
	}
}

// TestRemoteTreeCopy: a Workspace that is not a Git repository arrives as
// a copy; sync has no branch to bring it to.
func TestRemoteTreeCopy(t *testing.T) {
	r := newRemoteRig(t, false)
	ss := r.ready(t)
	if b, err := os.ReadFile(filepath.Join(r.clone(t, ss.ID), "a.txt")); err != nil || string(b) != "a\n" {
		t.Fatalf("copied a.txt: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(r.clone(t, ss.ID), "lathe.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the copy holds the daemon's config file (%v)", err)
	}
	if _, err := r.s.Environments.Sync(context.Background(), ss.ID); !errors.Is(err, core.ErrConflict) {
		t.Errorf("sync of a non-Git Workspace: %v", err)
	}
}

// TestRemoteRefusals: under remote, an image is refused before anything
// is provisioned, and so is a Ways set.
func TestRemoteRefusals(t *testing.T) {
	r := newRemoteRig(t, true)
	ctx := context.Background()
	_, err := r.s.Sessions.CreateSession(ctx, r.w.ID, sessions.SessionSpec{Name: "x", Mode: singleAgent(), Image: new("debian")})
	if !errors.Is(err, core.ErrInvalid) || len(r.d.specs) != 0 {
		t.Errorf("create with an image: %v, %d provisioned", err, len(r.d.specs))
	}
	ss := r.ready(t)
	if _, err := r.s.Environments.ChangeEnvironment(ctx, ss.ID, environments.EnvironmentPlan{Image: new("debian"), SetupReviewed: new(true)}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("PUT with an image: %v", err)
	}
	_, err = r.s.Ways.Start(ctx, ways.WaysRequest{SessionID: ss.ID, Input: "x", N: new(2)})
	if !errors.Is(err, core.ErrConflict) || !strings.Contains(err.Error(), "local container runtime") {
		t.Errorf("Ways under remote: %v", err)
	}
}

// TestConfirmRuntimeCleanup: a runtime the engine could not remove at
// close is retained with evidence naming the host, a forced delete keeps
// the record, and the confirmation clears it only when it matches.
func TestConfirmRuntimeCleanup(t *testing.T) {
	r := newRemoteRig(t, true)
	ctx := context.Background()
	ss := r.ready(t)
	runtimeID, token := ss.Environment.RuntimeID, ss.Environment.CreationToken
	r.d.setRemoveErr(fmt.Errorf("%w: dial ssh://builder@gpu-box: connection refused", sandbox.ErrUnavailable))
	closed, err := r.s.Sessions.CloseSession(ctx, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	env := closed.Environment
	if !env.Retained || env.RuntimeID != runtimeID || len(env.RetainedRuntimes) != 1 ||
		!strings.Contains(env.RetainedRuntimes[0].Evidence.Error, "ssh://builder@gpu-box") || !strings.Contains(env.RetainedRuntimes[0].Evidence.Fix, runtimeID) {
		t.Fatalf("retained environment %+v", env.RemoteRuntime)
	}
	if err := r.s.Sessions.DeleteSession(ctx, ss.ID); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("delete of a Session retaining a runtime: %v, want a conflict", err)
	}

	yes := new(true)
	for _, c := range []struct {
		name    string
		body    environments.CleanupConfirmation
		wantErr error
	}{
		{"empty", environments.CleanupConfirmation{}, core.ErrInvalid},
		{"both forms", environments.CleanupConfirmation{RuntimeID: &runtimeID, Confirmed: yes, CreationToken: &token, ConfirmedAllMatchingSandboxesDeleted: yes}, core.ErrInvalid},
		{"not confirmed", environments.CleanupConfirmation{RuntimeID: &runtimeID, Confirmed: new(false)}, core.ErrInvalid},
		{"blank token", environments.CleanupConfirmation{CreationToken: new(" "), ConfirmedAllMatchingSandboxesDeleted: yes}, core.ErrInvalid},
		{"another runtime", environments.CleanupConfirmation{RuntimeID: new("c-other"), Confirmed: yes}, core.ErrConflict},
		{"another token", environments.CleanupConfirmation{CreationToken: new("lct-other"), ConfirmedAllMatchingSandboxesDeleted: yes}, core.ErrConflict},
		{"matching token", environments.CleanupConfirmation{CreationToken: &token, ConfirmedAllMatchingSandboxesDeleted: yes}, nil},
		{"nothing retained any more", environments.CleanupConfirmation{RuntimeID: &runtimeID, Confirmed: yes}, core.ErrConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.s.Environments.ConfirmRuntimeCleanup(ctx, ss.ID, c.body)
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if c.wantErr == nil && (got.Environment.Retained || got.Environment.RuntimeID != "" || got.Environment.CreationToken != "") {
				t.Errorf("after the confirmation: %+v", got.Environment.RemoteRuntime)
			}
		})
	}
	if err := r.s.Sessions.DeleteSession(ctx, ss.ID); err != nil {
		t.Errorf("delete after the cleanup: %v", err)
	}
}

// TestRemoteRescue: a close whose bring-home the host's git refuses (a
// branch lathe blocks lathe/<id>) with the engine reachable keeps the
// clone, .git and uncommitted changes included, as an archive in the blob
// store and removes the runtime; only a clone that cannot be rescued (over
// the rescue limit, no blob store) is retained, with evidence naming both
// causes (issue 32, finding 5).
func TestRemoteRescue(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		limit   int64
		noStore bool
		// retained is the cause a retained runtime's evidence names; ""
		// when the clone is rescued.
		retained string
	}{
		{"rescued", 0, false, ""},
		{"over the limit", 1 << 10, false, "rescue limit of 1024 bytes"},
		{"no blob store", 0, true, "no blob store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs, err := blobs.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			r := newRemoteRig(t, true, func(o *core.Options) {
				o.Blobs, o.MaxRescue = bs, tc.limit
				if tc.noStore {
					o.Blobs = nil
				}
			})
			ss := r.ready(t)
			clone := r.clone(t, ss.ID)
			gittest.Write(t, clone, map[string]string{"late.txt": "late work\n"})
			gittest.Run(t, r.w.Path, "branch", "lathe") // refs/heads/lathe: no lathe/<id> beside it
			closed, err := r.s.Sessions.CloseSession(ctx, ss.ID)
			if err != nil {
				t.Fatal(err)
			}
			env := closed.Environment
			if tc.retained != "" {
				if !env.Retained || len(env.Rescued) != 0 || !strings.Contains(env.RetainedRuntimes[0].Evidence.Error, tc.retained) ||
					!strings.Contains(env.RetainedRuntimes[0].Evidence.Error, "cannot lock ref") {
					t.Fatalf("retained %+v, want the evidence to name %q and the host git's refusal", env.RemoteRuntime, tc.retained)
				}
				if _, err := os.Stat(clone); err != nil {
					t.Errorf("the retained clone is gone: %v", err)
				}
				return
			}
			if env.Retained || env.RuntimeID != "" || len(env.Rescued) != 1 {
				t.Fatalf("after the close: %+v", env.RemoteRuntime)
			}
			if _, err := os.Stat(clone); !os.IsNotExist(err) {
				t.Errorf("the runtime outlived the close: %v", err)
			}
			rw := env.Rescued[0]
			if want, _ := bs.Path(rw.SHA256); rw.Path != want || rw.Generation != ss.Environment.Generation ||
				!strings.Contains(rw.Evidence.Error, "ssh://builder@gpu-box") || !strings.Contains(rw.Evidence.Fix, rw.Path) {
				t.Errorf("rescued %+v", rw)
			}
			f, size, err := bs.Open(rw.SHA256) // verified against its hash
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if size != rw.Size {
				t.Errorf("size %d, journaled %d", size, rw.Size)
			}
			out := t.TempDir()
			if b, err := exec.Command("tar", "-xf", rw.Path, "-C", out).CombinedOutput(); err != nil {
				t.Fatalf("extract: %v: %s", err, b)
			}
			if b, err := os.ReadFile(filepath.Join(out, "late.txt")); err != nil || string(b) != "late work\n" {
				t.Errorf("late.txt in the rescue: %q %v", b, err)
			}
			if got := gittest.Run(t, out, "status", "--porcelain", "--untracked-files=all"); got != " M a.txt\n?? late.txt\n?? new.txt\n" {
				t.Errorf("the rescued clone's status %q", got)
			}
		})
	}
}

// TestRemoteSweepOwnership: the sweep spares a Ready Session's live
// runtime and a retained one, and takes an orphan and an old generation.
func TestRemoteSweepOwnership(t *testing.T) {
	r := newRemoteRig(t, true)
	ctx := context.Background()
	live := r.ready(t)
	kept := r.ready(t)
	r.d.setRemoveErr(fmt.Errorf("%w: engine gone", sandbox.ErrUnavailable))
	if _, err := r.s.Sessions.CloseSession(ctx, kept.ID); err != nil {
		t.Fatal(err)
	}
	rem := r.s.Environments.Remote()
	for _, c := range []struct {
		name  string
		sb    sandbox.Sandbox
		owned bool
	}{
		{"live", &fakeSandbox{id: live.ID, gen: live.Environment.Generation}, true},
		{"retained", &fakeSandbox{id: kept.ID, gen: kept.Environment.Generation}, true},
		{"old generation", &fakeSandbox{id: live.ID, gen: live.Environment.Generation + 7}, false},
		{"no Session", &fakeSandbox{id: "01NOSUCHSESSION", gen: 1}, false},
	} {
		if got := rem.Owned(c.sb); got != c.owned {
			t.Errorf("%s: owned = %v, want %v", c.name, got, c.owned)
		}
	}
}

// TestRemoteRebuildRetains: a rebuild whose old runtime the engine cannot
// remove keeps it retained beside the new generation's runtime, which
// starts from the work brought home.
func TestRemoteRebuildRetains(t *testing.T) {
	r := newRemoteRig(t, true)
	ctx := context.Background()
	ss := r.ready(t)
	old := ss.Environment.RuntimeID
	gittest.Write(t, r.clone(t, ss.ID), map[string]string{"work.txt": "work\n"})
	r.d.setRemoveErr(fmt.Errorf("%w: engine gone", sandbox.ErrUnavailable))
	got, err := r.s.Environments.RebuildEnvironment(ctx, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	env := got.Environment
	if env.State != events.EnvReady || !env.Retained || len(env.RetainedRuntimes) != 1 || env.RetainedRuntimes[0].RuntimeID != old || env.RuntimeID == old {
		t.Fatalf("after the rebuild: %s %+v", env.State, env.RemoteRuntime)
	}
	if b, err := os.ReadFile(filepath.Join(r.clone(t, ss.ID), "work.txt")); err != nil || string(b) != "work\n" {
		t.Errorf("the new clone lacks the work brought home: %q %v", b, err)
	}
}

// TestRemoteInterruptedCloseBringsWorkHome: a close that a stop cut off
// before it removed the runtime is finished by the next start's
// reconstruction, which brings the clone's work home before it removes
// the stale container.
func TestRemoteInterruptedCloseBringsWorkHome(t *testing.T) {
	r := newRemoteRig(t, true)
	ctx := context.Background()
	ss := r.ready(t)
	gittest.Write(t, r.clone(t, ss.ID), map[string]string{"late.txt": "late\n"})
	// The close's bracket is open in the journal when the daemon stops.
	err := r.s.Sessions.Append(ctx, []journal.Event{events.New(ss.ID, events.EnvironmentChanging{Generation: ss.Environment.Generation, Owner: events.OwnerClose})})
	if err != nil {
		t.Fatal(err)
	}
	restarted := New(r.j, r.store, r.opts)
	if err := restarted.Environments.Reconstruct(ctx); err != nil {
		t.Fatal(err)
	}
	polltest.Check(t, func() error {
		got, _ := r.store.Session(ss.ID)
		if got.Environment.State != events.EnvReady || got.Environment.Owner != "" {
			return fmt.Errorf("environment %s (%+v)", got.Environment.State, got.Environment.Evidence)
		}
		return nil
	}, polltest.Within(30*time.Second))
	if got := gittest.Run(t, r.w.Path, "show", "lathe/"+ss.ID+":late.txt"); got != "late\n" {
		t.Errorf("late.txt at home: %q", got)
	}
}

// TestRemoteSweepWhenTheEngineComesBack: a start that cannot reach the
// engine fails the Ready Sessions with evidence naming the host and, once
// the engine answers, removes this daemon's containers that no Session
// owns.
func TestRemoteSweepWhenTheEngineComesBack(t *testing.T) {
	r := newRemoteRig(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ss := r.ready(t)
	orphan, err := r.d.Prepare(ctx, sandbox.Spec{SessionID: "01ORPHANOFANEARLIERRUN", Generation: 3, WorkingDir: r.w.Path})
	if err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { environments.EngineRetry = d }(environments.EngineRetry)
	environments.EngineRetry = 10 * time.Millisecond
	var mu sync.Mutex
	down := true
	opts := r.opts
	opts.Connect = func(context.Context) (sandbox.Driver, error) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return nil, fmt.Errorf("%w: dial ssh://builder@gpu-box: connection refused", sandbox.ErrUnavailable)
		}
		return r.d, nil
	}
	restarted := New(r.j, r.store, opts)
	if err := restarted.Environments.Reconstruct(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := r.store.Session(ss.ID)
	if ev := got.Environment.Evidence; got.Environment.State != events.EnvFailed || ev == nil || !strings.Contains(ev.Error+ev.Fix, "ssh://builder@gpu-box") {
		t.Fatalf("after a start without the engine: %s %+v", got.Environment.State, got.Environment.Evidence)
	}
	if environments.IsDone(orphan) {
		t.Fatal("the orphan was removed while the engine was down")
	}
	mu.Lock()
	down = false
	mu.Unlock()
	polltest.Until(t, "the orphan removed once the engine is back", func() bool { return environments.IsDone(orphan) }, polltest.Within(10*time.Second))
}

// TestRemoteGitRootAndHooks: under remote the clone, not the host
// Workspace, decides whether a turn records its changes, and host hooks
// run in a scratch directory of the Session's (gone with its runtime),
// never in the Workspace folder, while hooks in the sandbox run in the
// clone.
func TestRemoteGitRootAndHooks(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		hostGit bool
		inClone func(t *testing.T, clone string)
		want    bool
	}{
		{"both repositories", true, func(*testing.T, string) {}, true},
		{"a copied folder the clone made a repository", false, func(t *testing.T, clone string) { gittest.Run(t, clone, "init", "-q") }, true},
		{"a repository whose clone dropped .git", true, func(t *testing.T, clone string) {
			if err := os.RemoveAll(filepath.Join(clone, ".git")); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"neither", false, func(*testing.T, string) {}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRemoteRig(t, tc.hostGit)
			th := agentrun.TurnHooks{Core: r.s.Turns.Core}
			call := core.ApprovalRequest{Run: "S", Session: "S", TurnID: "T"}
			if at := th.Run(call, nil, "/clone", true).At; at.HostDir != "" {
				t.Errorf("without hooks, a host directory was made: %+v", at)
			}
			r.s.Turns.Core.Opts.Hooks = hooks.Set{Global: []hooks.Hook{{Event: "Stop", Command: "pwd", Host: true}}}
			ss := r.ready(t)
			tc.inClone(t, r.clone(t, ss.ID))
			sb, ss, err := r.s.Environments.Sandbox(ss.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.s.Turns.GitRoot(ctx, sb, ss); got != tc.want {
				t.Errorf("gitRoot = %v, want %v (the host Workspace is a repository: %v)", got, tc.want, tc.hostGit)
			}
			at := th.Run(core.ApprovalRequest{Run: ss.ID, Session: ss.ID, TurnID: "T"}, sb, ss.WorkingDir, true).At
			if at.Dir != ss.WorkingDir || at.HostDir == "" || at.HostDir == ss.WorkingDir || strings.HasPrefix(at.HostDir, ss.WorkingDir+"/") {
				t.Fatalf("hooks at %+v: the sandbox's in the clone %s, the host's in a scratch directory", at, ss.WorkingDir)
			}
			if fi, err := os.Stat(at.HostDir); err != nil || !fi.IsDir() {
				t.Fatalf("the host hooks' directory: %v", err)
			}
			closed, err := r.s.Sessions.CloseSession(ctx, ss.ID)
			if err != nil {
				t.Fatal(err)
			}
			if closed.Environment.Retained { // its work could not come home: the runtime stays
				return
			}
			if _, err := os.Stat(at.HostDir); !os.IsNotExist(err) {
				t.Errorf("the host hooks' directory outlived the runtime: %v", err)
			}
		})
	}
}
