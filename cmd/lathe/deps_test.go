package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// rule limits what one package (or a tree, when pkg ends in "/") may
// depend on.
type rule struct {
	pkg     string   // a package, or a prefix ending in "/" for a tree
	allowed []string // the lathe packages (or trees, ending in "/") it may depend on; nil = any but banned
	banned  []string // exact packages, or prefixes ending in "/"; any module
}

// depGraph lists, for each lathe package, its direct imports and its whole
// transitive closure (tests aside), from one go list.
func depGraph(t *testing.T) (imports, deps map[string][]string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`, "lathe/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports, deps = map[string][]string{}, map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		imports[f[0]] = strings.Fields(f[1])
		deps[f[0]] = strings.Fields(f[2])
	}
	return imports, deps
}

// checkRules applies rules to graph; how names the relation in messages
// ("imports" or "reaches").
func checkRules(t *testing.T, graph map[string][]string, rules []rule, how string) {
	t.Helper()
	matched := map[string]bool{}
	for pkg, ds := range graph {
		for _, r := range rules {
			if !under(pkg, r.pkg) {
				continue
			}
			matched[r.pkg] = true
			for _, d := range ds {
				if r.allowed != nil && strings.HasPrefix(d, "lathe/") && !slices.ContainsFunc(r.allowed, func(a string) bool { return under(d, a) }) {
					t.Errorf("%s %s %s; it may only depend on %v", pkg, how, d, r.allowed)
				}
				for _, b := range r.banned {
					if under(d, b) {
						t.Errorf("%s %s %s, which it must not", pkg, how, d)
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

// under reports whether pkg is p, or lies under p when p ends in "/".
func under(pkg, p string) bool {
	return pkg == p || strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p)
}

// processManagers are the write side's workers: each runs one kind of
// long-lived process (a turn, a Chat turn, a Lattice turn, an outside
// agent's process, an Automation run, the start's reconciliation, the
// sweeps), started by the assembly's
// wiring, never imported by an aggregate's commands.
var processManagers = []string{
	"lathe/commands/turnrunner", "lathe/commands/chatrunner", "lathe/commands/latticerunner",
	"lathe/commands/automationrunner", "lathe/commands/startup", "lathe/commands/sweeps",
	"lathe/commands/acprunner",
}

// TestDependencyRules keeps the data flow one way (docs/ARCHITECTURE.md):
// the journal knows nothing of the project, projections know only the
// journal (and the usage leaf, which the events carry), the runtime knows
// neither, transport reaches the journal only through commands (and reads
// projections) and the runtime only through commands (bar the Preview host
// and the terminal it bridges), and the leaf packages import no project
// package. It checks each package's direct imports (tests aside), so every
// rule names the package that would break it.
func TestDependencyRules(t *testing.T) {
	imports, _ := depGraph(t)
	none := []string{}
	checkRules(t, imports, []rule{
		{pkg: "lathe/journal", allowed: none},
		// The events carry token usage in its one type, runtime/usage, a
		// leaf every layer may import.
		{pkg: "lathe/journal/events", allowed: []string{"lathe/journal", "lathe/runtime/usage"}},
		{pkg: "lathe/journal/bus", allowed: []string{"lathe/journal"}},
		{pkg: "lathe/projections", allowed: []string{"lathe/journal", "lathe/journal/events", "lathe/runtime/usage"}},
		{pkg: "lathe/commands", banned: []string{"lathe/transport", "lathe/web", "lathe/cmd/"}},
		// The write side (docs/ARCHITECTURE.md): the core knows no
		// capability; no capability knows the assembly (lathe/commands);
		// and no aggregate's commands reach into a process manager, which
		// they drive through the small interfaces the assembly wires.
		{pkg: "lathe/commands/core", banned: []string{"lathe/commands", "lathe/commands/", "lathe/transport", "lathe/web", "lathe/cmd/"}},
		{pkg: "lathe/commands/", banned: []string{"lathe/commands", "lathe/transport", "lathe/web", "lathe/cmd/"}},
		{pkg: "lathe/commands/a2a", banned: processManagers},
		{pkg: "lathe/commands/agents", banned: processManagers},
		{pkg: "lathe/commands/approvals", banned: processManagers},
		{pkg: "lathe/commands/attachments", banned: processManagers},
		{pkg: "lathe/commands/audit", banned: processManagers},
		{pkg: "lathe/commands/automations", banned: processManagers},
		{pkg: "lathe/commands/chats", banned: processManagers},
		{pkg: "lathe/commands/environments", banned: processManagers},
		{pkg: "lathe/commands/files", banned: processManagers},
		{pkg: "lathe/commands/lattice", banned: processManagers},
		{pkg: "lathe/commands/mcpservers", banned: processManagers},
		{pkg: "lathe/commands/scm", banned: processManagers},
		{pkg: "lathe/commands/sessions", banned: processManagers},
		{pkg: "lathe/commands/tasks", banned: processManagers},
		{pkg: "lathe/commands/turns", banned: processManagers},
		{pkg: "lathe/commands/ways", banned: processManagers},
		{pkg: "lathe/commands/worktrees", banned: processManagers},
		{pkg: "lathe/runtime/", banned: []string{"lathe/journal", "lathe/journal/", "lathe/projections", "lathe/commands", "lathe/transport", "lathe/web", "lathe/cmd/"}},
		// The leaf packages of the architecture table.
		{pkg: "lathe/runtime/jsonlimit", allowed: none},
		// The tests' one poll helper, importable from every layer.
		{pkg: "lathe/runtime/polltest", allowed: none},
		{pkg: "lathe/runtime/blobs", allowed: none},
		{pkg: "lathe/runtime/confine", allowed: none},
		{pkg: "lathe/runtime/doctext", allowed: none},
		{pkg: "lathe/runtime/preview", allowed: none},
		{pkg: "lathe/runtime/project", allowed: []string{"lathe/runtime/errs"}},
		{pkg: "lathe/runtime/sandbox", allowed: none},
		{pkg: "lathe/runtime/usage", allowed: none},
		// The error classes every layer shares.
		{pkg: "lathe/runtime/errs", allowed: none},
		// The workbench is embedded files only.
		{pkg: "lathe/web", allowed: none},
		// The driver suite is handed its driver by the driver's own test.
		{pkg: "lathe/runtime/sandbox/sandboxtest", allowed: []string{"lathe/runtime/sandbox", "lathe/runtime/polltest"}},
		// transport never writes the journal: it calls commands and reads
		// projections. Of the runtime it imports only what it bridges, the
		// Preview host and the terminal, and the shared value leaves; it
		// answers with its own view types (transport/views.go), which the
		// daemon's adapters fill from the runtime's values.
		{pkg: "lathe/transport", allowed: []string{
			"lathe/commands", "lathe/commands/", "lathe/projections", "lathe/journal/events", "lathe/web",
			"lathe/runtime/preview", "lathe/runtime/terminal", "lathe/runtime/usage", "lathe/runtime/jsonlimit", "lathe/runtime/errs",
		}},
		// Inbound A2A beside the transport (transport.A2AServer): the
		// commands it calls and the records it answers with.
		{pkg: "lathe/transport/a2aserve", allowed: []string{"lathe/commands/a2a", "lathe/commands/core", "lathe/projections", "lathe/runtime/errs"}},
	}, "imports")
}

// TestTransitiveDependencyRules checks each package's whole closure (tests
// aside), in the manner of Tailscale's deptest: a rule the direct imports
// keep can still be broken one package away, and the heavy dependencies
// only the binary needs (the containerd client and its gRPC, NATS) must not
// leak into the layers that the route tests and the tools build.
func TestTransitiveDependencyRules(t *testing.T) {
	_, deps := depGraph(t)
	none := []string{}
	checkRules(t, deps, []rule{
		{pkg: "lathe/journal", allowed: none},
		{pkg: "lathe/journal/events", allowed: []string{"lathe/journal", "lathe/runtime/usage"}},
		{pkg: "lathe/journal/bus", allowed: []string{"lathe/journal"}},
		{pkg: "lathe/projections", allowed: []string{"lathe/journal", "lathe/journal/events", "lathe/runtime/usage", "lathe/runtime/jsonlimit"}},
		{pkg: "lathe/web", allowed: none},
		{pkg: "lathe/runtime/", banned: []string{"lathe/journal", "lathe/journal/", "lathe/projections", "lathe/commands", "lathe/transport", "lathe/web", "lathe/cmd/"}},
		{pkg: "lathe/commands", banned: []string{"lathe/transport", "lathe/web", "lathe/cmd/", "lathe/journal/bus"}},
		{pkg: "lathe/commands/", banned: []string{"lathe/transport", "lathe/web", "lathe/cmd/", "lathe/journal/bus"}},
		{pkg: "lathe/transport", banned: []string{
			"lathe/journal/bus", "lathe/runtime/sandbox/containerd", "lathe/cmd/",
			"github.com/containerd/containerd/v2/client", "google.golang.org/grpc", "github.com/nats-io/",
		}},
		// The sandbox helper's process and stream layer is the standard
		// library and yamux: the protocols it carries bring their own
		// halves (cmd/lathe hands them over), and nothing of the drivers,
		// the engines' clients or the daemon's layers comes with it.
		{pkg: "lathe/runtime/sandbox/helper", allowed: none, banned: []string{
			"github.com/containerd/", "github.com/moby/", "github.com/docker/", "google.golang.org/grpc", "github.com/nats-io/",
		}},
	}, "reaches")
}
