package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lathe/commands/automationrunner"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal/events"
	"lathe/runtime/polltest"
)

// chainAutomation is n tool nodes on lathe__echo, each passing the last
// one's output on.
func chainAutomation(id string, n int) events.Automation {
	a := events.Automation{ID: id, Name: id, Enabled: true, Trigger: events.Trigger{Kind: events.TriggerManual}}
	for i := range n {
		in := `{"text": "{{trigger}}"}`
		if i > 0 {
			in = fmt.Sprintf(`{"text": "{{node:n%d}}"}`, i-1)
		}
		a.Nodes = append(a.Nodes, events.Node{ID: fmt.Sprintf("n%d", i), Kind: events.NodeTool, ToolID: "lathe__echo", Input: in})
		if i > 0 {
			a.Edges = append(a.Edges, events.Edge{From: fmt.Sprintf("n%d", i-1), To: fmt.Sprintf("n%d", i)})
		}
	}
	return a
}

// BenchmarkAutomationChain100 is the engine's overhead: a 100-node chain of
// tool nodes on a trivial built-in tool, from the run's start to
// succeeded, each node's end committed (fsync) before the next starts.
func BenchmarkAutomationChain100(b *testing.B) {
	d, _ := startDaemon(b, 10*time.Second, nil, WithoutSandbox())
	ctx := context.Background()
	if _, err := d.cmds.Automations.CreateAutomation(ctx, chainAutomation("chain", 100)); err != nil {
		b.Fatal(err)
	}
	in := "x"
	b.ResetTimer()
	for range b.N {
		ex, err := d.cmds.Automations.Execute(ctx, "chain", automationrunner.RunRequest{Input: &in})
		if err != nil || ex.State != events.StateSucceeded || ex.Output != "x" {
			b.Fatalf("%+v %v", ex, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/run")
}

// BenchmarkAutomationConcurrent1000 runs 1,000 runs of a 10-node
// Automation at once until all have succeeded, and reports the peak RSS.
func BenchmarkAutomationConcurrent1000(b *testing.B) {
	d, _ := startDaemon(b, 10*time.Second, nil, WithoutSandbox())
	ctx := context.Background()
	if _, err := d.cmds.Automations.CreateAutomation(ctx, chainAutomation("ten", 10)); err != nil {
		b.Fatal(err)
	}
	in := "x"
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		errs := make(chan error, 1000)
		for range 1000 {
			wg.Go(func() {
				ex, err := d.cmds.Automations.Execute(ctx, "ten", automationrunner.RunRequest{Input: &in})
				if err == nil && ex.State != events.StateSucceeded {
					err = fmt.Errorf("run %s: %s %s", ex.RunID, ex.State, ex.Error)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/1000runs")
	b.ReportMetric(float64(procStatusKB(b, "VmHWM"))/1024, "peakRSS_MiB")
}

// procStatusKB reads a kB field of /proc/self/status.
func procStatusKB(b *testing.B, field string) int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return n
		}
	}
	return 0
}

// BenchmarkAutomationRestart1000Waiting restarts a daemon that holds 1,000
// runs waiting at an interrupt, and measures from the daemon being ready to
// serve (where the listening line is printed) to GET /api/interrupts
// answering all 1,000.
func BenchmarkAutomationRestart1000Waiting(b *testing.B) {
	dir := b.TempDir()
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	start, stop := restartable(b, cfg, dir)
	d := start()
	ctx := context.Background()
	gate := events.Automation{ID: "gate", Name: "Gate", Enabled: true, Trigger: events.Trigger{Kind: events.TriggerManual},
		Nodes: []events.Node{{ID: "ask", Kind: events.NodeInterrupt, Input: "approve {{trigger}}", ResumeStrategy: "replace"}}}
	if _, err := d.cmds.Automations.CreateAutomation(ctx, gate); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 1000 {
		in := strconv.Itoa(i)
		wg.Go(func() {
			if _, err := d.cmds.Automations.Run(ctx, "gate", automationrunner.RunRequest{Input: &in}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	polltest.Check(b, func() error {
		if n := len(d.store.Interrupts()); n < 1000 {
			return fmt.Errorf("%d interrupts", n)
		}
		return nil
	}, polltest.Within(time.Minute))
	stop(d)
	var worst, worstStart time.Duration
	b.ResetTimer()
	for range b.N {
		s0 := time.Now()
		d := start()
		t0 := time.Now() // Start returned: the daemon serves and prints its listening line
		worstStart = max(worstStart, t0.Sub(s0))
		srv := httptest.NewServer(d.Handler())
		resp, err := http.Get(srv.URL + "/api/interrupts")
		if err != nil {
			b.Fatal(err)
		}
		var list []json.RawMessage
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		took := time.Since(t0)
		if err != nil || len(list) != 1000 {
			b.Fatalf("%d interrupts, %v", len(list), err)
		}
		worst = max(worst, took)
		b.StopTimer()
		srv.Close()
		stop(d)
		b.StartTimer()
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms_to_listed_worst")
	b.ReportMetric(float64(worstStart.Microseconds())/1000, "ms_start_worst")
}
