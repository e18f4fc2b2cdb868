package transport

import (
	"go/ast"
	"go/parser"
	"go/token"
	"lathe/transport/a2aserve"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"lathe/projections"
)

// samplePath fills a table path's parameters with sample values.
func samplePath(path string) string {
	var out []string
	for _, seg := range strings.Split(path, "/") {
		switch {
		case strings.HasPrefix(seg, ":"):
			seg = "X" + seg[1:]
		case strings.HasPrefix(seg, "*"):
			seg = "sample.txt"
		}
		out = append(out, seg)
	}
	return strings.Join(out, "/")
}

// TestRouteTableIsWhole checks each entry's data, and that the router
// serves exactly the table: every entry is registered under its own
// parameters, and no code of the package registers a route or a /ws
// command any other way.
func TestRouteTableIsWhole(t *testing.T) {
	f := &fake{}
	srv, err := New(SecurityOptions{APIKeys: []string{testKey}, CookieSecret: testSecret}, withStore(projections.New(), Deps{
		Sessions: f, Environments: f, Files: f, Attachments: f, Git: f, Tasks: f, Turns: f, TurnCode: f, Sandboxes: f,
		LLM: f, Runtime: f, Agents: f, MCP: f, MCPRegistry: f, Approvals: f, SkillCommands: f, Audit: f, Folders: f,
		Chats: f, SharedFiles: f, A2A: a2aserve.New(f, "test", true, false),
	}))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, rt := range Routes() {
		key := rt.Method + " " + rt.Path
		switch {
		case seen[key]:
			t.Errorf("%s: listed twice", key)
		case rt.Summary == "" || strings.Contains(rt.Summary, "\n"):
			t.Errorf("%s: the summary must be one line", key)
		case rt.Tag == "":
			t.Errorf("%s: no tag", key)
		case rt.Auth == "":
			t.Errorf("%s: no auth class", key)
		case rt.Status == 0:
			t.Errorf("%s: no success status", key)
		}
		seen[key] = true
		h, ps, _ := srv.router.Lookup(rt.Method, samplePath(rt.Path))
		if h == nil {
			t.Errorf("%s: not registered", key)
			continue
		}
		for _, p := range ps {
			if !strings.Contains(rt.Path, ":"+p.Key) && !strings.Contains(rt.Path, "*"+p.Key) {
				t.Errorf("%s: matched another route (parameter %s)", key, p.Key)
			}
		}
	}

	// Registration happens in register and New only, from the tables.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "http" {
					return true // http.HandlerFunc and the like: conversions
				}
				if len(call.Args) < 2 {
					return true // a getter (slog's Handler()), not a registration
				}
				at := fset.Position(call.Pos())
				switch sel.Sel.Name {
				case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "Handler", "HandlerFunc", "ServeFiles":
					t.Errorf("%s: %s registers a route outside the route table", at, sel.Sel.Name)
				case "Handle":
					allowed := (fn.Name.Name == "register" && len(call.Args) == 3) || (fn.Name.Name == "New" && len(call.Args) == 2)
					if !allowed {
						t.Errorf("%s: Handle registers a route or /ws command outside the tables (in %s)", at, fn.Name.Name)
					}
				}
				return true
			})
		}
	}
}

// TestEveryRouteIsAuthenticated sends each table route without a
// credential: every one but the public class answers 401, and with the key
// none answers 401 or 405.
func TestEveryRouteIsAuthenticated(t *testing.T) {
	f := &fake{}
	h := fakeServer(t, f)
	for _, rt := range Routes() {
		if rt.WebSocket {
			continue // an upgrade needs a client; the Guard's rule is the same
		}
		for _, withKey := range []bool{false, true} {
			r := httptest.NewRequest(rt.Method, samplePath(rt.Path), nil)
			r.Host = "localhost:8080"
			if withKey {
				r.Header.Set("X-Api-Key", testKey)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			switch {
			case !withKey && rt.Auth == AuthPublic && w.Code == http.StatusUnauthorized:
				t.Errorf("%s %s: public route answered 401", rt.Method, rt.Path)
			case !withKey && rt.Auth != AuthPublic && w.Code != http.StatusUnauthorized:
				t.Errorf("%s %s: answered %d without a credential, want 401", rt.Method, rt.Path, w.Code)
			case withKey && (w.Code == http.StatusUnauthorized || w.Code == http.StatusMethodNotAllowed):
				t.Errorf("%s %s: answered %d with the key", rt.Method, rt.Path, w.Code)
			}
		}
	}
}
