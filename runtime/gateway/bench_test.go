package gateway_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"lathe/runtime/gateway"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/llm/openai"
)

// chunkLatencies streams a Chat Completions answer from url and returns,
// for each text chunk, the time from fakellm's send stamp to its arrival.
func chunkLatencies(b *testing.B, url, model string) []time.Duration {
	b.Helper()
	body := `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"go"}]}`
	req, _ := http.NewRequestWithContext(testContext(b), http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
	var out []time.Duration
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		at := time.Now()
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			b.Fatal(err)
		}
		if len(c.Choices) == 0 || c.Choices[0].Delta.Content == "" {
			continue
		}
		_, sent, err := fakellm.SplitStamp(c.Choices[0].Delta.Content)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, at.Sub(sent))
	}
	return out
}

func p99(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[(len(ds)*99)/100]
}

// BenchmarkGatewayChunk measures, per streamed chunk, the gateway's added
// latency: the same fakellm stream read directly and through the gateway
// (Chat Completions in, the Chat Completions provider out). An op is one
// chunk (paced 1 ms apart, so ns/op is mostly the pacing); direct-p99-µs and gateway-p99-µs are the two p99 latencies from
// the server's send to the client's read, added-p99-µs their difference.
func BenchmarkGatewayChunk(b *testing.B) {
	// Paced a millisecond apart, each chunk travels alone: the figure is
	// the way through, not a queue behind earlier chunks.
	var steps []fakellm.Step
	for range b.N {
		steps = append(steps, fakellm.Pause(1), fakellm.Stamped("x"))
	}
	fake := fakellm.New(fakellm.Script{Turns: []fakellm.Turn{{Model: "direct", Steps: steps}, {Model: "gateway", Steps: steps}}})
	defer fake.Close()
	up := &upstream{p: openai.New(openai.Config{BaseURL: fake.URL() + "/v1"})}
	gw := httptest.NewServer(gateway.New(up, tokens{token: grant}, gateway.Options{}))
	defer gw.Close()

	b.ResetTimer()
	direct := chunkLatencies(b, fake.URL(), "direct")
	through := chunkLatencies(b, gw.URL, "gateway")
	b.StopTimer()
	if len(direct) != b.N || len(through) != b.N {
		b.Fatalf("%d direct and %d gateway chunks, want %d", len(direct), len(through), b.N)
	}
	d, g := p99(direct), p99(through)
	b.ReportMetric(float64(d.Nanoseconds())/1e3, "direct-p99-µs")
	b.ReportMetric(float64(g.Nanoseconds())/1e3, "gateway-p99-µs")
	b.ReportMetric(float64((g-d).Nanoseconds())/1e3, "added-p99-µs")
}
