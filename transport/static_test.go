package transport

import (
	"path"
	"strings"
	"testing"
)

func TestAssetPath(t *testing.T) {
	for _, tc := range []struct {
		file string
		want string // "" when refused
	}{
		{"/app.js", "ui/app.js"},
		{"app.js", "ui/app.js"},
		{"/sub/x.css", "ui/sub/x.css"},
		{"/", ""},
		{"", ""},
		{"/../web.go", ""},
		{"/a/../b.js", ""},
		{"/a//b.js", ""},
		{"/a/./b.js", ""},
		{"/.gitignore", ""},
		{"/a/.hidden/b.js", ""},
		{"/dir/", ""},
		{"/x\x00.js", ""},
	} {
		got, ok := assetPath("ui", tc.file)
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("assetPath(ui, %q) = %q, %v; want %q", tc.file, got, ok, tc.want)
		}
	}
}

// FuzzAssetPath: whatever the request path, an accepted asset path is clean,
// stays inside its directory and has no dot-file element.
func FuzzAssetPath(f *testing.F) {
	for _, s := range []string{"/app.js", "/../x", "/.env", "//", "/a/b/c.js", "/a/%2e%2e/b", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, file string) {
		got, ok := assetPath("vendor/dist", file)
		if !ok {
			return
		}
		rest, inside := strings.CutPrefix(got, "vendor/dist/")
		if !inside || rest == "" || path.Clean(got) != got || strings.Contains(got, "\x00") {
			t.Fatalf("assetPath(%q) = %q escapes or is not clean", file, got)
		}
		for elem := range strings.SplitSeq(rest, "/") {
			if elem == "" || strings.HasPrefix(elem, ".") {
				t.Fatalf("assetPath(%q) = %q has element %q", file, got, elem)
			}
		}
	})
}
