package journal_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyRules keeps the data flow one way (docs/ARCHITECTURE.md):
// the journal knows nothing of the project, projections know only the
// journal, and nothing below transport reaches up into it.
func TestDependencyRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "lathe/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, d := range f[1:] {
			if strings.HasPrefix(d, "lathe/") {
				deps[f[0]] = append(deps[f[0]], d)
			}
		}
	}
	rules := []struct {
		pkg     string
		allowed []string // lathe packages it may import; nil = any but banned
		banned  []string
	}{
		{pkg: "lathe/journal", allowed: []string{}},
		{pkg: "lathe/journal/events", allowed: []string{"lathe/journal"}},
		{pkg: "lathe/journal/bus", allowed: []string{"lathe/journal"}},
		{pkg: "lathe/projections", allowed: []string{"lathe/journal", "lathe/journal/events"}},
		{pkg: "lathe/commands", banned: []string{"lathe/transport", "lathe/web", "lathe/cmd/"}},
		{pkg: "lathe/runtime/", banned: []string{"lathe/transport", "lathe/web", "lathe/commands", "lathe/cmd/"}},
	}
	checked := 0
	for pkg, ds := range deps {
		for _, r := range rules {
			if pkg != r.pkg && !(strings.HasSuffix(r.pkg, "/") && strings.HasPrefix(pkg, r.pkg)) {
				continue
			}
			checked++
			for _, d := range ds {
				if r.allowed != nil && !contains(r.allowed, d) {
					t.Errorf("%s imports %s; it may only import %v", pkg, d, r.allowed)
				}
				for _, b := range r.banned {
					if d == b || strings.HasPrefix(d, b) {
						t.Errorf("%s imports %s, which it must not", pkg, d)
					}
				}
			}
		}
	}
	if checked < 4 {
		t.Fatalf("only %d packages matched a rule; is the module layout still the one the rules name?", checked)
	}
}

func contains(set []string, s string) bool {
	for _, v := range set {
		if v == s {
			return true
		}
	}
	return false
}
