package transport

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/julienschmidt/httprouter"
)

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                        false,
		"gzip":                    true,
		"gzip, deflate, br, zstd": true,
		"br;q=1.0, gzip;q=0.8":    true,
		"gzip;q=0":                false,
		"identity":                false,
		"deflate, GZIP":           true,
		"gzip;q=0.000, identity":  false,
		"x-gzip-not-really, br":   false,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}

func TestGzippedAnswer(t *testing.T) {
	body := strings.Repeat(`{"id":"01J","name":"a Session"},`, 1000)
	write := func(w http.ResponseWriter) { writeJSONBytes(w, http.StatusOK, []byte("["+body+"{}]")) }
	for _, enc := range []string{"gzip, br", ""} {
		r := httptest.NewRequest("GET", "/api/sessions", nil)
		r.Header.Set("Accept-Encoding", enc)
		rec := httptest.NewRecorder()
		gzipped(rec, r, write)
		res := rec.Result()
		var rd io.Reader = res.Body
		if enc != "" {
			if res.Header.Get("Content-Encoding") != "gzip" || res.Header.Get("Content-Length") != "" {
				t.Fatalf("%q: headers %v", enc, res.Header)
			}
			if rec.Body.Len() > len(body)/10 {
				t.Errorf("compressed to %d bytes of %d", rec.Body.Len(), len(body))
			}
			gz, err := gzip.NewReader(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			rd = gz
		} else if res.Header.Get("Content-Encoding") != "" {
			t.Fatalf("identity answered with %q", res.Header.Get("Content-Encoding"))
		}
		got, err := io.ReadAll(rd)
		if err != nil || string(got) != "["+body+"{}]\n" {
			t.Errorf("%q: body %d bytes, err %v", enc, len(got), err)
		}
	}
}

func TestStaticAssetsGzipped(t *testing.T) {
	h := serveStatic("ui")
	get := func(enc string) *http.Response {
		r := httptest.NewRequest("GET", "/ui/app.js", nil)
		if enc != "" {
			r.Header.Set("Accept-Encoding", enc)
		}
		rec := httptest.NewRecorder()
		h(rec, r, httprouter.Params{{Key: "file", Value: "/app.js"}})
		return rec.Result()
	}
	plain := get("")
	want, _ := io.ReadAll(plain.Body)
	if plain.Header.Get("Content-Encoding") != "" || !strings.Contains(plain.Header.Get("Vary"), "Accept-Encoding") || len(want) == 0 {
		t.Fatalf("identity: %v, %d bytes", plain.Header, len(want))
	}
	zipped := get("gzip, deflate, br")
	if zipped.Header.Get("Content-Encoding") != "gzip" || zipped.Header.Get("ETag") == plain.Header.Get("ETag") {
		t.Fatalf("gzip: headers %v (the identity ETag is %s)", zipped.Header, plain.Header.Get("ETag"))
	}
	gz, err := gzip.NewReader(zipped.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(gz)
	if err != nil || string(got) != string(want) {
		t.Errorf("the compressed asset reads back as %d bytes (%v), want %d", len(got), err, len(want))
	}
}
