package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"lathe/journal/events"
	"lathe/runtime/polltest"
)

// filesNamespace is the file route tests' own containerd namespace (see
// containerdtest.Namespace).
const filesNamespace = "lathe-test-files"

// filesReadySession creates a Session in the Workspace at dir and waits until its
// environment is Ready. Cleanup force-deletes it, which tears its container
// down (before the daemon stops: cleanups run last-registered first).
func filesReadySession(tb testing.TB, srv *httptest.Server, dir string) string {
	tb.Helper()
	ws := mustCall(tb, srv, 201, post, "/api/workspaces", `{"path":"`+dir+`"}`)["id"].(string)
	id := mustCall(tb, srv, 201, post, "/api/workspaces/"+ws+"/sessions", `{"name":"files",`+agentMode+`}`)["id"].(string)
	tb.Cleanup(func() {
		if r := call(tb, srv, del, "/api/sessions/"+id+"?force=true", ""); r.status != http.StatusOK {
			tb.Errorf("delete session %s: %d %s", id, r.status, r.body)
		}
	})
	filesAwaitState(tb, srv, id, "ready", time.Minute)
	return id
}

// filesAwaitState polls the Session until its environment reaches want; a
// "failed" environment ends the wait with its evidence.
func filesAwaitState(tb testing.TB, srv *httptest.Server, id, want string, within time.Duration) {
	tb.Helper()
	polltest.Check(tb, func() error {
		r := call(tb, srv, get, "/api/sessions/"+id, "")
		var ss struct {
			Environment map[string]any `json:"environment"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &ss) != nil {
			tb.Fatalf("get session %s: %d %s", id, r.status, r.body)
		}
		switch state := ss.Environment["state"]; {
		case state == want:
			return nil
		case state == "failed" && want != "failed":
			tb.Fatalf("session %s environment failed: %s", id, r.body)
		}
		return fmt.Errorf("session %s environment is %v, want %s: %s", id, ss.Environment["state"], want, r.body)
	}, polltest.Within(within), polltest.Every(10*time.Millisecond))
}

// filesTree writes the Workspace the file routes are tested on and returns
// its (canonical) path.
func filesTree(tb testing.TB) string {
	tb.Helper()
	root := realDir(tb, tb.TempDir())
	writeFile(tb, filepath.Join(root, "README.md"), "hello\n")
	writeFile(tb, filepath.Join(root, ".env"), "SECRET=1\n")
	writeFile(tb, filepath.Join(root, "src", "main.go"), "package main\n")
	writeFile(tb, filepath.Join(root, "src", "nested", "deep.txt"), "deep\n")
	writeFile(tb, filepath.Join(root, "notes.txt"), "v1\n")
	writeFile(tb, filepath.Join(root, "big.txt"), strings.Repeat("a", 600<<10))
	writeFile(tb, filepath.Join(root, "hundred.txt"), strings.Repeat("0123456789abcdef", 100<<10/16))
	mkdir(tb, root, "docs")
	if err := os.WriteFile(filepath.Join(root, "image.png"), []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"), 0o644); err != nil {
		tb.Fatal(err)
	}
	writeFile(tb, filepath.Join(root, "run.sh"), "echo old\n")
	if err := os.Chmod(filepath.Join(root, "run.sh"), 0o751); err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		tb.Fatal(err)
	}
	symlink(tb, "loop", filepath.Join(root, "loop"))
	symlink(tb, "/etc/passwd", filepath.Join(root, "passwd-link"))
	symlink(tb, "/nonexistent/secret", filepath.Join(root, "missing-out"))
	symlink(tb, "../../../../../../etc/passwd", filepath.Join(root, "climb-link"))
	symlink(tb, "/etc", filepath.Join(root, "etc-dir"))
	symlink(tb, "README.md", filepath.Join(root, "readme-link"))
	symlink(tb, "src", filepath.Join(root, "src-link"))
	return root
}

func filesSHA(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func filesFileSHA(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return filesSHA(string(b))
}

// filesQ is a path query parameter.
func filesQ(p string) string { return "?path=" + url.QueryEscape(p) }

// filesTreeNames checks a listing's entry names and types, in order.
func filesTreeNames(want ...string) func(t *testing.T, body []byte) {
	return func(t *testing.T, body []byte) {
		t.Helper()
		var l struct {
			Entries []struct{ Name, Path, Type, Mode string }
		}
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, e := range l.Entries {
			got = append(got, e.Name+":"+e.Type)
		}
		if !slices.Equal(got, want) {
			t.Errorf("entries = %v, want %v", got, want)
		}
	}
}

// filesUnchanged checks that a file still holds what it held before the table.
func filesUnchanged(path, content string) func(t *testing.T, _ []byte) {
	return func(t *testing.T, _ []byte) {
		t.Helper()
		if b, err := os.ReadFile(path); err != nil || string(b) != content {
			t.Errorf("%s = %q, %v; want it unchanged (%q)", path, b, err, content)
		}
	}
}

// filesAbsent checks that a path does not exist.
func filesAbsent(path string) func(t *testing.T, _ []byte) {
	return func(t *testing.T, _ []byte) {
		t.Helper()
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("%s exists", path)
		}
	}
}

// filesNoTemp checks that no write left a temporary file in dir.
func filesNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".lathe-") || strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", filepath.Join(dir, e.Name()))
		}
	}
}

// effectEvents is what a file change appends besides its brackets (record,
// then act: commands/startup/effects.go): its own event. The intent and settlement
// around it are checked apart (appendedSince).
const effectEvents = 1

func TestSessionFileRoutes(t *testing.T) {
	_, d, srv := sandboxDaemon(t, filesNamespace)
	root := filesTree(t)
	id := filesReadySession(t, srv, root)
	many := mkdir(t, root, "src", "nested", "many") // one entry over the listing cap
	for i := range 10_001 {
		if err := os.WriteFile(filepath.Join(many, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A Session that is not Ready: its setup command awaits approval.
	pendingDir := realDir(t, t.TempDir())
	writeFile(t, filepath.Join(pendingDir, "a.txt"), "a")
	wsPending := mustCall(t, srv, 201, post, "/api/workspaces", `{"path":"`+pendingDir+`"}`)["id"].(string)
	pending := mustCall(t, srv, 201, post, "/api/workspaces/"+wsPending+"/sessions", `{"name":"pending",`+agentMode+`,"setup_command":"make deps"}`)
	if state, _ := lookup(pending, "environment.state"); state != "awaiting_approval" {
		t.Fatalf("pending session is %v", state)
	}

	passwd := filesFileSHA(t, "/etc/passwd")
	v := vars{"s": id, "pending": pending["id"].(string), "root": root}
	base := "/api/sessions/{s}"
	tree, file := base+"/tree", base+"/file"
	write := func(content string) string {
		b, _ := json.Marshal(map[string]string{"content": content})
		return string(b)
	}
	oversizedContent := write(strings.Repeat("x", 600<<10))

	runRoutes(t, d, srv, v, []route{
		// GET /tree
		{name: "tree of the root", method: get, path: tree, status: 200, check: func(t *testing.T, body []byte) {
			fields(v, "path", ".", "truncated", "false", "entries.0.path", "docs", "entries.2.name", ".env",
				"entries.2.size", "9", "entries.2.mode", "0644")(t, body)
			filesTreeNames("docs:dir", "src:dir", ".env:file", "big.txt:file", "climb-link:symlink", "etc-dir:symlink", "fifo:other", "hundred.txt:file",
				"image.png:file", "loop:symlink", "missing-out:symlink", "notes.txt:file", "passwd-link:symlink", "readme-link:symlink", "README.md:file",
				"run.sh:file", "src-link:symlink")(t, body)
			if m, _ := lookup(decode(t, body), "entries.2.modified"); m == nil {
				t.Error("entries lack modified")
			}
		}},
		{name: "tree of . is the root", method: get, path: tree + filesQ("."), status: 200, check: fields(v, "path", ".", "entries.0.name", "docs")},
		{name: "tree of a subdirectory", method: get, path: tree + filesQ("src/"), status: 200, check: func(t *testing.T, body []byte) {
			fields(v, "path", "src", "entries.0.path", "src/nested", "entries.1.path", "src/main.go")(t, body)
			filesTreeNames("nested:dir", "main.go:file")(t, body)
		}},
		{name: "a huge directory is cut off", method: get, path: tree + filesQ("src/nested/many"), status: 200, check: func(t *testing.T, body []byte) {
			fields(v, "truncated", "true")(t, body)
			if l, _ := lookup(decode(t, body), "entries"); len(l.([]any)) != 10_000 {
				t.Errorf("%d entries listed, want 10000", len(l.([]any)))
			}
		}},
		{name: "tree of an empty directory", method: get, path: tree + filesQ("docs"), status: 200, check: fields(v, "entries", "[]")},
		{name: "tree through a symlink inside", method: get, path: tree + filesQ("src-link"), status: 200,
			check: fields(v, "path", "src-link", "entries.1.path", "src-link/main.go")},
		{name: "tree of a missing directory", method: get, path: tree + filesQ("nope"), status: 404, err: `"nope" does not exist`},
		{name: "tree of a file", method: get, path: tree + filesQ("README.md"), status: 400, err: `"README.md" is not a directory`},
		{name: "tree under a file", method: get, path: tree + filesQ("README.md/x"), status: 400, err: "not a directory"},
		{name: "tree of ..", method: get, path: tree + filesQ(".."), status: 400, err: `must not contain ".." elements`},
		{name: "tree of ../..", method: get, path: tree + filesQ("../.."), status: 400, err: `".." elements`},
		{name: "tree of a/../../x", method: get, path: tree + filesQ("src/../../x"), status: 400, err: `".." elements`},
		{name: "tree of an absolute path", method: get, path: tree + filesQ("/etc"), status: 400, err: "must be relative to the session root"},
		{name: "tree of the workspace's own absolute path", method: get, path: tree + filesQ(root), status: 400, err: "not absolute"},
		{name: "tree through a symlink to outside", method: get, path: tree + filesQ("etc-dir"), status: 403, err: `path "etc-dir" resolves outside the session root`},
		{name: "tree below a symlink to outside", method: get, path: tree + filesQ("etc-dir/ssl"), status: 403, err: "resolves outside"},
		{name: "tree with NUL", method: get, path: tree + "?path=src%00x", status: 400, err: "NUL"},
		{name: "tree with a malformed query", method: get, path: tree + "?path=%zz", status: 400, err: "malformed query"},

		// GET /file
		{name: "read", method: get, path: file + filesQ("README.md"), status: 200,
			check: fields(v, "path", "README.md", "content", "hello\n", "size", "6", "sha256", filesSHA("hello\n"), "binary", "false")},
		{name: "read a dotfile", method: get, path: file + filesQ(".env"), status: 200, check: fields(v, "content", "SECRET=1\n")},
		{name: "read nested", method: get, path: file + filesQ("./src//nested/deep.txt"), status: 200, check: fields(v, "path", "src/nested/deep.txt", "content", "deep\n")},
		{name: "read through a symlink inside", method: get, path: file + filesQ("readme-link"), status: 200, check: fields(v, "path", "readme-link", "content", "hello\n")},
		{name: "read through a directory symlink inside", method: get, path: file + filesQ("src-link/main.go"), status: 200, check: fields(v, "content", "package main\n")},
		{name: "read a binary file", method: get, path: file + filesQ("image.png"), status: 200,
			check: fields(v, "binary", "true", "content", "<absent>", "size", "18")},
		{name: "read 100 KiB", method: get, path: file + filesQ("hundred.txt"), status: 200, check: fields(v, "size", fmt.Sprint(100<<10))},
		{name: "read too big", method: get, path: file + filesQ("big.txt"), status: 413, err: `"big.txt" is 614400 bytes, over the 512 KiB`},
		{name: "read missing", method: get, path: file + filesQ("nope.txt"), status: 404, err: `"nope.txt" does not exist`},
		{name: "read a directory", method: get, path: file + filesQ("src"), status: 400, err: `"src" is a directory`},
		{name: "read the root", method: get, path: file + filesQ("."), status: 400, err: "is a directory"},
		{name: "read without path", method: get, path: file, status: 400, err: "path query parameter is required"},
		{name: "read with an empty path", method: get, path: file + "?path=", status: 400, err: "path query parameter is required"},
		{name: "read ../", method: get, path: file + filesQ("../x"), status: 400, err: `".." elements`},
		{name: "read an absolute path", method: get, path: file + filesQ("/etc/passwd"), status: 400, err: "must be relative"},
		{name: "read a symlink to outside", method: get, path: file + filesQ("passwd-link"), status: 403, err: `path "passwd-link" resolves outside the session root`},
		{name: "read a symlink to a missing outside file", method: get, path: file + filesQ("missing-out"), status: 403, err: `path "missing-out" resolves outside the session root`},
		{name: "read a climbing symlink", method: get, path: file + filesQ("climb-link"), status: 403, err: "resolves outside"},
		{name: "read through a directory symlink to outside", method: get, path: file + filesQ("etc-dir/passwd"), status: 403, err: "resolves outside"},
		{name: "read a FIFO without blocking", method: get, path: file + filesQ("fifo"), status: 400, err: `"fifo" is not a regular file`},
		{name: "read a symlink loop", method: get, path: file + filesQ("loop"), status: 400, err: `"loop" has too many levels of symbolic links`},
		{name: "read an overlong name", method: get, path: file + filesQ(strings.Repeat("n", 300)), status: 400, err: "too long a path"},
		{name: "read under a file", method: get, path: file + filesQ("README.md/x"), status: 400, err: "not a directory"},

		// POST /file
		{name: "write", method: post, path: file + filesQ("notes.txt"), body: write("v2\n"), status: 200, events: effectEvents, check: func(t *testing.T, body []byte) {
			fields(v, "path", "notes.txt", "size", "3", "sha256", filesSHA("v2\n"))(t, body)
			filesUnchanged(filepath.Join(root, "notes.txt"), "v2\n")(t, body)
			filesNoTemp(t, root)
		}},
		{name: "write keeps the mode", method: post, path: file + filesQ("run.sh"), body: write("echo new\n"), status: 200, events: effectEvents, check: func(t *testing.T, body []byte) {
			filesUnchanged(filepath.Join(root, "run.sh"), "echo new\n")(t, body)
			if fi, err := os.Stat(filepath.Join(root, "run.sh")); err != nil || fi.Mode().Perm() != 0o751 {
				t.Errorf("run.sh mode = %v, %v; want 0751", fi.Mode(), err)
			}
		}},
		{name: "the write is read back", method: get, path: file + filesQ("notes.txt"), status: 200, check: fields(v, "content", "v2\n", "sha256", filesSHA("v2\n"))},
		{name: "write with the current sha256", method: post, path: file + filesQ("notes.txt"), body: `{"content":"v3\n","expected_sha256":"` + strings.ToUpper(filesSHA("v2\n")) + `"}`, status: 200, events: effectEvents,
			check: filesUnchanged(filepath.Join(root, "notes.txt"), "v3\n")},
		{name: "write with a stale sha256", method: post, path: file + filesQ("notes.txt"), body: `{"content":"v4\n","expected_sha256":"` + filesSHA("v2\n") + `"}`, status: 409,
			err: `"notes.txt" changed since it was read`, check: filesUnchanged(filepath.Join(root, "notes.txt"), "v3\n")},
		{name: "write with a malformed sha256", method: post, path: file + filesQ("notes.txt"), body: `{"content":"x","expected_sha256":"abc"}`, status: 400,
			err: "expected_sha256 must be 64 hexadecimal digits", check: filesUnchanged(filepath.Join(root, "notes.txt"), "v3\n")},
		{name: "write through a symlink inside", method: post, path: file + filesQ("readme-link"), body: write("hi\n"), status: 200, events: effectEvents, check: func(t *testing.T, body []byte) {
			fields(v, "path", "readme-link")(t, body)
			filesUnchanged(filepath.Join(root, "README.md"), "hi\n")(t, body)
			if fi, err := os.Lstat(filepath.Join(root, "readme-link")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				t.Errorf("readme-link is no longer a symlink: %v", err)
			}
			filesNoTemp(t, root)
		}},
		{name: "write nested through a directory symlink", method: post, path: file + filesQ("src-link/nested/deep.txt"), body: write("deeper\n"), status: 200, events: effectEvents, check: func(t *testing.T, body []byte) {
			filesUnchanged(filepath.Join(root, "src", "nested", "deep.txt"), "deeper\n")(t, body)
			filesNoTemp(t, filepath.Join(root, "src", "nested"))
		}},
		{name: "write an empty file", method: post, path: file + filesQ(".env"), body: write(""), status: 200, events: effectEvents, check: filesUnchanged(filepath.Join(root, ".env"), "")},
		{name: "write a missing file", method: post, path: file + filesQ("new.txt"), body: write("x"), status: 404, err: `"new.txt" does not exist`,
			check: filesAbsent(filepath.Join(root, "new.txt"))},
		{name: "write into a missing parent", method: post, path: file + filesQ("newdir/new.txt"), body: write("x"), status: 404, err: "does not exist",
			check: filesAbsent(filepath.Join(root, "newdir"))},
		{name: "write a directory", method: post, path: file + filesQ("src"), body: write("x"), status: 400, err: `"src" is a directory`},
		{name: "write a symlink loop", method: post, path: file + filesQ("loop"), body: write("x"), status: 400, err: "too many levels of symbolic links"},
		{name: "write a FIFO", method: post, path: file + filesQ("fifo"), body: write("x"), status: 400, err: `"fifo" is not a regular file`},
		{name: "tree of a FIFO", method: get, path: tree + filesQ("fifo"), status: 400, err: `"fifo" is not a directory`},
		{name: "write a symlink to outside", method: post, path: file + filesQ("passwd-link"), body: write("root::0:0::/:/bin/sh\n"), status: 403,
			err: `path "passwd-link" resolves outside the session root`, check: func(t *testing.T, _ []byte) {
				if filesFileSHA(t, "/etc/passwd") != passwd {
					t.Error("/etc/passwd changed")
				}
				filesNoTemp(t, root)
			}},
		{name: "write a symlink to a missing outside file", method: post, path: file + filesQ("missing-out"), body: write("x"), status: 403,
			err: `path "missing-out" resolves outside the session root`, check: filesAbsent("/nonexistent")},
		{name: "write a climbing symlink", method: post, path: file + filesQ("climb-link"), body: write("x"), status: 403, err: "resolves outside"},
		{name: "write through a directory symlink to outside", method: post, path: file + filesQ("etc-dir/passwd"), body: write("x"), status: 403, err: "resolves outside",
			check: func(t *testing.T, _ []byte) {
				if filesFileSHA(t, "/etc/passwd") != passwd {
					t.Error("/etc/passwd changed")
				}
			}},
		{name: "write ..", method: post, path: file + filesQ("../notes.txt"), body: write("x"), status: 400, err: `".." elements`},
		{name: "write an absolute path", method: post, path: file + filesQ(root+"/notes.txt"), body: write("x"), status: 400, err: "must be relative",
			check: filesUnchanged(filepath.Join(root, "notes.txt"), "v3\n")},
		{name: "write without path", method: post, path: file, body: write("x"), status: 400, err: "path query parameter is required"},
		{name: "write oversized content", method: post, path: file + filesQ("notes.txt"), body: oversizedContent, status: 413, err: "content is 614400 bytes, over the 512 KiB",
			check: filesUnchanged(filepath.Join(root, "notes.txt"), "v3\n")},
		{name: "write an oversized body", method: post, path: file + filesQ("notes.txt"), body: `{"content":"` + strings.Repeat("x", 1<<20) + `"}`, status: 413, err: "exceeds",
			check: filesUnchanged(filepath.Join(root, "notes.txt"), "v3\n")},
		{name: "write an oversized chunked body", method: post, path: file + filesQ("notes.txt"), body: `{"content":"` + strings.Repeat("x", 1<<20) + `"}`, chunked: true, status: 413, err: "too large"},
		{name: "write without content", method: post, path: file + filesQ("notes.txt"), body: `{}`, status: 400, err: "content is required"},
		{name: "write content of wrong type", method: post, path: file + filesQ("notes.txt"), body: `{"content":1}`, status: 400, err: `field "content"`},
		{name: "write with an unknown field", method: post, path: file + filesQ("notes.txt"), body: `{"content":"x","mode":"0777"}`, status: 400, err: "unknown field"},
		{name: "write with an empty body", method: post, path: file + filesQ("notes.txt"), status: 400, err: "empty"},
		{name: "write with null", method: post, path: file + filesQ("notes.txt"), body: "null", status: 400, err: "request body is null"},
		{name: "nothing was left behind", method: get, path: tree, status: 200, check: func(t *testing.T, _ []byte) { filesNoTemp(t, root) }},

		// Sessions that are not Ready, or missing.
		{name: "tree of a session that is not ready", method: get, path: "/api/sessions/{pending}/tree", status: 409, err: "awaiting_approval, not ready"},
		{name: "read in a session that is not ready", method: get, path: "/api/sessions/{pending}/file" + filesQ("a.txt"), status: 409, err: "not ready"},
		{name: "write in a session that is not ready", method: post, path: "/api/sessions/{pending}/file" + filesQ("a.txt"), body: write("b"), status: 409, err: "not ready",
			check: filesUnchanged(filepath.Join(pendingDir, "a.txt"), "a")},
		{name: "not ready comes before a bad path", method: get, path: "/api/sessions/{pending}/file" + filesQ("../x"), status: 409, err: "not ready"},
		{name: "tree of an unknown session", method: get, path: "/api/sessions/" + unknownID + "/tree", status: 404, err: "session"},
		{name: "read in an unknown session", method: get, path: "/api/sessions/" + unknownID + "/file" + filesQ("a.txt"), status: 404, err: "session"},
		{name: "write in an unknown session", method: post, path: "/api/sessions/" + unknownID + "/file" + filesQ("a.txt"), body: write("b"), status: 404, err: "session"},
		// Tree changes: each journaled, each confined like a write.
		{name: "create a folder", method: post, path: base + "/files/create", body: `{"path":"ops","kind":"dir"}`, status: 201, events: effectEvents,
			check: fields(v, "path", "ops", "type", "dir")},
		{name: "create a file in it", method: post, path: base + "/files/create", body: `{"path":"ops/a.txt","kind":"file"}`, status: 201, events: effectEvents,
			check: both(fields(v, "path", "ops/a.txt", "type", "file", "size", "0"), filesUnchanged(filepath.Join(root, "ops", "a.txt"), ""))},
		{name: "create over it", method: post, path: base + "/files/create", body: `{"path":"ops/a.txt","kind":"dir"}`, status: 409, err: `"ops/a.txt" already exists`},
		{name: "create of an unknown kind", method: post, path: base + "/files/create", body: `{"path":"ops/x","kind":"pipe"}`, status: 400, err: `kind must be "file" or "dir"`},
		{name: "create in .git", method: post, path: base + "/files/create", body: `{"path":".git/hooks/pre-commit","kind":"file"}`, status: 403, err: "inside .git"},
		{name: "create through a link to outside", method: post, path: base + "/files/create", body: `{"path":"etc-dir/lathe-x","kind":"file"}`, status: 403, err: "resolves outside",
			check: filesAbsent("/etc/lathe-x")},
		{name: "create with ..", method: post, path: base + "/files/create", body: `{"path":"../x","kind":"file"}`, status: 400, err: `".." elements`},
		{name: "rename the file", method: post, path: base + "/files/rename", body: `{"from":"ops/a.txt","to":"ops/b.txt"}`, status: 200, events: effectEvents,
			check: both(fields(v, "from", "ops/a.txt", "to", "ops/b.txt", "kind", "file", "entry.path", "ops/b.txt"), filesAbsent(filepath.Join(root, "ops", "a.txt")))},
		{name: "rename over an entry", method: post, path: base + "/files/rename", body: `{"from":"ops/b.txt","to":"README.md"}`, status: 409, err: "already exists",
			check: filesUnchanged(filepath.Join(root, "ops", "b.txt"), "")},
		{name: "rename into .git", method: post, path: base + "/files/rename", body: `{"from":"ops/b.txt","to":".git/b"}`, status: 403, err: "inside .git"},
		{name: "delete a full folder", method: post, path: base + "/files/delete", body: `{"path":"ops"}`, status: 409, err: "not empty"},
		{name: "delete it recursively", method: post, path: base + "/files/delete", body: `{"path":"ops","recursive":true}`, status: 200, events: effectEvents,
			check: both(fields(v, "path", "ops", "kind", "dir", "recursive", "true"), filesAbsent(filepath.Join(root, "ops")))},
		{name: "delete a link to outside deletes the link", method: post, path: base + "/files/delete", body: `{"path":"missing-out"}`, status: 200, events: effectEvents,
			check: both(fields(v, "kind", "symlink"), filesAbsent(filepath.Join(root, "missing-out")))},
		{name: "delete the root", method: post, path: base + "/files/delete", body: `{"path":".","recursive":true}`, status: 400, err: "not the root"},
		{name: "create in a session that is not ready", method: post, path: "/api/sessions/{pending}/files/create", body: `{"path":"x","kind":"file"}`, status: 409, err: "not ready"},

		{name: "wrong method on file", method: put, path: file + filesQ("notes.txt"), body: write("x"), status: 405, err: "not allowed"},
		{name: "wrong method on tree", method: post, path: tree, body: `{}`, status: 405, err: "not allowed"},
	})

	// Every write that happened, and only those, is in the Session's
	// journal: path, size, hash and the hash the client expected.
	var got []string
	err := d.Journal().ScanAggregate(context.Background(), id, 0, 0, func(_ uint64, raw []byte) error {
		var env struct {
			Type string             `json:"type"`
			Data events.FileWritten `json:"data"`
		}
		if err := json.Unmarshal(raw, &env); err != nil || env.Type != (events.FileWritten{}).EventType() {
			return err
		}
		got = append(got, fmt.Sprintf("%s %d %s %s", env.Data.Path, env.Data.Size, env.Data.SHA256, env.Data.ExpectedSHA256))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"notes.txt 3 " + filesSHA("v2\n") + " ",
		"run.sh 9 " + filesSHA("echo new\n") + " ",
		"notes.txt 3 " + filesSHA("v3\n") + " " + filesSHA("v2\n"),
		"readme-link 3 " + filesSHA("hi\n") + " ",
		"src-link/nested/deep.txt 7 " + filesSHA("deeper\n") + " ",
		".env 0 " + filesSHA("") + " ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("journaled file writes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A write, like a tree change, stays out of git's data, however the
	// path is spelled or wherever a link leads (issue 32, finding 9).
	gitConfig := filepath.Join(root, ".git", "config")
	writeFile(t, gitConfig, "[core]\n")
	symlink(t, ".git/config", filepath.Join(root, "git-config"))
	symlink(t, "src/../.git/config", filepath.Join(root, "git-climb"))
	intoGit := func(name, path string) route {
		return route{name: name, method: post, path: file + filesQ(path), body: write("[core]\n\tfsmonitor = ./x\n"), status: 403, err: "git",
			check: filesUnchanged(gitConfig, "[core]\n")}
	}
	runRoutes(t, d, srv, v, []route{
		intoGit("write .git/config", ".git/config"),
		intoGit("write ./.git/config", "./.git/config"),
		intoGit("write .git//config", ".git//config"),
		intoGit("write .GIT/config", ".GIT/config"),
		intoGit("write a link to .git/config", "git-config"),
		intoGit("write a link that climbs into .git", "git-climb"),
	})
}

// BenchmarkReadFile100K reads a 100 KiB file through the whole HTTP stack
// from a Ready Session and reports the median latency.
func BenchmarkReadFile100K(b *testing.B) {
	_, _, srv := sandboxDaemon(b, filesNamespace)
	id := filesReadySession(b, srv, filesTree(b))
	benchReadFile(b, srv, id, "hundred.txt")
}

// benchReadFile is BenchmarkReadFile100K on the file rel of the Ready
// Session id.
func benchReadFile(b *testing.B, srv *httptest.Server, id, rel string) {
	client := srv.Client()
	u := srv.URL + "/api/sessions/" + id + "/file" + filesQ(rel)
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		r := send(b, client, req)
		took = append(took, time.Since(start))
		if r.status != http.StatusOK || len(r.body) < 100<<10 {
			b.Fatalf("read: %d, %d bytes", r.status, len(r.body))
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*95/100].Microseconds())/1000, "p95-ms")
}
