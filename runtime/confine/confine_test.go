package confine

import (
	"errors"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRel(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{in: "", want: "."},
		{in: ".", want: "."},
		{in: "./", want: "."},
		{in: "a", want: "a"},
		{in: "a/b/c.txt", want: "a/b/c.txt"},
		{in: "a//b/", want: "a/b"},
		{in: "./a/./b", want: "a/b"},
		{in: ".git/config", want: ".git/config"}, // no .git rule: see the package doc
		{in: ".hidden/.env", want: ".hidden/.env"},
		{in: "...", want: "..."},
		{in: "..a/b..", want: "..a/b.."},
		{in: " .. ", want: " .. "},
		{in: `a\b`, want: `a\b`},             // an ordinary byte on Linux
		{in: `..\..\etc`, want: `..\..\etc`}, // one odd name, not a climb
		{in: "héllo wörld", want: "héllo wörld"},
		{in: strings.Repeat("a", MaxPathBytes), want: strings.Repeat("a", MaxPathBytes)},

		{in: "/etc/passwd", err: ErrAbsolute},
		{in: "/", err: ErrAbsolute},
		{in: "//a", err: ErrAbsolute},
		{in: "..", err: ErrDotDot},
		{in: "../x", err: ErrDotDot},
		{in: "../..", err: ErrDotDot},
		{in: "a/../../x", err: ErrDotDot},
		{in: "a/../b", err: ErrDotDot}, // cleans to "b", but "a" may be a symlink
		{in: "a/..", err: ErrDotDot},
		{in: "a/b/../", err: ErrDotDot},
		{in: "a\x00b", err: ErrNUL},
		{in: "\x00", err: ErrNUL},
		{in: strings.Repeat("a", MaxPathBytes+1), err: ErrTooLong},
		{in: "/" + strings.Repeat("a", MaxPathBytes), err: ErrTooLong}, // the cheap check first
	} {
		got, err := Rel(tc.in)
		switch {
		case tc.err == nil && err != nil:
			t.Errorf("Rel(%.40q): %v", tc.in, err)
		case tc.err == nil && got != tc.want:
			t.Errorf("Rel(%.40q) = %.40q, want %.40q", tc.in, got, tc.want)
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("Rel(%.40q) = %.40q, %v; want %v", tc.in, got, err, tc.err)
		case tc.err != nil && got != "":
			t.Errorf("Rel(%.40q) = %.40q with an error", tc.in, got)
		}
	}
}

func FuzzRel(f *testing.F) {
	for _, seed := range []string{"", ".", "a/b", "../x", "a/../../x", "/etc", "a//b/./c/", `a\..\b`, "a\x00", "....//..", " .. ", "a/...//../b", ".git/hooks/pre-commit"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := Rel(p)
		elems := strings.Split(p, "/")
		legal := len(p) <= MaxPathBytes && !strings.ContainsRune(p, 0) && !strings.HasPrefix(p, "/") && !slices.Contains(elems, "..")
		if (err == nil) != legal {
			t.Fatalf("Rel(%q) = %q, %v; the rules say legal=%v", p, got, err, legal)
		}
		if err != nil {
			if got != "" {
				t.Fatalf("Rel(%q) = %q with error %v", p, got, err)
			}
			return
		}
		if got == "" || strings.HasPrefix(got, "/") || strings.IndexByte(got, 0) >= 0 || len(got) > MaxPathBytes {
			t.Fatalf("Rel(%q) = %q", p, got)
		}
		if slices.Contains(strings.Split(got, "/"), "..") {
			t.Fatalf("Rel(%q) = %q holds a \"..\" element", p, got)
		}
		if path.Clean(got) != got || !filepath.IsLocal(got) {
			t.Fatalf("Rel(%q) = %q is not a clean local path", p, got)
		}
		if j := path.Join("/root", got); j != "/root" && !strings.HasPrefix(j, "/root/") {
			t.Fatalf("Rel(%q) = %q joins the root as %q", p, got, j)
		}
		if again, err := Rel(got); err != nil || again != got {
			t.Fatalf("Rel is not idempotent on %q: %q, %v", got, again, err)
		}
	})
}
