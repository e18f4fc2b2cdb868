package transport

import (
	"bufio"
	"fmt"
	"lathe/transport/a2aserve"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"lathe/projections"
)

// A client that trickles a request body is cut off by its class's
// deadline; one that sends its body in time is served (issue 23, finding 9).
func TestTricklingBodyIsCutOff(t *testing.T) {
	f := &fake{}
	srv, err := New(SecurityOptions{APIKeys: []string{testKey}, CookieSecret: testSecret, BodyTimeouts: BodyTimeouts{JSON: 500 * time.Millisecond}}, withStore(projections.New(), Deps{
		Sessions: f, Environments: f, Files: f, Attachments: f, Git: f, Tasks: f, Turns: f, TurnCode: f, Sandboxes: f,
		LLM: f, Runtime: f, Agents: f, MCP: f, MCPRegistry: f, Approvals: f, SkillCommands: f, Audit: f, Folders: f,
		Chats: f, SharedFiles: f, A2A: a2aserve.New(f, "test", true, false),
	}))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	body := `{"path":"/src/app"}`
	send := func(t *testing.T, gap time.Duration) (int, string) {
		t.Helper()
		c, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "POST /api/workspaces HTTP/1.1\r\nHost: localhost:8080\r\nx-api-key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", testKey, len(body))
		go func() {
			for i := range len(body) {
				if _, err := c.Write([]byte{body[i]}); err != nil {
					return
				}
				time.Sleep(gap) // the trickle itself, not a wait for the server
			}
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return resp.StatusCode, b.String()
	}
	t.Run("in time", func(t *testing.T) {
		if status, body := send(t, 0); status != 201 {
			t.Fatalf("a body sent at once: %d %s", status, body)
		}
	})
	t.Run("trickling", func(t *testing.T) {
		start := time.Now()
		status, body := send(t, 150*time.Millisecond) // 19 bytes over ~3 s
		if status != 400 || !strings.Contains(body, "timeout") || time.Since(start) > 2500*time.Millisecond {
			t.Fatalf("a trickling body: %d %s after %v; want 400 within the deadline", status, body, time.Since(start))
		}
	})
}

func TestBodyTimeoutClasses(t *testing.T) {
	for ct, want := range map[string]time.Duration{
		"application/json":                DefaultBodyTimeout,
		"":                                DefaultBodyTimeout,
		"multipart/form-data; boundary=x": DefaultUploadBodyTimeout,
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader("x"))
		r.Header.Set("Content-Type", ct)
		if got := (BodyTimeouts{}).of(r); got != want {
			t.Errorf("%q: %v, want %v", ct, got, want)
		}
	}
}
