package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// restart runs the restart scenario: it builds a data directory holding
// -sessions Sessions in about -events events (written straight through the
// journal), starts the daemon on it once (a full replay, which also ends the
// work a crash left and writes the checkpoint at its shutdown), then starts
// it -restarts more times and measures each from outside: from exec to the
// listening line, and to the last byte of a 200 on GET /api/sessions, which
// lists every Session.
func restart(ctx context.Context, o options, stdout, stderr io.Writer) error {
	dir := o.keep
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "lathe-load-restart-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	journalPath := filepath.Join(dir, "data", "journal.db")
	if _, err := os.Stat(journalPath); err == nil && o.keep != "" {
		fmt.Fprintf(stdout, "history_reused=%q\n", journalPath)
	} else {
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
			return err
		}
		t0 := time.Now()
		n, err := writeHistory(ctx, journalPath, o.sessions, o.events)
		if err != nil {
			return fmt.Errorf("build history: %w", err)
		}
		fmt.Fprintf(stdout, "history_events=%d history_sessions=%d build_s=%.1f\n", n, o.sessions, time.Since(t0).Seconds())
	}

	// cpus is the daemon's CPU time by its first answer: on a shared
	// machine it varies less than the wall time.
	var listening, listed, cpus []time.Duration
	for i := 0; i <= o.restarts; i++ {
		d, err := launch(ctx, o, dir, stderr)
		if err != nil {
			return err
		}
		got, count, err := firstList(ctx, d)
		cpu, _ := cpuSeconds(d.cmd.Process.Pid)
		if stopErr := d.stop(); err == nil {
			err = stopErr
		}
		if err != nil {
			return err
		}
		if count != o.sessions {
			return fmt.Errorf("GET /api/sessions listed %d Sessions, want %d", count, o.sessions)
		}
		if i == 0 {
			fmt.Fprintf(stdout, "cold_start_listening_ms=%.0f cold_start_sessions_ms=%.0f\n", ms(d.started), ms(got))
			continue
		}
		listening, listed = append(listening, d.started), append(listed, got)
		cpus = append(cpus, time.Duration(cpu*float64(time.Second)))
	}
	var cpMB float64
	if fi, err := os.Stat(filepath.Join(dir, "data", "projections.checkpoint")); err == nil {
		cpMB = float64(fi.Size()) / (1 << 20)
	}
	slices.Sort(listening)
	slices.Sort(listed)
	slices.Sort(cpus)
	fmt.Fprintf(stdout, "restart_listening_ms=%.1f restart_sessions_ms=%.1f (median of %d; min %.1f/%.1f, max %.1f/%.1f) daemon_cpu_ms=%.0f sessions=%d checkpoint_mb=%.1f load1=%s\n",
		ms(pct(listening, 50)), ms(pct(listed, 50)), len(listed), ms(listening[0]), ms(listed[0]),
		ms(listening[len(listening)-1]), ms(listed[len(listed)-1]), ms(pct(cpus, 50)), o.sessions, cpMB, load1())
	return nil
}

// firstList asks for GET /api/sessions right after the listening line and
// returns the time from exec to its whole 200 body, and how many Sessions it
// listed.
func firstList(ctx context.Context, d *daemon) (time.Duration, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/api/sessions", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	// Read into one buffer of the announced length, so that the client's
	// own growing and copying of a 35 MB body is not counted as the daemon's.
	var buf bytes.Buffer
	buf.Grow(int(max(resp.ContentLength, 0)) + 1)
	_, err = buf.ReadFrom(resp.Body)
	took := time.Since(d.t0)
	body := buf.Bytes()
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("GET /api/sessions: %s", resp.Status)
	}
	// Count the records without decoding them: each has one "workspace_id".
	count := bytes.Count(body, []byte(`"workspace_id":`))
	if count == 0 && len(body) > 2 {
		return 0, 0, errors.New("GET /api/sessions: no Sessions in the answer")
	}
	return took, count, nil
}
