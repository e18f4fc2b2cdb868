package mcp_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"lathe/runtime/mcp"
)

// BenchmarkMCPCallOverhead measures what Lathe's registry adds to one tool
// call on a stdio server: registry.Call against a direct go-sdk client call
// to another process of the same server, alternated in one run. It reports
// both p50s and the p50 added.
func BenchmarkMCPCallOverhead(b *testing.B) {
	ctx := context.Background()
	r := mcp.New(mcp.Options{})
	defer r.Close()
	if v, err := r.Add(ctx, mcp.Config{Name: "t", Transport: mcp.Stdio, Command: serverBin}); err != nil || v.Status != mcp.StatusConnected {
		b.Fatalf("Add: %+v %v", v, err)
	}
	direct, err := sdk.NewClient(&sdk.Implementation{Name: "bench"}, nil).Connect(ctx, &sdk.CommandTransport{Command: exec.Command(serverBin)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	args := json.RawMessage(`{"text":"ping"}`)
	var viaLathe, viaSDK []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := r.Call(ctx, "mcp__t__echo", args); err != nil {
			b.Fatal(err)
		}
		viaLathe = append(viaLathe, time.Since(t0))
		t0 = time.Now()
		if _, err := direct.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "ping"}}); err != nil {
			b.Fatal(err)
		}
		viaSDK = append(viaSDK, time.Since(t0))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	l, s := p50(viaLathe), p50(viaSDK)
	b.ReportMetric(float64(l.Microseconds())/1000, "lathe-p50-ms")
	b.ReportMetric(float64(s.Microseconds())/1000, "sdk-p50-ms")
	b.ReportMetric(float64((l-s).Microseconds())/1000, "added-p50-ms")
}
