package gateway_test

import (
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"lathe/runtime/gateway"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fresh matches what differs between runs: the gateway's own ids and the
// creation times.
var fresh = regexp.MustCompile(`((?:msg_|chatcmpl-|resp_|rs_|fc_|gm_))[A-Z2-7]{26}|("created(?:_at)?":)\d+`)

// TestStreamGolden pins each wire's event sequence for one answer with
// reasoning, text, a tool call and usage, from the Chat Completions provider.
func TestStreamGolden(t *testing.T) {
	for _, tc := range []struct{ name, path, body string }{
		{"anthropic", "/v1/messages?beta=true", `{"model":"m1","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"chat", "/v1/chat/completions", `{"model":"m1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/v1/responses", `{"model":"m1","stream":true,"store":false,"input":"hi"}`},
		{"gemini", "/v1beta/models/m1:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, chatProvider, gateway.Options{}, toolTurn())
			req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, r.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("x-api-key", token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
				t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			got := fresh.ReplaceAll(body, []byte("${1}${2}X"))
			path := filepath.Join("testdata", tc.name+"_stream.golden")
			if *update {
				os.MkdirAll("testdata", 0o755)
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s differs from golden:\ngot:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}
