package transport

// The workbench's static assets: GET /ui/*, /vendor/* and /brand/* from the
// embedded web.Assets. Each file is served with its content type, a strong
// ETag (its SHA-256, computed once) and Cache-Control: no-cache, so a reload
// revalidates every module with one cheap 304 and never runs a stale one
// after an upgrade. Only files are served: a directory, a dot file or a path
// outside the tree is 404.

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"lathe/web"
)

// staticAsset is one embedded file, read once.
type staticAsset struct {
	data        []byte
	etag        string
	contentType string
	// gz is data gzip-compressed (once, on first use), for the text assets
	// a browser takes compressed (transport/gzip.go); nil for the others.
	gz     []byte
	gzOnce sync.Once
}

// compressed is the asset gzip-compressed, or nil when its type does not
// gain from it (images but SVG) or it would not shrink.
func (f *staticAsset) compressed() []byte {
	f.gzOnce.Do(func() {
		ct := f.contentType
		if !strings.HasPrefix(ct, "text/") && !strings.Contains(ct, "javascript") && !strings.Contains(ct, "json") && !strings.Contains(ct, "svg") {
			return
		}
		var b bytes.Buffer
		gz, _ := gzip.NewWriterLevel(&b, gzip.BestCompression) // a valid level: never an error
		_, _ = gz.Write(f.data)
		if gz.Close() == nil && b.Len() < len(f.data) {
			f.gz = b.Bytes()
		}
	})
	return f.gz
}

// staticAssets caches the embedded files by their path in web.Assets.
type staticAssets struct {
	mu    sync.Mutex
	files map[string]*staticAsset
}

var assets = &staticAssets{files: map[string]*staticAsset{}}

// get returns the asset at name (a clean path in web.Assets), or nil when
// there is no such regular file.
func (a *staticAssets) get(name string) *staticAsset {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f, ok := a.files[name]; ok {
		return f
	}
	data, err := fs.ReadFile(web.Assets, name)
	if err != nil {
		return nil // missing, or a directory
	}
	sum := sha256.Sum256(data)
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = http.DetectContentType(data)
	}
	f := &staticAsset{data: data, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, contentType: ct}
	a.files[name] = f
	return f
}

// staticRoutes are the URL prefixes of the asset routes and the directories
// of web.Assets they serve.
var staticRoutes = []struct{ prefix, dir string }{
	{"/ui/", "ui"},
	{"/vendor/", "vendor/dist"},
	{"/brand/", "brand"},
	{"/lattice/", "lattice"},
}

// serveStatic returns the handler of one asset route.
func serveStatic(dir string) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		name, ok := assetPath(dir, p.ByName("file"))
		var f *staticAsset
		if ok {
			f = assets.get(name)
		}
		if f == nil {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no asset %s", r.URL.Path))
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		body, etag := f.data, f.etag
		if gz := f.compressed(); gz != nil {
			h.Add("Vary", "Accept-Encoding")
			if acceptsGzip(r.Header.Get("Accept-Encoding")) {
				// The compressed representation: its own strong ETag.
				body, etag = gz, strings.TrimSuffix(f.etag, `"`)+`-gz"`
				h.Set("Content-Encoding", "gzip")
			}
		}
		h.Set("ETag", etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	}
}

// assetPath maps the route's *file parameter to a path in web.Assets: clean,
// inside dir, with no dot-file element.
func assetPath(dir, file string) (string, bool) {
	file = strings.TrimPrefix(file, "/")
	if file == "" || strings.IndexByte(file, 0) >= 0 || path.Clean("/"+file) != "/"+file {
		return "", false
	}
	for elem := range strings.SplitSeq(file, "/") {
		if strings.HasPrefix(elem, ".") {
			return "", false
		}
	}
	return dir + "/" + file, true
}

// serveIndex serves the workbench document at /.
func serveIndex(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	page, err := web.Assets.ReadFile("index.html")
	if err != nil {
		fail(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// Scripts and connections (fetch, /ws, terminal WebSockets) stay on this
	// origin; CodeMirror and xterm.js style their elements inline. Frames
	// are the Previews only: their virtual origins on this listener's port.
	frames := "http://*.localhost"
	if _, port := splitHost(r.Host); port != "" {
		frames += ":" + port
	}
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-src "+frames+
		"; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
	_, _ = w.Write(page)
}
