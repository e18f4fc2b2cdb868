package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"lathe/runtime/polltest"
	"lathe/runtime/sandbox/helper/helpertest"
)

// latheBin is the lathe binary TestMain builds once for every test.
var latheBin string

func TestMain(m *testing.M) {
	if latheBin = os.Getenv(helpertest.BinEnv); latheBin != "" {
		// Built beforehand: this test binary runs where it cannot build
		// (make test-podman runs it as an ordinary user).
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "lathe-process-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	latheBin = filepath.Join(dir, "lathe")
	build := exec.Command("go", "build", "-o", latheBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // static, as `make build` makes it: its own sandbox helper
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build lathe:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// lathe is one run of the binary.
type lathe struct {
	cmd    *exec.Cmd
	stdout polltest.Buffer
	stderr polltest.Buffer
	exited chan struct{} // closed once the process has been waited for
	err    error         // the Wait result, set before exited is closed
}

// env is the environment of every child: no config lookup from the
// developer's setup, and nothing written outside the test's directories.
func env(t *testing.T) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LATHE_") && !strings.HasPrefix(kv, "XDG_DATA_HOME=") {
			out = append(out, kv)
		}
	}
	return append(out, "XDG_DATA_HOME="+t.TempDir())
}

// startLathe starts the binary with args; the process is killed when the
// test ends if it is still running.
func startLathe(t *testing.T, args ...string) *lathe {
	t.Helper()
	l := &lathe{exited: make(chan struct{})}
	l.cmd = exec.Command(latheBin, args...)
	l.cmd.Dir = t.TempDir() // no ./lathe.yaml
	l.cmd.Env = env(t)
	l.cmd.Stdout, l.cmd.Stderr = &l.stdout, &l.stderr
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		l.err = l.cmd.Wait()
		close(l.exited)
	}()
	t.Cleanup(func() {
		_ = l.cmd.Process.Kill()
		<-l.exited
	})
	return l
}

// runLathe runs the binary to completion within 10 s and returns its exit
// code and output.
func runLathe(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	l := startLathe(t, args...)
	code, ok := l.wait(10 * time.Second)
	if !ok {
		t.Fatalf("lathe %s did not exit within 10s; stderr:\n%s", strings.Join(args, " "), l.stderr.String())
	}
	return code, l.stdout.String(), l.stderr.String()
}

// wait waits up to d for the process to exit and returns its exit code.
func (l *lathe) wait(d time.Duration) (code int, exited bool) {
	select {
	case <-l.exited:
	case <-time.After(d):
		return 0, false
	}
	var exit *exec.ExitError
	switch {
	case l.err == nil:
		return 0, true
	case errors.As(l.err, &exit):
		return exit.ExitCode(), true // -1 when killed by a signal
	default:
		return -1, true
	}
}

// daemonProc is a running `lathe serve`.
type daemonProc struct {
	*lathe
	url  string // http://127.0.0.1:PORT
	data string
}

var listeningLine = regexp.MustCompile(`(?m)^lathe listening on (http://127\.0\.0\.1:([0-9]+))$`)

// startDaemon starts `lathe serve --data data --listen 127.0.0.1:0` and waits
// for its listening line.
func startDaemon(t *testing.T, data string, extra ...string) *daemonProc {
	t.Helper()
	l := startLathe(t, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0"}, extra...)...)
	var m []string
	polltest.Check(t, func() error {
		if m = listeningLine.FindStringSubmatch(l.stderr.String()); m != nil {
			return nil
		}
		select {
		case <-l.exited:
			t.Fatalf("lathe serve exited before listening: %v\n%s", l.err, l.stderr.String())
		default:
		}
		return fmt.Errorf("no listening line; stderr:\n%s", l.stderr.String())
	}, polltest.Within(10*time.Second))
	if m[2] == "0" {
		t.Fatalf("listening line names port 0: %q", m[0])
	}
	return &daemonProc{lathe: l, url: m[1], data: data}
}

// stop sends SIGTERM and requires exit status 0 within the 10 s the
// contract allows.
func (d *daemonProc) stop(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, ok := d.wait(10 * time.Second)
	if !ok {
		t.Fatalf("no exit within 10s of SIGTERM; stderr:\n%s", d.stderr.String())
	}
	if code != 0 {
		t.Fatalf("exit status %d after SIGTERM; stderr:\n%s", code, d.stderr.String())
	}
}

// kill sends SIGKILL and waits for the process to die.
func (d *daemonProc) kill(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.wait(10 * time.Second); !ok {
		t.Fatal("no exit within 10s of SIGKILL")
	}
}

// get fetches path and returns status and body.
func (d *daemonProc) get(t *testing.T, client *http.Client, path string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url+path, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, body
}

// post sends a JSON body and returns status and body.
func post(ctx context.Context, client *http.Client, url, body string) (int, []byte, error) {
	return request(ctx, client, http.MethodPost, url, body)
}

// get reads url and returns status and body.
func get(ctx context.Context, url string) (int, []byte, error) {
	return request(ctx, http.DefaultClient, http.MethodGet, url, "")
}

func request(ctx context.Context, client *http.Client, method, url, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func idOf(t *testing.T, body []byte) string {
	t.Helper()
	var rec struct{ ID string }
	if err := json.Unmarshal(body, &rec); err != nil || rec.ID == "" {
		t.Fatalf("no id in %s", body)
	}
	return rec.ID
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lathe.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ---------------------------------------------------------------------------

func TestServePrintsTheListeningLine(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	if got := listeningLine.FindAllString(d.stderr.String(), -1); len(got) != 1 {
		t.Errorf("listening lines %q, want exactly one", got)
	}
	code, body := d.get(t, http.DefaultClient, "/health/live")
	if code != 200 {
		t.Errorf("GET /health/live on the printed address: %d %s", code, body)
	}
	d.stop(t)
}

func TestSIGTERMClosesLiveStreamsAndExitsZero(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, d.url+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for _, kind := range []string{"ready", "snapshot"} {
		_, raw, err := c.Read(ctx)
		if err != nil || !strings.Contains(string(raw), `"kind":"`+kind+`"`) {
			t.Fatalf("want %s frame, got %s (%v)", kind, raw, err)
		}
	}

	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Read(ctx)
	if status := websocket.CloseStatus(err); status != websocket.StatusGoingAway {
		t.Errorf("/ws client got %v (close status %d), want a going-away close frame", err, status)
	}
	code, ok := d.wait(10 * time.Second)
	switch {
	case !ok:
		t.Fatalf("no exit within 10s of SIGTERM; stderr:\n%s", d.stderr.String())
	case code != 0:
		t.Fatalf("exit status %d after SIGTERM; stderr:\n%s", code, d.stderr.String())
	}
	t.Logf("graceful shutdown took %v", time.Since(start))
}

func TestSecondDaemonOnTheSameDataDirFailsFast(t *testing.T) {
	data := t.TempDir()
	first := startDaemon(t, data)
	// The first's scratch, which a start empties: the second, refused,
	// must not.
	inUse := filepath.Join(data, "scratch", "lathe-bundle-in-use")
	if err := os.WriteFile(inUse, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, stderr := runLathe(t, "serve", "--data", data, "--listen", "127.0.0.1:0")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("second daemon took %v to fail, want < 5s", took)
	}
	if code == 0 {
		t.Errorf("second daemon exited 0; stderr:\n%s", stderr)
	}
	if !strings.Contains(stderr, "lock") || !strings.Contains(stderr, "another") {
		t.Errorf("second daemon's message does not mention the lock held by another daemon:\n%s", stderr)
	}
	if listeningLine.MatchString(stderr) {
		t.Errorf("second daemon printed a listening line:\n%s", stderr)
	}
	// The first one is unharmed.
	if code, _ := first.get(t, http.DefaultClient, "/health/live"); code != 200 {
		t.Errorf("first daemon answers %d after the second failed", code)
	}
	if _, err := os.Stat(inUse); err != nil {
		t.Errorf("the second daemon touched the first's scratch: %v", err)
	}
	first.stop(t)
}

// TestStartClearsWhatAKillLeft: files a kill -9 leaves half written or
// unused in the data dir (a checkpoint being written, a blob being staged,
// a bundle on its way to a remote sandbox, a hook's scratch folder) go at
// the next start; what was whole stays.
func TestStartClearsWhatAKillLeft(t *testing.T) {
	data := t.TempDir()
	d := startDaemon(t, data)
	d.stop(t) // a clean stop writes the checkpoint
	checkpoint, err := os.ReadFile(filepath.Join(data, "projections.checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	left := []string{
		filepath.Join(data, ".checkpoint-123"),
		filepath.Join(data, "blobs", "tmp", "stage-123"),
		filepath.Join(data, "scratch", "lathe-bundle-123"),
		filepath.Join(data, "scratch", "lathe-hooks-123", "out.txt"),
		filepath.Join(data, "scratch", "lathe-remote-hooks", "S1", "state"),
	}
	for _, p := range left {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d = startDaemon(t, data)
	for _, p := range left {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s stayed: %v", p, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(data, "projections.checkpoint")); err != nil || !bytes.Equal(b, checkpoint) {
		t.Errorf("the checkpoint changed at start: %v", err)
	}
	if code, _ := d.get(t, http.DefaultClient, "/health/live"); code != 200 {
		t.Errorf("the daemon answers %d", code)
	}
}

// TestKill9KeepsEveryAcknowledgedSession kills the daemon with SIGKILL in
// the middle of a burst of concurrent Session creates, and checks that
// every create answered 201 survived, that the journal verifies, and that
// the projections rebuilt on restart (checkpoint plus tail) equal a full
// replay.
func TestKill9KeepsEveryAcknowledgedSession(t *testing.T) {
	for _, tc := range []struct {
		name      string
		killAfter int // acknowledged creates before SIGKILL
	}{
		{"early", 1},
		{"mid", 40},
		{"late", 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			t.Cleanup(client.CloseIdleConnections)

			// A first life leaves a checkpoint, so the restart after the
			// crash restores it and replays only the tail.
			d := startDaemon(t, data)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			status, body, err := post(ctx, client, d.url+"/api/workspaces", `{"path":"`+t.TempDir()+`"}`)
			if err != nil || status != 201 {
				t.Fatalf("register workspace: %d %s %v", status, body, err)
			}
			// The Sessions carry an unreviewed setup command, so they await
			// approval and no sandbox preparation races the comparison below.
			sessionsOf := "/api/workspaces/" + idOf(t, body) + "/sessions"
			for i := range 3 {
				if status, body, err := post(ctx, client, d.url+sessionsOf, fmt.Sprintf(`{"name":"before-%d","mode":{"kind":"lattice"},"setup_command":"make deps"}`, i)); err != nil || status != 201 {
					t.Fatalf("create session: %d %s %v", status, body, err)
				}
			}
			d.stop(t)
			if _, err := os.Stat(filepath.Join(data, "projections.checkpoint")); err != nil {
				t.Fatalf("no checkpoint after a graceful stop: %v", err)
			}

			d = startDaemon(t, data)
			create := d.url + sessionsOf
			var (
				mu       sync.Mutex
				acked    []string
				reached  = make(chan struct{})
				wg       sync.WaitGroup
				burstCtx context.Context
			)
			burstCtx, stopBurst := context.WithCancel(ctx)
			defer stopBurst()
			for w := range 32 {
				wg.Go(func() {
					for i := 0; burstCtx.Err() == nil; i++ {
						body := fmt.Sprintf(`{"name":"w%d-%d","mode":{"kind":"single_agent","agent_id":"coder"},"exposed_ports":[%d],"setup_command":"make deps"}`, w, i, 1024+i)
						status, resp, err := post(burstCtx, client, create, body)
						if err != nil {
							return // the daemon is gone
						}
						if status != 201 {
							t.Errorf("create: %d %s", status, resp)
							return
						}
						var rec struct{ ID string }
						if json.Unmarshal(resp, &rec) != nil || rec.ID == "" {
							continue // cut off mid-body: not an acknowledgement
						}
						mu.Lock()
						acked = append(acked, rec.ID)
						if len(acked) == tc.killAfter {
							close(reached)
						}
						mu.Unlock()
					}
				})
			}
			select {
			case <-reached:
			case <-ctx.Done():
				t.Fatal("burst never reached the kill point")
			}
			d.kill(t)
			stopBurst()
			wg.Wait()
			client.CloseIdleConnections()
			mu.Lock()
			ackedIDs := append([]string(nil), acked...)
			mu.Unlock()
			t.Logf("killed after %d acknowledged creates", len(ackedIDs))

			code, stdout, stderr := runLathe(t, "journal", "verify", "--data", data)
			if code != 0 || !strings.HasPrefix(stdout, "ok ") {
				t.Fatalf("journal verify after SIGKILL: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}

			d = startDaemon(t, data)
			for _, id := range ackedIDs {
				if status, body := d.get(t, client, "/api/sessions/"+id); status != 200 {
					t.Errorf("acknowledged session %s: %d %s", id, status, body)
				}
			}
			status, restored := d.get(t, client, "/api/sessions")
			if status != 200 {
				t.Fatalf("GET /api/sessions: %d", status)
			}
			d.stop(t)

			if err := os.Remove(filepath.Join(data, "projections.checkpoint")); err != nil {
				t.Fatal(err)
			}
			d = startDaemon(t, data)
			status, replayed := d.get(t, client, "/api/sessions")
			if status != 200 {
				t.Fatalf("GET /api/sessions: %d", status)
			}
			if !bytes.Equal(restored, replayed) {
				t.Errorf("sessions after the crash restart differ from a full replay:\nrestart %s\nreplay  %s", restored, replayed)
			}
			var list []json.RawMessage
			if err := json.Unmarshal(replayed, &list); err != nil || len(list) < 3+len(ackedIDs) {
				t.Errorf("%d sessions after replay, want at least %d (%v)", len(list), 3+len(ackedIDs), err)
			}
			d.stop(t)
		})
	}
}

func TestBadConfigurationIsRefused(t *testing.T) {
	t.Run("unknown key names the dotted key", func(t *testing.T) {
		cfg := writeConfig(t, "server:\n  listen: \"127.0.0.1:0\"\n  rate_limit:\n    burts: 3\n")
		code, _, stderr := runLathe(t, "serve", "--config", cfg, "--data", t.TempDir())
		if code == 0 || !strings.Contains(stderr, "server.rate_limit.burts") {
			t.Errorf("exit %d, stderr:\n%s\nwant a non-zero exit naming server.rate_limit.burts", code, stderr)
		}
	})
	t.Run("non-loopback listen without keys", func(t *testing.T) {
		code, _, stderr := runLathe(t, "serve", "--data", t.TempDir(), "--listen", "0.0.0.0:0")
		if code == 0 || !strings.Contains(stderr, "server.listen") || !strings.Contains(stderr, "not a loopback address") ||
			!strings.Contains(stderr, "api_keys") {
			t.Errorf("exit %d, stderr:\n%s\nwant a refusal explaining loopback mode", code, stderr)
		}
		if listeningLine.MatchString(stderr) || strings.Contains(stderr, "listening") {
			t.Errorf("refused daemon claims to listen:\n%s", stderr)
		}
	})
	t.Run("missing config file", func(t *testing.T) {
		code, _, stderr := runLathe(t, "serve", "--config", filepath.Join(t.TempDir(), "nope.yaml"), "--data", t.TempDir())
		if code == 0 || !strings.Contains(stderr, "nope.yaml") {
			t.Errorf("exit %d, stderr:\n%s", code, stderr)
		}
	})
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := runLathe(t, "version")
	if code != 0 || !regexp.MustCompile(`^lathe \S+\n$`).MatchString(stdout) {
		t.Errorf("lathe version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestURL(t *testing.T) {
	code, stdout, stderr := runLathe(t, "url")
	if code != 0 || stdout != "http://localhost:8080/\n" {
		t.Errorf("lathe url without keys: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	const key = "process-test-key-0123456789"
	cfg := writeConfig(t, "server:\n  api_keys: [\""+key+"\"]\n")
	code, stdout, stderr = runLathe(t, "url", "--config", cfg)
	if code != 0 || stdout != "http://localhost:8080/?token="+key+"\n" {
		t.Errorf("lathe url with a key: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
