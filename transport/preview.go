package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"lathe/projections"
	"lathe/runtime/preview"
)

// PreviewOptions tune the Preview proxy.
type PreviewOptions struct {
	// ResponseHeaderTimeout bounds how long an app may take to start its
	// answer; 0 means DefaultPreviewResponseHeaderTimeout.
	ResponseHeaderTimeout time.Duration
}

// DefaultPreviewResponseHeaderTimeout leaves room for a dev server's first
// compile while still freeing a request to an app that hangs.
const DefaultPreviewResponseHeaderTimeout = 60 * time.Second

// legacyCSP sandboxes every response of the legacy path proxy: it is
// served from the workbench's own origin, so the page runs with an opaque
// origin and can reach neither the workbench's storage nor, with its
// credentials, the control routes.
const legacyCSP = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// previewDialTimeout bounds one connect inside a sandbox.
const previewDialTimeout = 10 * time.Second

// legacyMethods are the methods the legacy path proxy forwards.
var legacyMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions,
}

// previewTag is the picker bridge's script element on a Preview origin.
var previewTag = preview.ScriptTag(preview.PickerPath)

// previewProxy forwards Preview traffic into Session sandboxes. It never
// dials the host's own network: its only dialer is the sandbox's, reached
// through the request context, and it has no proxy.
type previewProxy struct {
	// sandbox is Sandboxes.Sandbox: 404 for a missing Session, 409 unless
	// its environment is Ready.
	sandbox func(id string) (PreviewSandbox, projections.Session, error)
	rp      *httputil.ReverseProxy
	tr      *http.Transport
	log     *slog.Logger
	timeout time.Duration
	// base ends every proxied exchange, upgraded ones included, on
	// Shutdown, which waits for active to drain.
	base    context.Context
	stop    context.CancelFunc
	mu      sync.Mutex
	closing bool
	active  sync.WaitGroup
}

// upstream is one proxied request's target, carried in its context from
// the handler to the Rewrite, the dialer and the response hooks.
type upstream struct {
	sb        PreviewSandbox
	port      int
	authority string // the Host the app sees
	tag       []byte // the picker bridge's script element
	legacy    bool
	path      string // legacy: the path below the proxy prefix, and its escaped form
	rawPath   string
}

type upstreamKey struct{}

// poolKey names the upstream's connection pool: one per sandbox
// generation and port, so that no connection is reused across Sessions,
// ports or environment rebuilds.
func (u *upstream) poolKey() string {
	return strings.ToLower(u.sb.SessionID()) + "-g" + strconv.FormatUint(u.sb.Generation(), 10) +
		"-p" + strconv.Itoa(u.port) + ".sandbox.invalid"
}

func (u *upstream) describe() string {
	return fmt.Sprintf("port %d of session %s", u.port, u.sb.SessionID())
}

// dialError is a failure to connect inside the sandbox.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func newPreviewProxy(lookup func(string) (PreviewSandbox, projections.Session, error), opts PreviewOptions, log *slog.Logger) *previewProxy {
	p := &previewProxy{sandbox: lookup, log: log, timeout: opts.ResponseHeaderTimeout}
	if p.timeout <= 0 {
		p.timeout = DefaultPreviewResponseHeaderTimeout
	}
	p.base, p.stop = context.WithCancel(context.Background())
	p.tr = &http.Transport{
		Proxy:                 nil, // never: the sandbox dialer is the only way out
		DialContext:           p.dial,
		DisableCompression:    true, // bodies pass as the app encodes them
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: p.timeout,
		ExpectContinueTimeout: time.Second,
		// As many as may idle: a request that finds none idle while the
		// others return dials only below it, and no connection is closed
		// for want of an idle slot. Without it, every such race dialled
		// one more and the pool closed one: cheap into a local netns, a
		// relay exec per request on a remote sandbox.
		MaxConnsPerHost: 256,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      p.tr,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.fail,
		BufferPool:     &copyBuffers,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return p
}

// close ends every proxied exchange, drops the idle upstream connections
// and waits, until ctx ends, for the exchanges to finish.
func (p *previewProxy) close(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.stop()
	p.tr.CloseIdleConnections()
	done := make(chan struct{})
	go func() {
		p.active.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("preview shutdown: %w", ctx.Err())
	}
}

// serve proxies r to u. The exchange ends when the client goes away or the
// daemon shuts down, and with it the upstream connection.
func (p *previewProxy) serve(w http.ResponseWriter, r *http.Request, u *upstream) {
	if !p.enter() {
		previewError(w, r, !u.legacy, http.StatusServiceUnavailable, "the daemon is shutting down")
		return
	}
	defer p.active.Done()
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), upstreamKey{}, u))
	defer cancel()
	defer context.AfterFunc(p.base, cancel)()
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// enter counts one more exchange, unless the proxy is closing.
func (p *previewProxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return false
	}
	p.active.Add(1)
	return true
}

func upstreamOf(ctx context.Context) *upstream {
	u, _ := ctx.Value(upstreamKey{}).(*upstream)
	return u
}

func (p *previewProxy) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	u := upstreamOf(ctx)
	if u == nil {
		return nil, errors.New("preview: request without an upstream")
	}
	ctx, cancel := context.WithTimeout(ctx, previewDialTimeout)
	defer cancel()
	c, err := u.sb.Dial(ctx, u.port)
	if err != nil {
		return nil, &dialError{err}
	}
	return c, nil
}

func (p *previewProxy) rewrite(pr *httputil.ProxyRequest) {
	u := upstreamOf(pr.In.Context())
	out := pr.Out
	out.URL.Scheme = "http"
	out.URL.Host = u.poolKey()
	out.Host = u.authority
	if u.legacy {
		out.URL.Path, out.URL.RawPath = u.path, u.rawPath
	}
	pr.SetXForwarded()
	h := out.Header
	dropCredentials(h)
	if ae := preview.AcceptEncoding(h.Get("Accept-Encoding")); ae != "" {
		h.Set("Accept-Encoding", ae)
	} else {
		h.Del("Accept-Encoding")
	}
}

func (p *previewProxy) modifyResponse(resp *http.Response) error {
	u := upstreamOf(resp.Request.Context())
	if u.legacy {
		// An app's cookies would land on the workbench origin.
		resp.Header.Del("Set-Cookie")
		resp.Header.Add("Content-Security-Policy", legacyCSP)
	}
	preview.InjectResponse(resp, u.tag)
	return nil
}

// fail answers a proxied request that got no response from the app.
func (p *previewProxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	u := upstreamOf(r.Context())
	var de *dialError
	var ne net.Error
	var tooLarge *http.MaxBytesError
	status, msg := http.StatusBadGateway, ""
	switch {
	case errors.As(err, &tooLarge):
		status, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body exceeds the %d-byte limit", tooLarge.Limit)
	case errors.Is(err, context.Canceled):
		// The client went away (nobody reads this) or the daemon is stopping.
		p.log.Debug("preview request canceled", "upstream", u.describe(), "err", err)
		status, msg = http.StatusServiceUnavailable, "the preview request was canceled"
	case errors.As(err, &de):
		msg = fmt.Sprintf("nothing accepts connections on %s: %v; start the app on that port inside the Session", u.describe(), de.err)
	case errors.As(err, &ne) && ne.Timeout():
		status = http.StatusGatewayTimeout
		msg = fmt.Sprintf("the app on %s sent no response within %s", u.describe(), p.timeout)
	default:
		msg = fmt.Sprintf("the app on %s failed: %v", u.describe(), err)
	}
	previewError(w, r, !u.legacy, status, msg)
}

// ---------------------------------------------------------------------------
// The Preview virtual origin

// interceptPreview is the Guard's Preview seam: it owns every request whose
// Host is a subdomain of localhost, so none of them reaches the workbench
// router.
func (s *previewProxy) interceptPreview(w http.ResponseWriter, r *http.Request) bool {
	if !preview.Claims(r.Host) {
		return false
	}
	s.origin(w, r)
	return true
}

// origin serves one request to a Preview origin: exact Host, the daemon's
// own listener port, a loopback peer and the browser-origin rule first,
// then the Ready Session's sandbox.
func (p *previewProxy) origin(w http.ResponseWriter, r *http.Request) {
	h, err := preview.ParseHost(r.Host)
	if err != nil {
		previewError(w, r, true, http.StatusBadRequest,
			err.Error()+"; a Preview is served at http://<session_id>-p<port>.localhost:<daemon port>/")
		return
	}
	if lp := localPort(r); lp != 0 && lp != h.ListenPort {
		previewError(w, r, true, http.StatusMisdirectedRequest,
			fmt.Sprintf("this daemon listens on port %d, not %d; open http://%s/", lp, h.ListenPort,
				preview.Host{Session: h.Session, Port: h.Port, ListenPort: lp}.Authority()))
		return
	}
	if host, _ := splitHost(r.RemoteAddr); !isLoopbackIP(host) {
		// *.localhost resolves to the browser's own machine: a Preview
		// request from elsewhere is not a browser's.
		previewError(w, r, true, http.StatusForbidden, "a Preview is served to loopback clients only")
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && (isWrite(r) || isWebSocket(r)) &&
		!strings.EqualFold(origin, h.Origin()) && !strings.EqualFold(origin, "https://"+h.Authority()) {
		previewError(w, r, true, http.StatusForbidden,
			fmt.Sprintf("origin %q may not write to or open WebSockets on the Preview %s; only the Preview's own origin may", origin, h.Origin()))
		return
	}
	if p.sandbox == nil {
		previewError(w, r, true, http.StatusServiceUnavailable, "this daemon runs no Session environments")
		return
	}
	sb, _, err := p.sandbox(h.Session)
	if err != nil {
		previewError(w, r, true, statusOf(err), errorMessage(err))
		return
	}
	if r.URL.Path == preview.PickerPath {
		servePicker(w, r)
		return
	}
	p.serve(w, r, &upstream{sb: sb, port: h.Port, authority: h.Authority(), tag: previewTag})
}

// ---------------------------------------------------------------------------
// The legacy path proxy: /api/sessions/:id/proxy/:port[/*tail], behind the
// control router's authentication, every response sandboxed by CSP.

func (s *previewProxy) legacyProxy(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, portText, tail := ps.ByName("id"), ps.ByName("port"), ps.ByName("tail")
	port, err := preview.ParsePort(portText)
	if err != nil {
		writeError(w, http.StatusBadRequest, "port: "+err.Error())
		return
	}
	if s.sandbox == nil {
		writeError(w, http.StatusServiceUnavailable, "this daemon runs no Session environments")
		return
	}
	sb, _, err := s.sandbox(id)
	if err != nil {
		fail(w, err)
		return
	}
	prefix := "/api/sessions/" + id + "/proxy/" + portText
	if tail == "/"+preview.LegacyPickerName {
		servePicker(w, r)
		return
	}
	// The path below the prefix, as the client escaped it. The ID and port
	// are validated, so the prefix escapes to itself.
	raw, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
	if !ok {
		raw = (&url.URL{Path: tail}).EscapedPath()
	}
	if raw == "" {
		raw = "/"
	}
	path, err := url.PathUnescape(raw)
	if err != nil {
		writeError(w, http.StatusBadRequest, "path: "+err.Error())
		return
	}
	listen := localPort(r)
	if listen == 0 {
		listen = 80
	}
	s.serve(w, r, &upstream{
		sb: sb, port: port, legacy: true, path: path, rawPath: raw,
		authority: preview.Host{Session: sb.SessionID(), Port: port, ListenPort: listen}.Authority(),
		tag:       preview.ScriptTag(prefix + "/" + preview.LegacyPickerName),
	})
}

// ---------------------------------------------------------------------------
// helpers

// servePicker answers the picker bridge script.
func servePicker(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed on the picker script")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", preview.PickerETag)
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(preview.PickerJS))
}

var previewErrorPage = template.Must(template.New("").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Preview: {{.Status}}</title>
<style>body{font:15px/1.5 system-ui,sans-serif;margin:3rem auto;max-width:42rem;padding:0 1rem;color:#222}
code{background:#f3f3f3;padding:.1em .3em;border-radius:3px}</style></head>
<body><h1>Preview unavailable</h1><p><strong>{{.Status}} {{.Text}}</strong></p><p>{{.Message}}</p></body></html>
`))

// previewError answers a refused or failed Preview request: an HTML page
// for a browser navigating to it (when html is set), {error} JSON for
// everything else.
func previewError(w http.ResponseWriter, r *http.Request, html bool, status int, msg string) {
	if !html || !strings.Contains(r.Header.Get("Accept"), "text/html") {
		writeError(w, status, msg)
		return
	}
	var b bytes.Buffer
	_ = previewErrorPage.Execute(&b, struct {
		Status        int
		Text, Message string
	}{status, http.StatusText(status), msg})
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// localPort is the port the request's connection was accepted on, or 0
// when unknown.
func localPort(r *http.Request) int {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return 0
	}
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.Port
	}
	_, p := splitHost(a.String())
	n, _ := strconv.Atoi(p)
	return n
}

// dropCredentials removes the daemon's credentials from a request on its
// way to an app, on either path: an API key, a bearer token and the
// workbench's session cookie authenticate to the daemon, never to an app,
// and code in the sandbox could replay them against the daemon's API.
func dropCredentials(h http.Header) {
	h.Del("X-Api-Key")
	h.Del("Authorization")
	dropCookie(h, SessionCookie)
}

// dropCookie removes the cookies called name from a request's Cookie
// headers, leaving every other cookie byte for byte.
func dropCookie(h http.Header, name string) {
	lines := h.Values("Cookie")
	found := false
	for _, line := range lines {
		found = found || strings.Contains(line, name)
	}
	if !found {
		return
	}
	var keep []string
	for _, line := range lines {
		for part := range strings.SplitSeq(line, ";") {
			k, _, _ := strings.Cut(part, "=")
			if strings.TrimSpace(k) != name && strings.TrimSpace(part) != "" {
				keep = append(keep, strings.TrimSpace(part))
			}
		}
	}
	if len(keep) == 0 {
		h.Del("Cookie")
		return
	}
	h.Set("Cookie", strings.Join(keep, "; "))
}

// copyBuffers recycles the proxy's 32 KiB body copy buffers.
var copyBuffers = bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte  { return *p.pool.Get().(*[]byte) }
func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// previewPorts is GET /api/sessions/:id/preview/ports: the TCP ports the
// Ready Session's sandbox listens on, for the Preview to offer.
func (s *environmentRoutes) previewPorts(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	out, err := s.cmds.PreviewPorts(r.Context(), p.ByName("id"))
	respond(w, out, err)
}
