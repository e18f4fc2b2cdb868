package transport

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"lathe/journal"
)

const (
	testKey    = "key-0123456789abcdef"
	testBearer = "bearer-fedcba9876543210"
	testCross  = "http://localhost:5173"
)

var testSecret = bytes.Repeat([]byte{7}, MinCookieSecret)

// echo is the next handler: it reads the whole body, so an over-long body
// surfaces as *http.MaxBytesError and maps to 413 as a real route would.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if _, err := io.ReadAll(r.Body); err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("X-Next", "1")
	writeJSON(w, http.StatusOK, map[string]string{"path": r.URL.Path})
})

func newTestGuard(t *testing.T, opts SecurityOptions) *Guard {
	t.Helper()
	if opts.CookieSecret == nil {
		opts.CookieSecret = testSecret
	}
	g, err := NewGuard(opts, nil, echo)
	if err != nil {
		t.Fatalf("NewGuard: %v", err)
	}
	return g
}

func keyOptions() SecurityOptions {
	return SecurityOptions{APIKeys: []string{testKey}, BearerTokens: []string{testBearer}, CORSOrigins: []string{testCross}}
}

type guardCase struct {
	name    string
	method  string
	host    string // default localhost:8080
	path    string
	header  http.Header
	body    io.Reader
	status  int
	errSub  string            // substring of the JSON error, if any
	want    map[string]string // expected response headers; "" means absent
	reached bool              // whether next must have run
}

func (c guardCase) request() *http.Request {
	method := c.method
	if method == "" {
		method = http.MethodGet
	}
	r := httptest.NewRequest(method, c.path, c.body)
	r.Host = "localhost:8080"
	if c.host != "" {
		r.Host = c.host
	}
	for k, vs := range c.header {
		r.Header[k] = vs
	}
	if cl := r.Header.Get("Content-Length"); cl != "" {
		r.ContentLength, _ = strconv.ParseInt(cl, 10, 64) // as the server would
	}
	return r
}

func runGuardCases(t *testing.T, g *Guard, cases []guardCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			g.ServeHTTP(w, c.request())
			res := w.Result()
			if res.StatusCode != c.status {
				t.Fatalf("status = %d, want %d; body %s", res.StatusCode, c.status, w.Body)
			}
			if got := res.Header.Get("X-Next") == "1"; got != c.reached {
				t.Errorf("next reached = %v, want %v", got, c.reached)
			}
			if c.errSub != "" {
				var body errorBody
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
					t.Fatalf("body %q is not a JSON error: %v", w.Body, err)
				}
				if !strings.Contains(body.Error, c.errSub) {
					t.Errorf("error = %q, want it to contain %q", body.Error, c.errSub)
				}
			}
			for k, v := range c.want {
				if got := res.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestGuardLoopbackMode(t *testing.T) {
	g := newTestGuard(t, SecurityOptions{CORSOrigins: []string{testCross}})
	ws := func(kv ...string) http.Header {
		return hdr(append([]string{"Connection", "Upgrade", "Upgrade", "websocket"}, kv...)...)
	}
	runGuardCases(t, g, []guardCase{
		{name: "root on localhost", path: "/", status: 200, reached: true},
		{name: "redirect ipv4 literal keeps query", host: "127.0.0.1:8080", path: "/?token=abc", status: http.StatusFound,
			want: map[string]string{"Location": "http://localhost:8080/?token=abc"}},
		{name: "redirect head ipv6 literal", method: http.MethodHead, host: "[::1]:9000", path: "/", status: http.StatusFound,
			want: map[string]string{"Location": "http://localhost:9000/"}},
		{name: "redirect any 127/8", host: "127.1.2.3:8080", path: "/", status: http.StatusFound,
			want: map[string]string{"Location": "http://localhost:8080/"}},
		{name: "no redirect for api", host: "127.0.0.1:8080", path: "/api/x", status: 200, reached: true},
		{name: "no redirect for health", host: "127.0.0.1:8080", path: "/health", status: 200, reached: true},
		{name: "no redirect for assets", host: "127.0.0.1:8080", path: "/ui/app.js", status: 200, reached: true},
		{name: "no redirect for post", method: http.MethodPost, host: "127.0.0.1:8080", path: "/", status: 200, reached: true},
		{name: "ipv6 loopback host", host: "[::1]:8080", path: "/api/x", status: 200, reached: true},
		{name: "dns rebinding host", host: "evil.example:8080", path: "/api/x", status: 403, errSub: `host "evil.example:8080" is not allowed`},
		{name: "dns rebinding host with same origin", host: "evil.example:8080", path: "/api/x",
			header: hdr("Origin", "http://evil.example:8080"), status: 403, errSub: "is not allowed"},
		{name: "dns rebinding health", host: "evil.example", path: "/health", status: 403, errSub: "is not allowed"},
		{name: "localhost subdomain", host: "a.localhost:8080", path: "/api/x", status: 403, errSub: "is not allowed"},
		{name: "no auth needed", path: "/api/x", status: 200, reached: true},
		{name: "token link ignored", path: "/?token=x", status: 200, reached: true},
		{name: "write without origin", method: http.MethodPost, path: "/api/x", status: 200, reached: true},
		{name: "write same origin", method: http.MethodPost, path: "/api/x", header: hdr("Origin", "http://localhost:8080"),
			status: 200, reached: true, want: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "write null origin", method: http.MethodPost, path: "/api/x", header: hdr("Origin", "null"),
			status: 403, errSub: `origin "null" is not allowed`},
		{name: "delete null origin", method: http.MethodDelete, path: "/api/x", header: hdr("Origin", "null"),
			status: 403, errSub: `origin "null"`},
		{name: "write cross origin", method: http.MethodPost, path: "/api/x", header: hdr("Origin", "http://evil.example"),
			status: 403, errSub: "server.cors_origins"},
		{name: "write other localhost port", method: http.MethodPut, path: "/api/x", header: hdr("Origin", "http://localhost:3000"),
			status: 403, errSub: "cross-origin"},
		{name: "write allowed cross origin", method: http.MethodPatch, path: "/api/x", header: hdr("Origin", testCross),
			status: 200, reached: true, want: map[string]string{
				"Access-Control-Allow-Origin": testCross, "Access-Control-Allow-Credentials": "true", "Vary": "Origin"}},
		{name: "read cross origin passes without cors headers", path: "/api/x", header: hdr("Origin", "http://evil.example"),
			status: 200, reached: true, want: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "read allowed cross origin", path: "/api/x", header: hdr("Origin", testCross),
			status: 200, reached: true, want: map[string]string{"Access-Control-Allow-Origin": testCross}},
		{name: "websocket null origin", path: "/ws", header: ws("Origin", "null"), status: 403, errSub: `origin "null"`},
		{name: "websocket cross origin", path: "/ws", header: ws("Origin", "http://evil.example"), status: 403, errSub: "cross-origin"},
		{name: "websocket same origin", path: "/ws", header: ws("Origin", "http://localhost:8080"), status: 200, reached: true},
		{name: "websocket no origin", path: "/ws", header: ws(), status: 200, reached: true},
		{name: "preflight allowed", method: http.MethodOptions, path: "/api/x",
			header: hdr("Origin", testCross, "Access-Control-Request-Method", "DELETE"), status: 204, want: map[string]string{
				"Access-Control-Allow-Methods": "HEAD, GET, POST, PUT, PATCH, DELETE",
				"Access-Control-Allow-Headers": "Content-Type, Authorization, X-Api-Key",
				"Access-Control-Max-Age":       "600",
				"Access-Control-Allow-Origin":  testCross,
			}},
		{name: "preflight denied", method: http.MethodOptions, path: "/api/x",
			header: hdr("Origin", "http://evil.example", "Access-Control-Request-Method", "POST"), status: 403, errSub: "cross-origin",
			want: map[string]string{"Access-Control-Allow-Methods": ""}},
		{name: "preflight null", method: http.MethodOptions, path: "/api/x",
			header: hdr("Origin", "null", "Access-Control-Request-Method", "POST"), status: 403, errSub: `origin "null"`},
		{name: "plain options reaches router", method: http.MethodOptions, path: "/api/x", status: 200, reached: true},
		{name: "declared body too large", method: http.MethodPost, path: "/api/x",
			header: hdr("Content-Length", fmt.Sprint(DefaultMaxBodyBytes+1)), status: 413, errSub: "exceeds the 1048576-byte limit"},
	})
}

func TestGuardKeysMode(t *testing.T) {
	g := newTestGuard(t, keyOptions())
	html := hdr("Accept", "text/html,application/xhtml+xml")
	runGuardCases(t, g, []guardCase{
		{name: "health open", path: "/health", status: 200, reached: true},
		{name: "ready open", path: "/health/ready", status: 200, reached: true},
		{name: "live open", path: "/health/live", status: 200, reached: true},
		{name: "health subpath closed", path: "/health/other", status: 401, errSub: "authentication required"},
		{name: "api needs auth", path: "/api/x", status: 401, errSub: "authentication required",
			want: map[string]string{"WWW-Authenticate": `Bearer realm="lathe"`, "Content-Type": "application/json"}},
		{name: "root without html accept is json", path: "/", status: 401, errSub: "lathe url"},
		{name: "api key", path: "/api/x", header: hdr("X-Api-Key", testKey), status: 200, reached: true},
		{name: "wrong api key", path: "/api/x", header: hdr("X-Api-Key", "nope"), status: 401, errSub: "x-api-key is not accepted"},
		{name: "bearer token", path: "/api/x", header: hdr("Authorization", "Bearer "+testBearer), status: 200, reached: true},
		{name: "bearer lower case scheme", path: "/api/x", header: hdr("Authorization", "bearer "+testBearer), status: 200, reached: true},
		{name: "wrong bearer", path: "/api/x", header: hdr("Authorization", "Bearer nope"), status: 401, errSub: "bearer token is not accepted"},
		{name: "basic scheme", path: "/api/x", header: hdr("Authorization", "Basic "+testBearer), status: 401, errSub: "must be Bearer"},
		{name: "api key is not a bearer token", path: "/api/x", header: hdr("Authorization", "Bearer "+testKey), status: 401},
		{name: "write with key no origin", method: http.MethodPost, path: "/api/x", header: hdr("X-Api-Key", testKey), status: 200, reached: true},
		{name: "write null origin before auth", method: http.MethodPost, path: "/api/x",
			header: hdr("X-Api-Key", testKey, "Origin", "null"), status: 403, errSub: `origin "null"`},
		{name: "websocket needs auth", path: "/ws", header: hdr("Upgrade", "websocket"), status: 401, errSub: "authentication required"},
		{name: "websocket with bearer", path: "/ws", header: hdr("Upgrade", "websocket", "Authorization", "Bearer "+testBearer),
			status: 200, reached: true},
		{name: "other host allowed with keys", host: "lathe.internal:8080", path: "/api/x",
			header: hdr("X-Api-Key", testKey), status: 200, reached: true},
		{name: "other host still authenticated", host: "lathe.internal:8080", path: "/api/x", status: 401},
		{name: "preflight before auth", method: http.MethodOptions, path: "/api/x",
			header: hdr("Origin", testCross, "Access-Control-Request-Method", "POST"), status: 204},
		{name: "redirect before auth", host: "127.0.0.1:8080", path: "/?token=abc", status: http.StatusFound,
			want: map[string]string{"Location": "http://localhost:8080/?token=abc"}},
		{name: "declared body too large", method: http.MethodPut, path: "/api/x",
			header: hdr("X-Api-Key", testKey, "Content-Length", "2000000"), status: 413, errSub: "exceeds"},
	})

	for _, c := range []guardCase{
		{name: "get", path: "/", header: html},
		{name: "head", method: http.MethodHead, path: "/", header: html},
		{name: "wrong token", path: "/?token=nope", header: html},
		{name: "wrong token without accept", path: "/?token=nope"},
	} {
		t.Run("sign-in page "+c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			g.ServeHTTP(w, c.request())
			if w.Code != http.StatusUnauthorized {
				t.Fatalf("status = %d, want 401", w.Code)
			}
			for k, v := range map[string]string{"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"} {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			for _, s := range []string{"lathe url", `name="token"`, `method="get"`} {
				if !strings.Contains(w.Body.String(), s) {
					t.Errorf("page lacks %q", s)
				}
			}
			if strings.Contains(w.Header().Get("Set-Cookie"), SessionCookie) {
				t.Error("a failed sign-in set a session cookie")
			}
		})
	}
}

// signIn follows the sign-in link for token and returns the session cookie.
func signIn(t *testing.T, g *Guard, token string) *http.Cookie {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/?token="+token, nil)
	r.Host = "localhost:8080"
	g.ServeHTTP(w, r)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" {
		t.Fatalf("sign-in: status %d, Location %q; want 303 to /", w.Code, w.Header().Get("Location"))
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("sign-in set %d cookies, want 1", len(cookies))
	}
	c := cookies[0]
	if c.Name != SessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge != 0 || !c.Expires.IsZero() {
		t.Errorf("cookie %v: want HttpOnly, SameSite=Strict, Path=/, a session cookie", c)
	}
	if strings.Contains(c.Value, token) {
		t.Errorf("cookie value %q contains the credential", c.Value)
	}
	return c
}

func cookieStatus(g *Guard, c *http.Cookie, upgrade bool) int {
	r := httptest.NewRequest(http.MethodGet, "/api/x", nil)
	r.Host = "localhost:8080"
	r.AddCookie(c)
	if upgrade {
		r.Header.Set("Upgrade", "websocket")
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	return w.Code
}

func TestGuardCookieSignIn(t *testing.T) {
	opts := keyOptions()
	g := newTestGuard(t, opts)
	for _, token := range []string{testKey, testBearer} {
		c := signIn(t, g, token)
		if got := cookieStatus(g, c, false); got != 200 {
			t.Errorf("request with cookie from %q: status %d, want 200", token, got)
		}
		if got := cookieStatus(g, c, true); got != 200 {
			t.Errorf("websocket with cookie: status %d, want 200", got)
		}
		if got := cookieStatus(newTestGuard(t, opts), c, false); got != 200 {
			t.Errorf("cookie after restart with the same secret and keys: status %d, want 200", got)
		}
	}

	c := signIn(t, g, testKey)
	altered := func(f func(string) string) *http.Cookie { return &http.Cookie{Name: SessionCookie, Value: f(c.Value)} }
	flip := func(i int) func(string) string {
		return func(v string) string {
			b := []byte(v)
			if b[i] == 'A' {
				b[i] = 'B'
			} else {
				b[i] = 'A'
			}
			return string(b)
		}
	}
	for name, bad := range map[string]*http.Cookie{
		"nonce altered":  altered(flip(0)),
		"mac altered":    altered(flip(len(c.Value) - 2)),
		"truncated":      altered(func(v string) string { return v[:len(v)-1] }),
		"no separator":   altered(func(v string) string { return strings.Replace(v, ".", "", 1) }),
		"empty":          altered(func(string) string { return "" }),
		"raw credential": {Name: SessionCookie, Value: testKey},
		"wrong name":     {Name: "session", Value: c.Value},
	} {
		if got := cookieStatus(g, bad, false); got != 401 {
			t.Errorf("%s cookie: status %d, want 401", name, got)
		}
	}

	other := opts
	other.CookieSecret = bytes.Repeat([]byte{8}, MinCookieSecret)
	if got := cookieStatus(newTestGuard(t, other), c, false); got != 401 {
		t.Errorf("cookie under another secret: status %d, want 401", got)
	}
	removed := SecurityOptions{APIKeys: []string{"another-key"}, BearerTokens: []string{testBearer}}
	if got := cookieStatus(newTestGuard(t, removed), c, false); got != 401 {
		t.Errorf("cookie after its key was removed: status %d, want 401", got)
	}
	if got := cookieStatus(newTestGuard(t, removed), signIn(t, g, testBearer), false); got != 200 {
		t.Errorf("cookie of a key still configured: status %d, want 200", got)
	}
}

func TestGuardSignInURL(t *testing.T) {
	for _, c := range []struct {
		opts SecurityOptions
		want string
	}{
		{SecurityOptions{}, "http://localhost:8080/"},
		{SecurityOptions{APIKeys: []string{"a b&c", "x"}, BearerTokens: []string{"t"}}, "http://localhost:8080/?token=a+b%26c"},
		{SecurityOptions{BearerTokens: []string{"t/1"}}, "http://localhost:8080/?token=t%2F1"},
	} {
		if got := newTestGuard(t, c.opts).SignInURL("http://localhost:8080"); got != c.want {
			t.Errorf("SignInURL = %q, want %q", got, c.want)
		}
	}
}

func TestGuardRateLimit(t *testing.T) {
	g := newTestGuard(t, SecurityOptions{RateLimit: RateLimitOptions{Enabled: true, RequestsPerSecond: 0.5, Burst: 2}})
	now := time.Unix(1_700_000_000, 0)
	g.now = func() time.Time { return now }
	get := func(path, remote string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = "localhost:8080"
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w
	}
	for i := range 2 {
		if w := get("/api/x", "10.0.0.1:1000"); w.Code != 200 {
			t.Fatalf("request %d within burst: status %d", i, w.Code)
		}
	}
	w := get("/api/x", "10.0.0.1:2000")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("after burst: status %d, Retry-After %q; want 429, 2", w.Code, w.Header().Get("Retry-After"))
	}
	if !strings.Contains(w.Body.String(), "rate limit") {
		t.Errorf("429 body %q", w.Body)
	}
	if w := get("/health", "10.0.0.1:1000"); w.Code != 200 {
		t.Errorf("health is rate limited: %d", w.Code)
	}
	if w := get("/api/x", "10.0.0.2:1000"); w.Code != 200 {
		t.Errorf("another client is limited: %d", w.Code)
	}
	if w := get("/api/x", "[2001:db8::1]:1"); w.Code != 200 {
		t.Errorf("ipv6 client: %d", w.Code)
	}
	get("/api/x", "[2001:db8::2]:1")
	if w := get("/api/x", "[2001:db8::3]:1"); w.Code != http.StatusTooManyRequests {
		t.Errorf("one ipv6 /64 is one client: status %d, want 429", w.Code)
	}
	now = now.Add(2 * time.Second)
	if w := get("/api/x", "10.0.0.1:1000"); w.Code != 200 {
		t.Errorf("after refill: status %d", w.Code)
	}
}

func TestGuardRateLimitEviction(t *testing.T) {
	l := &clientLimits{rate: 1, burst: 1, clients: make(map[string]*client)}
	now := time.Unix(1_700_000_000, 0)
	for i := range maxClients + 10 {
		l.allow(fmt.Sprint(i), now)
	}
	if n := len(l.clients); n != maxClients {
		t.Fatalf("clients = %d, want the cap %d", n, maxClients)
	}
	now = now.Add(clientIdleAfter + time.Second)
	l.allow("fresh", now)
	if n := len(l.clients); n != 1 {
		t.Fatalf("clients after idle sweep = %d, want 1", n)
	}
}

func TestGuardBodyCap(t *testing.T) {
	g := newTestGuard(t, SecurityOptions{MaxBodyBytes: 8})
	post := func(body io.Reader, length int64) int {
		r := httptest.NewRequest(http.MethodPost, "/api/x", body)
		r.Host = "localhost:8080"
		r.ContentLength = length
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w.Code
	}
	if got := post(strings.NewReader("12345678"), 8); got != 200 {
		t.Errorf("body at the cap: %d", got)
	}
	if got := post(strings.NewReader("123456789"), 9); got != 413 {
		t.Errorf("declared length over the cap: %d", got)
	}
	if got := post(io.MultiReader(strings.NewReader("123456789")), -1); got != 413 {
		t.Errorf("streamed body over the cap: %d", got)
	}
}

func TestGuardPreviewFirst(t *testing.T) {
	preview := func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.Host, ".localhost:8080") {
			return false
		}
		w.WriteHeader(http.StatusTeapot)
		return true
	}
	g, err := NewGuard(SecurityOptions{}, preview, echo)
	if err != nil {
		t.Fatal(err)
	}
	runGuardCases(t, g, []guardCase{
		{name: "preview host skips every check", method: http.MethodPost, host: "01j-p3000.localhost:8080", path: "/",
			header: hdr("Origin", "null"), status: http.StatusTeapot},
		{name: "control host unaffected", path: "/api/x", status: 200, reached: true},
	})
}

func TestGuardOptionErrors(t *testing.T) {
	for name, opts := range map[string]SecurityOptions{
		"short secret":    {APIKeys: []string{"k"}, CookieSecret: []byte("short")},
		"empty key":       {APIKeys: []string{""}, CookieSecret: testSecret},
		"empty token":     {BearerTokens: []string{""}, CookieSecret: testSecret},
		"origin path":     {CORSOrigins: []string{"http://localhost:5173/"}},
		"origin null":     {CORSOrigins: []string{"null"}},
		"origin wildcard": {CORSOrigins: []string{"*"}},
		"origin scheme":   {CORSOrigins: []string{"ftp://x"}},
		"rate zero":       {RateLimit: RateLimitOptions{Enabled: true, RequestsPerSecond: 0, Burst: 1}},
		"burst zero":      {RateLimit: RateLimitOptions{Enabled: true, RequestsPerSecond: 1}},
		"negative body":   {MaxBodyBytes: -1},
	} {
		if _, err := NewGuard(opts, nil, echo); err == nil {
			t.Errorf("%s: NewGuard accepted %+v", name, opts)
		}
	}
	if _, err := NewGuard(SecurityOptions{}, nil, echo); err != nil {
		t.Errorf("loopback mode needs no secret: %v", err)
	}
	if (SecurityOptions{}).AuthEnabled() || !(SecurityOptions{BearerTokens: []string{"t"}}).AuthEnabled() {
		t.Error("AuthEnabled is wrong")
	}
}

func FuzzCookie(f *testing.F) {
	g, err := NewGuard(SecurityOptions{APIKeys: []string{testKey}, CookieSecret: testSecret}, nil, echo)
	if err != nil {
		f.Fatal(err)
	}
	signed := map[string]bool{}
	for i := range 4 { // fixed nonces: every fuzz worker must know the same signed values
		v := g.signCookie(bytes.Repeat([]byte{byte(i)}, nonceSize), sha256.Sum256([]byte(testKey)))
		signed[v] = true
		f.Add(v)
		f.Add(v + "=")
		f.Add(v[:len(v)-1] + "\n" + v[len(v)-1:])
	}
	f.Add("")
	f.Add(".")
	f.Add("..")
	f.Add("AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, v string) {
		if _, ok := g.validCookie(v); ok && !signed[v] {
			t.Fatalf("accepted a cookie it did not sign: %q", v)
		}
	})
}

// Every authenticated request carries its operator actor: the credential's
// fingerprint (never the secret), cookie:<fingerprint> after the sign-in
// link, or loopback without authentication. A configured name is found by
// the fingerprint.
func TestGuardNamesTheOperator(t *testing.T) {
	var got journal.Actor
	capture := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = journal.ActorFrom(r.Context()) })
	opts := keyOptions()
	opts.CookieSecret = testSecret
	g, err := NewGuard(opts, nil, capture)
	if err != nil {
		t.Fatal(err)
	}
	fp := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:6]) }
	cookie := signIn(t, g, testBearer)
	for _, c := range []struct {
		name string
		set  func(r *http.Request)
		want string
	}{
		{"api key", func(r *http.Request) { r.Header.Set("X-Api-Key", testKey) }, fp(testKey)},
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testBearer) }, fp(testBearer)},
		{"cookie", func(r *http.Request) { r.AddCookie(cookie) }, "cookie:" + fp(testBearer)},
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/x", nil)
		r.Host = "localhost:8080"
		c.set(r)
		g.ServeHTTP(httptest.NewRecorder(), r)
		if got != (journal.Actor{Kind: journal.ActorOperator, ID: c.want}) {
			t.Errorf("%s: actor %+v, want %s", c.name, got, c.want)
		}
	}
	if CredentialID(testKey) != fp(testKey) {
		t.Errorf("CredentialID(key) = %s, want the actor ID %s", CredentialID(testKey), fp(testKey))
	}
	open, err := NewGuard(SecurityOptions{}, nil, capture)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/api/x", nil)
	r.Host = "localhost:8080"
	open.ServeHTTP(httptest.NewRecorder(), r)
	if got != (journal.Actor{Kind: journal.ActorOperator, ID: "loopback"}) {
		t.Errorf("loopback mode: actor %+v", got)
	}
}
