package doctext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"lathe/runtime/doctext/doctexttest"
)

// A memory bomb fills the child's memory before it dies: keep it small.
func init() { childMemory = 128 << 20 }

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// tempFile writes b to a file and returns it open.
func tempFile(t testing.TB, b []byte) *os.File {
	p := filepath.Join(t.TempDir(), "doc")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

var (
	onePage  = doctexttest.Doc("BT /F1 12 Tf 72 720 Td (Hello, PDF) Tj ET")
	twoPages = doctexttest.Doc("BT /F1 12 Tf 72 720 Td (First page) Tj 0 -14 Td (second line) Tj ET",
		"deflate:BT /F1 12 Tf 72 720 Td [(Second)-333(page,)-250(comp)10(ressed)] TJ ET")
	nonASCIIPage = "BT /F1 12 Tf 72 720 Td (Caf\\351 cr\\350me) Tj ET BT /F2 12 Tf 72 700 Td <00010002> Tj ET"
	nonASCII     = doctexttest.Doc(nonASCIIPage)
	noText       = doctexttest.Doc("0 0 m 100 100 l S")
	// pageLoop's page tree is its own kid: the library walks it forever.
	pageLoop = doctexttest.File("<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [2 0 R] /Count 1 >>")
	hugeXref = doctexttest.HugeXref()
	// cmapBomb's CMap asks for 2^60 bfchar entries: the library appends
	// until memory runs out.
	cmapBomb = doctexttest.DocCMap(strings.Replace(doctexttest.ToUnicode, "2 beginbfchar", "1152921504606846976 beginbfchar", 1), nonASCIIPage)
)

func TestExtractPDF(t *testing.T) {
	long := strings.Repeat("abcdefgh", 100)
	for _, tc := range []struct {
		name      string
		mediaType string
		data      []byte
		limit     int
		want      string
		wantErr   string // what the error says, if one is expected
	}{
		{name: "one page", mediaType: "application/pdf", data: onePage, want: "Hello, PDF"},
		{name: "two pages, a line break, word gaps in TJ, compressed", mediaType: "application/pdf", data: twoPages,
			want: "First page\nsecond line\n\nSecond page, compressed"},
		{name: "WinAnsi and ToUnicode text", mediaType: "application/pdf", data: nonASCII, want: "Café crème\n日本"},
		{name: "runs placed by Td join, ActualText replaces its span", mediaType: "application/pdf",
			data: doctexttest.Doc("BT /F1 12 Tf 1 0 0 1 72 700 Tm (Quarterly r) Tj 50 0 Td (eport) Tj ET " +
				"BT /Span << /ActualText (fi) >> BDC /F1 12 Tf 1 0 0 1 72 680 Tm (\\001) Tj EMC 6 0 Td (le) Tj /P << /MCID 0 >> BDC (s) Tj EMC ET"),
			want: "Quarterly report\nfiles"},
		{name: "detected by its magic", mediaType: "application/octet-stream", data: onePage, want: "Hello, PDF"},
		{name: "cut at the limit on a rune boundary", mediaType: "application/pdf", data: nonASCII, limit: 4, want: "Caf"},
		{name: "long text stops at the limit", mediaType: "application/pdf", data: doctexttest.Doc(strings.Repeat("BT /F1 12 Tf ("+long+") Tj ET\n", 50)), limit: 1000, want: (long + long)[:1000]},
		{name: "no text", mediaType: "application/pdf", data: noText},
		{name: "truncated", mediaType: "application/pdf", data: twoPages[:len(twoPages)/2], wantErr: "missing %%EOF"},
		{name: "corrupt cross-reference", mediaType: "application/pdf", data: bytes.Replace(onePage, []byte("xref"), []byte("xjunk"), 1), wantErr: "cross-reference table not found"},
		{name: "declared PDF that is not one", mediaType: "application/pdf", data: []byte("just text"), wantErr: "not a PDF"},
		{name: "a crash in the library", mediaType: "application/pdf", data: hugeXref, wantErr: "crashed"},
		{name: "a memory bomb", mediaType: "application/pdf", data: cmapBomb, wantErr: "crashed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = 64 << 10
			}
			// The file is passed to the child as is (the daemon's case); a
			// reader in memory is piped (TestExtractPDFFromMemory).
			text, ok, err := Extract(ctxFor(t, 15*time.Second), tc.mediaType, tempFile(t, tc.data), int64(len(tc.data)), limit)
			if (err != nil) != (tc.wantErr != "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) || string(text) != tc.want || ok != (tc.want != "") {
				t.Errorf("Extract = %q, %v, %v; want %q, error %q", text, ok, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestExtractPDFFromMemory(t *testing.T) {
	for _, tc := range []struct {
		data    []byte
		want    string
		wantErr bool
	}{{onePage, "Hello, PDF", false}, {hugeXref, "", true}} {
		text, ok, err := Extract(ctxFor(t, 15*time.Second), "application/pdf", bytes.NewReader(tc.data), int64(len(tc.data)), 100)
		if string(text) != tc.want || ok != (tc.want != "") || (err != nil) != tc.wantErr {
			t.Errorf("Extract = %q, %v, %v; want %q", text, ok, err, tc.want)
		}
	}
}

func TestExtractPDFHangIsKilledAtTheDeadline(t *testing.T) {
	start := time.Now()
	text, ok, err := Extract(ctxFor(t, 2*time.Second), "application/pdf", bytes.NewReader(pageLoop), int64(len(pageLoop)), 1024)
	if !errors.Is(err, ErrTimeout) || ok || text != nil {
		t.Fatalf("Extract = %q, %v, %v; want ErrTimeout", text, ok, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestExtractPDFConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Go(func() {
			data := [][]byte{onePage, hugeXref}[i%2]
			text, ok, err := Extract(ctxFor(t, 30*time.Second), "application/pdf", bytes.NewReader(data), int64(len(data)), 100)
			if i%2 == 0 && (string(text) != "Hello, PDF" || !ok || err != nil) || i%2 == 1 && (ok || err == nil) {
				errs <- fmt.Errorf("%d: %q, %v, %v", i, text, ok, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestExtractText(t *testing.T) {
	for _, tc := range []struct {
		name, mediaType, data string
		limit                 int
		want                  string
		ok                    bool
	}{
		{name: "plain", mediaType: "text/plain", data: "hello", want: "hello", ok: true},
		{name: "markdown with charset", mediaType: "text/markdown; charset=utf-8", data: "# T", want: "# T", ok: true},
		{name: "json", mediaType: "application/json", data: `{"a":1}`, want: `{"a":1}`, ok: true},
		{name: "+xml", mediaType: "image/svg+xml", data: "<svg/>"},
		{name: "vendor +json", mediaType: "application/vnd.x+json", data: "{}", want: "{}", ok: true},
		{name: "UTF-8 octet-stream", mediaType: "application/octet-stream", data: "x=1", want: "x=1", ok: true},
		{name: "binary octet-stream", mediaType: "application/octet-stream", data: "\x00\x01\x02"},
		{name: "invalid UTF-8 in text is replaced, NULs dropped", mediaType: "text/plain", data: "a\x00b\xffc", want: "ab\uFFFDc", ok: true},
		{name: "image", mediaType: "image/png", data: "hello"},
		{name: "only NULs", mediaType: "text/plain", data: "\x00\x00"},
		{name: "empty", mediaType: "text/plain", data: ""},
		{name: "cut before a split rune", mediaType: "text/plain", data: "ab日本", limit: 4, want: "ab", ok: true},
		{name: "cut after a whole rune", mediaType: "text/plain", data: "ab日本", limit: 5, want: "ab日", ok: true},
		{name: "replacements stay within the limit", mediaType: "text/plain", data: "\xffabc", limit: 4, want: "\uFFFDa", ok: true},
		{name: "cut in ASCII", mediaType: "text/plain", data: "abcdef", limit: 3, want: "abc", ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = 64
			}
			text, ok, err := Extract(context.Background(), tc.mediaType, strings.NewReader(tc.data), int64(len(tc.data)), limit)
			if err != nil || ok != tc.ok || string(text) != tc.want {
				t.Errorf("Extract = %q, %v, %v; want %q, %v", text, ok, err, tc.want, tc.ok)
			}
		})
	}
}

func TestExtractShortReader(t *testing.T) {
	if _, ok, err := Extract(context.Background(), "text/plain", strings.NewReader("abc"), 10, 64); ok || err == nil {
		t.Errorf("a reader shorter than size: ok %v, err %v", ok, err)
	}
}

func FuzzExtract(f *testing.F) {
	// pageLoop is left out: it runs to the deadline.
	for _, seed := range [][]byte{onePage, twoPages, nonASCII, noText, hugeXref, cmapBomb, twoPages[:len(twoPages)/2]} {
		f.Add("application/pdf", seed)
	}
	f.Add("text/plain", []byte("a\x00b\xffc日本"))
	f.Add("application/octet-stream", []byte("%PDF-1.4\n%%EOF\n"))
	f.Fuzz(func(t *testing.T, mediaType string, data []byte) {
		const limit = 256
		// A short deadline: inputs that hang the parser are common.
		text, ok, err := Extract(ctxFor(t, 2*time.Second), mediaType, bytes.NewReader(data), int64(len(data)), limit)
		if len(text) > limit || !utf8.Valid(text) || ok != (len(text) > 0) || ok && err != nil {
			t.Fatalf("Extract = %q (%d bytes), %v, %v", text, len(text), ok, err)
		}
	})
}
