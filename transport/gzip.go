package transport

import (
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
)

// The Session list is the read the workbench's first load waits for, and
// the largest: a thousand Sessions are over a MiB of JSON. Compressed, its
// repetitive records are a small fraction of that on the wire.

// gzipMaxBytes bounds the Session lists that are compressed (1,000 Sessions
// are about 600 KiB). Past it the list is tens of MiB, which a loopback
// client receives faster than the daemon compresses it (50,000 Sessions:
// about 100 ms of CPU, doubling the restart-to-served-list time); the
// workbench's rail wants a page of it instead.
const gzipMaxBytes = 4 << 20

// gzipWriter compresses an answer's body; its header drops the
// uncompressed Content-Length and says the encoding.
type gzipWriter struct {
	http.ResponseWriter
	gz          *gzip.Writer
	wroteHeader bool
}

func (g *gzipWriter) WriteHeader(status int) {
	if g.wroteHeader {
		return
	}
	g.wroteHeader = true
	h := g.ResponseWriter.Header()
	h.Del("Content-Length")
	h.Set("Content-Encoding", "gzip")
	h.Add("Vary", "Accept-Encoding")
	g.ResponseWriter.WriteHeader(status)
}

func (g *gzipWriter) Write(b []byte) (int, error) {
	g.WriteHeader(http.StatusOK)
	return g.gz.Write(b)
}

// gzipped runs write with w compressed when r accepts gzip, else with w.
func gzipped(w http.ResponseWriter, r *http.Request, write func(http.ResponseWriter)) {
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		write(w)
		return
	}
	gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: never an error
	gw := &gzipWriter{ResponseWriter: w, gz: gz}
	write(gw)
	_ = gz.Close()
}

// acceptsGzip reports whether an Accept-Encoding header accepts gzip (and
// not with q=0).
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		q, found := strings.CutPrefix(strings.TrimSpace(params), "q=")
		if !found {
			return true
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(q), 64)
		return err == nil && v > 0
	}
	return false
}
