package daemon

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"lathe/runtime/git/gittest"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/docker/dockertest"
)

// remoteBenchRepo is a Git Workspace of n committed files, registered on
// srv; it answers the Workspace's path and ID.
func remoteBenchRepo(b *testing.B, srv *httptest.Server, n int) (dir, ws string) {
	dir = realDir(b, b.TempDir())
	gittest.Run(b, dir, "init", "-q", "-b", "main")
	for i := range n {
		writeFile(b, filepath.Join(dir, fmt.Sprintf("d%02d/f%04d.txt", i/50, i)), fmt.Sprintf("file %d\n", i))
	}
	gittest.Run(b, dir, "add", "-A")
	gittest.Run(b, dir, "commit", "-q", "-m", "files")
	return dir, mustCall(b, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
}

// waitAllRemoteReady polls the Sessions ids every 5 ms until all are Ready.
func waitAllRemoteReady(b *testing.B, srv *httptest.Server, ids ...string) {
	polltest.Check(b, func() error {
		for _, id := range ids {
			if _, err := remoteState(b, srv, id); err != nil {
				return fmt.Errorf("session %s: %w", id, err)
			}
		}
		return nil
	}, polltest.Within(3*time.Minute), polltest.Every(5*time.Millisecond))
}

// BenchmarkRemoteCreateToReady: Create → Ready of a remote Session on a
// 1,000-file Git repository against the machine's dockerd (image cached),
// beside, in the same run, `docker run --rm <template> true` plus `git
// clone` of the same repository; ratio = p50 / baseline p50 (target ≤ 1.5).
func BenchmarkRemoteCreateToReady(b *testing.B) {
	_, srv := remoteDaemon(b)
	dir, ws := remoteBenchRepo(b, srv, 1000)
	var took, base []time.Duration
	for b.Loop() {
		t0 := time.Now()
		id := mustCall(b, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"bench",`+agentMode+`}`)["id"].(string)
		waitAllRemoteReady(b, srv, id)
		took = append(took, time.Since(t0))
		b.StopTimer()
		// Removed at the end, not here: on this VM's ext4 (no journal)
		// creating files within minutes of deleting as many scans the
		// freed inodes, and would slow whichever side came next.
		b.Cleanup(func() { removeRemote(b, srv, id) })
		t0 = time.Now()
		if out, err := dockerCLI(dockertest.Host(), "run", "--rm", dockerTemplate, "true"); err != nil {
			b.Fatalf("docker run: %v: %s", err, out)
		}
		gittest.Run(b, b.TempDir(), "clone", "-q", dir, "c")
		base = append(base, time.Since(t0))
		b.StartTimer()
	}
	slices.Sort(took)
	slices.Sort(base)
	p50, b50 := took[len(took)/2], base[len(base)/2]
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(b50.Microseconds())/1000, "baseline-p50-ms")
	b.ReportMetric(float64(p50)/float64(b50), "ratio")
}

// BenchmarkRemoteTenReady: ten remote Sessions created at once on a
// 1,000-file Git repository; the time until the last is Ready, and the
// RSS of this process (the daemon, with the benchmark's small HTTP
// client) at its peak during the ten and its growth over the level
// before.
//
//	go test -run '^$' -bench RemoteTenReady -benchtime 2x ./cmd/lathe/internal/daemon/
func BenchmarkRemoteTenReady(b *testing.B) {
	const n = 10
	_, srv := remoteDaemon(b)
	_, ws := remoteBenchRepo(b, srv, 1000)
	var took []time.Duration
	var peakMiB, growthMiB float64
	for b.Loop() {
		before := rssBytes(b)
		peak := sampleRSS(b)
		t0 := time.Now()
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				ids[i] = mustCall(b, srv, 201, post, "/api/workspaces/"+ws+"/sessions", fmt.Sprintf(`{"name":"ten-%d",%s}`, i, agentMode))["id"].(string)
			})
		}
		wg.Wait()
		waitAllRemoteReady(b, srv, ids...)
		took = append(took, time.Since(t0))
		top := peak()
		peakMiB = max(peakMiB, float64(top)/(1<<20))
		growthMiB = max(growthMiB, float64(top-before)/(1<<20))
		b.StopTimer()
		for _, id := range ids {
			removeRemote(b, srv, id)
		}
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "last-ready-p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "last-ready-max-ms")
	b.ReportMetric(peakMiB, "rss-peak-MiB")
	b.ReportMetric(growthMiB, "rss-growth-MiB")
}

// BenchmarkRemotePreviewRPS: requests/s of 100 keep-alive clients
// of the same small app (testdata/preview_app.py) through the Preview of
// a remote Session on the machine's dockerd and through the Preview of a
// containerd Session, alternating in the same run; ratio = remote /
// containerd (target ≥ 0.5).
//
//	go test -run '^$' -bench RemotePreviewRPS -benchtime 1x ./cmd/lathe/internal/daemon/
func BenchmarkRemotePreviewRPS(b *testing.B) {
	const conns = 100
	const round = 3 * time.Second
	local := newPreviewRig(b)
	la := local.startPreviewApp(b, "bench")

	remote := newRemotePreviewRig(b)
	d, srv := remote.d, remote.srv
	id := startRemotePreviewApp(b, remote, "bench").id

	lc, rc := loopbackClient(local.srv), loopbackClient(srv)
	for _, c := range []*http.Client{lc, rc} {
		c.Transport.(*http.Transport).MaxConnsPerHost = conns
		defer c.CloseIdleConnections()
	}
	viaLocal := func() float64 { return requestRate(b, lc, local.url(la.id, previewPort, "/hello"), conns, round) }
	viaRemote := func() float64 { return requestRate(b, rc, remote.url(id, previewPort, "/hello"), conns, round) }
	// Beside them, the remote sandbox's own Dial without the Preview: what
	// the relays cost and what the proxy adds.
	sb, _, err := d.cmds.Environments.Sandbox(id)
	if err != nil {
		b.Fatal(err)
	}
	dc := dialClient(sb, conns)
	defer dc.CloseIdleConnections()
	viaDial := func() float64 { return requestRate(b, dc, "http://app/hello", conns, round) }
	// Each opens its 100 connections first (through the remote provider,
	// 100 relays exec'd in the sandbox), untimed.
	warmConns(b, lc, local.url(la.id, previewPort, "/hello"), conns)
	warmConns(b, rc, remote.url(id, previewPort, "/hello"), conns)
	warmConns(b, dc, "http://app/hello", conns)
	var localSum, remoteSum, dialSum float64
	for b.Loop() {
		// Alternate, so that drift on a shared machine hits all alike.
		for range 2 {
			localSum += viaLocal()
			remoteSum += viaRemote()
			dialSum += viaDial()
		}
	}
	b.ReportMetric(dialSum/float64(2*b.N), "remote-dial-req/s")
	b.ReportMetric(localSum/float64(2*b.N), "containerd-req/s")
	b.ReportMetric(remoteSum/float64(2*b.N), "remote-req/s")
	b.ReportMetric(remoteSum/localSum, "ratio")
}

// warmConns opens conns keep-alive connections of c, holding each
// answer of url until all have one, and retrying a failed request for up
// to 3 minutes: a busy engine may time out the first relays' execs.
func warmConns(b *testing.B, c *http.Client, url string, conns int) {
	var got, done sync.WaitGroup
	got.Add(conns)
	release := make(chan struct{})
	for range conns {
		done.Go(func() {
			var resp *http.Response
			deadline := time.Now().Add(3 * time.Minute)
			for resp == nil {
				r, err := c.Get(url)
				switch {
				case err == nil && r.StatusCode == 200:
					resp = r
					continue
				case err == nil:
					_, _ = io.Copy(io.Discard, r.Body)
					r.Body.Close()
					err = fmt.Errorf("status %d", r.StatusCode)
				}
				if time.Now().After(deadline) {
					b.Errorf("open a connection to %s: %v", url, err)
					break
				}
			}
			got.Done()
			<-release
			if resp != nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	got.Wait()
	close(release)
	done.Wait()
	if b.Failed() {
		b.FailNow()
	}
}
