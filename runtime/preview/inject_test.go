package preview

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
)

var tag = ScriptTag(PickerPath)

func inject(t testing.TB, in string, wrap func(io.Reader) io.Reader, limit int) string {
	t.Helper()
	out, err := io.ReadAll(newInjector(wrap(strings.NewReader(in)), tag, limit))
	if err != nil {
		t.Fatalf("inject %q: %v", in, err)
	}
	return string(out)
}

func TestInjector(t *testing.T) {
	const T = "\x00" // stands for the tag in the wants
	big := "<!--" + strings.Repeat("x", 200) + "-->"
	tests := []struct {
		name, in, want string
		limit          int
	}{
		{name: "after head", in: "<!doctype html><html><head><title>a</title></head><body>b</body></html>",
			want: "<!doctype html><html><head>" + T + "<title>a</title></head><body>b</body></html>"},
		{name: "head with attributes", in: "<HTML lang=en>\n<HEAD data-x='>'>\n<meta charset=utf-8>",
			want: "<HTML lang=en>\n<HEAD data-x='>'>" + T + "\n<meta charset=utf-8>"},
		{name: "no head", in: "<!DOCTYPE html>\n<html>\n<body><p>x</p></body></html>",
			want: "<!DOCTYPE html>\n<html>\n" + T + "<body><p>x</p></body></html>"},
		{name: "fragment", in: "<p>hello</p>", want: T + "<p>hello</p>"},
		{name: "text first", in: "hello <b>world</b>", want: T + "hello <b>world</b>"},
		{name: "comments and bom", in: "\ufeff<!-- a --><!doctype html><!-- <head> --><head>",
			want: "\ufeff<!-- a --><!doctype html><!-- <head> --><head>" + T},
		{name: "script before head", in: "<!doctype html><script>var h='<head>'</script><head>",
			want: "<!doctype html>" + T + "<script>var h='<head>'</script><head>"},
		{name: "end tag first", in: "</div><head>", want: T + "</div><head>"},
		{name: "prologue only", in: "<!doctype html>\n", want: "<!doctype html>\n" + T},
		{name: "empty", in: "", want: ""},
		{name: "unterminated tag", in: "<!doctype html><hea", want: "<!doctype html>" + T + "<hea"},
		{name: "unterminated comment", in: "<!doctype html><!-- x", want: "<!doctype html>" + T + "<!-- x"},
		{name: "long prologue", in: big + big + "<head>", want: big + big + T + "<head>", limit: 300},
		{name: "token over the limit", in: "<!doctype html>" + big + "<head>", want: "<!doctype html>" + T + big + "<head>", limit: 100},
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
	}
	for _, tt := range tests {
		for rname, wrap := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				limit := tt.limit
				if limit == 0 {
					limit = maxPrologue
				}
				want := strings.ReplaceAll(tt.want, T, string(tag))
				if got := inject(t, tt.in, wrap, limit); got != want {
					t.Errorf("got  %q\nwant %q", got, want)
				}
			})
		}
	}
}

// TestInjectorStreams: the head and the tag come out before the rest of
// the document exists, and the body arrives chunk by chunk.
func TestInjectorStreams(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	r := NewInjector(pr, tag)
	go func() { _, _ = pw.Write([]byte("<!doctype html><html><head>")) }()
	want := "<!doctype html><html><head>" + string(tag)
	got := readN(t, r, len(want))
	if got != want {
		t.Fatalf("first bytes %q, want %q", got, want)
	}
	for _, chunk := range []string{"<body>", strings.Repeat("z", 100_000), "</body>"} {
		go func() { _, _ = pw.Write([]byte(chunk)) }()
		if got := readN(t, r, len(chunk)); got != chunk {
			t.Fatalf("chunk of %d bytes came out as %d bytes", len(chunk), len(got))
		}
	}
	pw.Close()
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the end: %d, %v", n, err)
	}
}

// readN reads exactly n bytes, failing if that takes more than 10 s (which
// would mean the injector waits for input it does not need).
func readN(t *testing.T, r io.Reader, n int) string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		b := make([]byte, n)
		k, _ := io.ReadFull(r, b)
		done <- string(b[:k])
	}()
	select {
	case s := <-done:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("reading %d bytes blocked", n)
		return ""
	}
}

// encoded is s compressed by the writer newWriter makes.
func encoded[W io.WriteCloser](t testing.TB, newWriter func(io.Writer) W, s string) []byte {
	var b bytes.Buffer
	w := newWriter(&b)
	_, _ = w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gzipped(t testing.TB, s string) []byte  { return encoded(t, gzip.NewWriter, s) }
func brotlied(t testing.TB, s string) []byte { return encoded(t, brotli.NewWriter, s) }

func TestInjectResponse(t *testing.T) {
	page := "<!doctype html><html><head><title>t</title></head><body>" + strings.Repeat("é and more ", 5000) + "</body></html>"
	injected := strings.Replace(page, "<head>", "<head>"+string(tag), 1)
	tests := []struct {
		name, method, ctype, encoding string
		status                        int
		body                          []byte
		rewritten                     bool
		want                          string // the body read back
	}{
		{name: "plain", ctype: "text/html; charset=utf-8", body: []byte(page), rewritten: true, want: injected},
		{name: "gzip", ctype: "text/html", encoding: "gzip", body: gzipped(t, page), rewritten: true, want: injected},
		{name: "x-gzip", ctype: "TEXT/HTML", encoding: "x-gzip", body: gzipped(t, page), rewritten: true, want: injected},
		{name: "brotli", ctype: "text/html", encoding: "br", body: brotlied(t, page), rewritten: true, want: injected},
		{name: "error page", ctype: "text/html", status: 404, body: []byte("<h1>nope</h1>"), rewritten: true, want: string(tag) + "<h1>nope</h1>"},
		{name: "empty gzip", ctype: "text/html", encoding: "gzip", body: nil, rewritten: true, want: ""},
		{name: "head", method: http.MethodHead, ctype: "text/html", encoding: "gzip", body: nil, rewritten: true, want: ""},
		{name: "not html", ctype: "application/javascript", body: []byte("<head>"), want: "<head>"},
		{name: "no type", body: []byte("<head>"), want: "<head>"},
		{name: "xhtml", ctype: "application/xhtml+xml", body: []byte("<head>"), want: "<head>"},
		{name: "zstd", ctype: "text/html", encoding: "zstd", body: []byte("opaque"), want: "opaque"},
		{name: "two codings", ctype: "text/html", encoding: "gzip, br", body: []byte("opaque"), want: "opaque"},
		{name: "partial", ctype: "text/html", status: 206, body: []byte("<head>"), want: "<head>"},
		{name: "not modified", ctype: "text/html", status: 304, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, status := tt.method, tt.status
			if method == "" {
				method = http.MethodGet
			}
			if status == 0 {
				status = 200
			}
			resp := &http.Response{
				StatusCode:    status,
				Header:        http.Header{},
				Body:          io.NopCloser(iotest.HalfReader(bytes.NewReader(tt.body))),
				ContentLength: int64(len(tt.body)),
				Request:       &http.Request{Method: method},
			}
			if tt.ctype != "" {
				resp.Header.Set("Content-Type", tt.ctype)
			}
			if tt.encoding != "" {
				resp.Header.Set("Content-Encoding", tt.encoding)
			}
			resp.Header.Set("Content-Length", "123")
			if got := InjectResponse(resp, tag); got != tt.rewritten {
				t.Fatalf("rewritten %v, want %v", got, tt.rewritten)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if !tt.rewritten && tt.body != nil {
				want = string(tt.body)
			}
			if string(body) != want {
				t.Errorf("body (%d bytes) is not the expected %d bytes:\n%.200q", len(body), len(want), body)
			}
			if tt.rewritten {
				if h := resp.Header; h.Get("Content-Encoding") != "" || h.Get("Content-Length") != "" || resp.ContentLength != -1 {
					t.Errorf("rewritten response keeps Content-Encoding %q, Content-Length %q / %d",
						h.Get("Content-Encoding"), h.Get("Content-Length"), resp.ContentLength)
				}
			} else if resp.Header.Get("Content-Length") != "123" || resp.Header.Get("Content-Encoding") != tt.encoding {
				t.Errorf("untouched response lost its headers: %v", resp.Header)
			}
		})
	}
}

func TestInjectResponseCorruptGzip(t *testing.T) {
	z := gzipped(t, "<head>"+strings.Repeat("x", 10_000))
	z[len(z)/2] ^= 0xff
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}, "Content-Encoding": {"gzip"}},
		Body: io.NopCloser(bytes.NewReader(z)), Request: &http.Request{Method: http.MethodGet}}
	InjectResponse(resp, tag)
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("a corrupt gzip body read back without an error")
	}
}

func TestAcceptEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"gzip, deflate, br, zstd":         "gzip, br",
		"br;q=1.0, gzip;q=0.8, *;q=0.1":   "br;q=1.0, gzip;q=0.8",
		"identity":                        "identity",
		"deflate":                         "",
		"":                                "",
		" GZIP ; q=0.5 ,compress,x-gzip ": "GZIP ; q=0.5, x-gzip",
	} {
		if got := AcceptEncoding(in); got != want {
			t.Errorf("AcceptEncoding(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzInjector: whatever the document and however it is split into reads,
// the output is the input with the tag inserted exactly once (nothing for
// an empty input), and splitting the reads changes nothing.
func FuzzInjector(f *testing.F) {
	for _, s := range []string{
		"", "<head>", "<!doctype html><html><head></head>", "<p>", "text", "<!--", "<!-- <head> -->",
		"\ufeff \n<HTML><HEAD>", "<script>", "</", "<!doctype", "<hea", "<html><body><head>", "<?xml?><head>",
		"<plaintext><head>", "<html\x00><head>", "<!DOCTYPE html SYSTEM \"about:legacy-compat\">",
	} {
		f.Add(s, uint16(0))
	}
	f.Fuzz(func(t *testing.T, in string, limit uint16) {
		lim := int(limit%512) + 16
		whole := inject(t, in, func(r io.Reader) io.Reader { return r }, lim)
		if split := inject(t, in, iotest.OneByteReader, lim); split != whole {
			t.Fatalf("one-byte reads give %q, whole reads %q", split, whole)
		}
		if in == "" {
			if whole != "" {
				t.Fatalf("empty input gave %q", whole)
			}
			return
		}
		for i := 0; ; {
			k := strings.Index(whole[i:], string(tag))
			if k < 0 {
				t.Fatalf("the output of %q is not the input with the tag inserted: %q", in, whole)
			}
			i += k
			if whole[:i]+whole[i+len(tag):] == in {
				return
			}
			i++
		}
	})
}
