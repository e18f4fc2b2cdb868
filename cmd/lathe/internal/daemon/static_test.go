package daemon

import (
	"net/http"
	"strings"
	"testing"

	"lathe/cmd/lathe/internal/config"
)

// TestWorkbenchAssets covers GET / and the asset routes: content types,
// strong ETags with 304 revalidation, only embedded files (no listings, no
// dot files, no escapes) and authentication like every other route.
func TestWorkbenchAssets(t *testing.T) {
	const key = "asset-test-key-0123456789"
	_, srv := newTestDaemon(t, func(c *config.Config) { c.Server.APIKeys = config.Secrets(key) })
	auth := []string{"X-Api-Key", key}

	for _, tc := range []struct {
		name, method, path string
		header             []string
		status             int
		contentType        string // prefix
		body               string // substring
	}{
		{"document", get, "/", auth, 200, "text/html", `<script type="module" src="/ui/app.js">`},
		{"module", get, "/ui/app.js", auth, 200, "text/javascript", "class App"},
		{"stylesheet", get, "/ui/app.css", auth, 200, "text/css", "color-scheme"},
		{"vendored bundle", get, "/vendor/codemirror.js", auth, 200, "text/javascript", "import"},
		{"vendored stylesheet", get, "/vendor/xterm.css", auth, 200, "text/css", ".xterm"},
		{"licences", get, "/vendor/LICENSES.txt", auth, 200, "text/plain", "MIT"},
		{"brand", get, "/brand/icon.svg", auth, 200, "image/svg+xml", "<svg"},
		{"head", http.MethodHead, "/ui/app.js", auth, 200, "text/javascript", ""},
		{"missing", get, "/ui/nope.js", auth, 404, "application/json", "no asset"},
		{"directory", get, "/vendor/", auth, 404, "application/json", "no asset"},
		{"subdirectory", get, "/ui/../web.go", auth, 404, "", ""},
		{"encoded escape", get, "/ui/%2e%2e/web.go", auth, 404, "application/json", "no asset"},
		{"dot file", get, "/vendor/.gitignore", auth, 404, "application/json", "no asset"},
		{"build tooling is not served", get, "/vendor/package.json", auth, 404, "application/json", "no asset"},
		{"post", post, "/ui/app.js", auth, 405, "application/json", "not allowed"},
		{"needs authentication", get, "/ui/app.js", nil, 401, "application/json", "authentication required"},
		{"vendor needs authentication", get, "/vendor/lit.js", nil, 401, "application/json", "authentication required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, srv, tc.method, tc.path, "", tc.header...)
			if r.status != tc.status {
				t.Fatalf("%s %s: %d, want %d: %.200s", tc.method, tc.path, r.status, tc.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
				t.Errorf("Content-Type %q, want %q", ct, tc.contentType)
			}
			if !strings.Contains(string(r.body), tc.body) {
				t.Errorf("body lacks %q: %.200s", tc.body, r.body)
			}
			if tc.status == 200 && r.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no X-Content-Type-Options: nosniff")
			}
		})
	}

	t.Run("document policy", func(t *testing.T) {
		r := call(t, srv, get, "/", "", auth...)
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "frame-src http://*.localhost:"} {
			if !strings.Contains(csp, want) {
				t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
			}
		}
	})
	t.Run("etag revalidation", func(t *testing.T) {
		r := call(t, srv, get, "/ui/store.js", "", auth...)
		etag := r.header.Get("ETag")
		if !strings.HasPrefix(etag, `"`) || r.header.Get("Cache-Control") != "no-cache" {
			t.Fatalf("ETag %q, Cache-Control %q: want a strong ETag and no-cache", etag, r.header.Get("Cache-Control"))
		}
		r = call(t, srv, get, "/ui/store.js", "", append([]string{"If-None-Match", etag}, auth...)...)
		if r.status != http.StatusNotModified || len(r.body) != 0 {
			t.Errorf("revalidation: %d with %d bytes, want 304 and none", r.status, len(r.body))
		}
		if other := call(t, srv, get, "/ui/app.js", "", auth...).header.Get("ETag"); other == etag {
			t.Errorf("two files share the ETag %s", etag)
		}
	})
}
