package journal_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDependencyRules keeps the data flow one way (docs/ARCHITECTURE.md):
// the journal knows nothing of the project, projections know only the
// journal (and the usage leaf, which the events carry), the runtime knows
// neither, transport reaches the journal only
// through commands (and reads projections), and the leaf packages import no
// project package. It checks each package's direct imports (tests aside), so
// every rule names the package that would break it.
func TestDependencyRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "lathe/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = []string{}
		for _, d := range f[1:] {
			if strings.HasPrefix(d, "lathe/") {
				imports[f[0]] = append(imports[f[0]], d)
			}
		}
	}
	none := []string{}
	rules := []struct {
		pkg     string   // a package, or a prefix ending in "/" for a tree
		allowed []string // the lathe packages it may import; nil = any but banned
		banned  []string // exact packages, or prefixes ending in "/"
	}{
		{pkg: "lathe/journal", allowed: none},
		// The events carry token usage in its one type, runtime/usage, a
		// leaf every layer may import.
		{pkg: "lathe/journal/events", allowed: []string{"lathe/journal", "lathe/runtime/usage"}},
		{pkg: "lathe/journal/bus", allowed: []string{"lathe/journal"}},
		{pkg: "lathe/projections", allowed: []string{"lathe/journal", "lathe/journal/events", "lathe/runtime/usage"}},
		{pkg: "lathe/commands", banned: []string{"lathe/transport", "lathe/web", "lathe/cmd/"}},
		{pkg: "lathe/runtime/", banned: []string{"lathe/journal", "lathe/journal/", "lathe/projections", "lathe/commands", "lathe/transport", "lathe/web", "lathe/cmd/"}},
		// The leaf packages of the architecture table.
		{pkg: "lathe/runtime/jsonlimit", allowed: none},
		{pkg: "lathe/runtime/blobs", allowed: none},
		{pkg: "lathe/runtime/confine", allowed: none},
		{pkg: "lathe/runtime/doctext", allowed: none},
		{pkg: "lathe/runtime/preview", allowed: none},
		{pkg: "lathe/runtime/project", allowed: none},
		{pkg: "lathe/runtime/sandbox", allowed: none},
		{pkg: "lathe/runtime/usage", allowed: none},
		// The driver suite is handed its driver by the driver's own test.
		{pkg: "lathe/runtime/sandbox/sandboxtest", allowed: []string{"lathe/runtime/sandbox"}},
		// transport never writes the journal: it calls commands and reads
		// projections, and it never reaches a sandbox driver.
		{pkg: "lathe/transport", banned: []string{"lathe/journal", "lathe/journal/bus", "lathe/runtime/sandbox/containerd", "lathe/cmd/"}},
	}
	matched := map[string]bool{}
	for pkg, ds := range imports {
		for _, r := range rules {
			if pkg != r.pkg && !(strings.HasSuffix(r.pkg, "/") && strings.HasPrefix(pkg, r.pkg)) {
				continue
			}
			matched[r.pkg] = true
			for _, d := range ds {
				if r.allowed != nil && !slices.Contains(r.allowed, d) {
					t.Errorf("%s imports %s; it may only import %v", pkg, d, r.allowed)
				}
				for _, b := range r.banned {
					if d == b || strings.HasSuffix(b, "/") && strings.HasPrefix(d, b) {
						t.Errorf("%s imports %s, which it must not", pkg, d)
					}
				}
			}
		}
	}
	for _, r := range rules {
		if !matched[r.pkg] {
			t.Errorf("no package matched the rule for %s; is the module layout still the one the rules name?", r.pkg)
		}
	}
}
