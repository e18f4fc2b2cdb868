package web

import (
	"io/fs"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"
)

// assetBudget bounds the embedded assets: the vendored bundles are most of
// it, and each one is loaded only when its tool first opens.
const assetBudget = 2 << 20

// TestAssetsBudget reports the size of the embedded assets and keeps it
// under assetBudget.
func TestAssetsBudget(t *testing.T) {
	sizes := map[string]int64{}
	var total int64
	err := fs.WalkDir(Assets, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		top, _, _ := strings.Cut(p, "/")
		sizes[top] += info.Size()
		total += info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("embedded assets: %d bytes (%.0f KiB): %v", total, float64(total)/1024, sizes)
	if total > assetBudget {
		t.Errorf("embedded assets are %d bytes, over the %d-byte budget", total, assetBudget)
	}
}

// importRE finds the module specifiers of static and dynamic imports that
// name a file by path ("./x.js", "/ui/x.js"); bare names never appear in
// the shipped modules.
var importRE = regexp.MustCompile(`(?:\bfrom|\bimport)\s*\(?\s*["'](\.{0,2}/[^"']+)["']`)

// refRE finds the src and href attributes of index.html.
var refRE = regexp.MustCompile(`(?:src|href)="(/[^"]+)"`)

// urlToAsset maps a served URL path to its file in Assets (the routes in
// transport/static.go).
func urlToAsset(u string) (string, bool) {
	for _, m := range []struct{ prefix, dir string }{{"/ui/", "ui"}, {"/vendor/", "vendor/dist"}, {"/brand/", "brand"}, {"/lattice/", "lattice"}} {
		if rest, ok := strings.CutPrefix(u, m.prefix); ok {
			return m.dir + "/" + rest, true
		}
	}
	return "", false
}

// TestReferencesResolve checks that every module import in the shipped
// JavaScript and every asset index.html names is an embedded file, so a
// missing chunk fails here rather than in a browser.
func TestReferencesResolve(t *testing.T) {
	exists := func(name string) bool {
		_, err := fs.Stat(Assets, name)
		return err == nil
	}
	index, err := fs.ReadFile(Assets, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range refRE.FindAllStringSubmatch(string(index), -1) {
		if name, ok := urlToAsset(m[1]); !ok || !exists(name) {
			t.Errorf("index.html names %s, which is not embedded", m[1])
		}
	}
	checked := 0
	err = fs.WalkDir(Assets, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		data, err := fs.ReadFile(Assets, p)
		if err != nil {
			return err
		}
		for _, m := range importRE.FindAllStringSubmatch(string(data), -1) {
			spec := m[1]
			var name string
			if strings.HasPrefix(spec, "/") {
				var ok bool
				if name, ok = urlToAsset(spec); !ok {
					t.Errorf("%s imports %s, outside the asset routes", p, spec)
					continue
				}
			} else {
				name = path.Join(path.Dir(p), spec)
			}
			checked++
			if !exists(name) {
				t.Errorf("%s imports %s (%s), which is not embedded", p, spec, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Errorf("only %d imports found: the pattern no longer matches the modules", checked)
	}
}

// TestUIModules runs the state rules' unit tests (uitest/*.test.mjs) with
// node's test runner. Without node the test is skipped, or fails when $CI
// is set (`make browser-up` installs it).
func TestUIModules(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is missing (run `make browser-up`)")
		}
		t.Skip("node is missing (run `make browser-up`; set CI to fail instead)")
	}
	out, err := exec.Command(node, "--test", "--test-reporter=dot", "uitest/").CombinedOutput()
	if err != nil {
		t.Fatalf("node --test uitest/: %v\n%s", err, out)
	}
}

// staticImportRE finds the specifiers of static imports only (import …
// from "x", import "x"), not of dynamic ones (import("x")).
var staticImportRE = regexp.MustCompile(`(?:\bfrom|\bimport)\s*["'](\.{0,2}/[^"']+)["']`)

// preloadRE finds index.html's module preloads.
var preloadRE = regexp.MustCompile(`<link rel="modulepreload" href="(/[^"]+)">`)

// TestIndexPreloadsTheFirstRender checks that index.html preloads exactly
// the modules app.js imports statically, the rail's first render: each is
// asked for at once (no waterfall of imports), and none of the tools,
// which app.js imports after (tools.js), queue before the first page of
// the Session list.
func TestIndexPreloadsTheFirstRender(t *testing.T) {
	graph := map[string]bool{}
	var walk func(name string)
	walk = func(name string) {
		if graph[name] {
			return
		}
		graph[name] = true
		data, err := fs.ReadFile(Assets, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range staticImportRE.FindAllStringSubmatch(string(data), -1) {
			next := path.Join(path.Dir(name), m[1])
			if strings.HasPrefix(m[1], "/") {
				next, _ = urlToAsset(m[1])
			}
			walk(next)
		}
	}
	walk("ui/app.js")
	if graph["ui/tools.js"] || graph["ui/session.js"] {
		t.Error("app.js imports the tools statically: the rail's first render waits for them")
	}
	index, err := fs.ReadFile(Assets, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	preloaded := map[string]bool{"ui/app.js": true} // the document's script
	for _, m := range preloadRE.FindAllStringSubmatch(string(index), -1) {
		name, _ := urlToAsset(m[1])
		preloaded[name] = true
		if !graph[name] {
			t.Errorf("index.html preloads %s, which the first render does not import", m[1])
		}
	}
	for name := range graph {
		if !preloaded[name] {
			t.Errorf("index.html does not preload %s, which the first render imports", name)
		}
	}
}
