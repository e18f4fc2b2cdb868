package daemon

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/git/gittest"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
)

// BenchmarkRemoteCreateToReady: Create → Ready of a remote Session on a
// 1,000-file Git repository against the machine's dockerd (image cached),
// beside, in the same run, `docker run --rm <template> true` plus `git
// clone` of the same repository; ratio = p50 / baseline p50 (target ≤ 1.5).
func BenchmarkRemoteCreateToReady(b *testing.B) {
	host := dockertest.Host()
	dockertest.Docker(b, docker.Options{Host: host}) // skips without an engine
	const template = "lathe.local/sandbox:bookworm"
	_, srv := startDaemon(b, 10*time.Second, func(c *config.Config) {
		c.Sandbox.Provider = config.SandboxRemote
		c.Sandbox.Remote.Host = host
		c.Sandbox.Remote.Template = template
	})
	dir := realDir(b, b.TempDir())
	gittest.Run(b, dir, "init", "-q", "-b", "main")
	for i := range 1000 {
		writeFile(b, filepath.Join(dir, fmt.Sprintf("d%02d/f%04d.txt", i/50, i)), fmt.Sprintf("file %d\n", i))
	}
	gittest.Run(b, dir, "add", "-A")
	gittest.Run(b, dir, "commit", "-q", "-m", "1k")
	ws := mustCall(b, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)

	var took, base []time.Duration
	for b.Loop() {
		t0 := time.Now()
		id := mustCall(b, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"bench",`+agentMode+`}`)["id"].(string)
		polltest.Check(b, func() error {
			var ss struct{ Environment struct{ State, Owner string } }
			if err := json.Unmarshal(call(b, srv, get, "/api/sessions/"+id, "").body, &ss); err != nil {
				return err
			}
			if ss.Environment.State == "failed" {
				b.Fatalf("session %s failed", id)
			}
			if ss.Environment.State != "ready" || ss.Environment.Owner != "" {
				return fmt.Errorf("environment %s", ss.Environment.State)
			}
			return nil
		}, polltest.Within(2*time.Minute), polltest.Every(5*time.Millisecond))
		took = append(took, time.Since(t0))
		b.StopTimer()
		mustCall(b, srv, 200, "DELETE", "/api/sessions/"+id+"?force=true", "")
		t0 = time.Now()
		if out, err := dockerCLI(host, "run", "--rm", template, "true"); err != nil {
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
