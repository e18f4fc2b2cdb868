package daemon

// Preview tests against a whole daemon and real sandboxes, in this file's
// own containerd namespace: apps run inside Sessions (testdata/preview_app.py
// and python3 -m http.server) and are reached through the Preview virtual
// origin "<session>-p<port>.localhost:<daemon port>" and the legacy path
// proxy.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/oklog/ulid/v2"

	"lathe/cmd/lathe/internal/config"
	"lathe/runtime/preview"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/sandboxtest"
)

const (
	// previewNamespace is this file's own containerd namespace.
	previewNamespace = "lathe-test-preview"
	// previewPort is the logical port the apps listen on in every Session.
	previewPort = 8000
	// previewTimeout is the test daemon's Preview response header timeout.
	previewTimeout = 2 * time.Second
)

var pickerTag = string(preview.ScriptTag(preview.PickerPath))

// previewRig is a sandbox daemon and an HTTP client that reaches it under
// any Host, as a browser resolving *.localhost to loopback does.
type previewRig struct {
	d      *Daemon
	srv    *httptest.Server
	client *http.Client
	listen string // the daemon's port
}

func newPreviewRig(tb testing.TB) *previewRig {
	tb.Helper()
	containerdtest.Namespace(tb, previewNamespace)
	d, srv := newSandboxDaemon(tb, previewNamespace, nil, WithPreviewTimeout(previewTimeout))
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return &previewRig{d: d, srv: srv, client: loopbackClient(srv), listen: port}
}

// loopbackClient dials srv whatever the URL's host, sends no credentials
// and follows no redirects.
func loopbackClient(srv *httptest.Server) *http.Client {
	addr := srv.Listener.Addr().String()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 128,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// host is the Preview authority of a Session's port on this daemon.
func (r *previewRig) host(id string, port int) string {
	return strings.ToLower(id) + "-p" + strconv.Itoa(port) + ".localhost:" + r.listen
}

func (r *previewRig) url(id string, port int, path string) string {
	return "http://" + r.host(id, port) + path
}

// send sends a request with Host set to host (a Preview authority or any
// other) and reads the whole reply; header holds name, value pairs.
func (r *previewRig) send(tb testing.TB, method, host, path, body string, header ...string) reply {
	tb.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+host+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return send(tb, r.client, req)
}

// previewApp is one app running in a Session.
type previewApp struct {
	id      string
	dir     string // the Workspace, bind-mounted at the same path
	markers string // where preview_app.py reports released connections
}

// startApp creates a Ready Session in a Workspace of its own and starts, as
// a task, command(dir) in it; it returns once GET probe answers through
// the Preview.
func (r *previewRig) startApp(tb testing.TB, name string, command func(dir string) string, probe string) previewApp {
	tb.Helper()
	tr := newTaskRig(tb, r.d, r.srv)
	tr.name = name
	id := tr.ready(tb, tr.create(tb, `"exposed_ports":[8000]`).ID).ID
	resp := tr.do(tb, post, "/api/sessions/"+id+"/tasks", fmt.Sprintf(`{"command":%q}`, command(tr.dir)))
	if resp.status != 201 {
		tb.Fatalf("start %s: %d %s", name, resp.status, resp.body)
	}
	sandboxtest.WaitFor(tb, 30*time.Second, func() bool {
		return r.send(tb, get, r.host(id, previewPort), probe, "").status == 200
	})
	return previewApp{id: id, dir: tr.dir, markers: filepath.Join(tr.dir, "markers")}
}

// startPreviewApp runs testdata/preview_app.py NAME on previewPort.
func (r *previewRig) startPreviewApp(tb testing.TB, name string) previewApp {
	tb.Helper()
	script, err := os.ReadFile(filepath.Join("testdata", "preview_app.py"))
	if err != nil {
		tb.Fatal(err)
	}
	return r.startApp(tb, name, func(dir string) string {
		if err := os.WriteFile(filepath.Join(dir, "preview_app.py"), script, 0o644); err != nil {
			tb.Fatal(err)
		}
		return fmt.Sprintf("exec python3 %s/preview_app.py %d %s/markers %s", dir, previewPort, dir, name)
	}, "/hello")
}

// waitMarker waits until the app reports, by a file, that it saw the
// connection of name end.
func (a previewApp) waitMarker(tb testing.TB, name string) {
	tb.Helper()
	sandboxtest.WaitFor(tb, 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(a.markers, name))
		return err == nil
	})
}

// echo is preview_app.py's /echo answer.
type echo struct {
	Name, Method, Path, Host, Body string
	Cookie, Origin, Authorization  *string
	XAPIKey                        *string `json:"x_api_key"`
	AcceptEncoding                 *string `json:"accept_encoding"`
}

func decodeEcho(tb testing.TB, r reply) echo {
	tb.Helper()
	if r.status != 200 {
		tb.Fatalf("echo: %d %s", r.status, r.body)
	}
	var e echo
	if err := json.Unmarshal(r.body, &e); err != nil {
		tb.Fatalf("echo body: %v: %s", err, r.body)
	}
	return e
}

func orNone(p *string) string {
	if p == nil {
		return "<none>"
	}
	return *p
}

func TestPreview(t *testing.T) {
	r := newPreviewRig(t)
	a := r.startPreviewApp(t, "A")
	// A sibling Session serves other content on the same logical port.
	b := r.startApp(t, "B", func(dir string) string {
		site := filepath.Join(dir, "site")
		if err := os.MkdirAll(site, 0o755); err != nil {
			t.Fatal(err)
		}
		page := "<!doctype html>\n<html><head><title>B</title></head><body>static site of B</body></html>\n"
		if err := os.WriteFile(filepath.Join(site, "index.html"), []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("exec python3 -m http.server %d --bind 127.0.0.1 --directory %s", previewPort, site)
	}, "/")
	hostA, hostB := r.host(a.id, previewPort), r.host(b.id, previewPort)

	t.Run("listening ports", func(t *testing.T) { testPreviewPorts(t, r, a) })
	t.Run("siblings on one port", func(t *testing.T) { testPreviewSiblings(t, r, hostA, hostB) })
	t.Run("forwarding", func(t *testing.T) { testPreviewForwarding(t, r, hostA) })
	t.Run("no control routes", func(t *testing.T) { testPreviewNoControlRoutes(t, r, hostA) })
	t.Run("cookies", func(t *testing.T) { testPreviewCookies(t, r, hostA) })
	t.Run("picker", func(t *testing.T) { testPreviewPicker(t, r, hostA, hostB) })
	t.Run("server-sent events flush", func(t *testing.T) { testPreviewSSE(t, r, hostA) })
	t.Run("websocket", func(t *testing.T) { testPreviewWebSocket(t, r, hostA) })
	t.Run("browser origin", func(t *testing.T) { testPreviewOrigin(t, r, hostA) })
	t.Run("faults", func(t *testing.T) { testPreviewFaults(t, r, a) })
	t.Run("bad hosts", func(t *testing.T) { testPreviewBadHosts(t, r, a) })
	t.Run("legacy path proxy", func(t *testing.T) { testLegacyProxy(t, r, a, b) })
	t.Run("shutdown", func(t *testing.T) { testPreviewShutdown(t, r, hostA) }) // last: it stops the Preview
}

// testPreviewPorts: the ports listening in a Session's sandbox, read from
// /proc/net/tcp{,6} inside its network namespace, are offered; a second
// server started in the sandbox appears, on IPv4 or IPv6 alike.
func testPreviewPorts(t *testing.T, r *previewRig, a previewApp) {
	ports := func() []int {
		rp := call(t, r.srv, get, "/api/sessions/"+a.id+"/preview/ports", "")
		var got []struct{ Port int }
		if rp.status != 200 || json.Unmarshal(rp.body, &got) != nil {
			t.Fatalf("ports: %d %s", rp.status, rp.body)
		}
		var out []int
		for _, p := range got {
			out = append(out, p.Port)
		}
		return out
	}
	if got := ports(); !slices.Contains(got, previewPort) || !slices.IsSorted(got) {
		t.Fatalf("ports %v, want %d among them, sorted", got, previewPort)
	}
	const second = 8765
	resp := call(t, r.srv, post, "/api/sessions/"+a.id+"/tasks", fmt.Sprintf(`{"command":"exec python3 -m http.server %d --bind :: --directory /"}`, second))
	if resp.status != 201 {
		t.Fatalf("start a second server: %d %s", resp.status, resp.body)
	}
	sandboxtest.WaitFor(t, 30*time.Second, func() bool { return slices.Contains(ports(), second) })
	if r := call(t, r.srv, get, "/api/sessions/"+unknownID+"/preview/ports", ""); r.status != 404 {
		t.Errorf("ports of an unknown session: %d %s", r.status, r.body)
	}
}

func testPreviewSiblings(t *testing.T, r *previewRig, hostA, hostB string) {
	if got := r.send(t, get, hostA, "/", ""); got.status != 200 || string(got.body) != "app A /" {
		t.Errorf("A: %d %q", got.status, got.body)
	}
	got := r.send(t, get, hostB, "/", "")
	if got.status != 200 || !strings.Contains(string(got.body), "static site of B") {
		t.Fatalf("B: %d %q", got.status, got.body)
	}
	if e := decodeEcho(t, r.send(t, get, hostA, "/echo", "")); e.Name != "A" {
		t.Errorf("A's host reached app %q", e.Name)
	}
}

func testPreviewForwarding(t *testing.T, r *previewRig, host string) {
	for _, m := range []string{get, post, put, patch, del, http.MethodOptions} {
		t.Run(m, func(t *testing.T) {
			body := ""
			if m != get && m != http.MethodOptions {
				body = `{"n":` + strconv.Itoa(len(m)) + `}`
			}
			e := decodeEcho(t, r.send(t, m, host, "/echo?q=a%20b&x=1&x=2", body, "Content-Type", "application/json"))
			if e.Method != m || e.Path != "/echo?q=a%20b&x=1&x=2" || e.Body != body {
				t.Errorf("app saw %s %s %q, want %s %q", e.Method, e.Path, e.Body, m, body)
			}
			if e.Host != host {
				t.Errorf("app saw Host %q, want the virtual authority %q", e.Host, host)
			}
		})
	}
	t.Run("HEAD", func(t *testing.T) {
		if got := r.send(t, http.MethodHead, host, "/hello", ""); got.status != 200 || got.header.Get("Content-Length") != "6" {
			t.Errorf("HEAD: %d %v", got.status, got.header)
		}
	})
	t.Run("large body", func(t *testing.T) {
		big := strings.Repeat("0123456789", 300_000) // 3 MB: beyond the control router's JSON cap
		if e := decodeEcho(t, r.send(t, post, host, "/echo", big)); e.Body != big {
			t.Errorf("app got %d bytes, want %d", len(e.Body), len(big))
		}
	})
	t.Run("accept-encoding narrowed", func(t *testing.T) {
		e := decodeEcho(t, r.send(t, get, host, "/echo", "", "Accept-Encoding", "gzip, deflate, br, zstd"))
		if orNone(e.AcceptEncoding) != "gzip, br" {
			t.Errorf("app saw Accept-Encoding %q", orNone(e.AcceptEncoding))
		}
	})
	t.Run("keep-alive", func(t *testing.T) {
		for range 50 {
			if got := r.send(t, get, host, "/hello", ""); got.status != 200 || string(got.body) != "hello\n" {
				t.Fatalf("%d %q", got.status, got.body)
			}
		}
	})
}

// testPreviewNoControlRoutes: every path on a Preview host is the app's.
func testPreviewNoControlRoutes(t *testing.T, r *previewRig, host string) {
	for _, path := range []string{"/api/sessions", "/api/workspaces", "/ws", "/health", "/health/ready", "/?token=x", "/index.html", "/assets/app.js"} {
		got := r.send(t, get, host, path, "")
		want := "app A " + strings.SplitN(path, "?", 2)[0]
		if got.status != 200 || string(got.body) != want {
			t.Errorf("GET %s: %d %q, want the app's %q", path, got.status, got.body, want)
		}
	}
}

func testPreviewCookies(t *testing.T, r *previewRig, host string) {
	got := r.send(t, get, host, "/cookie", "")
	want := []string{"app=one; Path=/; HttpOnly; SameSite=Lax", "second=two; Max-Age=60"}
	if sc := got.header.Values("Set-Cookie"); strings.Join(sc, "\n") != strings.Join(want, "\n") {
		t.Errorf("Set-Cookie %q, want %q unchanged", sc, want)
	}
	// The workbench's session cookie never reaches an app, whatever sends it.
	e := decodeEcho(t, r.send(t, get, host, "/echo", "", "Cookie", "app=one; "+"lathe_session=c2VjcmV0.bWFj; second=two"))
	if orNone(e.Cookie) != "app=one; second=two" {
		t.Errorf("app saw Cookie %q", orNone(e.Cookie))
	}
	e = decodeEcho(t, r.send(t, get, host, "/echo", "", "Cookie", "lathe_session=x"))
	if e.Cookie != nil {
		t.Errorf("app saw Cookie %q", *e.Cookie)
	}
	// Nor do the daemon's other credentials, on the Preview origin as on the
	// legacy path: a client may send them to any host.
	e = decodeEcho(t, r.send(t, get, host, "/echo", "", "X-Api-Key", "daemon-key", "Authorization", "Bearer daemon", "Cookie", "lathe_session=x; app=1"))
	if e.XAPIKey != nil || e.Authorization != nil || orNone(e.Cookie) != "app=1" {
		t.Errorf("credentials reached the app: key %q, authorization %q, cookie %q", orNone(e.XAPIKey), orNone(e.Authorization), orNone(e.Cookie))
	}
}

func testPreviewPicker(t *testing.T, r *previewRig, hostA, hostB string) {
	got := r.send(t, get, hostB, "/", "")
	want := "<!doctype html>\n<html><head>" + pickerTag + "<title>B</title>"
	if !strings.HasPrefix(string(got.body), want) || got.header.Get("Content-Length") != "" {
		t.Errorf("index.html: %q (Content-Length %q), want it to start %q", got.body, got.header.Get("Content-Length"), want)
	}
	// Non-HTML passes untouched, with its length.
	if got := r.send(t, get, hostA, "/hello", ""); got.header.Get("Content-Length") != "6" || string(got.body) != "hello\n" {
		t.Errorf("text: %v %q", got.header, got.body)
	}
	// gzip HTML is decoded, injected and sent as identity.
	got = r.send(t, get, hostA, "/gzip.html", "", "Accept-Encoding", "gzip")
	body := string(got.body)
	if got.status != 200 || got.header.Get("Content-Encoding") != "" ||
		!strings.HasPrefix(body, "<!doctype html><html><head>"+pickerTag+"<title>gz</title>") ||
		strings.Count(body, "compressed A ") != 2000 || !strings.HasSuffix(body, "</body></html>") {
		t.Errorf("gzip page: %d %v %.300q", got.status, got.header, body)
	}
	// The bridge itself, on every Preview origin.
	for _, host := range []string{hostA, hostB} {
		js := r.send(t, get, host, preview.PickerPath, "")
		if js.status != 200 || !bytes.Equal(js.body, preview.PickerJS) ||
			js.header.Get("Content-Type") != "text/javascript; charset=utf-8" || js.header.Get("ETag") != preview.PickerETag {
			t.Errorf("picker on %s: %d %v", host, js.status, js.header)
		}
	}
	if js := r.send(t, get, hostA, preview.PickerPath, "", "If-None-Match", preview.PickerETag); js.status != 304 {
		t.Errorf("picker revalidation: %d", js.status)
	}
	if js := r.send(t, post, hostA, preview.PickerPath, "x", "Origin", "http://"+hostA); js.status != 405 {
		t.Errorf("POST picker: %d", js.status)
	}
}

// testPreviewSSE: the first event arrives while the app still holds the
// stream open; a proxy that buffered would time the request out.
func testPreviewSSE(t *testing.T, r *previewRig, host string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, get, "http://"+host+"/sse", nil)
	resp, err := r.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := bufio.NewReader(resp.Body)
	readEvent := func() string {
		t.Helper()
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("read event: %v", err)
		}
		if blank, _ := lines.ReadString('\n'); blank != "\n" {
			t.Fatalf("event not terminated: %q", blank)
		}
		return line
	}
	if ev := readEvent(); ev != "data: one\n" {
		t.Fatalf("first event %q", ev)
	}
	if got := r.send(t, get, host, "/sse-next", ""); got.status != 200 {
		t.Fatalf("sse-next: %d", got.status)
	}
	if ev := readEvent(); ev != "data: two\n" {
		t.Fatalf("second event %q", ev)
	}
}

func (r *previewRig) dialWS(t *testing.T, host, origin string, protocols ...string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	c, resp, err := websocket.Dial(ctx, "ws://"+host+"/hmr", &websocket.DialOptions{HTTPClient: r.client, HTTPHeader: h, Subprotocols: protocols})
	if err == nil {
		t.Cleanup(func() { c.CloseNow() })
	}
	return c, resp, err
}

func testPreviewWebSocket(t *testing.T, r *previewRig, host string) {
	for _, origin := range []string{"http://" + host, ""} {
		c, _, err := r.dialWS(t, host, origin, "vite-hmr")
		if err != nil {
			t.Fatalf("dial with origin %q: %v", origin, err)
		}
		if c.Subprotocol() != "vite-hmr" {
			t.Errorf("subprotocol %q", c.Subprotocol())
		}
		c.SetReadLimit(1 << 20)
		ctx := testContext(t, 10*time.Second)
		_, hello, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var h struct{ Host, Origin, Protocol, Path string }
		if err := json.Unmarshal(hello, &h); err != nil || h.Host != host || h.Protocol != "vite-hmr" || h.Path != "/hmr" {
			t.Errorf("the app saw %s (%v)", hello, err)
		}
		for _, msg := range []struct {
			typ  websocket.MessageType
			data []byte
		}{{websocket.MessageText, []byte(`{"type":"ping"}`)}, {websocket.MessageBinary, bytes.Repeat([]byte{7, 0, 255}, 40_000)}} {
			if err := c.Write(ctx, msg.typ, msg.data); err != nil {
				t.Fatal(err)
			}
			typ, got, err := c.Read(ctx)
			if err != nil || typ != msg.typ || !bytes.Equal(got, msg.data) {
				t.Fatalf("echo of %d bytes: %v, %d bytes, %v", len(msg.data), typ, len(got), err)
			}
		}
		if err := c.Close(websocket.StatusNormalClosure, "bye"); err != nil {
			t.Errorf("close: %v", err)
		}
	}
}

// testPreviewOrigin: writes and WebSockets come only from the Preview's
// own origin (or from no browser at all).
func testPreviewOrigin(t *testing.T, r *previewRig, host string) {
	workbench := "http://localhost:" + r.listen
	tests := []struct {
		name, method, origin string
		status               int
	}{
		{"no origin", post, "", 200},
		{"own origin", post, "http://" + host, 200},
		{"own origin, other case", post, "http://" + strings.ToUpper(host), 200},
		{"null", post, "null", 403},
		{"workbench", post, workbench, 403},
		{"sibling port", put, "http://" + strings.Replace(host, "-p8000.", "-p8001.", 1), 403},
		{"foreign", del, "https://evil.example", 403},
		{"foreign read", get, "https://evil.example", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h []string
			if tt.origin != "" {
				h = []string{"Origin", tt.origin}
			}
			got := r.send(t, tt.method, host, "/echo", "x", h...)
			if got.status != tt.status {
				t.Fatalf("%s with Origin %q: %d %s, want %d", tt.method, tt.origin, got.status, got.body, tt.status)
			}
			if tt.status == 403 {
				assertErrorBody(t, got, "origin")
			}
		})
	}
	for _, origin := range []string{"null", workbench, "https://evil.example"} {
		if _, resp, err := r.dialWS(t, host, origin); err == nil || resp == nil || resp.StatusCode != 403 {
			t.Errorf("WebSocket from %q: %v %v, want 403", origin, resp != nil && resp.StatusCode == 403, err)
		}
	}
}

func testPreviewFaults(t *testing.T, r *previewRig, a previewApp) {
	host := r.host(a.id, previewPort)
	t.Run("down port", func(t *testing.T) {
		got := r.send(t, get, r.host(a.id, 8099), "/", "")
		if got.status != 502 {
			t.Fatalf("%d %s", got.status, got.body)
		}
		assertErrorBody(t, got, "nothing accepts connections on port 8099 of session "+a.id)
		// A browser gets a page saying the same.
		page := r.send(t, get, r.host(a.id, 8099), "/", "", "Accept", "text/html,*/*")
		if page.status != 502 || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(string(page.body), "nothing accepts connections on port 8099") {
			t.Errorf("page: %d %v %s", page.status, page.header, page.body)
		}
	})
	t.Run("hanging app", func(t *testing.T) {
		start := time.Now()
		got := r.send(t, get, host, "/hang", "")
		if got.status != 504 {
			t.Fatalf("%d %s", got.status, got.body)
		}
		assertErrorBody(t, got, "sent no response within 2s")
		if took := time.Since(start); took < previewTimeout {
			t.Errorf("answered after %v, before the %v timeout", took, previewTimeout)
		}
		a.waitMarker(t, "hang-released") // the daemon let go of the upstream connection
	})
	t.Run("client disconnects mid-stream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, get, "http://"+host+"/stream", nil)
		resp, err := r.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := io.CopyN(io.Discard, resp.Body, 4<<20); n != 4<<20 {
			t.Fatalf("read %d bytes: %v", n, err)
		}
		cancel()
		resp.Body.Close()
		a.waitMarker(t, "stream-released")
	})
}

func testPreviewBadHosts(t *testing.T, r *previewRig, a previewApp) {
	closed := newTaskRig(t, r.d, r.srv)
	cid := closed.ready(t, closed.create(t, "").ID).ID
	if got := closed.do(t, del, "/api/sessions/"+cid, ""); got.status != 200 {
		t.Fatalf("close: %d %s", got.status, got.body)
	}
	lower := strings.ToLower(a.id)
	tests := []struct {
		name, host, path string
		status           int
		err              string
	}{
		{"not a preview name", "foo.localhost:" + r.listen, "/api/sessions", 400, "is not <session_id>-p<port>"},
		{"not a session", "foo-p8000.localhost:" + r.listen, "/api/sessions", 400, "does not start with a session ID"},
		{"no port", lower + ".localhost:" + r.listen, "/", 400, "is not <session_id>-p<port>"},
		{"port 0", lower + "-p0.localhost:" + r.listen, "/", 400, "port 0 is not a port"},
		{"port above 65535", lower + "-p65536.localhost:" + r.listen, "/", 400, "65536 is above 65535"},
		{"leading zero", lower + "-p08000.localhost:" + r.listen, "/", 400, "leading zero"},
		{"nested name", "x." + lower + "-p8000.localhost:" + r.listen, "/ws", 400, "does not start with a session ID"},
		{"trailing dot", lower + "-p8000.localhost.:" + r.listen, "/", 400, "does not end in .localhost"},
		{"unknown session", strings.ToLower(ulid.Make().String()) + "-p8000.localhost:" + r.listen, "/", 404, "session"},
		{"closed session", r.host(cid, previewPort), "/", 409, "closed, not ready"},
		{"other listener port", lower + "-p8000.localhost:1", "/", 421, "this daemon listens on port " + r.listen},
		{"default port", lower + "-p8000.localhost", "/", 421, "not 80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.send(t, get, tt.host, tt.path, "")
			if got.status != tt.status {
				t.Fatalf("Host %s: %d %s, want %d", tt.host, got.status, got.body, tt.status)
			}
			assertErrorBody(t, got, tt.err)
		})
	}
	// Upper case is the same origin: hostnames are case-insensitive.
	if got := r.send(t, get, strings.ToUpper(r.host(a.id, previewPort)), "/hello", ""); got.status != 200 {
		t.Errorf("upper-case host: %d %s", got.status, got.body)
	}
}

func testLegacyProxy(t *testing.T, r *previewRig, a, b previewApp) {
	base := "/api/sessions/" + b.id + "/proxy/8000"
	got := call(t, r.srv, get, base+"/", "")
	tag := string(preview.ScriptTag(base + "/" + preview.LegacyPickerName))
	if got.status != 200 || !strings.HasPrefix(string(got.body), "<!doctype html>\n<html><head>"+tag) {
		t.Errorf("index: %d %q", got.status, got.body)
	}
	if csp := got.header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox allow-scripts") || strings.Contains(csp, "allow-same-origin") {
		t.Errorf("CSP %q", csp)
	}
	if js := call(t, r.srv, get, base+"/"+preview.LegacyPickerName, ""); js.status != 200 || !bytes.Equal(js.body, preview.PickerJS) {
		t.Errorf("lathe-tap.js: %d %.100s", js.status, js.body)
	}

	abase := "/api/sessions/" + a.id + "/proxy/8000"
	e := decodeEcho(t, call(t, r.srv, put, abase+"/echo?q=%2F1", "payload", "X-Api-Key", "daemon-key", "Authorization", "Bearer daemon", "Cookie", "lathe_session=x; app=1"))
	if e.Method != put || e.Path != "/echo?q=%2F1" || e.Body != "payload" || e.Host != r.host(a.id, 8000) {
		t.Errorf("app saw %+v", e)
	}
	if e.XAPIKey != nil || e.Authorization != nil || orNone(e.Cookie) != "app=1" {
		t.Errorf("credentials reached the app: key %q, authorization %q, cookie %q", orNone(e.XAPIKey), orNone(e.Authorization), orNone(e.Cookie))
	}
	if got := call(t, r.srv, get, abase, ""); got.status != 200 || string(got.body) != "app A /" {
		t.Errorf("root without slash: %d %q", got.status, got.body)
	}
	if got := call(t, r.srv, get, abase+"/a%2Fb/c%20d", ""); string(got.body) != "app A /a%2Fb/c%20d" {
		t.Errorf("escaped path reached the app as %q", got.body)
	}
	if got := call(t, r.srv, get, abase+"/cookie", ""); got.status != 200 || len(got.header.Values("Set-Cookie")) != 0 {
		t.Errorf("legacy Set-Cookie: %d %v", got.status, got.header.Values("Set-Cookie"))
	}

	tests := []struct {
		name, method, path string
		header             []string
		status             int
		err                string
	}{
		{"port 0", get, "/api/sessions/" + a.id + "/proxy/0/", nil, 400, "port 0 is not a port"},
		{"port above 65535", get, "/api/sessions/" + a.id + "/proxy/65536", nil, 400, "above 65535"},
		{"port not a number", get, "/api/sessions/" + a.id + "/proxy/http/", nil, 400, "not a decimal port"},
		{"unknown session", get, "/api/sessions/" + ulid.Make().String() + "/proxy/8000/", nil, 404, "session"},
		{"down port", get, "/api/sessions/" + a.id + "/proxy/8099/", nil, 502, "nothing accepts connections on port 8099"},
		{"null origin write", post, abase + "/echo", []string{"Origin", "null"}, 403, "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := call(t, r.srv, tt.method, tt.path, "", tt.header...)
			if got.status != tt.status {
				t.Fatalf("%s %s: %d %s, want %d", tt.method, tt.path, got.status, got.body, tt.status)
			}
			assertErrorBody(t, got, tt.err)
		})
	}
}

// TestPreviewOutsideAuth: with authentication on, the Preview origin needs
// no credential (it is bounded by its Host), the legacy proxy does, and the
// workbench's cookie is host-only, so a browser never sends it to a
// Preview origin.
func TestPreviewOutsideAuth(t *testing.T) {
	_, srv := newTestDaemon(t, func(cfg *config.Config) { cfg.Server.APIKeys = config.Secrets("k3y") })
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	client := loopbackClient(srv)
	id := ulid.Make().String()
	previewHost := strings.ToLower(id) + "-p3000.localhost:" + port

	req, _ := http.NewRequest(get, "http://"+previewHost+"/", nil)
	if got := send(t, client, req); got.status != 404 || got.header.Get("WWW-Authenticate") != "" {
		t.Errorf("Preview without credentials: %d %s, want the Preview's own 404", got.status, got.body)
	}
	if got := call(t, srv, get, "/api/sessions/"+id+"/proxy/3000/", ""); got.status != 401 {
		t.Errorf("legacy proxy without credentials: %d %s", got.status, got.body)
	}

	req, _ = http.NewRequest(get, "http://localhost:"+port+"/?token=k3y", nil)
	signIn := send(t, client, req)
	cookies := (&http.Response{Header: signIn.header}).Cookies()
	if signIn.status != http.StatusSeeOther || len(cookies) != 1 || cookies[0].Name != "lathe_session" {
		t.Fatalf("sign-in: %d %v", signIn.status, signIn.header)
	}
	if strings.Contains(strings.ToLower(signIn.header.Get("Set-Cookie")), "domain=") {
		t.Errorf("the session cookie names a Domain, so subdomains would get it: %s", signIn.header.Get("Set-Cookie"))
	}
	jar, _ := cookiejar.New(nil)
	workbench, _ := url.Parse("http://localhost:" + port + "/")
	jar.SetCookies(workbench, cookies)
	if len(jar.Cookies(workbench)) != 1 {
		t.Fatalf("the jar does not send the cookie back to the workbench")
	}
	pv, _ := url.Parse("http://" + previewHost + "/")
	if got := jar.Cookies(pv); len(got) != 0 {
		t.Errorf("a browser would send %v to the Preview origin", got)
	}
}

// testPreviewShutdown: the daemon's Shutdown ends proxied WebSockets,
// which http.Server.Shutdown does not track, and refuses new exchanges.
func testPreviewShutdown(t *testing.T, r *previewRig, host string) {
	c, _, err := r.dialWS(t, host, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 10*time.Second)
	if _, _, err := c.Read(ctx); err != nil {
		t.Fatalf("hello: %v", err)
	}
	if err := r.d.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, _, err := c.Read(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("the WebSocket outlived the shutdown: %v", err)
	}
	got := r.send(t, get, host, "/hello", "")
	if got.status != 503 {
		t.Fatalf("after shutdown: %d %s", got.status, got.body)
	}
	assertErrorBody(t, got, "shutting down")
}

// ---------------------------------------------------------------------------
// Benchmarks

// BenchmarkPreviewThroughput compares requests/s of 100 concurrent
// keep-alive clients of a small app in a sandbox, through the Preview and
// directly over the sandbox's netns dial, in the same run.
//
//	go test -run '^$' -bench PreviewThroughput -benchtime 1x ./cmd/lathe/internal/daemon/
func BenchmarkPreviewThroughput(b *testing.B) {
	const conns = 100
	const round = 3 * time.Second
	r := newPreviewRig(b)
	a := r.startPreviewApp(b, "bench")
	sb, _, err := r.d.cmds.Environments.Sandbox(a.id)
	if err != nil {
		b.Fatal(err)
	}
	direct := dialClient(sb, conns)
	proxied := loopbackClient(r.srv)
	proxied.Transport.(*http.Transport).MaxConnsPerHost = conns
	run := func(c *http.Client, url string) float64 { return requestRate(b, c, url, conns, round) }
	var viaDirect, viaPreview float64
	for b.Loop() {
		// Alternate, so that drift on a shared machine hits both alike.
		for range 2 {
			viaDirect += run(direct, "http://app/hello")
			viaPreview += run(proxied, r.url(a.id, previewPort, "/hello"))
		}
	}
	b.ReportMetric(viaDirect/float64(2*b.N), "direct-req/s")
	b.ReportMetric(viaPreview/float64(2*b.N), "preview-req/s")
	b.ReportMetric(viaPreview/viaDirect, "ratio")
}

// dialClient is an HTTP client of up to conns keep-alive connections to
// previewPort in sb, each made by sb.Dial, whatever the URL's host.
func dialClient(sb sandbox.Sandbox, conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return sb.Dial(ctx, previewPort) },
		DisableCompression:  true,
		MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
	}}
}

// requestRate is the requests/s that conns clients of c, each looping
// GETs of url on its keep-alive connection, make in round.
func requestRate(b *testing.B, c *http.Client, url string, conns int, round time.Duration) float64 {
	var n atomic.Int64
	var failed atomic.Value
	deadline := time.Now().Add(round)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				resp, err := c.Get(url)
				if err != nil {
					failed.Store(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Store(fmt.Errorf("status %d", resp.StatusCode))
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	return float64(n.Load()) / round.Seconds()
}

// BenchmarkPreviewDownload1GiB downloads 1 GiB of non-HTML through the
// Preview and reports the growth of this process's RSS (the daemon and
// the client) over its level before, sampled throughout.
//
//	go test -run '^$' -bench PreviewDownload1GiB -benchtime 1x ./cmd/lathe/internal/daemon/
func BenchmarkPreviewDownload1GiB(b *testing.B) {
	const size = 1 << 30
	r := newPreviewRig(b)
	a := r.startPreviewApp(b, "download")
	var growth, mbps float64
	for b.Loop() {
		before := rssBytes(b)
		peak := sampleRSS(b)
		start := time.Now()
		resp, err := r.client.Get(r.url(a.id, previewPort, "/download?n="+strconv.Itoa(size)))
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		top := peak()
		if err != nil || n != size {
			b.Fatalf("downloaded %d bytes: %v", n, err)
		}
		growth = max(growth, float64(top-before)/(1<<20))
		mbps = size / took.Seconds() / (1 << 20)
	}
	b.ReportMetric(growth, "rss-growth-MiB")
	b.ReportMetric(mbps, "MiB/s")
}

// sampleRSS samples this process's RSS every 20 ms until the function it
// returns is called, which answers the peak.
func sampleRSS(tb testing.TB) func() int64 {
	var peak atomic.Int64
	peak.Store(rssBytes(tb))
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if v := rssBytes(tb); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-sampled
		return peak.Load()
	}
}

// rssBytes is this process's resident set size.
func rssBytes(tb testing.TB) int64 { return procStatus(tb, "VmRSS:") }
