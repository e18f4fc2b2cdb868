package daemon

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"lathe/commands/core"

	"github.com/coder/websocket"
)

// BenchmarkApprovalFrame100 measures, for 100 connected /ws clients, the
// time from a call being parked (Park is called) to each client holding its
// mcp-approval-required frame. It reports p50 and p99 over every client and
// call.
func BenchmarkApprovalFrame100(b *testing.B) {
	d, srv := startDaemon(b, 10*time.Second, nil, WithoutSandbox())
	ctx := context.Background()
	const clients = 100
	conns := make([]*websocket.Conn, clients)
	for i := range conns {
		c, _, err := websocket.Dial(ctx, wsURL(srv), nil)
		if err != nil {
			b.Fatal(err)
		}
		c.SetReadLimit(1 << 20)
		defer c.CloseNow()
		for _, want := range []string{"ready", "snapshot"} {
			if _, raw, err := c.Read(ctx); err != nil || !json.Valid(raw) {
				b.Fatalf("%s: %v", want, err)
			}
		}
		conns[i] = c
	}
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		parked := make(chan string, 1)
		go func() {
			_, _ = d.cmds.Approvals.Park(ctx, core.ApprovalRequest{AgentID: "coder", Server: "fs", Tool: "read", Arguments: json.RawMessage(`{}`)})
		}()
		var wg sync.WaitGroup
		for i, c := range conns {
			wg.Go(func() {
				for {
					_, raw, err := c.Read(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					var f struct {
						Kind       string `json:"kind"`
						ApprovalID string `json:"approval_id"`
					}
					_ = json.Unmarshal(raw, &f)
					if f.Kind == "mcp-approval-required" {
						took := time.Since(t0)
						mu.Lock()
						lat = append(lat, took)
						mu.Unlock()
						if i == 0 {
							parked <- f.ApprovalID
						}
						return
					}
				}
			})
		}
		wg.Wait()
		if err := d.cmds.Approvals.Resolve(ctx, <-parked, "allow", "once"); err != nil {
			b.Fatal(err)
		}
		// Drain each client up to the resolution, so the next call's frame
		// is the next one they read.
		for _, c := range conns {
			wg.Go(func() {
				for {
					_, raw, err := c.Read(ctx)
					var f struct{ Kind string }
					if err != nil || json.Unmarshal(raw, &f) != nil || f.Kind == "mcp-approval-resolved" {
						return
					}
				}
			})
		}
		wg.Wait()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
