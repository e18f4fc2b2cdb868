package transport

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"lathe/commands/core"

	"golang.org/x/time/rate"
)

// SecurityOptions configures the Guard in front of the control router.
type SecurityOptions struct {
	APIKeys      []string         // accepted x-api-key values (server.api_keys)
	BearerTokens []string         // accepted Authorization: Bearer values (server.bearer_tokens)
	CORSOrigins  []string         // exact allowed cross origins, e.g. "http://localhost:5173" (server.cors_origins)
	RateLimit    RateLimitOptions // per-client-IP limit (server.rate_limit)
	CookieSecret []byte           // at least 32 random bytes, persisted by the caller; signs session cookies
	MaxBodyBytes int64            // request body cap; 0 means DefaultMaxBodyBytes
	BodyTimeouts BodyTimeouts     // how long a body may take to arrive, per class (bodydeadline.go)
}

// RateLimitOptions configures the optional per-client-IP rate limit.
type RateLimitOptions struct {
	Enabled           bool
	RequestsPerSecond float64
	Burst             int
}

// AuthEnabled reports whether any key or token is configured. Without one the
// daemon runs in unauthenticated loopback mode.
func (o SecurityOptions) AuthEnabled() bool {
	return len(o.APIKeys)+len(o.BearerTokens) > 0
}

// PreviewInterceptor is the seam for the Preview virtual origin. It runs
// before every other check; if it returns true it has handled the request.
type PreviewInterceptor func(w http.ResponseWriter, r *http.Request) bool

const (
	// DefaultMaxBodyBytes is the request body cap when SecurityOptions.MaxBodyBytes is 0.
	DefaultMaxBodyBytes = 1 << 20
	// SessionCookie is the name of the cookie set by the sign-in link.
	SessionCookie = "lathe_session"
	// MinCookieSecret is the shortest accepted SecurityOptions.CookieSecret.
	MinCookieSecret = 32

	nonceSize        = 16
	allowMethods     = "HEAD, GET, POST, PUT, PATCH, DELETE"
	allowHeaders     = "Content-Type, Authorization, X-Api-Key"
	preflightMaxAge  = "600"
	wwwAuthenticate  = `Bearer realm="lathe"`
	clientIdleAfter  = 3 * time.Minute
	clientSweepEvery = time.Minute
	maxClients       = 10_000
)

//go:embed signin.html
var signInPage []byte

var cookieEncoding = base64.RawURLEncoding

// digest is the SHA-256 of a configured credential. Credentials are compared
// and bound into cookies only through their digests.
type digest [sha256.Size]byte

// Guard is the http.Handler that enforces Host, Origin, CORS, authentication,
// rate-limit and body-size rules in front of the control router.
type Guard struct {
	preview PreviewInterceptor
	next    http.Handler

	apiKeys []digest
	bearers []digest
	all     []digest // apiKeys then bearers: sign-in and cookie credentials
	first   string   // the credential SignInURL prints
	secret  []byte
	origins map[string]bool
	maxBody int64
	// bodyTimeouts cut off a body that trickles (bodydeadline.go).
	bodyTimeouts BodyTimeouts
	limits       *clientLimits    // nil when rate limiting is off
	now          func() time.Time // replaced in tests
	// names: credential fingerprint → its configured name.
	// public are the paths that need no credential and are not rate
	// limited: the route table's AuthPublic routes (publicPaths).
	public map[string]bool
}

// NewGuard checks opts and returns a Guard that serves next. preview may be nil.
func NewGuard(opts SecurityOptions, preview PreviewInterceptor, next http.Handler) (*Guard, error) {
	g := &Guard{
		preview: preview,
		next:    next,
		origins: make(map[string]bool),
		maxBody: opts.MaxBodyBytes,
		now:     time.Now,
		public:  publicPaths(Routes()),

		bodyTimeouts: opts.BodyTimeouts,
	}
	for i, k := range opts.APIKeys {
		if k == "" {
			return nil, fmt.Errorf("server.api_keys[%d] is empty", i)
		}
		g.apiKeys = append(g.apiKeys, sha256.Sum256([]byte(k)))
	}
	for i, t := range opts.BearerTokens {
		if t == "" {
			return nil, fmt.Errorf("server.bearer_tokens[%d] is empty", i)
		}
		g.bearers = append(g.bearers, sha256.Sum256([]byte(t)))
	}
	g.all = append(append([]digest(nil), g.apiKeys...), g.bearers...)
	if opts.AuthEnabled() {
		if len(opts.CookieSecret) < MinCookieSecret {
			return nil, fmt.Errorf("cookie secret is %d bytes; at least %d are required", len(opts.CookieSecret), MinCookieSecret)
		}
		g.secret = append([]byte(nil), opts.CookieSecret...)
		if len(opts.APIKeys) > 0 {
			g.first = opts.APIKeys[0]
		} else {
			g.first = opts.BearerTokens[0]
		}
	}
	for _, o := range opts.CORSOrigins {
		if !validOrigin(o) {
			return nil, fmt.Errorf("server.cors_origins: %q must be scheme://host[:port], like \"http://localhost:5173\"", o)
		}
		g.origins[strings.ToLower(o)] = true
	}
	if g.maxBody < 0 {
		return nil, fmt.Errorf("max body size %d is negative", g.maxBody)
	}
	if g.maxBody == 0 {
		g.maxBody = DefaultMaxBodyBytes
	}
	if rl := opts.RateLimit; rl.Enabled {
		if rl.RequestsPerSecond <= 0 || rl.Burst < 1 {
			return nil, errors.New("server.rate_limit needs requests_per_second > 0 and burst >= 1 when enabled")
		}
		g.limits = &clientLimits{rate: rate.Limit(rl.RequestsPerSecond), burst: rl.Burst, clients: make(map[string]*client)}
	}
	return g, nil
}

// SignInURL returns the link that signs a browser in: base+"/?token=<first
// key or token>", or base+"/" when authentication is off. base is like
// "http://localhost:8080". The link carries a secret: print it, never log it.
func (g *Guard) SignInURL(base string) string {
	u := strings.TrimSuffix(base, "/") + "/"
	if g.first == "" {
		return u
	}
	return u + "?token=" + url.QueryEscape(g.first)
}

// ServeHTTP applies, in order: the Preview interceptor, the loopback-literal
// redirect, the loopback Host check (unauthenticated mode), Origin rules,
// CORS preflight, the sign-in link, authentication, the rate limit and the
// body cap; then it calls the next handler.
func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.preview != nil && g.preview(w, r) {
		return
	}
	if loc, ok := loopbackRedirect(r); ok {
		http.Redirect(w, r, loc, http.StatusFound)
		return
	}
	if len(g.all) == 0 && !localHost(w, r, "in unauthenticated loopback mode only localhost, 127.0.0.1 and [::1] are served; configure server.api_keys to serve other names") {
		return
	}
	if !g.checkOrigin(w, r) {
		return
	}
	if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		g.preflight(w, r)
		return
	}
	public := g.public[r.URL.Path]
	if len(g.all) > 0 {
		if r.Method == http.MethodGet && r.URL.Path == "/" && r.URL.Query().Has("token") {
			g.signIn(w, r)
			return
		}
		if !public {
			who, msg, ok := g.authenticate(r)
			if !ok {
				g.unauthorized(w, r, msg)
				return
			}
			r = r.WithContext(core.AsOperator(r.Context(), who))
		}
	} else {
		r = r.WithContext(core.AsOperator(r.Context(), "loopback"))
	}
	if g.limits != nil && !public {
		if wait, ok := g.limits.allow(clientKey(r.RemoteAddr), g.now()); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
			writeError(w, http.StatusTooManyRequests, "rate limit exceeded for this client; retry after the Retry-After delay")
			return
		}
	}
	if r.ContentLength > g.maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes exceeds the %d-byte limit", r.ContentLength, g.maxBody))
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, withBodyDeadline(w, r.Body, g.bodyTimeouts.of(r)), g.maxBody)
	}
	g.next.ServeHTTP(w, r)
}

// localHost is the loopback Host check: a request whose Host header names
// anything but this machine's loopback interface is refused 403 (why says
// what is served) and false returned. A DNS-rebinding page reaches a
// loopback listener under its own name, so this is what keeps it out of
// an unauthenticated one.
func localHost(w http.ResponseWriter, r *http.Request, why string) bool {
	if isLocalHost(r.Host) {
		return true
	}
	writeError(w, http.StatusForbidden, fmt.Sprintf("host %q is not allowed: %s", r.Host, why))
	return false
}

// LocalHostOnly serves next only to requests whose Host header names the
// loopback interface, by the Guard's check: for the daemon's other
// unauthenticated loopback listener (telemetry.metrics_listen).
func LocalHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if localHost(w, r, "this listener serves only localhost, 127.0.0.1 and [::1]") {
			next.ServeHTTP(w, r)
		}
	})
}

// loopbackRedirect returns where a GET or HEAD of "/" on a loopback IP
// literal goes: the localhost name on the same port, with the same query.
func loopbackRedirect(r *http.Request) (string, bool) {
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || r.URL.Path != "/" {
		return "", false
	}
	host, port := splitHost(r.Host)
	if !isLoopbackIP(host) {
		return "", false
	}
	loc := "http://localhost"
	if port != "" {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return "", false
		}
		loc += ":" + port
	}
	loc += "/"
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	return loc, true
}

// checkOrigin rejects writes and WebSocket upgrades from the null origin and
// from cross origins not in server.cors_origins, and sets the CORS response
// headers for allowed cross origins. It reports whether to go on.
func (g *Guard) checkOrigin(w http.ResponseWriter, r *http.Request) bool {
	if len(g.origins) > 0 {
		w.Header().Add("Vary", "Origin") // responses differ by Origin only when cross origins are allowed
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser: CLI clients send no Origin
	}
	same := isSameOrigin(r, origin)
	allowed := origin != "null" && (same || g.origins[strings.ToLower(origin)])
	if allowed && !same {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	if allowed || !(isWrite(r) || isWebSocket(r)) {
		return true
	}
	writeError(w, http.StatusForbidden, originRefusal(origin))
	return false
}

// preflight answers a CORS preflight request.
func (g *Guard) preflight(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin == "null" || (!isSameOrigin(r, origin) && !g.origins[strings.ToLower(origin)]) {
		writeError(w, http.StatusForbidden, originRefusal(origin))
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", allowMethods)
	h.Set("Access-Control-Allow-Headers", allowHeaders)
	h.Set("Access-Control-Max-Age", preflightMaxAge)
	w.WriteHeader(http.StatusNoContent)
}

func originRefusal(origin string) string {
	if origin == "null" {
		return `origin "null" is not allowed: requests from opaque or sandboxed origins are refused`
	}
	return fmt.Sprintf("cross-origin request from %q is not allowed; add it to server.cors_origins to allow it", origin)
}

// signIn answers the sign-in link "/?token=...": a valid token sets the
// session cookie and redirects to "/" so the token leaves the address bar.
func (g *Guard) signIn(w http.ResponseWriter, r *http.Request) {
	d, ok := match(g.all, r.URL.Query().Get("token"))
	if !ok {
		g.signInPage(w)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     SessionCookie,
		Value:    g.mintCookie(d),
		Path:     "/",
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// authenticate reports whether r carries an accepted x-api-key, bearer token
// or session cookie, and who: the credential's fingerprint, or
// "cookie:<fingerprint>" for a browser signed in by the link. If not, msg
// says what was wrong.
func (g *Guard) authenticate(r *http.Request) (who, msg string, ok bool) {
	if key := r.Header.Get("X-Api-Key"); key != "" {
		if d, ok := match(g.apiKeys, key); ok {
			return fingerprint(d), "", true
		}
		msg = "the x-api-key is not accepted"
	}
	if authz := r.Header.Get("Authorization"); authz != "" {
		scheme, token, _ := strings.Cut(authz, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			msg = "the Authorization scheme must be Bearer"
		} else if d, ok := match(g.bearers, strings.TrimSpace(token)); ok {
			return fingerprint(d), "", true
		} else {
			msg = "the bearer token is not accepted"
		}
	}
	for _, c := range r.CookiesNamed(SessionCookie) {
		if d, ok := g.validCookie(c.Value); ok {
			return "cookie:" + fingerprint(d), "", true
		}
		if msg == "" {
			msg = "the session cookie is no longer valid; sign in again"
		}
	}
	if msg == "" {
		msg = `authentication required: send an x-api-key or Authorization: Bearer header, or open the link printed by "lathe url"`
	}
	return "", msg, false
}

// fingerprint names a credential in the audit trail without revealing it:
// the first 12 hex digits of its SHA-256.
func fingerprint(d digest) string { return hex.EncodeToString(d[:6]) }

// CredentialID is the operator actor ID of a credential: its fingerprint,
// never the secret. The audit's credential names are keyed by it.
func CredentialID(secret string) string { return fingerprint(sha256.Sum256([]byte(secret))) }

// unauthorized answers 401: the HTML sign-in page for a browser asking for
// "/", the JSON error otherwise.
func (g *Guard) unauthorized(w http.ResponseWriter, r *http.Request, msg string) {
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/" &&
		strings.Contains(r.Header.Get("Accept"), "text/html") {
		g.signInPage(w)
		return
	}
	w.Header().Set("WWW-Authenticate", wwwAuthenticate)
	writeError(w, http.StatusUnauthorized, msg)
}

func (g *Guard) signInPage(w http.ResponseWriter) {
	h := w.Header()
	h.Set("WWW-Authenticate", wwwAuthenticate)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(signInPage)
}

// mintCookie returns a new session cookie value bound to the credential d:
// base64url(nonce) "." base64url(HMAC-SHA256(secret, nonce || d)).
func (g *Guard) mintCookie(d digest) string {
	nonce := make([]byte, nonceSize)
	_, _ = rand.Read(nonce) // never fails since Go 1.24
	return g.signCookie(nonce, d)
}

func (g *Guard) signCookie(nonce []byte, d digest) string {
	return encodeCookie(nonce, g.cookieMAC(nonce, d))
}

// validCookie reports whether v was minted by mintCookie, with this secret,
// for a credential that is still configured, and which.
func (g *Guard) validCookie(v string) (digest, bool) {
	n, m, ok := strings.Cut(v, ".")
	if !ok {
		return digest{}, false
	}
	nonce, err := cookieEncoding.DecodeString(n)
	if err != nil || len(nonce) != nonceSize {
		return digest{}, false
	}
	mac, err := cookieEncoding.DecodeString(m)
	if err != nil || len(mac) != sha256.Size || encodeCookie(nonce, mac) != v {
		return digest{}, false // wrong sizes, or a non-canonical encoding of a signed value
	}
	var found digest
	valid := false
	for _, d := range g.all {
		if hmac.Equal(mac, g.cookieMAC(nonce, d)) {
			found, valid = d, true
		}
	}
	return found, valid
}

func (g *Guard) cookieMAC(nonce []byte, d digest) []byte {
	h := hmac.New(sha256.New, g.secret)
	h.Write(nonce)
	h.Write(d[:])
	return h.Sum(nil)
}

func encodeCookie(nonce, mac []byte) string {
	return cookieEncoding.EncodeToString(nonce) + "." + cookieEncoding.EncodeToString(mac)
}

// match compares v with every digest in set in constant time and returns the
// one it matches.
func match(set []digest, v string) (digest, bool) {
	h := digest(sha256.Sum256([]byte(v)))
	var found digest
	ok := false
	for _, d := range set {
		if subtle.ConstantTimeCompare(h[:], d[:]) == 1 {
			found, ok = d, true
		}
	}
	return found, ok
}

// clientLimits holds one token bucket per client address. Buckets idle for
// clientIdleAfter are swept, and the map never exceeds maxClients.
type clientLimits struct {
	rate  rate.Limit
	burst int

	mu        sync.Mutex
	clients   map[string]*client
	lastSweep time.Time
}

type client struct {
	lim  *rate.Limiter
	seen time.Time
}

// allow takes one token for key at now. If none is left it returns how long
// until one is.
func (l *clientLimits) allow(key string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= clientSweepEvery {
		for k, c := range l.clients {
			if now.Sub(c.seen) > clientIdleAfter {
				delete(l.clients, k)
			}
		}
		l.lastSweep = now
	}
	c := l.clients[key]
	if c == nil {
		for k := range l.clients {
			if len(l.clients) < maxClients {
				break
			}
			delete(l.clients, k) // full even after the sweep: drop an arbitrary client
		}
		c = &client{lim: rate.NewLimiter(l.rate, l.burst)}
		l.clients[key] = c
	}
	c.seen = now
	if c.lim.AllowN(now, 1) {
		return 0, true
	}
	missing := 1 - c.lim.TokensAt(now)
	return time.Duration(missing / float64(l.rate) * float64(time.Second)), false
}

// clientKey is the rate-limit key of a remote address: its IP, or its /64
// for IPv6, since one client commonly holds a whole /64.
func clientKey(remoteAddr string) string {
	host, _ := splitHost(remoteAddr)
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// splitHost splits a Host header or address into hostname and port; the port
// is empty if there is none. IPv6 brackets are removed.
func splitHost(hostport string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
}

func isLoopbackIP(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// isLocalHost reports whether the Host header names this machine's loopback
// interface: localhost, 127.0.0.0/8 or ::1, with any port.
func isLocalHost(hostport string) bool {
	host, _ := splitHost(hostport)
	return strings.EqualFold(host, "localhost") || isLoopbackIP(host)
}

func isSameOrigin(r *http.Request, origin string) bool {
	return strings.EqualFold(origin, "http://"+r.Host) || strings.EqualFold(origin, "https://"+r.Host)
}

func isWrite(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

func isWebSocket(r *http.Request) bool {
	for _, v := range r.Header.Values("Upgrade") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "websocket") {
				return true
			}
		}
	}
	return false
}

// validOrigin reports whether o is a bare http(s) origin: scheme://host[:port].
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.Scheme+"://"+u.Host == o
}
