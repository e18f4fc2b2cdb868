package mcp

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server's stderr is masked line by line before any cut: a secret that
// straddles the byte limit is never logged in part (issue 23, finding 6).
func TestStderrMasksBeforeTheCut(t *testing.T) {
	const secret = "tok-0123456789abcdef"
	mask := func(s string) string { return strings.ReplaceAll(s, secret, "[secret]") }
	for _, tc := range []struct {
		name   string
		writes []string
		limit  int
		want   []string // lines logged
	}{
		{"a whole line is masked", []string{"auth " + secret + " ok\n"}, 1 << 10, []string{"auth [secret] ok"}},
		{"the limit falls inside the secret", []string{"first\n", "auth " + secret + "\n"}, 16, []string{"first"}},
		{"a line split over writes", []string{"auth tok-0123", "456789abcdef\n"}, 1 << 10, []string{"auth [secret]"}},
		{"no newline before the limit", []string{"auth " + secret}, 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := newStderrLog(slog.New(slog.NewJSONHandler(&buf, nil)), "s", tc.limit, mask)
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			var got []string
			for line := range strings.Lines(buf.String()) {
				var rec struct{ Line *string }
				_ = json.Unmarshal([]byte(line), &rec)
				if rec.Line != nil {
					got = append(got, *rec.Line)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("logged %q, want %q", got, tc.want)
			}
			for _, part := range []string{"tok-", "0123", "abcdef"} {
				if strings.Contains(buf.String(), part) {
					t.Errorf("a part of the secret (%q) reached the log:\n%s", part, buf.String())
				}
			}
		})
	}
}

// A stdio server's environment is passEnv and its own variables, never
// the rest of the daemon's (issue 23, finding 5).
func TestServerEnvIsMinimal(t *testing.T) {
	daemon := map[string]string{"PATH": "/usr/bin", "HOME": "/home/l", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
		"OPENAI_API_KEY": "sk-secret", "ANTHROPIC_API_KEY": "sk-ant", "LATHE_TEST_KEY": "k", "AWS_SECRET_ACCESS_KEY": "x"}
	got := serverEnv(func(k string) string { return daemon[k] }, map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp"})
	want := []string{"PATH=/usr/bin", "HOME=/home/l", "LANG=C.UTF-8", "TMPDIR=/tmp", "GITHUB_PERSONAL_ACCESS_TOKEN=ghp"}
	if !slices.Equal(got, want) {
		t.Fatalf("serverEnv = %q, want %q", got, want)
	}
}

// A result whose JSON nests past jsonlimit.Default, or that is too large,
// is refused (issue 23, finding 1).
func TestResultTextBounds(t *testing.T) {
	var deep any = "x"
	for range 100 {
		deep = []any{deep}
	}
	for _, tc := range []struct {
		name string
		res  *sdk.CallToolResult
		want string // "" refuses
	}{
		{"text", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}}, "a\nb"},
		{"structured", &sdk.CallToolResult{StructuredContent: map[string]any{"n": 1}}, `{"n":1}`},
		{"structured too deep", &sdk.CallToolResult{StructuredContent: deep}, ""},
		{"too large", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("x", 9<<20)}}}, ""},
	} {
		got, err := resultText(tc.res)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("%s: %.40q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}
