package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"

	"lathe/cmd/lathe/internal/config"
	"lathe/journal"
	"lathe/journal/bus"
	"lathe/journal/events"
	"lathe/projections"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/helper/helpertest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// ---------------------------------------------------------------------------
// Helpers

// newTestDaemon starts a whole daemon without sandboxes on
// config.Default() (listen 127.0.0.1:0, then mutate): see startDaemon.
func newTestDaemon(t *testing.T, mutate func(*config.Config)) (*Daemon, *httptest.Server) {
	t.Helper()
	return startDaemon(t, 10*time.Second, mutate, WithoutSandbox())
}

// startDaemon starts a whole daemon on config.Default() (listen
// 127.0.0.1:0, then mutate) with opts, allowing it startWithin: a real bbolt
// journal in t.TempDir, the projections, embedded NATS and the commands,
// served by an httptest server. Cleanup drains the /ws clients and the
// terminal WebSockets, stops the server and closes the daemon, in that
// order.
func startDaemon(t testing.TB, startWithin time.Duration, mutate func(*config.Config), opts ...Option) (*Daemon, *httptest.Server) {
	t.Helper()
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	if mutate != nil {
		mutate(&cfg)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if !o.withoutSandbox && o.sandboxHelper == "" {
		opts = append(opts, WithSandboxHelper(helpertest.Path(t))) // a test binary is no helper
	}
	d, err := Start(testContext(t, startWithin), cfg, t.TempDir(), log, "test", opts...)
	if err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	srv := httptest.NewServer(checkOpenAPI(t, d.Handler())) // every JSON response is checked against the document
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("daemon shutdown: %v", err)
		}
		srv.Close()
		d.Close()
		if cfg.Sandbox.Provider == config.SandboxRemote {
			dropHelperVolumes(t, cfg.Sandbox.Remote.Host, d.owner)
		}
	})
	return d, srv
}

// dropHelperVolumes removes the sandbox helper's volumes a remote test
// daemon left on its engine: a daemon keeps its own across restarts (the
// next start finds the helper there), but each test daemon is a data dir,
// an owner, of its own, and their volumes would pile up (140 MB each).
func dropHelperVolumes(t testing.TB, host, owner string) {
	if host == "" || owner == "" {
		return
	}
	ids, err := dockerCLI(host, "volume", "ls", "-q", "--filter", "label="+docker.LabelDaemon+"="+owner)
	if err != nil || ids == "" {
		return
	}
	if out, err := dockerCLI(host, append([]string{"volume", "rm"}, strings.Fields(ids)...)...); err != nil {
		t.Logf("remove the helper volumes of %s: %v: %s", owner, err, out)
	}
}

// testContext returns a context that ends with the test or after d.
func testContext(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// reply is one HTTP response, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// send performs req with a bounded context and reads the whole response.
func send(t testing.TB, client *http.Client, req *http.Request) reply {
	t.Helper()
	return sendWithin(t, client, req, 10*time.Second)
}

// sendWithin is send with its own bound: a forced delete may wait on
// containerd's shim to remove a task (up to ~30 s on containerd 1.6).
func sendWithin(t testing.TB, client *http.Client, req *http.Request, within time.Duration) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), within)
	defer cancel()
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

// call sends one request to srv; header holds name, value pairs. A body
// goes as application/json unless header names another Content-Type.
func call(t testing.TB, srv *httptest.Server, method, path, body string, header ...string) reply {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return send(t, srv.Client(), req)
}

// mustCall is call for set-up steps: it fails the test unless status matches.
func mustCall(t testing.TB, srv *httptest.Server, status int, method, path, body string) map[string]any {
	t.Helper()
	r := call(t, srv, method, path, body)
	if r.status != status {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.body)
	}
	var out map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %v: %s", method, path, err, r.body)
	}
	return out
}

// assertErrorBody checks that a rejection is exactly a JSON object whose
// "error" is a non-empty string containing want.
func assertErrorBody(t testing.TB, r reply, want string) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("error body is not a JSON object: %v: %s", err, r.body)
	}
	var msg string
	if err := json.Unmarshal(body["error"], &msg); err != nil || msg == "" {
		t.Fatalf(`error body lacks a non-empty string "error": %s`, r.body)
	}
	if want == "" {
		t.Fatalf("table row expects a rejection without naming its message; got %q", msg)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("error = %q, want it to contain %q", msg, want)
	}
}

// vars are the IDs and paths a route table refers to as {name}.
type vars map[string]string

func (v vars) expand(s string) string {
	for k, val := range v {
		s = strings.ReplaceAll(s, "{"+k+"}", val)
	}
	return s
}

// route is one row of a route table.
type route struct {
	name    string
	method  string
	path    string // {var} is expanded
	body    string // {var} is expanded; "" sends no body
	chunked bool   // send the body without a Content-Length
	status  int
	err     string // substring of the {"error"} message of a rejection
	events  int    // events the request appends; a rejection appends none
	save    string // store the response's "id" as this var
	check   func(t *testing.T, body []byte)
}

// runRoutes runs the rows in order, each as a subtest; later rows may use
// the vars earlier rows saved.
func runRoutes(t *testing.T, d *Daemon, srv *httptest.Server, v vars, rows []route) {
	t.Helper()
	for _, rt := range rows {
		t.Run(rt.name, func(t *testing.T) {
			var body io.Reader
			if rt.body != "" {
				body = strings.NewReader(v.expand(rt.body))
				if rt.chunked {
					body = io.MultiReader(body) // hides the length
				}
			}
			req, err := http.NewRequest(rt.method, srv.URL+v.expand(rt.path), body)
			if err != nil {
				t.Fatal(err)
			}
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			before := d.Journal().Last()
			r := send(t, srv.Client(), req)
			if r.status != rt.status {
				t.Fatalf("%s %s: status %d, want %d: %s", rt.method, req.URL.Path, r.status, rt.status, r.body)
			}
			switch {
			case rt.status >= 400:
				assertErrorBody(t, r, rt.err)
			case rt.err != "":
				t.Fatalf("table row names error %q for a success", rt.err)
			}
			if got := appendedSince(t, d, before); got != rt.events {
				t.Errorf("request appended %d events, want %d", got, rt.events)
			}
			if rt.status == http.StatusMethodNotAllowed && r.header.Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
			if rt.save != "" {
				v[rt.save] = str(t, r.body, "id")
			}
			if rt.check != nil {
				rt.check(t, r.body)
			}
		})
	}
}

// lookup returns the value at a dotted path ("environment.state",
// "0.id") in a decoded JSON document.
func lookup(doc any, path string) (any, bool) {
	for key := range strings.SplitSeq(path, ".") {
		switch d := doc.(type) {
		case map[string]any:
			v, ok := d[key]
			if !ok {
				return nil, false
			}
			doc = v
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(d) {
				return nil, false
			}
			doc = d[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

func decode(t testing.TB, body []byte) any {
	t.Helper()
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, body)
	}
	return doc
}

// str returns the string at path in body.
func str(t testing.TB, body []byte, path string) string {
	t.Helper()
	v, _ := lookup(decode(t, body), path)
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%s is %v, not a string, in %s", path, v, body)
	}
	return s
}

// fields checks dotted paths of the response: a string value must equal
// the expanded want, any other value must encode to want as JSON.
// "<absent>" asserts that the field is missing.
func fields(v vars, kv ...string) func(t *testing.T, body []byte) {
	return func(t *testing.T, body []byte) {
		t.Helper()
		doc := decode(t, body)
		for i := 0; i+1 < len(kv); i += 2 {
			path, want := kv[i], v.expand(kv[i+1])
			got, ok := lookup(doc, path)
			var text string
			switch s, isString := got.(string); {
			case !ok:
				text = "<absent>"
			case isString:
				text = s
			default:
				b, _ := json.Marshal(got)
				text = string(b)
			}
			if text != want {
				t.Errorf("%s = %s, want %s", path, text, want)
			}
		}
	}
}

// ids checks that the response is a JSON array whose elements' ids are
// exactly want (expanded), in order.
func ids(v vars, want ...string) func(t *testing.T, body []byte) {
	return func(t *testing.T, body []byte) {
		t.Helper()
		var list []struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("body is not a JSON array of records: %v: %s", err, body)
		}
		got := []string{}
		for _, e := range list {
			got = append(got, e.ID)
		}
		exp := []string{}
		for _, w := range want {
			exp = append(exp, v.expand(w))
		}
		if !slices.Equal(got, exp) {
			t.Errorf("ids = %v, want %v", got, exp)
		}
	}
}

// seqs checks that an NDJSON journal feed holds exactly the envelopes with
// the given seqs.
func seqs(want ...uint64) func(t *testing.T, body []byte) {
	return func(t *testing.T, body []byte) {
		t.Helper()
		got := []uint64{}
		for _, env := range feed(t, body) {
			got = append(got, env.Seq)
		}
		if want == nil {
			want = []uint64{}
		}
		if !slices.Equal(got, want) {
			t.Errorf("feed seqs = %v, want %v", got, want)
		}
	}
}

// feed decodes an NDJSON journal feed.
func feed(t testing.TB, body []byte) []journal.Envelope {
	t.Helper()
	var out []journal.Envelope
	for line := range bytes.Lines(body) {
		env, err := journal.DecodeEnvelope(line)
		if err != nil {
			t.Fatalf("feed line %q: %v", line, err)
		}
		out = append(out, env)
	}
	return out
}

// realDir returns dir with its symlinks resolved, as Workspace paths are.
func realDir(t testing.TB, dir string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

func mkdir(t testing.TB, parts ...string) string {
	t.Helper()
	dir := filepath.Join(parts...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t testing.TB, path, content string) string {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func symlink(t testing.TB, target, link string) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link
}

const (
	get   = http.MethodGet
	post  = http.MethodPost
	patch = http.MethodPatch
	del   = http.MethodDelete
	put   = http.MethodPut

	unknownID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	agentMode = `"mode":{"kind":"single_agent","agent_id":"coder"}`
)

// oversized is a JSON body just over the 1 MiB request cap.
var oversized = `{"path":"` + strings.Repeat("a", 1<<20) + `"}`

// ---------------------------------------------------------------------------
// Route tables, one per resource

func TestWorkspaceRoutes(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	root := realDir(t, t.TempDir())
	v := vars{
		"root":  root,
		"alpha": mkdir(t, root, "alpha"),
		"beta":  mkdir(t, root, "beta"),
		"gamma": mkdir(t, root, "gamma"),
		"file":  writeFile(t, filepath.Join(root, "file.txt"), "not a directory"),
	}
	v["link"] = symlink(t, v["alpha"], filepath.Join(root, "alpha-link"))
	runRoutes(t, d, srv, v, []route{
		{name: "list none", method: get, path: "/api/workspaces", status: 200, check: ids(v)},
		{name: "register", method: post, path: "/api/workspaces", body: `{"path":"{alpha}","name":"Alpha"}`, status: 201, events: 1, save: "wsA",
			check: fields(v, "path", "{alpha}", "name", "Alpha")},
		{name: "re-register without name keeps the label", method: post, path: "/api/workspaces", body: `{"path":"{alpha}"}`, status: 200,
			check: fields(v, "id", "{wsA}", "name", "Alpha")},
		{name: "re-register via symlink resolves to the same workspace", method: post, path: "/api/workspaces", body: `{"path":"{link}"}`, status: 200,
			check: fields(v, "id", "{wsA}", "path", "{alpha}")},
		{name: "re-register an unclean path", method: post, path: "/api/workspaces", body: `{"path":"{alpha}/../alpha/."}`, status: 200,
			check: fields(v, "id", "{wsA}")},
		{name: "re-register with a name renames", method: post, path: "/api/workspaces", body: `{"path":"{alpha}","name":"Alpha Two"}`, status: 200, events: 1,
			check: fields(v, "id", "{wsA}", "name", "Alpha Two", "path", "{alpha}")},
		{name: "re-register with the same name", method: post, path: "/api/workspaces", body: `{"path":"{link}","name":"Alpha Two"}`, status: 200,
			check: fields(v, "id", "{wsA}")},
		{name: "register labels with the directory name", method: post, path: "/api/workspaces", body: `{"path":"{beta}"}`, status: 201, events: 1, save: "wsB",
			check: fields(v, "name", "beta")},
		{name: "list oldest first", method: get, path: "/api/workspaces", status: 200, check: ids(v, "{wsA}", "{wsB}")},

		{name: "truncated JSON", method: post, path: "/api/workspaces", body: `{"path":"{gamma}"`, status: 400, err: "truncated"},
		{name: "invalid JSON", method: post, path: "/api/workspaces", body: `{path: 1}`, status: 400, err: "not valid JSON"},
		{name: "path of wrong type", method: post, path: "/api/workspaces", body: `{"path":5}`, status: 400, err: `field "path" must be a string, not number`},
		{name: "name of wrong type", method: post, path: "/api/workspaces", body: `{"path":"{gamma}","name":true}`, status: 400, err: `field "name"`},
		{name: "array body", method: post, path: "/api/workspaces", body: `["{gamma}"]`, status: 400, err: "array"},
		{name: "unknown field", method: post, path: "/api/workspaces", body: `{"path":"{gamma}","colour":"red"}`, status: 400, err: `unknown field "colour"`},
		{name: "trailing data", method: post, path: "/api/workspaces", body: `{"path":"{gamma}"} {}`, status: 400, err: "after top-level value"},
		{name: "empty body", method: post, path: "/api/workspaces", status: 400, err: "empty"},
		{name: "null body", method: post, path: "/api/workspaces", body: `null`, status: 400, err: "request body is null; a JSON object is required"},
		{name: "no path", method: post, path: "/api/workspaces", body: `{"name":"x"}`, status: 400, err: "path is required"},
		{name: "empty path", method: post, path: "/api/workspaces", body: `{"path":""}`, status: 400, err: "path is required"},
		{name: "relative path", method: post, path: "/api/workspaces", body: `{"path":"alpha"}`, status: 400, err: "must be absolute"},
		{name: "missing path", method: post, path: "/api/workspaces", body: `{"path":"{root}/missing"}`, status: 400, err: "does not exist"},
		{name: "path is a file", method: post, path: "/api/workspaces", body: `{"path":"{file}"}`, status: 400, err: "not a directory"},
		{name: "blank name", method: post, path: "/api/workspaces", body: `{"path":"{gamma}","name":"  "}`, status: 400, err: "name must not be empty"},
		{name: "control character in name", method: post, path: "/api/workspaces", body: `{"path":"{gamma}","name":"a\u0007b"}`, status: 400, err: "control characters"},
		{name: "overlong name", method: post, path: "/api/workspaces", body: `{"path":"{gamma}","name":"` + strings.Repeat("n", 201) + `"}`, status: 400, err: "longer than 200"},
		{name: "oversized body", method: post, path: "/api/workspaces", body: oversized, status: 413, err: "exceeds"},
		{name: "oversized chunked body", method: post, path: "/api/workspaces", body: oversized, chunked: true, status: 413, err: "too large"},

		{name: "get", method: get, path: "/api/workspaces/{wsA}", status: 200, check: fields(v, "id", "{wsA}", "name", "Alpha Two", "path", "{alpha}")},
		{name: "get unknown", method: get, path: "/api/workspaces/" + unknownID, status: 404, err: "workspace"},

		{name: "rename", method: patch, path: "/api/workspaces/{wsA}", body: `{"name":"Renamed"}`, status: 200, events: 1,
			check: fields(v, "id", "{wsA}", "name", "Renamed", "path", "{alpha}")},
		{name: "rename to the same name", method: patch, path: "/api/workspaces/{wsA}", body: `{"name":" Renamed "}`, status: 200, check: fields(v, "name", "Renamed")},
		{name: "rename unknown", method: patch, path: "/api/workspaces/" + unknownID, body: `{"name":"x"}`, status: 404, err: "workspace"},
		{name: "rename without name", method: patch, path: "/api/workspaces/{wsA}", body: `{}`, status: 400, err: "name is required"},
		{name: "rename with wrong type", method: patch, path: "/api/workspaces/{wsA}", body: `{"name":1}`, status: 400, err: `field "name"`},
		{name: "rename with empty body", method: patch, path: "/api/workspaces/{wsA}", status: 400, err: "empty"},
		{name: "rename with unknown field", method: patch, path: "/api/workspaces/{wsA}", body: `{"name":"x","path":"/"}`, status: 400, err: "unknown field"},
		{name: "rename to blank", method: patch, path: "/api/workspaces/{wsA}", body: `{"name":""}`, status: 400, err: "must not be empty"},
		{name: "rename truncated", method: patch, path: "/api/workspaces/{wsA}", body: `{"name":`, status: 400, err: "truncated"},
		{name: "renamed is kept on re-register", method: post, path: "/api/workspaces", body: `{"path":"{alpha}"}`, status: 200, check: fields(v, "name", "Renamed")},

		{name: "sessions of an empty workspace", method: get, path: "/api/workspaces/{wsA}/sessions", status: 200, check: ids(v)},
		{name: "sessions of unknown workspace", method: get, path: "/api/workspaces/" + unknownID + "/sessions", status: 404, err: "workspace"},
		{name: "add a session", method: post, path: "/api/workspaces/{wsA}/sessions", body: `{"name":"s",` + agentMode + `}`, status: 201, events: 1, save: "s"},
		{name: "remove a workspace with sessions", method: del, path: "/api/workspaces/{wsA}", status: 409, err: "still has 1 sessions"},
		{name: "remove unknown", method: del, path: "/api/workspaces/" + unknownID, status: 404, err: "workspace"},
		{name: "remove an empty workspace", method: del, path: "/api/workspaces/{wsB}", status: 200, events: 1, check: fields(v, "id", "{wsB}", "removed", "true")},
		{name: "removed is gone", method: get, path: "/api/workspaces/{wsB}", status: 404, err: "workspace"},
		{name: "removed is not listed", method: get, path: "/api/workspaces", status: 200, check: ids(v, "{wsA}")},
		{name: "remove again", method: del, path: "/api/workspaces/{wsB}", status: 404, err: "workspace"},
		{name: "registering a removed path creates a new workspace", method: post, path: "/api/workspaces", body: `{"path":"{beta}"}`, status: 201, events: 1, save: "wsB2",
			check: func(t *testing.T, body []byte) {
				if id := str(t, body, "id"); id == v["wsB"] {
					t.Errorf("re-registered removed path got the old id %s", id)
				}
			}},

		{name: "unknown route", method: get, path: "/api/nope", status: 404, err: "no route for GET /api/nope"},
		{name: "wrong method", method: put, path: "/api/workspaces", body: `{}`, status: 405, err: "not allowed"},
		{name: "wrong method on one", method: post, path: "/api/workspaces/{wsA}", body: `{}`, status: 405, err: "not allowed"},
	})
}

func TestSessionRoutes(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	root := realDir(t, t.TempDir())
	v := vars{
		"home":  mkdir(t, root, "home"),
		"other": mkdir(t, root, "other"),
		"third": mkdir(t, root, "third"),
		"file":  writeFile(t, filepath.Join(root, "file.txt"), "x"),
	}
	v["link"] = symlink(t, v["other"], filepath.Join(root, "other-link"))
	create := "/api/workspaces/{ws}/sessions"
	manyPorts := strings.Repeat("1,", 32) + "1"
	runRoutes(t, d, srv, v, []route{
		{name: "register the workspace", method: post, path: "/api/workspaces", body: `{"path":"{home}"}`, status: 201, events: 1, save: "ws"},

		{name: "create single agent", method: post, path: create, body: `{"name":"First",` + agentMode + `}`, status: 201, events: 1, save: "s1",
			check: fields(v, "workspace_id", "{ws}", "name", "First", "working_dir", "{home}", "status", "open",
				"mode", `{"agent_id":"coder","kind":"single_agent"}`, "enabled_skills", "[]", "exposed_ports", "[]",
				"check_command", "null", "environment.state", "unprepared", "environment.generation", "1",
				"environment.image", "docker.io/library/buildpack-deps:bookworm-scm", "closed_at", "<absent>")},
		{name: "create lattice with ports and skills", method: post, path: create,
			body:   `{"name":"Second","mode":{"kind":"lattice"},"exposed_ports":[8080,3000,8080],"enabled_skills":["lint"]}`,
			status: 201, events: 1, save: "s2",
			check: fields(v, "mode", `{"kind":"lattice"}`, "exposed_ports", "[3000,8080]", "enabled_skills", `["lint"]`)},
		{name: "an unreviewed setup command awaits approval", method: post, path: create,
			body:   `{"name":"Third",` + agentMode + `,"setup_command":"make deps"}`,
			status: 201, events: 1,
			check: fields(v, "environment.state", "awaiting_approval", "environment.setup_command", "make deps", "environment.setup_reviewed", "false")},
		{name: "a reviewed approved setup command", method: post, path: create,
			body:   `{"name":"Fourth",` + agentMode + `,"setup_command":"make deps","setup_approved":true,"setup_reviewed":true}`,
			status: 201, events: 1,
			check: fields(v, "environment.state", "unprepared", "environment.setup_approved", "true", "environment.setup_reviewed", "true")},
		{name: "an explicit image", method: post, path: create, body: `{"name":"Fifth",` + agentMode + `,"image":"lathe.local/sandbox:bookworm"}`,
			status: 201, events: 1, check: fields(v, "environment.image", "lathe.local/sandbox:bookworm")},

		{name: "unknown agent", method: post, path: create, body: `{"name":"x","mode":{"kind":"single_agent","agent_id":"ghost"}}`, status: 400, err: `"ghost" is not a configured agent`},
		{name: "single agent without agent", method: post, path: create, body: `{"name":"x","mode":{"kind":"single_agent"}}`, status: 400, err: "agent_id is required"},
		{name: "unknown mode kind", method: post, path: create, body: `{"name":"x","mode":{"kind":"solo"}}`, status: 400, err: `mode.kind "solo"`},
		{name: "mode without kind", method: post, path: create, body: `{"name":"x","mode":{}}`, status: 400, err: "mode.kind"},
		{name: "lattice with an unknown worker", method: post, path: create, body: `{"name":"x","mode":{"kind":"lattice","workers":["ghost"]}}`, status: 400, err: `"ghost" is not a configured lattice Worker`},
		{name: "lattice with an agent", method: post, path: create, body: `{"name":"x","mode":{"kind":"lattice","agent_id":"coder"}}`, status: 400, err: "only for single_agent"},
		{name: "mode missing", method: post, path: create, body: `{"name":"x"}`, status: 400, err: "mode is required"},
		{name: "mode of wrong type", method: post, path: create, body: `{"name":"x","mode":"lattice"}`, status: 400, err: `field "mode"`},
		{name: "mode with unknown field", method: post, path: create, body: `{"name":"x","mode":{"kind":"lattice","agent":"coder"}}`, status: 400, err: "unknown field"},
		{name: "port zero", method: post, path: create, body: `{"name":"x",` + agentMode + `,"exposed_ports":[0]}`, status: 400, err: "0 is not a port"},
		{name: "port above 65535", method: post, path: create, body: `{"name":"x",` + agentMode + `,"exposed_ports":[65536]}`, status: 400, err: "65536 is not a port"},
		{name: "negative port", method: post, path: create, body: `{"name":"x",` + agentMode + `,"exposed_ports":[-1]}`, status: 400, err: "-1 is not a port"},
		{name: "port of wrong type", method: post, path: create, body: `{"name":"x",` + agentMode + `,"exposed_ports":["80"]}`, status: 400, err: "exposed_ports"},
		{name: "too many ports", method: post, path: create, body: `{"name":"x",` + agentMode + `,"exposed_ports":[` + manyPorts + `]}`, status: 400, err: "more than 32"},
		{name: "blank skill", method: post, path: create, body: `{"name":"x",` + agentMode + `,"enabled_skills":[" "]}`, status: 400, err: "enabled_skills"},
		{name: "blank name", method: post, path: create, body: `{"name":" ",` + agentMode + `}`, status: 400, err: "name must not be empty"},
		{name: "missing name", method: post, path: create, body: `{` + agentMode + `}`, status: 400, err: "name must not be empty"},
		{name: "image with a space", method: post, path: create, body: `{"name":"x",` + agentMode + `,"image":"bad image"}`, status: 400, err: "image"},
		{name: "setup_approved of wrong type", method: post, path: create, body: `{"name":"x",` + agentMode + `,"setup_approved":"yes"}`, status: 400, err: `setup_approved`},
		{name: "unknown field", method: post, path: create, body: `{"name":"x",` + agentMode + `,"colour":"red"}`, status: 400, err: `unknown field "colour"`},
		{name: "truncated JSON", method: post, path: create, body: `{"name":"x",` + agentMode, status: 400, err: "truncated"},
		{name: "invalid JSON", method: post, path: create, body: `{"name":'x'}`, status: 400, err: "not valid JSON"},
		{name: "empty body", method: post, path: create, status: 400, err: "empty"},
		{name: "oversized body", method: post, path: create, body: oversized, status: 413, err: "exceeds"},
		{name: "oversized chunked body", method: post, path: create, body: oversized, chunked: true, status: 413, err: "too large"},
		{name: "unknown workspace", method: post, path: "/api/workspaces/" + unknownID + "/sessions", body: `{"name":"x",` + agentMode + `}`, status: 404, err: "workspace"},

		{name: "get", method: get, path: "/api/sessions/{s1}", status: 200, check: fields(v, "id", "{s1}", "workspace_id", "{ws}", "name", "First")},
		{name: "get unknown", method: get, path: "/api/sessions/" + unknownID, status: 404, err: "session"},
		{name: "list", method: get, path: "/api/sessions", status: 200, check: func(t *testing.T, body []byte) {
			if n := len(decode(t, body).([]any)); n != 5 {
				t.Errorf("%d sessions listed, want 5", n)
			}
		}},

		{name: "rename", method: patch, path: "/api/sessions/{s1}", body: `{"name":"Renamed"}`, status: 200, events: 1, check: fields(v, "id", "{s1}", "name", "Renamed")},
		{name: "rename to the same name", method: patch, path: "/api/sessions/{s1}", body: `{"name":"Renamed"}`, status: 200},
		{name: "rename without name", method: patch, path: "/api/sessions/{s1}", body: `{}`, status: 400, err: "name is required"},
		{name: "rename to blank", method: patch, path: "/api/sessions/{s1}", body: `{"name":"\t"}`, status: 400, err: "must not be empty"},
		{name: "rename with unknown field", method: patch, path: "/api/sessions/{s1}", body: `{"name":"x","mode":{}}`, status: 400, err: "unknown field"},
		{name: "rename with wrong type", method: patch, path: "/api/sessions/{s1}", body: `{"name":["x"]}`, status: 400, err: `field "name"`},
		{name: "rename unknown", method: patch, path: "/api/sessions/" + unknownID, body: `{"name":"x"}`, status: 404, err: "session"},

		{name: "soft close", method: del, path: "/api/sessions/{s1}", status: 200, events: 1, check: func(t *testing.T, body []byte) {
			fields(v, "id", "{s1}", "status", "closed")(t, body)
			if _, err := time.Parse(time.RFC3339Nano, str(t, body, "closed_at")); err != nil {
				t.Errorf("closed_at: %v", err)
			}
		}},
		{name: "close a closed session", method: del, path: "/api/sessions/{s1}", status: 200, check: fields(v, "status", "closed")},
		{name: "a closed session is still listed", method: get, path: "/api/sessions", status: 200, check: fields(v, "0.id", "{s1}", "0.status", "closed")},
		{name: "a closed session is listed in its workspace", method: get, path: "/api/workspaces/{ws}/sessions", status: 200, check: fields(v, "0.id", "{s1}", "0.status", "closed")},
		{name: "force=false soft-closes", method: del, path: "/api/sessions/{s2}?force=false", status: 200, events: 1, check: fields(v, "status", "closed")},
		{name: "force=bogus", method: del, path: "/api/sessions/{s2}?force=bogus", status: 400, err: "force must be true or false"},
		{name: "close unknown", method: del, path: "/api/sessions/" + unknownID, status: 404, err: "session"},
		{name: "reopen", method: post, path: "/api/sessions/{s1}/reopen", status: 200, events: 1, check: fields(v, "status", "open", "closed_at", "<absent>", "name", "Renamed")},
		{name: "reopen an open session", method: post, path: "/api/sessions/{s1}/reopen", status: 200, check: fields(v, "status", "open")},
		{name: "reopen unknown", method: post, path: "/api/sessions/" + unknownID + "/reopen", status: 404, err: "session"},

		{name: "force delete", method: del, path: "/api/sessions/{s2}?force=true", status: 200, events: 1, check: fields(v, "id", "{s2}", "deleted", "true")},
		{name: "a deleted session is gone", method: get, path: "/api/sessions/{s2}", status: 404, err: "session"},
		{name: "a deleted session is not listed", method: get, path: "/api/sessions", status: 200, check: func(t *testing.T, body []byte) {
			if bytes.Contains(body, []byte(v["s2"])) {
				t.Errorf("deleted session %s is still listed", v["s2"])
			}
		}},
		{name: "delete again", method: del, path: "/api/sessions/{s2}?force=true", status: 404, err: "session"},
		{name: "reopen deleted", method: post, path: "/api/sessions/{s2}/reopen", status: 404, err: "session"},
		{name: "rename deleted", method: patch, path: "/api/sessions/{s2}", body: `{"name":"x"}`, status: 404, err: "session"},

		{name: "compat create registers the workspace", method: post, path: "/api/sessions", body: `{"working_dir":"{other}","name":"Compat",` + agentMode + `}`,
			status: 201, events: 2, save: "c1", check: func(t *testing.T, body []byte) {
				fields(v, "working_dir", "{other}", "name", "Compat")(t, body)
				v["wsOther"] = str(t, body, "workspace_id")
				if v["wsOther"] == v["ws"] {
					t.Error("compat create used the wrong workspace")
				}
			}},
		{name: "the compat workspace is registered", method: get, path: "/api/workspaces/{wsOther}", status: 200, check: fields(v, "path", "{other}", "name", "other")},
		{name: "compat create finds the workspace through a symlink", method: post, path: "/api/sessions", body: `{"working_dir":"{link}","name":"Compat 2","mode":{"kind":"lattice"}}`,
			status: 201, events: 1, check: fields(v, "workspace_id", "{wsOther}", "working_dir", "{other}")},
		{name: "compat create in a registered workspace", method: post, path: "/api/sessions", body: `{"working_dir":"{home}","name":"Compat 3",` + agentMode + `}`,
			status: 201, events: 1, check: fields(v, "workspace_id", "{ws}")},
		{name: "compat without working_dir", method: post, path: "/api/sessions", body: `{"name":"x",` + agentMode + `}`, status: 400, err: "working_dir is required"},
		{name: "compat relative working_dir", method: post, path: "/api/sessions", body: `{"working_dir":"home","name":"x",` + agentMode + `}`, status: 400, err: "must be absolute"},
		{name: "compat missing working_dir", method: post, path: "/api/sessions", body: `{"working_dir":"{home}/missing","name":"x",` + agentMode + `}`, status: 400, err: "does not exist"},
		{name: "compat working_dir is a file", method: post, path: "/api/sessions", body: `{"working_dir":"{file}","name":"x",` + agentMode + `}`, status: 400, err: "not a directory"},
		{name: "compat working_dir of wrong type", method: post, path: "/api/sessions", body: `{"working_dir":1,"name":"x",` + agentMode + `}`, status: 400, err: "working_dir"},
		{name: "compat invalid spec registers no workspace", method: post, path: "/api/sessions", body: `{"working_dir":"{third}","name":"x","mode":{"kind":"single_agent","agent_id":"ghost"}}`,
			status: 400, err: "not a configured agent"},
		{name: "compat unknown field", method: post, path: "/api/sessions", body: `{"working_dir":"{third}","name":"x",` + agentMode + `,"workspace_id":"x"}`, status: 400, err: "unknown field"},
		{name: "compat empty body", method: post, path: "/api/sessions", status: 400, err: "empty"},
		{name: "workspaces after compat creates", method: get, path: "/api/workspaces", status: 200, check: ids(v, "{ws}", "{wsOther}")},

		{name: "wrong method", method: put, path: "/api/sessions", body: `{}`, status: 405, err: "not allowed"},
		{name: "wrong method on one", method: post, path: "/api/sessions/{s1}", body: `{}`, status: 405, err: "not allowed"},
		{name: "reopen with GET", method: get, path: "/api/sessions/{s1}/reopen", status: 405, err: "not allowed"},
		{name: "unknown sub-route", method: get, path: "/api/sessions/{s1}/nope", status: 404, err: "no route"},
	})
}

func TestFSRoutes(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	root := realDir(t, t.TempDir())
	home := mkdir(t, root, "home")
	t.Setenv("HOME", home)
	proj := mkdir(t, root, "proj")
	mkdir(t, proj, "sub")
	mkdir(t, proj, ".git")
	mkdir(t, proj, ".hidden")
	writeFile(t, filepath.Join(proj, "go.sum"), "")
	writeFile(t, filepath.Join(proj, "LATHE.md"), "be careful")
	symlink(t, home, filepath.Join(proj, "to-home"))
	broken := mkdir(t, root, "broken")
	writeFile(t, filepath.Join(broken, ".devcontainer", "devcontainer.json"), "{")
	v := vars{"root": root, "home": home, "proj": proj, "broken": broken, "file": writeFile(t, filepath.Join(root, "file.txt"), "x")}
	entries := func(want ...string) func(t *testing.T, body []byte) {
		return func(t *testing.T, body []byte) {
			var l struct {
				Entries []struct{ Name, Path string }
			}
			if err := json.Unmarshal(body, &l); err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, e := range l.Entries {
				got = append(got, e.Name)
			}
			if !slices.Equal(got, want) {
				t.Errorf("entries = %v, want %v", got, want)
			}
		}
	}
	runRoutes(t, d, srv, v, []route{
		{name: "list", method: get, path: "/api/fs/list?path={proj}", status: 200, check: func(t *testing.T, body []byte) {
			fields(v, "path", "{proj}", "parent", "{root}", "entries.1.path", "{home}")(t, body)
			entries("sub", "to-home")(t, body)
		}},
		{name: "list hidden", method: get, path: "/api/fs/list?path={proj}&hidden=true", status: 200, check: entries(".git", ".hidden", "sub", "to-home")},
		{name: "list hidden=false", method: get, path: "/api/fs/list?path={proj}&hidden=false", status: 200, check: entries("sub", "to-home")},
		{name: "list defaults to home", method: get, path: "/api/fs/list", status: 200, check: fields(v, "path", "{home}", "entries", "[]")},
		{name: "list an unclean path", method: get, path: "/api/fs/list?path={proj}/sub/..", status: 200, check: fields(v, "path", "{proj}")},
		{name: "list the root", method: get, path: "/api/fs/list?path=/", status: 200, check: fields(v, "path", "/", "parent", "<absent>")},
		{name: "hidden=bogus", method: get, path: "/api/fs/list?path={proj}&hidden=bogus", status: 400, err: "hidden must be true or false"},
		{name: "list a relative path", method: get, path: "/api/fs/list?path=proj", status: 400, err: "not absolute"},
		{name: "list a missing path", method: get, path: "/api/fs/list?path={root}/missing", status: 404, err: "missing"},
		{name: "list a file", method: get, path: "/api/fs/list?path={file}", status: 400, err: "not a directory"},
		{name: "list a path with NUL", method: get, path: "/api/fs/list?path={root}%00x", status: 400, err: "NUL"},

		{name: "probe", method: get, path: "/api/fs/project?path={proj}", status: 200,
			check: fields(v, "path", "{proj}", "is_git_repo", "true", "devcontainer", "null", "detected_setup.0.command", "go mod download",
				"supports_session_image", "true", "auto_approve_devcontainer_setup", "false", "template", "null", "guidance.0.content", "be careful")},
		{name: "probe without path", method: get, path: "/api/fs/project", status: 400, err: "path is required"},
		{name: "probe a relative path", method: get, path: "/api/fs/project?path=proj", status: 400, err: "not absolute"},
		{name: "probe a missing path", method: get, path: "/api/fs/project?path={root}/missing", status: 404, err: "missing"},
		{name: "probe a file", method: get, path: "/api/fs/project?path={file}", status: 400, err: "not a directory"},
		{name: "probe a broken devcontainer", method: get, path: "/api/fs/project?path={broken}", status: 400, err: "devcontainer.json"},

		{name: "wrong method", method: post, path: "/api/fs/list", body: `{}`, status: 405, err: "not allowed"},
		{name: "unknown fs route", method: get, path: "/api/fs/read", status: 404, err: "no route"},
	})
}

func TestEventRoutes(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	dir := realDir(t, t.TempDir())
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)                        // seq 1
	s := mustCall(t, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"s",`+agentMode+`}`)["id"].(string) // seq 2
	mustCall(t, srv, 200, patch, "/api/sessions/"+s, `{"name":"t"}`)                                                 // seq 3
	mustCall(t, srv, 200, patch, "/api/workspaces/"+ws, `{"name":"w"}`)                                              // seq 4
	v := vars{"ws": ws, "s": s}
	runRoutes(t, d, srv, v, []route{
		{name: "recent", method: get, path: "/api/events/recent", status: 200,
			check: fields(v, "0.type", "workspace-registered", "1.type", "session-created", "1.aggregate_id", "{s}", "3.seq", "4", "4", "<absent>")},
		{name: "journal", method: get, path: "/api/events/journal", status: 200, check: seqs(1, 2, 3, 4)},
		{name: "after", method: get, path: "/api/events/journal?after=2", status: 200, check: seqs(3, 4)},
		{name: "limit", method: get, path: "/api/events/journal?limit=2", status: 200, check: seqs(1, 2)},
		{name: "after and limit", method: get, path: "/api/events/journal?after=1&limit=1", status: 200, check: seqs(2)},
		{name: "after the end", method: get, path: "/api/events/journal?after=4", status: 200, check: seqs()},
		{name: "the largest limit", method: get, path: "/api/events/journal?limit=100000", status: 200, check: seqs(1, 2, 3, 4)},
		{name: "aggregate", method: get, path: "/api/events/journal?aggregate={s}", status: 200, check: seqs(2, 3)},
		{name: "aggregate after", method: get, path: "/api/events/journal?aggregate={ws}&after=1", status: 200, check: seqs(4)},
		{name: "aggregate limit", method: get, path: "/api/events/journal?aggregate={ws}&limit=1", status: 200, check: seqs(1)},
		{name: "unknown aggregate", method: get, path: "/api/events/journal?aggregate=" + unknownID, status: 200, check: seqs()},
		{name: "after not a number", method: get, path: "/api/events/journal?after=x", status: 400, err: "after must be a non-negative integer"},
		{name: "negative after", method: get, path: "/api/events/journal?after=-1", status: 400, err: "after must be a non-negative integer"},
		{name: "limit zero", method: get, path: "/api/events/journal?limit=0", status: 400, err: "limit must be an integer from 1 to 100000"},
		{name: "limit too large", method: get, path: "/api/events/journal?limit=100001", status: 400, err: "limit must be"},
		{name: "limit not a number", method: get, path: "/api/events/journal?limit=ten", status: 400, err: "limit must be"},
		{name: "wrong method", method: post, path: "/api/events/journal", body: `{}`, status: 405, err: "not allowed"},
		{name: "unknown events route", method: get, path: "/api/events/nope", status: 404, err: "no route"},
	})

	r := call(t, srv, get, "/api/events/journal", "")
	if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("journal feed Content-Type = %q", ct)
	}
	// Every exported envelope names who did it and carries its link in
	// the hash chain; the audit head is the newest link.
	envs := feed(t, r.body)
	for _, env := range envs {
		if env.Actor != (journal.Actor{Kind: journal.ActorOperator, ID: "loopback"}) || len(env.Hash) != 64 {
			t.Errorf("seq %d: actor %+v, hash %q", env.Seq, env.Actor, env.Hash)
		}
	}
	head := mustCall(t, srv, 200, get, "/api/audit/head", "")
	if head["seq"] != float64(4) || head["hash"] != envs[len(envs)-1].Hash {
		t.Errorf("audit head %v, want seq 4 and %s", head, envs[len(envs)-1].Hash)
	}
}

// An operator's actor is the fingerprint of the credential used, never the
// secret: the key's, the bearer token's, or cookie:<fingerprint> for a
// browser signed in by the link.
func TestActorNamesTheCredential(t *testing.T) {
	const key, bearer = "k3y-0123456789abcdef", "b3arer-0123456789abcdef"
	d, srv := newTestDaemon(t, func(c *config.Config) {
		c.Server.APIKeys = []config.Credential{{Key: key, Name: "laptop"}}
		c.Server.BearerTokens = config.Secrets(bearer)
	})
	fp := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:6]) }
	dir := realDir(t, t.TempDir())
	for _, c := range []struct {
		header, value, want string
	}{
		{"X-Api-Key", key, fp(key)},
		{"Authorization", "Bearer " + bearer, fp(bearer)},
	} {
		w := call(t, srv, post, "/api/workspaces", `{"path":"`+dir+`"}`, c.header, c.value)
		if w.status != 201 {
			t.Fatalf("%s: %d %s", c.header, w.status, w.body)
		}
		seq := d.Journal().Last()
		var env journal.Envelope
		err := d.Journal().ScanSealed(t.Context(), seq-1, 1, func(_ uint64, raw []byte) error {
			var err error
			env, err = journal.DecodeEnvelope(raw)
			return err
		})
		if err != nil || env.Actor != (journal.Actor{Kind: journal.ActorOperator, ID: c.want}) {
			t.Errorf("%s: actor %+v (%v), want %s", c.header, env.Actor, err, c.want)
		}
		if strings.Contains(string(env.Data), c.value) {
			t.Errorf("%s: the secret is in the journal", c.header)
		}
		if r := call(t, srv, "DELETE", "/api/workspaces/"+env.AggregateID, "", c.header, c.value); r.status != 200 {
			t.Fatalf("delete: %d %s", r.status, r.body)
		}
	}
}

func TestHealthRoutes(t *testing.T) {
	// agents: [] — no Agent is spawned, so the daemon is not ready
	// (TestAgentHealthReady covers the ready case).
	d, srv := newTestDaemon(t, func(c *config.Config) { c.Agents = []config.Agent{} })
	v := vars{}
	runRoutes(t, d, srv, v, []route{
		{name: "health", method: get, path: "/health", status: 200, check: fields(v, "status", "ok", "agents", "0", "version", "test", "seq", "0")},
		{name: "live", method: get, path: "/health/live", status: 200, check: fields(v, "status", "ok")},
		{name: "ready without agents", method: get, path: "/health/ready", status: 503, err: "no agent is spawned"},
		{name: "wrong method", method: post, path: "/health", body: `{}`, status: 405, err: "not allowed"},
		{name: "unknown health route", method: get, path: "/health/nope", status: 404, err: "no route"},
	})
}

// ---------------------------------------------------------------------------
// Concurrency and replay

func TestConcurrentRegistrationOfOnePath(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	dir := realDir(t, t.TempDir())
	const n = 32
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
		got      = map[string]bool{}
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			r := call(t, srv, post, "/api/workspaces", `{"path":"`+dir+`"}`)
			var w struct{ ID string }
			_ = json.Unmarshal(r.body, &w)
			mu.Lock()
			defer mu.Unlock()
			statuses[r.status]++
			got[w.ID] = true
		})
	}
	close(start)
	wg.Wait()
	if statuses[201] != 1 || statuses[200] != n-1 {
		t.Errorf("statuses = %v, want one 201 and %d 200", statuses, n-1)
	}
	if len(got) != 1 {
		t.Errorf("%d distinct workspace ids answered, want 1: %v", len(got), got)
	}
	if ws := d.Store().Workspaces(); len(ws) != 1 {
		t.Errorf("%d workspaces, want 1", len(ws))
	}
	registered := 0
	for _, env := range feed(t, call(t, srv, get, "/api/events/journal", "").body) {
		if env.Type == "workspace-registered" {
			registered++
		}
	}
	if registered != 1 {
		t.Errorf("%d workspace-registered events, want 1", registered)
	}
}

// runMixedCommands drives every kind of command through the HTTP surface.
// When midway is set it is called halfway through.
func runMixedCommands(t *testing.T, srv *httptest.Server, midway func()) {
	t.Helper()
	root := realDir(t, t.TempDir())
	var wsIDs []string
	for _, name := range []string{"a", "b", "c"} {
		dir := mkdir(t, root, name)
		wsIDs = append(wsIDs, mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`","name":"`+name+`"}`)["id"].(string))
	}
	var sIDs []string
	for i := range 6 {
		body := fmt.Sprintf(`{"name":"s%d",%s,"exposed_ports":[%d],"enabled_skills":["k%d"]}`, i, agentMode, 3000+i, i)
		if i%2 == 1 {
			body = fmt.Sprintf(`{"name":"s%d","mode":{"kind":"lattice"}}`, i) // nil skills and ports
		}
		sIDs = append(sIDs, mustCall(t, srv, 201, post, "/api/workspaces/"+wsIDs[i%2]+"/sessions", body)["id"].(string))
	}
	mustCall(t, srv, 200, patch, "/api/workspaces/"+wsIDs[0], `{"name":"renamed"}`)
	mustCall(t, srv, 200, patch, "/api/sessions/"+sIDs[0], `{"name":"renamed"}`)
	mustCall(t, srv, 200, del, "/api/sessions/"+sIDs[1], "")
	if midway != nil {
		midway()
	}
	mustCall(t, srv, 200, del, "/api/sessions/"+sIDs[2], "")
	mustCall(t, srv, 200, post, "/api/sessions/"+sIDs[2]+"/reopen", "")
	mustCall(t, srv, 200, del, "/api/sessions/"+sIDs[3]+"?force=true", "")
	mustCall(t, srv, 200, del, "/api/workspaces/"+wsIDs[2], "")
	mustCall(t, srv, 201, post, "/api/sessions", `{"working_dir":"`+mkdir(t, root, "d")+`","name":"compat","mode":{"kind":"lattice"}}`)
	mustCall(t, srv, 200, patch, "/api/sessions/"+sIDs[4], `{"name":"late"}`)
	mustCall(t, srv, 200, del, "/api/sessions/"+sIDs[5], "")
}

// assertSameProjections deep-compares two stores' read models.
func assertSameProjections(t *testing.T, live, rebuilt *projections.Store) {
	t.Helper()
	if live.Seq() != rebuilt.Seq() {
		t.Errorf("seq: live %d, rebuilt %d", live.Seq(), rebuilt.Seq())
	}
	if a, b := live.Workspaces(), rebuilt.Workspaces(); !reflect.DeepEqual(a, b) {
		t.Errorf("workspaces differ:\nlive    %+v\nrebuilt %+v", a, b)
	}
	if a, b := live.Sessions(""), rebuilt.Sessions(""); !reflect.DeepEqual(a, b) {
		t.Errorf("sessions differ:\nlive    %+v\nrebuilt %+v", a, b)
	}
	for _, w := range live.Workspaces() {
		if a, b := live.Sessions(w.ID), rebuilt.Sessions(w.ID); !reflect.DeepEqual(a, b) {
			t.Errorf("sessions of %s differ:\nlive    %+v\nrebuilt %+v", w.ID, a, b)
		}
	}
	if a, b := live.Recent(), rebuilt.Recent(); !reflect.DeepEqual(a, b) {
		t.Errorf("recent events differ:\nlive    %+v\nrebuilt %+v", a, b)
	}
	// What clients see must match too, byte for byte.
	for _, v := range []struct {
		name string
		a, b any
	}{{"workspaces", live.Workspaces(), rebuilt.Workspaces()}, {"sessions", live.Sessions(""), rebuilt.Sessions("")}} {
		ja, _ := json.Marshal(v.a)
		jb, _ := json.Marshal(v.b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("%s JSON differs:\nlive    %s\nrebuilt %s", v.name, ja, jb)
		}
	}
}

func TestReplayRebuildsTheLiveProjections(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	runMixedCommands(t, srv, nil)
	rebuilt, n, err := projections.Load(testContext(t, 10*time.Second), d.Journal(), "")
	if err != nil {
		t.Fatal(err)
	}
	if uint64(n) != d.Journal().Last() {
		t.Errorf("replayed %d events, journal holds %d", n, d.Journal().Last())
	}
	assertSameProjections(t, d.Store(), rebuilt)
}

func TestReplayFromAMidwayCheckpoint(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	path := filepath.Join(t.TempDir(), "projections.checkpoint")
	var at uint64
	runMixedCommands(t, srv, func() {
		var err error
		if at, err = d.Store().WriteCheckpoint(path); err != nil {
			t.Fatal(err)
		}
	})
	if at == 0 || at >= d.Journal().Last() {
		t.Fatalf("checkpoint at seq %d of %d is not midway", at, d.Journal().Last())
	}
	rebuilt, n, err := projections.Load(testContext(t, 10*time.Second), d.Journal(), path)
	if err != nil {
		t.Fatal(err)
	}
	if want := d.Journal().Last() - at; uint64(n) != want {
		t.Errorf("replayed %d events after the checkpoint, want %d", n, want)
	}
	assertSameProjections(t, d.Store(), rebuilt)
}

// ---------------------------------------------------------------------------
// /ws

// wsURL is the /ws endpoint of srv.
func wsURL(srv *httptest.Server) string { return "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws" }

// dialWS connects to /ws and closes the connection when the test ends.
func dialWS(t testing.TB, ctx context.Context, srv *httptest.Server, header http.Header) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.Dial(ctx, wsURL(srv), &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial /ws: %v (status %d)", err, status)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// readFrame reads one text frame and its kind.
func readFrame(t testing.TB, ctx context.Context, c *websocket.Conn) (kind string, raw []byte) {
	t.Helper()
	typ, raw, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	if typ != websocket.MessageText {
		t.Fatalf("frame type %v, want text", typ)
	}
	var head struct{ Kind string }
	if err := json.Unmarshal(raw, &head); err != nil || head.Kind == "" {
		t.Fatalf("frame without kind: %s", raw)
	}
	return head.Kind, raw
}

// expectFrame reads one frame and fails unless it is of kind.
func expectFrame(t testing.TB, ctx context.Context, c *websocket.Conn, kind string) []byte {
	t.Helper()
	got, raw := readFrame(t, ctx, c)
	if got != kind {
		t.Fatalf("frame kind %q, want %q: %s", got, kind, raw)
	}
	return raw
}

func writeText(t testing.TB, ctx context.Context, c *websocket.Conn, msg string) {
	t.Helper()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
}

func TestWSReadyThenSnapshot(t *testing.T) {
	d, srv := newTestDaemon(t, nil)
	dir := realDir(t, t.TempDir())
	mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)
	ctx := testContext(t, 10*time.Second)
	c := dialWS(t, ctx, srv, nil)
	expectFrame(t, ctx, c, "ready")
	raw := expectFrame(t, ctx, c, "snapshot")
	var snap map[string]json.RawMessage
	if err := json.Unmarshal(raw, &snap); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"runs", "approvals", "environment_transitions", "attempt_ownerships"} {
		var arr []any
		if err := json.Unmarshal(snap[key], &arr); err != nil || arr == nil {
			t.Errorf("snapshot %s = %s, want a JSON array", key, snap[key])
		}
	}
	if got := string(snap["seq"]); got != strconv.FormatUint(d.Store().Seq(), 10) {
		t.Errorf("snapshot seq = %s, want %d", got, d.Store().Seq())
	}
}

func TestWSCommands(t *testing.T) {
	_, srv := newTestDaemon(t, nil)
	ctx := testContext(t, 10*time.Second)
	c := dialWS(t, ctx, srv, nil)
	expectFrame(t, ctx, c, "ready")
	expectFrame(t, ctx, c, "snapshot")
	for _, tc := range []struct{ send, kind, message string }{
		{`{"cmd":"ping"}`, "pong", ""},
		{`{`, "error", "malformed command"},
		{`not json`, "error", "malformed command"},
		{`{"cmd":5}`, "error", `"cmd" must be a string`},
		{`[1,2]`, "error", `command must be a JSON object, not array`},
		{`{"cmd":"session-stop","id":7,"turn_id":"t"}`, "error", `malformed session-stop command: field "id" must be a string, not number`},
		{`{}`, "error", `missing "cmd" field`},
		{`{"cmd":"launch-missiles"}`, "error", `unknown command "launch-missiles"`},
		{`{"cmd":"ping","extra":true}`, "pong", ""},
		// Issue 23, findings 1 and 10: the rules of an HTTP body.
		{`{"cmd":"session","session_id":"x","input":"hi","context_references":[{"a":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}]}`,
			"error", "nests too deeply"},
		{`{"cmd":"ping","cmd":"ping"}`, "error", `the key "cmd" twice`},
	} {
		writeText(t, ctx, c, tc.send)
		raw := expectFrame(t, ctx, c, tc.kind)
		if tc.message != "" {
			var f struct{ Message string }
			_ = json.Unmarshal(raw, &f)
			if !strings.Contains(f.Message, tc.message) {
				t.Errorf("reply to %s: message %q, want it to contain %q", tc.send, f.Message, tc.message)
			}
		}
	}
	if err := c.Write(ctx, websocket.MessageBinary, []byte(`{"cmd":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	expectFrame(t, ctx, c, "error")
	writeText(t, ctx, c, `{"cmd":"ping"}`)
	expectFrame(t, ctx, c, "pong") // still served after errors
}

func TestWSEventFrameForACreatedSession(t *testing.T) {
	_, srv := newTestDaemon(t, nil)
	ctx := testContext(t, 10*time.Second)
	c := dialWS(t, ctx, srv, nil)
	expectFrame(t, ctx, c, "ready")
	expectFrame(t, ctx, c, "snapshot")

	dir := realDir(t, t.TempDir())
	ws := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	created := call(t, srv, post, "/api/workspaces/"+ws+"/sessions", `{"name":"live",`+agentMode+`}`)
	if created.status != 201 {
		t.Fatalf("create session: %d %s", created.status, created.body)
	}
	var want projections.Session
	if err := json.Unmarshal(created.body, &want); err != nil {
		t.Fatal(err)
	}
	var types []string
	for {
		var f struct {
			Type        string
			Seq         uint64
			Aggregate   string
			AggregateID string `json:"aggregate_id"`
			Session     *projections.Session
			Workspace   *projections.Workspace
		}
		raw := expectFrame(t, ctx, c, "event")
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		types = append(types, f.Type)
		if f.Type != "session-created" {
			continue
		}
		if f.Aggregate != "session" || f.AggregateID != want.ID || f.Seq != 2 {
			t.Errorf("session-created frame names %s %s seq %d: %s", f.Aggregate, f.AggregateID, f.Seq, raw)
		}
		if f.Session == nil || !reflect.DeepEqual(*f.Session, want) {
			t.Errorf("session-created frame's session = %+v, want the created record %+v", f.Session, want)
		}
		break
	}
	if !slices.Equal(types, []string{"workspace-registered", "session-created"}) {
		t.Errorf("event frames %v", types)
	}
}

var (
	ulidPattern = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`)
	timePattern = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
)

// normaliser rewrites the run-specific values of frames: each ULID becomes
// <ULID-n> in order of first appearance, every timestamp <TIME>, and the
// test's directory <DIR>.
type normaliser struct {
	dir  string
	ulid map[string]string
}

func (n *normaliser) frame(t *testing.T, raw []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(n.value(v)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// value normalises v, visiting map keys in sorted order so that ULIDs are
// numbered the same way on every run.
func (n *normaliser) value(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			v[k] = n.value(v[k])
		}
	case []any:
		for i := range v {
			v[i] = n.value(v[i])
		}
	case string:
		switch {
		case ulidPattern.MatchString(v):
			if _, ok := n.ulid[v]; !ok {
				n.ulid[v] = fmt.Sprintf("<ULID-%d>", len(n.ulid)+1)
			}
			return n.ulid[v]
		case timePattern.MatchString(v):
			return "<TIME>"
		case v == n.dir || strings.HasPrefix(v, n.dir+"/"):
			return "<DIR>" + strings.TrimPrefix(v, n.dir)
		}
	}
	return v
}

func TestWSGoldenFrameSequence(t *testing.T) {
	_, srv := newTestDaemon(t, nil)
	ctx := testContext(t, 10*time.Second)
	c := dialWS(t, ctx, srv, nil)
	var frames [][]byte
	for range 2 { // ready, snapshot
		_, raw := readFrame(t, ctx, c)
		frames = append(frames, raw)
	}

	// Each step waits for its event frame before the next one: a frame
	// carries its record as projected when the frame is built, so a
	// later command applied first would leak into an earlier frame.
	step := func(status int, method, path, body string) map[string]any {
		t.Helper()
		out := mustCall(t, srv, status, method, path, body)
		frames = append(frames, expectFrame(t, ctx, c, "event"))
		return out
	}
	dir := realDir(t, t.TempDir())
	proj := mkdir(t, dir, "project")
	ws := step(201, post, "/api/workspaces", `{"path":"`+proj+`","name":"Project"}`)["id"].(string)
	s := step(201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"Scripted",`+agentMode+`,"exposed_ports":[5173]}`)["id"].(string)
	step(200, patch, "/api/sessions/"+s, `{"name":"Renamed"}`)
	step(200, del, "/api/sessions/"+s, "")
	step(200, post, "/api/sessions/"+s+"/reopen", "")
	step(200, del, "/api/sessions/"+s+"?force=true", "")
	step(200, del, "/api/workspaces/"+ws, "")

	n := &normaliser{dir: dir, ulid: map[string]string{}}
	var got bytes.Buffer
	for _, f := range frames {
		got.Write(n.frame(t, f))
	}
	golden := filepath.Join("testdata", "ws_flow.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("frame sequence differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", golden, got.Bytes(), want)
	}
}

// ---------------------------------------------------------------------------
// NATS

func TestNATSSubjectsAndPayloadsMatchTheJournal(t *testing.T) {
	d, srv := newTestDaemon(t, func(c *config.Config) { c.NATS.Listen = "127.0.0.1:0" })
	url := d.NATSURL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":0") {
		t.Fatalf("NATSURL() = %q, want the real TCP address", url)
	}
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync("lathe.events.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	runMixedCommands(t, srv, nil)
	last := d.Journal().Last()

	deadline := time.Now().Add(10 * time.Second)
	var msgs []*nats.Msg
	for uint64(len(msgs)) < last {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			t.Fatalf("after %d of %d events: %v", len(msgs), last, err)
		}
		msgs = append(msgs, m)
	}
	lines := slices.Collect(bytes.Lines(call(t, srv, get, "/api/events/journal", "").body))
	if uint64(len(lines)) != last {
		t.Fatalf("journal feed has %d lines, journal last seq is %d", len(lines), last)
	}
	subject := regexp.MustCompile(`^lathe\.events\.(workspace|session)\.[0-9A-HJKMNP-TV-Z]{26}\.[a-z]+(-[a-z]+)+$`)
	var prev uint64
	for i, m := range msgs {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(m.Data, &keys); err != nil {
			t.Fatalf("payload %d is not a JSON object: %s", i, m.Data)
		}
		got := slices.Sorted(maps.Keys(keys))
		if want := []string{"actor", "aggregate", "aggregate_id", "at", "data", "hash", "id", "seq", "type"}; !slices.Equal(got, want) {
			t.Errorf("payload keys %v, want %v", got, want)
		}
		env, err := journal.DecodeEnvelope(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if want := "lathe.events." + env.Aggregate + "." + env.AggregateID + "." + env.Type; m.Subject != want || !subject.MatchString(m.Subject) {
			t.Errorf("subject %q, want %q", m.Subject, want)
		}
		if env.Seq <= prev {
			t.Errorf("seq %d after %d: not strictly increasing", env.Seq, prev)
		}
		prev = env.Seq
		if env.Seq != uint64(i+1) {
			t.Errorf("message %d has seq %d", i, env.Seq)
		}
		if line := bytes.TrimSuffix(lines[i], []byte("\n")); !bytes.Equal(line, m.Data) {
			t.Errorf("seq %d: NATS payload differs from the journal feed:\nnats    %s\njournal %s", env.Seq, m.Data, line)
		}
	}
	if m, err := sub.NextMsg(50 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("extra message after the journal's last seq: %v %v", m, err)
	}
}

// TestNATSUsersHaveTheirOwnInboxes: nats.user and nats.users are each a
// user of their own, and a user's requests are answered only in its own
// inboxes, which no other user may subscribe to (issue 32, finding 10).
func TestNATSUsersHaveTheirOwnInboxes(t *testing.T) {
	const password = "a-long-nats-password"
	d, _ := newTestDaemon(t, func(c *config.Config) {
		c.NATS = config.NATS{Listen: "127.0.0.1:0", User: "feed-a", Password: password, Users: []config.NATSUser{{User: "feed-b", Password: password}}}
	})
	for _, user := range []string{"feed-a", "feed-b"} {
		nc, err := nats.Connect(d.NATSURL(), nats.UserInfo(user, password), nats.CustomInboxPrefix(bus.InboxPrefix(user)))
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		if _, err := nc.Request(bus.SubjectJournalRead, []byte(`{"after":0}`), 5*time.Second); err != nil {
			t.Errorf("%s's journal read: %v", user, err)
		}
		nc.Close()
	}
	violations := make(chan error, 1)
	spy, err := nats.Connect(d.NATSURL(), nats.UserInfo("feed-b", password),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	if _, err := spy.SubscribeSync(bus.InboxPrefix("feed-a") + ".>"); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("feed-b subscribing to feed-a's inboxes: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("feed-b may subscribe to feed-a's inboxes")
	}
}

func TestNATSIsInProcessByDefault(t *testing.T) {
	d, _ := newTestDaemon(t, nil)
	if url := d.NATSURL(); url != "" {
		t.Errorf("NATSURL() = %q with nats.listen empty, want \"\"", url)
	}
}

// ---------------------------------------------------------------------------
// Authentication

func TestAuthentication(t *testing.T) {
	const key = "test-api-key-0123456789"
	d, srv := newTestDaemon(t, func(c *config.Config) { c.Server.APIKeys = config.Secrets(key) })

	t.Run("health routes are open", func(t *testing.T) {
		for path, status := range map[string]int{"/health": 200, "/health/live": 200, "/health/ready": 200} {
			if r := call(t, srv, get, path, ""); r.status != status {
				t.Errorf("GET %s without a key: %d, want %d", path, r.status, status)
			}
		}
	})
	t.Run("api needs a key", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			header []string
			status int
			err    string
		}{
			{"no key", nil, 401, "authentication required"},
			{"wrong key", []string{"X-Api-Key", "wrong-key-0123456789"}, 401, "x-api-key is not accepted"},
			{"key as bearer token", []string{"Authorization", "Bearer " + key}, 401, "bearer token is not accepted"},
			{"bogus cookie", []string{"Cookie", "lathe_session=bogus"}, 401, "sign in again"},
			{"x-api-key", []string{"X-Api-Key", key}, 200, ""},
		} {
			r := call(t, srv, get, "/api/workspaces", "", tc.header...)
			if r.status != tc.status {
				t.Errorf("%s: status %d, want %d: %s", tc.name, r.status, tc.status, r.body)
				continue
			}
			if tc.status == 401 {
				assertErrorBody(t, r, tc.err)
				if r.header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
				}
			}
		}
		before := d.Journal().Last()
		if r := call(t, srv, post, "/api/workspaces", `{"path":"`+t.TempDir()+`"}`); r.status != 401 {
			t.Errorf("unauthenticated write: %d, want 401", r.status)
		}
		if d.Journal().Last() != before {
			t.Error("an unauthenticated write appended events")
		}
		if r := call(t, srv, post, "/api/workspaces", `{"path":"`+t.TempDir()+`"}`, "X-Api-Key", key); r.status != 201 {
			t.Errorf("authenticated write: %d %s", r.status, r.body)
		}
	})
	t.Run("ws needs a key", func(t *testing.T) {
		ctx := testContext(t, 10*time.Second)
		_, resp, err := websocket.Dial(ctx, wsURL(srv), nil)
		if err == nil || resp == nil || resp.StatusCode != 401 {
			t.Fatalf("unauthenticated /ws upgrade: err %v, response %v; want 401", err, resp)
		}
		c := dialWS(t, ctx, srv, http.Header{"X-Api-Key": {key}})
		expectFrame(t, ctx, c, "ready")
	})
	t.Run("sign-in link sets a cookie that authenticates api and ws", func(t *testing.T) {
		client := &http.Client{
			Transport: srv.Client().Transport,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
		// A loopback IP literal first moves to the localhost name, keeping the token.
		req, _ := http.NewRequest(get, srv.URL+"/?token="+key, nil)
		r := send(t, client, req)
		port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
		if want := "http://localhost:" + port + "/?token=" + key; r.status != http.StatusFound || r.header.Get("Location") != want {
			t.Fatalf("GET /?token on 127.0.0.1: %d Location %q, want 302 to %q", r.status, r.header.Get("Location"), want)
		}
		signIn := func(token string) reply {
			req, _ := http.NewRequest(get, srv.URL+"/?token="+token, nil)
			req.Host = "localhost:" + port
			return send(t, client, req)
		}
		if r := signIn("wrong-token-0123456789"); r.status != 401 || len(r.header.Values("Set-Cookie")) != 0 {
			t.Errorf("sign-in with a wrong token: %d, cookies %v; want 401 and none", r.status, r.header.Values("Set-Cookie"))
		}
		r = signIn(key)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
			t.Fatalf("sign-in: %d Location %q, want 303 to /", r.status, r.header.Get("Location"))
		}
		resp := http.Response{Header: r.header}
		var cookie *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "lathe_session" {
				cookie = c
			}
		}
		if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value == "" {
			t.Fatalf("sign-in cookie = %+v, want an HttpOnly SameSite=Strict lathe_session", cookie)
		}
		if strings.Contains(cookie.Value, key) {
			t.Error("the cookie carries the key itself")
		}
		withCookie := cookie.Name + "=" + cookie.Value
		if r := call(t, srv, get, "/api/workspaces", "", "Cookie", withCookie); r.status != 200 {
			t.Errorf("GET /api/workspaces with the cookie: %d %s", r.status, r.body)
		}
		ctx := testContext(t, 10*time.Second)
		c := dialWS(t, ctx, srv, http.Header{"Cookie": {withCookie}})
		expectFrame(t, ctx, c, "ready")
		expectFrame(t, ctx, c, "snapshot")
	})
}

// appendedSince counts the events appended after seq, leaving out the
// effect brackets (record, then act: effect-intended and effect-settled
// around an effect outside the journal), of which it checks only that
// every intent is settled in the same stretch.
func appendedSince(t *testing.T, d *Daemon, seq uint64) int {
	t.Helper()
	n, open := 0, map[string]bool{}
	err := d.Journal().Scan(context.Background(), seq, 0, func(_ uint64, raw []byte) error {
		env, err := journal.DecodeEnvelope(raw)
		if err != nil {
			return err
		}
		if env.Aggregate != events.Effect {
			n++
			return nil
		}
		p, err := events.Decode(env.Type, env.Data)
		switch e := p.(type) {
		case events.EffectIntended:
			open[e.Intent] = true
		case events.EffectSettled:
			delete(open, e.Intent)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(open) > 0 {
		t.Errorf("%d effect intents left unsettled by the request", len(open))
	}
	return n
}
