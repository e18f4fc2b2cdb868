package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
)

// The baseline is what this machine's HTTP stack does with no daemon
// behind it: a minimal Go server, in its own process as the daemon is,
// driven by the same clients with the same requests. It decodes each
// create's JSON body and answers 201 with a small JSON record; it keeps
// nothing but a count, writes nothing to disk and publishes nothing. The
// daemon's rate over the baseline's is the share of the machine's HTTP
// throughput that the daemon's own work (journal, projections, frames,
// NATS) leaves.

// serveMinimal runs the minimal server on a free loopback port, prints its
// URL on stdout and serves until it is killed.
func serveMinimal(stdout io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var created atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/workspaces", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"minimal"}`+"\n")
	})
	mux.HandleFunc("POST /api/workspaces/{id}/sessions", func(w http.ResponseWriter, r *http.Request) {
		var spec struct {
			Name          string          `json:"name"`
			Mode          json.RawMessage `json:"mode"`
			EnabledSkills []string        `json:"enabled_skills"`
			ExposedPorts  []int           `json:"exposed_ports"`
			SetupCommand  string          `json:"setup_command"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&spec); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n := created.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": strconv.FormatInt(n, 10), "workspace_id": r.PathValue("id"), "name": spec.Name})
	})
	mux.HandleFunc("GET /api/workspaces/{id}/sessions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n := int(created.Load())
		_, _ = io.WriteString(w, "["+strings.TrimSuffix(strings.Repeat("{},", n), ",")+"]\n")
	})
	fmt.Fprintf(stdout, "%shttp://%s\n", listeningPrefix, ln.Addr())
	return http.Serve(ln, mux)
}

// baseline starts the minimal server, drives it as the sessions scenario
// drove the daemon, and prints both rates and their ratio.
func baseline(ctx context.Context, o options, daemonRate float64, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, "-minimal-server")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	url := ""
	if lines.Scan() {
		url, _ = strings.CutPrefix(lines.Text(), listeningPrefix)
	}
	if url == "" {
		return errors.New("the minimal server printed no URL")
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	fmt.Fprintf(stdout, "baseline: a minimal Go HTTP server (JSON decode, 201 with a small JSON record, nothing stored), same clients and requests:\n")
	o.baseline = false
	rate, err := sessions(ctx, o, url, cmd.Process.Pid, io.Discard, stderr)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	fmt.Fprintf(stdout, "baseline_per_sec=%.0f lathe_per_sec=%.0f ratio=%.2f clients=%d duration_s=%.0f load1=%s\n",
		rate, daemonRate, daemonRate/max(rate, 1), o.clients, o.duration.Seconds(), load1())
	return nil
}
