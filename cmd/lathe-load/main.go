// Command lathe-load drives a Lathe daemon with load and prints one
// machine-readable line per figure.
//
//	lathe-load -lathe ./lathe -scenario restart [-sessions 50000] [-events 1000000] [-restarts 5]
//	lathe-load -lathe ./lathe [-scenario all|sessions|rss] [-clients 64] [-duration 5s | -n N] [-key K] [-journal FILE]
//	lathe-load -url http://127.0.0.1:8080 [-clients 64] [-duration 5s | -n N] [-key K]
//
// With -lathe it starts that binary itself ("serve" on 127.0.0.1:0 with a
// fresh data directory) and stops it with SIGTERM at the end; with -url it
// drives a daemon that is already running.
//
// Scenarios:
//
//	rss       wait until the started daemon has been idle for -idle, then read
//	          VmRSS from /proc/<pid>/status: idle_rss_mb=…
//	sessions  register a Workspace (a temp dir), then -clients keep-alive
//	          clients POST /api/workspaces/{id}/sessions as fast as they can;
//	          only a 201 counts, and a 201 means the Session is durable:
//	          sessions_per_sec=… p50_ms=… p99_ms=…; then, for a daemon it
//	          started, loaded_rss_mb=… (read right after the last 201)
//	all       rss, then sessions (the default with -lathe)
//
// With -baseline, the sessions scenario then drives a minimal Go HTTP
// server (baseline.go) the same way and prints baseline_per_sec and the
// daemon's ratio to it.
//
//	restart   build a data directory of -events events over -sessions
//	          Sessions straight through the journal, start the daemon on it
//	          once (full replay; its shutdown writes the checkpoint), then
//	          restart it -restarts times: restart_listening_ms (exec to the
//	          listening line) and restart_sessions_ms (exec to the whole 200
//	          of GET /api/sessions, every Session), medians with min and max
//
// The daemon it starts gets a config whose containerd address does not
// exist, so that no run creates sandboxes on the machine, and -journal seeds
// its data directory with a copy of an existing journal (start_s then
// includes the replay, and idle_rss_mb the memory the replay leaves).
// Everything is bounded by -timeout.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	url, lathe, key, scenario string
	journal                   string
	clients, n                int
	sessions, events          int // restart: the history's size
	restarts                  int
	keep                      string // restart: the directory to build in (or reuse) and keep
	duration, idle, timeout   time.Duration
	verbose                   bool
	baseline                  bool // sessions: also drive a minimal Go server (baseline.go)
	minimal                   bool // run as that minimal server
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "lathe-load:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("lathe-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", "", "base URL of a running daemon (instead of -lathe)")
	fs.StringVar(&o.lathe, "lathe", "", "path of the lathe binary to start (instead of -url)")
	fs.StringVar(&o.journal, "journal", "", "with -lathe: start from a copy of this journal.db (restart time, RSS after a replay)")
	fs.StringVar(&o.key, "key", "", "x-api-key to send (with -lathe, the daemon is configured to require it)")
	fs.StringVar(&o.scenario, "scenario", "", "all, sessions or rss (default: all with -lathe, sessions with -url)")
	fs.IntVar(&o.clients, "clients", 64, "concurrent keep-alive clients")
	fs.IntVar(&o.n, "n", 0, "create exactly this many Sessions (overrides -duration)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "how long to create Sessions")
	fs.DurationVar(&o.idle, "idle", 2*time.Second, "rss: how long the daemon idles after it is ready")
	fs.DurationVar(&o.timeout, "timeout", 0, "bound on the whole run (default: -duration + 1m, or 5m with -n)")
	fs.IntVar(&o.sessions, "sessions", 50_000, "restart: Sessions in the generated history")
	fs.IntVar(&o.events, "events", 1_000_000, "restart: events in the generated history")
	fs.IntVar(&o.restarts, "restarts", 5, "restart: measured restarts after the first start")
	fs.StringVar(&o.keep, "keep", "", "restart: build the data directory here, or reuse the one built here, and keep it")
	fs.BoolVar(&o.baseline, "baseline", false, "sessions: then drive a minimal Go HTTP server the same way and print the ratio")
	fs.BoolVar(&o.minimal, "minimal-server", false, "run the minimal Go HTTP server that -baseline drives (internal)")
	fs.BoolVar(&o.verbose, "v", false, "copy the daemon's stderr to this stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.minimal {
		return serveMinimal(stdout)
	}
	if (o.url == "") == (o.lathe == "") {
		return errors.New("give exactly one of -url and -lathe")
	}
	if o.scenario == "" {
		o.scenario = "sessions"
		if o.lathe != "" {
			o.scenario = "all"
		}
	}
	switch {
	case o.scenario != "all" && o.scenario != "sessions" && o.scenario != "rss" && o.scenario != "restart":
		return fmt.Errorf("unknown -scenario %q: want all, sessions, rss or restart", o.scenario)
	case o.scenario == "restart" && o.lathe == "":
		return errors.New("-scenario restart starts the daemon itself, so it needs -lathe")
	case o.scenario == "restart" && (o.sessions < 1 || o.restarts < 1):
		return errors.New("-scenario restart needs -sessions and -restarts of at least 1")
	case o.scenario != "sessions" && o.lathe == "":
		return fmt.Errorf("-scenario %s reads the daemon's RSS, so it needs -lathe", o.scenario)
	case o.clients < 1:
		return errors.New("-clients must be at least 1")
	}
	if o.timeout == 0 {
		o.timeout = o.duration + time.Minute
		if o.n > 0 {
			o.timeout = 5 * time.Minute
		}
		if o.scenario == "restart" {
			o.timeout = 15 * time.Minute
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if o.scenario == "restart" {
		return restart(ctx, o, stdout, stderr)
	}

	base := strings.TrimRight(o.url, "/")
	pid := 0
	if o.lathe != "" {
		d, err := startDaemon(ctx, o, stderr)
		if err != nil {
			return err
		}
		defer func() {
			if err := d.stop(); err != nil {
				fmt.Fprintln(stderr, "lathe-load:", err)
			}
		}()
		base, pid = d.url, d.cmd.Process.Pid
		fmt.Fprintf(stdout, "start_s=%.3f journal=%q\n", d.started.Seconds(), o.journal)
	}

	if o.scenario != "sessions" {
		select {
		case <-time.After(o.idle):
		case <-ctx.Done():
			return ctx.Err()
		}
		rss, err := readRSS(pid)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "idle_rss_mb=%.1f anon_mb=%.1f file_mb=%.1f idle_s=%g load1=%s\n", rss.total, rss.anon, rss.file, o.idle.Seconds(), load1())
	}
	if o.scenario != "rss" {
		rate, err := sessions(ctx, o, base, pid, stdout, stderr)
		if err != nil {
			return err
		}
		if o.baseline {
			return baseline(ctx, o, rate, stdout, stderr)
		}
	}
	return nil
}

// sessions runs the Session-creation scenario and prints its line.
func sessions(ctx context.Context, o options, base string, pid int, stdout, stderr io.Writer) (float64, error) {
	var dials atomic.Int64
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	client := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return dialer.DialContext(ctx, network, addr)
			},
			MaxIdleConns:        2 * o.clients,
			MaxIdleConnsPerHost: 2 * o.clients,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
	defer client.CloseIdleConnections()
	api := &apiClient{http: client, base: base, key: o.key}

	dir, err := os.MkdirTemp("", "lathe-load-workspace-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	var ws struct {
		ID string `json:"id"`
	}
	if err := api.do(ctx, http.MethodPost, "/api/workspaces", map[string]string{"path": dir}, &ws, http.StatusCreated, http.StatusOK); err != nil {
		return 0, fmt.Errorf("register workspace: %w", err)
	}
	path := "/api/workspaces/" + ws.ID + "/sessions"
	// A setup command that awaits review keeps the create to the journal
	// and the projections: a Session without one would prepare a sandbox
	// in the background, which is not what this scenario measures.
	body := []byte(`{"name":"load test session","mode":{"kind":"lattice"},"enabled_skills":["git"],"exposed_ports":[3000],"setup_command":"npm ci"}`)

	loadBefore := load1()
	cpu0, _ := cpuSeconds(pid)
	self0 := selfCPUSeconds()
	var (
		issued   atomic.Int64
		deadline = time.Now().Add(o.duration)
		lats     = make([][]time.Duration, o.clients)
		fails    = make([]map[string]int, o.clients)
		wg       sync.WaitGroup
	)
	start := time.Now()
	for c := range o.clients {
		fails[c] = map[string]int{}
		wg.Go(func() {
			for ctx.Err() == nil {
				// A request once sent is always awaited, so that every
				// Session the daemon acknowledged is counted.
				if o.n > 0 && issued.Add(1) > int64(o.n) || o.n == 0 && time.Now().After(deadline) {
					return
				}
				t0 := time.Now()
				status, err := api.post(ctx, path, body)
				switch {
				case err != nil && ctx.Err() != nil:
					return
				case err != nil:
					fails[c]["transport"]++
					time.Sleep(10 * time.Millisecond) // do not spin on a dead daemon
				case status == http.StatusCreated:
					lats[c] = append(lats[c], time.Since(t0))
				default:
					fails[c][strconv.Itoa(status)]++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("sessions scenario cut short: %w", err)
	}
	cpu1, cpuErr := cpuSeconds(pid)
	self1 := selfCPUSeconds()
	// Read before the listing below, whose response buffer would count too.
	loadedRSS, rssErr := readRSS(pid)

	all := slices.Concat(lats...)
	slices.Sort(all)
	failed := map[string]int{}
	nfail := 0
	for _, f := range fails {
		for k, v := range f {
			failed[k] += v
			nfail += v
		}
	}
	var listed []json.RawMessage
	if err := api.do(ctx, http.MethodGet, path, nil, &listed, http.StatusOK); err != nil {
		return 0, fmt.Errorf("list sessions: %w", err)
	}

	line := fmt.Sprintf("sessions_per_sec=%.0f created=%d errors=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f clients=%d elapsed_s=%.2f conns=%d listed=%d driver_cpu_s=%.2f",
		float64(len(all))/elapsed.Seconds(), len(all), nfail, ms(pct(all, 50)), ms(pct(all, 99)), ms(pct(all, 100)),
		o.clients, elapsed.Seconds(), dials.Load(), len(listed), self1-self0)
	if pid != 0 && cpuErr == nil {
		line += fmt.Sprintf(" daemon_cpu_s=%.2f daemon_cpu_us_per_session=%.0f", cpu1-cpu0, (cpu1-cpu0)*1e6/float64(max(1, len(all))))
	}
	fmt.Fprintf(stdout, "%s load1=%s\n", line, loadBefore)
	if pid != 0 && rssErr == nil {
		fmt.Fprintf(stdout, "loaded_rss_mb=%.1f anon_mb=%.1f file_mb=%.1f sessions=%d\n", loadedRSS.total, loadedRSS.anon, loadedRSS.file, len(listed))
	}
	if nfail > 0 {
		fmt.Fprintf(stderr, "lathe-load: failures by status: %v\n", failed)
	}
	if len(listed) != len(all) {
		fmt.Fprintf(stderr, "lathe-load: the workspace lists %d sessions but %d creates were acknowledged\n", len(listed), len(all))
	}
	return float64(len(all)) / elapsed.Seconds(), nil
}

// apiClient calls the daemon's JSON API.
type apiClient struct {
	http *http.Client
	base string
	key  string
}

func (a *apiClient) post(ctx context.Context, path string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.key != "" {
		req.Header.Set("X-Api-Key", a.key)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body) // drain, so that the connection is reused
	resp.Body.Close()
	return resp.StatusCode, nil
}

// do sends in as JSON (unless nil), expects one of the statuses and decodes
// the response into out.
func (a *apiClient) do(ctx context.Context, method, path string, in, out any, want ...int) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.key != "" {
		req.Header.Set("X-Api-Key", a.key)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if !slices.Contains(want, resp.StatusCode) {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}

// daemon is a lathe process this driver started.
type daemon struct {
	cmd     *exec.Cmd
	url     string
	dir     string
	exited  chan struct{}
	err     error // cmd.Wait's result, once exited is closed
	log     *logTail
	t0      time.Time     // exec
	started time.Duration // from exec to the listening line
	// removeDir: stop removes dir (a fresh directory startDaemon made).
	removeDir bool
}

// startDaemon runs "lathe serve" on a free loopback port with a fresh data
// directory and waits until it answers /health/live.
func startDaemon(ctx context.Context, o options, stderr io.Writer) (*daemon, error) {
	dir, err := os.MkdirTemp("", "lathe-load-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if o.journal != "" {
		if err := copyFile(o.journal, filepath.Join(data, "journal.db")); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	d, err := launch(ctx, o, dir, stderr)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	d.removeDir = true
	client := &http.Client{Timeout: time.Second}
	for i := 0; ; i++ {
		resp, err := client.Get(d.url + "/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, nil
			}
		}
		if i == 100 || ctx.Err() != nil {
			err = fmt.Errorf("lathe at %s is not live after 10s (last: %v)", d.url, err)
			return nil, errors.Join(err, d.stop())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// launch runs "lathe serve" on a free loopback port with dir/data as its
// data directory and returns once it printed its listening line. Its stop
// leaves dir in place.
func launch(ctx context.Context, o options, dir string, stderr io.Writer) (*daemon, error) {
	data := filepath.Join(dir, "data")
	// The daemon never reaches a real containerd: a load run must not
	// create sandboxes on this machine.
	cfg := fmt.Appendf(nil, "sandbox:\n  containerd:\n    address: %q\n", filepath.Join(dir, "no-containerd.sock"))
	if o.key != "" {
		cfg = fmt.Appendf(cfg, "server:\n  api_keys: [%q]\n", o.key)
	}
	cfgPath := filepath.Join(dir, "lathe.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, err
	}
	args := []string{"serve", "--config", cfgPath, "--data", data, "--listen", "127.0.0.1:0"}
	log := &logTail{ready: make(chan string, 1)}
	if o.verbose {
		log.copy = stderr
	}
	cmd := exec.Command(o.lathe, args...)
	cmd.Dir = dir // so that no ./lathe.yaml is picked up
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "LATHE_CONFIG=") })
	cmd.Stderr = log
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, dir: dir, exited: make(chan struct{}), log: log, t0: t0}
	go func() {
		d.err = cmd.Wait()
		close(d.exited)
	}()
	fail := func(err error) (*daemon, error) {
		if stopErr := d.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	// Start-up replays the journal and reconstructs environments: with a
	// large -journal that takes a while, so only -timeout bounds it.
	startBy := time.NewTimer(o.timeout)
	defer startBy.Stop()
	select {
	case d.url = <-log.ready:
		d.started = time.Since(t0)
	case <-d.exited:
		return fail(fmt.Errorf("lathe exited before listening (%v):\n%s", d.err, log.String()))
	case <-startBy.C:
		return fail(fmt.Errorf("lathe did not print its listening line within %s:\n%s", o.timeout, log.String()))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	return d, nil
}

// stop sends SIGTERM, waits for the exit (killing the process after 15 s)
// and removes the data directory if startDaemon made it.
func (d *daemon) stop() error {
	if d.removeDir {
		defer os.RemoveAll(d.dir)
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
		return fmt.Errorf("lathe did not exit within 15s of SIGTERM; killed:\n%s", d.log.String())
	}
	if d.err != nil {
		return fmt.Errorf("lathe exited with %v:\n%s", d.err, d.log.String())
	}
	return nil
}

// logTail receives the daemon's stderr: it finds the listening line and
// keeps the last lines for error reports.
type logTail struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	ready   chan string
	found   bool
	copy    io.Writer
}

const listeningPrefix = "lathe listening on "

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.copy != nil {
		_, _ = l.copy.Write(p)
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		if rest, ok := strings.CutPrefix(line, listeningPrefix); ok && !l.found {
			l.found = true
			l.ready <- strings.TrimSpace(rest)
		}
		if l.lines = append(l.lines, line); len(l.lines) > 40 {
			l.lines = l.lines[1:]
		}
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// rss is a process's resident set, in MiB: anonymous memory (the heap and
// stacks) and mapped files (the binary, and the journal's bbolt mmap).
type rss struct{ total, anon, file float64 }

func readRSS(pid int) (rss, error) {
	var r rss
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return r, err
	}
	found := 0
	for line := range strings.Lines(string(b)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *float64
		switch key {
		case "VmRSS":
			dst = &r.total
		case "RssAnon":
			dst = &r.anon
		case "RssFile":
			dst = &r.file
		default:
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(val), "kB")), 64)
		if err != nil {
			return r, fmt.Errorf("%s of %d: %w", key, pid, err)
		}
		*dst = kb / 1024
		found++
	}
	if found != 3 {
		return r, fmt.Errorf("no VmRSS, RssAnon and RssFile in /proc/%d/status", pid)
	}
	return r, nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// cpuSeconds is the user+system CPU a process has used, from /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	if pid == 0 {
		return 0, errors.New("no pid")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("malformed stat")
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const ticks = 100 // USER_HZ on Linux
	return (utime + stime) / ticks, nil
}

func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// load1 is the one-minute load average, for judging a figure's reliability.
func load1() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
