package main

// Remote Sessions across SIGKILL, with the real binary and the machine's
// dockerd: a daemon killed while it provisions leaves no container behind
// once it has restarted (the attempt's creation token is in the journal
// before the engine is asked; reconstruction removes what no open Session
// owns).

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/journal/events"
	"lathe/runtime/git/gittest"
	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
)

// procContainers lists the IDs of every container labelled as this daemon's
// (lathe.daemon = owner), running or not.
func procContainers(t *testing.T, host, owner string) []string {
	t.Helper()
	out, err := exec.Command("docker", "-H", host, "ps", "-a", "-q", "--no-trunc", "--filter", "label="+docker.LabelDaemon+"="+owner).CombinedOutput()
	if err != nil {
		t.Fatalf("docker ps: %v: %s", err, out)
	}
	ids := strings.Fields(string(out))
	slices.Sort(ids)
	return ids
}

func TestRemoteKill9DuringProvisioning(t *testing.T) {
	host := dockertest.Host()
	dockertest.Docker(t, docker.Options{Host: host}) // skips without an engine
	const template = "lathe.local/sandbox:bookworm"
	cfg := writeConfig(t, fmt.Sprintf("sandbox:\n  provider: remote\n  default_image: %q\n  remote:\n    engine: docker\n    host: %q\n    template: %q\n",
		template, host, template))
	data := t.TempDir()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	for i := range 200 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.txt", i)), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-q", "-m", "first")

	d := procStart(t, data, "--config", cfg)
	owner, err := os.ReadFile(filepath.Join(data, "daemon-id"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ids := procContainers(t, host, strings.TrimSpace(string(owner))); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"-H", host, "rm", "-f"}, ids...)...).Run()
		}
	})
	var sessions []string
	for round := range 5 {
		id := procCreate(t, d, dir, "")
		sessions = append(sessions, id)
		// Kill at a different point of the attempt each round: as soon as
		// its token is journaled, or once the engine has its container.
		polltest.Check(t, func() error {
			if round%2 == 0 {
				if slices.Contains(procTypes(procEvents(t, d, id)), events.RuntimeProvisioning{}.EventType()) {
					return nil
				}
				return fmt.Errorf("no provisioning of %s journaled yet", id)
			}
			out, err := exec.Command("docker", "-H", host, "ps", "-a", "-q", "--filter", "label="+docker.LabelSession+"="+id).Output()
			if err == nil && len(strings.TrimSpace(string(out))) > 0 {
				return nil
			}
			return fmt.Errorf("no container of %s yet", id)
		}, polltest.Within(procSettle), polltest.Every(2*time.Millisecond))
		d.kill(t)
		d = procStart(t, data, "--config", cfg)
		// Every Session settles; each open Ready one owns exactly its
		// bound container, and nothing else of this daemon's is left.
		want := []string{}
		for _, s := range sessions {
			ss := procWait(t, d, s, "settled", procSettled)
			if ss.Environment.State == events.EnvReady {
				if ss.Environment.RuntimeID == "" || ss.Environment.CreationToken == "" {
					t.Fatalf("round %d: Ready Session %s without its runtime: %+v", round, s, ss.Environment.RemoteRuntime)
				}
				want = append(want, ss.Environment.RuntimeID)
			}
		}
		slices.Sort(want)
		polltest.Check(t, func() error {
			if got := procContainers(t, host, strings.TrimSpace(string(owner))); !slices.Equal(got, want) {
				return fmt.Errorf("round %d: this daemon's containers %v, want those of its Ready Sessions %v", round, got, want)
			}
			return nil
		}, polltest.Within(procSettle), polltest.Every(50*time.Millisecond))
		// A bundle the kill cut went at the start; the settled seeds
		// removed theirs.
		if left, _ := filepath.Glob(filepath.Join(data, "scratch", "lathe-bundle-*")); len(left) != 0 {
			t.Errorf("round %d: bundles left in the scratch folder: %v", round, left)
		}
	}
	for _, s := range sessions {
		if status, body := procDoLong(t, http.MethodDelete, d.url+"/api/sessions/"+s+"?force=true", ""); status != 200 {
			t.Errorf("force delete %s: %d %s", s, status, body)
		}
	}
	if got := procContainers(t, host, strings.TrimSpace(string(owner))); len(got) != 0 {
		t.Errorf("containers left after every Session was deleted: %v", got)
	}
	d.stop(t)
}
