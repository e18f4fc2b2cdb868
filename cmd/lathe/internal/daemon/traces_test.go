package daemon

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/llm/fakellm"
	"lathe/runtime/polltest"
)

// otlpReceiver is a real OTLP/HTTP trace receiver: it decodes the
// exporter's protobuf requests and keeps the spans.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP request %s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.Error(w, "unexpected", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if err != nil {
			t.Errorf("decode OTLP request: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// await polls until the receiver holds at least n spans.
func (rc *otlpReceiver) await(t *testing.T, n int) []*tracepb.Span {
	t.Helper()
	var got []*tracepb.Span
	polltest.Check(t, func() error {
		rc.mu.Lock()
		got = slices.Clone(rc.spans)
		rc.mu.Unlock()
		if len(got) < n {
			return fmt.Errorf("the receiver got %d spans, want %d", len(got), n)
		}
		return nil
	}, polltest.Every(20*time.Millisecond))
	return got
}

func attrs(s *tracepb.Span) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestTurnTrace runs a turn with three tool calls, the last of which
// fails, on a real sandbox with telemetry.otlp_endpoint set to the
// receiver's traces URL, and checks the spans an OTLP receiver gets at
// that URL: the tree, the names, the gen_ai.* attributes (the Agent's name
// and ID), the chat spans' server.address and server.port, the failed
// call's error.type, and the Session's sandbox.prepare span.
func TestTurnTrace(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export within 50 ms, not the default 5 s
	rc := newOTLPReceiver(t)
	script := fakellm.Script{Turns: []fakellm.Turn{
		{Steps: []fakellm.Step{fakellm.ToolCall("c1", "write_file", `{"path":"a.txt","content":"hi\n"}`), fakellm.Usage(100, 20, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c2", "shell", `{"command":"cat a.txt"}`), fakellm.Usage(150, 10, 0)}},
		{Steps: []fakellm.Step{fakellm.ToolCall("c3", "shell", `{"command":"cat missing.txt"}`), fakellm.Usage(50, 5, 0)}},
		{Steps: []fakellm.Step{fakellm.Text("done"), fakellm.Usage(200, 8, 0)}},
	}}
	r := turnDaemonIn(t, "lathe-test-traces", config.KindOpenAI, script, func(c *config.Config) {
		c.Telemetry.OTLPEndpoint = rc.srv.URL + "/v1/traces" // the signal's URL, posted to as given
	})
	llmURL, err := url.Parse(r.llm.URL())
	if err != nil {
		t.Fatal(err)
	}
	id := r.create(t, "").ID
	r.ready(t, id)
	tc := openTurnConn(t, r)
	tc.runDone(t, id, "traced", "write and check")

	spans := rc.await(t, 9)
	// The Session's sandbox got ready under its own root span.
	spans = slices.DeleteFunc(spans, func(s *tracepb.Span) bool {
		if s.Name != "sandbox.prepare" {
			return false
		}
		if attrs(s)["gen_ai.conversation.id"].GetStringValue() != id || len(s.ParentSpanId) != 0 || s.EndTimeUnixNano <= s.StartTimeUnixNano {
			t.Errorf("sandbox.prepare span: %v", s)
		}
		return true
	})
	var root *tracepb.Span
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
		if len(s.ParentSpanId) == 0 {
			if root != nil {
				t.Fatalf("two root spans: %s and %s", root.Name, s.Name)
			}
			root = s
		}
	}
	sort.Strings(names)
	want := []string{"chat m1", "chat m1", "chat m1", "chat m1", "execute_tool shell", "execute_tool shell", "execute_tool write_file", "invoke_agent Coder"}
	if !slices.Equal(names, want) {
		t.Fatalf("spans %v, want %v", names, want)
	}
	ra := attrs(root)
	if root.Name != "invoke_agent Coder" || ra["gen_ai.operation.name"].GetStringValue() != "invoke_agent" ||
		ra["gen_ai.agent.name"].GetStringValue() != "Coder" || ra["gen_ai.agent.id"].GetStringValue() != "coder" ||
		ra["lathe.turn.id"].GetStringValue() != "traced" || ra["lathe.accept_seq"].GetIntValue() <= 0 ||
		ra["gen_ai.request.model"].GetStringValue() != "m1" || ra["gen_ai.provider.name"].GetStringValue() != config.KindOpenAI {
		t.Errorf("invoke_agent span: %v", ra)
	}
	var input, output int64
	var tools []string
	var firstTokens int
	for _, s := range spans {
		a := attrs(s)
		if a["gen_ai.conversation.id"].GetStringValue() != id {
			t.Errorf("%s: gen_ai.conversation.id = %v, want %s", s.Name, a["gen_ai.conversation.id"], id)
		}
		if s.TraceId == nil || hex.EncodeToString(s.TraceId) != hex.EncodeToString(root.TraceId) {
			t.Errorf("%s is in another trace", s.Name)
		}
		if s != root && hex.EncodeToString(s.ParentSpanId) != hex.EncodeToString(root.SpanId) {
			t.Errorf("%s is not a child of invoke_agent", s.Name)
		}
		if s.EndTimeUnixNano < s.StartTimeUnixNano || s.StartTimeUnixNano < root.StartTimeUnixNano || s.EndTimeUnixNano > root.EndTimeUnixNano {
			t.Errorf("%s runs %d..%d outside its turn %d..%d", s.Name, s.StartTimeUnixNano, s.EndTimeUnixNano, root.StartTimeUnixNano, root.EndTimeUnixNano)
		}
		for _, k := range []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} {
			if a[k] != nil { // telemetry.capture_content is off
				t.Errorf("%s carries content by default: %s", s.Name, k)
			}
		}
		switch op := a["gen_ai.operation.name"].GetStringValue(); {
		case strings.HasPrefix(s.Name, "chat"):
			if op != "chat" || a["gen_ai.request.model"].GetStringValue() != "m1" || a["gen_ai.response.finish_reasons"] == nil ||
				a["server.address"].GetStringValue() != llmURL.Hostname() || strconv.FormatInt(a["server.port"].GetIntValue(), 10) != llmURL.Port() {
				t.Errorf("chat span: %v", a)
			}
			if ttft := a["lathe.time_to_first_token"].GetDoubleValue(); ttft > 0 && len(s.Events) == 1 && s.Events[0].Name == "gen_ai.first_token" {
				firstTokens++
			}
			input += a["gen_ai.usage.input_tokens"].GetIntValue()
			output += a["gen_ai.usage.output_tokens"].GetIntValue()
		case strings.HasPrefix(s.Name, "execute_tool"):
			failed := a["gen_ai.tool.call.id"].GetStringValue() == "c3"
			if op != "execute_tool" || failed != (a["error.type"].GetStringValue() == "tool_error") ||
				failed != (s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR) {
				t.Errorf("tool span: %v, status %v", a, s.Status)
			}
			tools = append(tools, a["gen_ai.tool.name"].GetStringValue())
		}
	}
	if firstTokens == 0 { // the last inference streamed its text
		t.Error("no chat span has a time to first token")
	}
	if input != 500 || output != 43 {
		t.Errorf("chat usage: %d input, %d output tokens; want 500, 43", input, output)
	}
	if sort.Strings(tools); !slices.Equal(tools, []string{"shell", "shell", "write_file"}) {
		t.Errorf("tool spans name %v", tools)
	}
}

// TestSecretValues: the secrets span content is scrubbed of are the
// daemon's keys and tokens, its providers' keys, its MCP servers'
// environment values and its NATS users' passwords.
func TestSecretValues(t *testing.T) {
	t.Setenv("LATHE_TEST_PROVIDER_KEY", "provider-key-0123456789")
	cfg := config.Config{
		Server:    config.Server{APIKeys: config.Secrets("api-key-0123456789"), BearerTokens: config.Secrets("bearer-0123456789")},
		Providers: map[string]config.Provider{"p": {Kind: config.KindOpenAI, APIKeyEnv: "LATHE_TEST_PROVIDER_KEY"}},
		MCP:       config.MCP{Servers: []config.MCPServer{{Name: "gh", Env: map[string]string{"GITHUB_TOKEN": "ghp-token-0123456789"}}}},
		NATS:      config.NATS{User: "feed", Password: "nats-password-0123", Users: []config.NATSUser{{User: "audit", Password: "nats-audit-0123456"}}},
	}
	got := secretValues(cfg)
	for _, want := range []string{"api-key-0123456789", "bearer-0123456789", "provider-key-0123456789", "ghp-token-0123456789",
		"nats-password-0123", "nats-audit-0123456"} {
		if !slices.Contains(got, want) {
			t.Errorf("secretValues lacks %s: %v", want, got)
		}
	}
}
