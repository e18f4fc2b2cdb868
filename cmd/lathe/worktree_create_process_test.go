package main

// A worktree Session's create cut off by kill -9 at each of its steps,
// with the real binary and real containerd: after every restart each
// Session the journal holds is Ready or failed with one settlement, and
// nothing a create makes outside the journal outlives its Session: no
// worktree folder, overlay, base, mount, branch, git worktree
// registration or container (docs/design/git.md).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"

	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/lanefs"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/containerd/containerdtest"
)

// worktreeProcNamespace is this test's containerd namespace: a daemon owns
// its namespace, so it shares none with the other process tests.
const worktreeProcNamespace = "lathe-test-worktreeproc"

// createStage is a point of a worktree Session's create a kill lands at,
// seen from outside the daemon.
type createStage struct {
	name    string
	reached func(r *createRig, seen map[string]bool) bool
}

// createStages are the steps of a create, in order: the request sent, the
// base checkout being written and whole, the worktree registered, its
// overlay's marker written and mounted, the Session appended, its
// container made.
var createStages = []createStage{
	{"request sent", func(*createRig, map[string]bool) bool { return true }},
	{"base partial", func(r *createRig, _ map[string]bool) bool {
		return len(r.glob(".bases", "*.partial-*")) > 0
	}},
	{"base whole", func(r *createRig, _ map[string]bool) bool {
		return len(r.glob(".bases", "*"+r.head)) > 0
	}},
	{"registered", func(r *createRig, _ map[string]bool) bool {
		es, _ := os.ReadDir(filepath.Join(r.ws, ".git", "worktrees"))
		return len(es) > len(r.wantIDs)
	}},
	{"marker", func(r *createRig, seen map[string]bool) bool { return r.fresh(r.glob(".overlays", "*", "base"), seen) }},
	{"mounted", func(r *createRig, seen map[string]bool) bool {
		m, _ := lanefs.MountsUnder(r.dir())
		return r.fresh(m, seen)
	}},
	{"appended", func(r *createRig, seen map[string]bool) bool {
		return r.fresh(r.glob("*"), seen) && len(r.sessions()) > len(r.wantIDs)
	}},
	{"container", func(r *createRig, _ map[string]bool) bool {
		return len(containerdtest.ManagedContainers(r.t, r.cl)) > r.ready
	}},
}

// createRig is one daemon's data dir and Workspace across the kills.
type createRig struct {
	t       *testing.T
	cl      *client.Client
	cfg     string
	data    string
	ws      string
	head    string // the Workspace's HEAD, a new commit per round
	d       *daemonProc
	wantIDs []string // the Sessions of the last check
	ready   int      // how many of them are Ready
}

// dir is the daemon's folder of worktrees.
func (r *createRig) dir() string { return filepath.Join(r.data, "worktrees") }

// glob lists the paths matching the pattern's parts under dir(); a
// pattern's "*" matches no name that starts with a dot unless the
// pattern does.
func (r *createRig) glob(parts ...string) []string {
	m, _ := filepath.Glob(filepath.Join(append([]string{r.dir()}, parts...)...))
	return slices.DeleteFunc(m, func(p string) bool {
		rel, _ := filepath.Rel(r.dir(), p)
		for i, name := range strings.Split(rel, string(filepath.Separator)) {
			if strings.HasPrefix(name, ".") && !strings.HasPrefix(parts[i], ".") {
				return true
			}
		}
		return false
	})
}

// fresh reports whether paths holds one not in seen (the paths of the
// Sessions there before the round).
func (r *createRig) fresh(paths []string, seen map[string]bool) bool {
	return slices.ContainsFunc(paths, func(p string) bool { return !seen[strings.TrimSuffix(p, "/base")] })
}

// sessions lists the daemon's Sessions, nil while it cannot answer.
func (r *createRig) sessions() []projections.Session {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	status, body, err := request(ctx, http.DefaultClient, http.MethodGet, r.d.url+"/api/sessions", "")
	var ss []projections.Session
	if err != nil || status != 200 || json.Unmarshal(body, &ss) != nil {
		return nil
	}
	return ss
}

// commit makes a new commit of n files in the Workspace, so that the
// round's create makes a new base.
func (r *createRig) commit(round, n int) {
	for i := range n {
		p := filepath.Join(r.ws, fmt.Sprintf("d%02d", i%40), fmt.Sprintf("f%04d.txt", i))
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, fmt.Appendf(nil, "round %d file %d\n", round, i), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	gitIn(r.t, r.ws, "add", "-A")
	gitIn(r.t, r.ws, "commit", "-qm", fmt.Sprintf("round %d", round))
	r.head = strings.TrimSpace(gitIn(r.t, r.ws, "rev-parse", "HEAD"))
}

// killAt creates a worktree Session and kills the daemon once the create
// reaches stage (or has answered), then starts it again.
func (r *createRig) killAt(stage createStage) {
	r.t.Helper()
	seen := map[string]bool{}
	for _, id := range r.wantIDs {
		seen[filepath.Join(r.dir(), id)], seen[filepath.Join(r.dir(), ".overlays", id)] = true, true
	}
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _, _ = request(ctx, http.DefaultClient, http.MethodPost, r.d.url+"/api/sessions",
			`{"working_dir":"`+r.ws+`","name":"wt","mode":{"kind":"lattice"},"isolation":"worktree"}`)
	}()
	deadline := time.Now().Add(time.Minute)
	for !stage.reached(r, seen) {
		select {
		case <-answered:
			r.t.Logf("the create answered before %q was seen", stage.name)
		default:
			if time.Now().After(deadline) {
				r.t.Fatalf("the create never reached %q", stage.name)
			}
			runtime.Gosched() // a tight poll, bounded by the deadline: the kill must land mid-create
			continue
		}
		break
	}
	r.d.kill(r.t)
	<-answered
	r.d = procStart(r.t, r.data, "--config", r.cfg)
}

// check waits until every Session is settled once and what the creates
// made matches the Sessions exactly, and records them for the next round.
func (r *createRig) check() {
	r.t.Helper()
	var last error
	_, err := polltest.Poll(func() error {
		last = r.leftovers()
		return last
	}, polltest.Within(procSettle+30*time.Second), polltest.Every(100*time.Millisecond))
	if err != nil {
		r.t.Fatalf("after the restart: %v\nstderr:\n%s", last, r.d.stderr.String())
	}
}

// leftovers compares the Sessions with the worktree folders, overlays,
// bases, mounts, branches, git worktrees and containers.
func (r *createRig) leftovers() error {
	all := r.sessions()
	if all == nil {
		return errors.New("the daemon does not list its Sessions")
	}
	var ids, dirs, branches []string
	ready := 0
	for _, ss := range all {
		if !procSettled(ss) {
			return fmt.Errorf("session %s not settled: %+v", ss.ID, ss.Environment)
		}
		if s := ss.Environment.State; s != events.EnvReady && s != events.EnvFailed {
			return fmt.Errorf("session %s settled %s, want ready or failed", ss.ID, s)
		}
		types := procTypes(procEvents(r.t, r.d, ss.ID))
		if n := strings.Count(strings.Join(types, " "), "session-environment-settled"); n != 1 || types[len(types)-1] != "session-environment-settled" {
			return fmt.Errorf("session %s events %v, want one settlement, last", ss.ID, types)
		}
		want := 0
		if ss.Environment.State == events.EnvReady {
			want, ready = 1, ready+1
		}
		if got := containerdtest.SessionContainers(r.t, r.cl, ss.ID); len(got) != want {
			return fmt.Errorf("session %s (%s) has containers %v", ss.ID, ss.Environment.State, got)
		}
		ids, dirs, branches = append(ids, ss.ID), append(dirs, ss.WorkingDir), append(branches, ss.Branch)
	}
	slices.Sort(ids)
	slices.Sort(dirs)
	slices.Sort(branches)
	if got := containerdtest.ManagedContainers(r.t, r.cl); len(got) != ready {
		return fmt.Errorf("containers %v for %d Ready Sessions", got, ready)
	}
	names := func(paths []string) []string {
		out := make([]string, 0, len(paths))
		for _, p := range paths {
			out = append(out, filepath.Base(strings.TrimSuffix(p, "/base")))
		}
		slices.Sort(out)
		return out
	}
	if got := names(r.glob("*")); !slices.Equal(got, ids) {
		return fmt.Errorf("worktree folders %v, Sessions %v", got, ids)
	}
	if got := names(r.glob(".overlays", "*")); !slices.Equal(got, ids) {
		return fmt.Errorf("overlays %v, Sessions %v", got, ids)
	}
	var used []string
	for _, m := range r.glob(".overlays", "*", "base") {
		b, _ := os.ReadFile(m)
		used = append(used, strings.TrimSpace(string(b)))
	}
	slices.Sort(used)
	if got := names(r.glob(".bases", "*")); !slices.Equal(got, slices.Compact(used)) {
		return fmt.Errorf("bases %v, used %v", got, used)
	}
	mounts, err := lanefs.MountsUnder(r.data)
	if err != nil {
		return err
	}
	slices.Sort(mounts)
	if !slices.Equal(mounts, dirs) { // a kill leaves them mounted; none more
		return fmt.Errorf("mounts %v, worktrees %v", mounts, dirs)
	}
	if got := strings.Fields(gitIn(r.t, r.ws, "for-each-ref", "--format=%(refname:short)", "refs/heads/lathe/")); !slices.Equal(got, branches) {
		return fmt.Errorf("branches %v, Sessions' %v", got, branches)
	}
	var listed []string
	for _, line := range strings.Split(gitIn(r.t, r.ws, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok && p != r.ws {
			listed = append(listed, p)
		}
	}
	slices.Sort(listed)
	if !slices.Equal(listed, dirs) {
		return fmt.Errorf("git worktrees %v, Sessions' %v", listed, dirs)
	}
	if stale := gitIn(r.t, r.ws, "worktree", "prune", "--dry-run", "--verbose"); stale != "" {
		return fmt.Errorf("stale git worktrees: %s", stale)
	}
	r.wantIDs, r.ready = ids, ready
	return nil
}

func TestKill9DuringWorktreeCreateLeavesNothingHalfMade(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("worktree overlays need root")
	}
	cl := containerdtest.Namespace(t, worktreeProcNamespace)
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	r := &createRig{t: t, cl: cl, data: t.TempDir(), ws: ws,
		cfg: writeConfig(t, fmt.Sprintf("sandbox:\n  default_image: %q\n  containerd:\n    address: %q\n    namespace: %q\n",
			containerdtest.Image, containerdtest.Address(), worktreeProcNamespace))}
	// A killed daemon leaves its worktrees' overlays mounted; none
	// outlives the test.
	t.Cleanup(func() { _ = lanefs.UnmountUnder(r.data) })
	gitIn(t, ws, "init", "-q", "-b", "main")
	gitIn(t, ws, "config", "user.name", "Owner")
	gitIn(t, ws, "config", "user.email", "owner@test")
	r.d = procStart(t, r.data, "--config", r.cfg)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	// Every stage once, in a random order, then two more at random.
	order := append(rng.Perm(len(createStages)), rng.IntN(len(createStages)), rng.IntN(len(createStages)))
	for round, i := range order {
		r.commit(round, 2000)
		t0 := time.Now()
		r.killAt(createStages[i])
		r.check()
		t.Logf("round %d: killed at %q; %d Sessions (%d Ready) whole %v after", round, createStages[i].name, len(r.wantIDs), r.ready, time.Since(t0))
	}
	// Deleting every Session leaves nothing: no base, mount, branch or
	// registration.
	for _, id := range r.wantIDs {
		procDelete(t, r.d, id)
	}
	r.check()
	if len(r.wantIDs) != 0 || len(r.glob(".bases", "*")) != 0 {
		t.Fatalf("after deleting every Session: %v, bases %v", r.wantIDs, r.glob(".bases", "*"))
	}
	r.d.stop(t)
}
