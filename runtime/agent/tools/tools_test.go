package tools_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lathe/runtime/agent/tools"
	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/containerd/containerdtest"
	"lathe/runtime/sandbox/sandboxtest"
)

// env is one real sandbox whose working dir is a host temp dir.
type env struct {
	t    *testing.T
	sb   sandbox.Sandbox
	set  *tools.Set
	root string
}

func newEnv(t *testing.T) *env {
	d := containerdtest.Containerd(t)
	spec := sandboxtest.NewSpec(t)
	sb := sandboxtest.Prepare(t, d, spec)
	return &env{t: t, sb: sb, set: tools.New(sb, spec.WorkingDir), root: spec.WorkingDir}
}

func (e *env) call(name string, args any) tools.Result {
	e.t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			e.t.Fatal(err)
		}
		raw = string(b)
	}
	return e.set.Call(sandboxtest.Context(e.t, time.Minute), name, json.RawMessage(raw))
}

func (e *env) put(rel, content string) {
	e.t.Helper()
	p := filepath.Join(e.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) get(rel string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.root, rel))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// tc is one call and what its result must show.
type tc struct {
	name    string
	tool    string
	args    any
	isError bool
	want    []string // substrings of the output
	not     []string // substrings the output must not have
}

func (e *env) run(t *testing.T, tests []tc) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.set.Call(sandboxtest.Context(t, time.Minute), tt.tool, json.RawMessage(mustJSON(t, tt.args)))
			if r.IsError != tt.isError {
				t.Errorf("IsError = %v, want %v; output:\n%s", r.IsError, tt.isError, r.Output)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.Output, w) {
					t.Errorf("output lacks %q:\n%s", w, r.Output)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(r.Output, w) {
					t.Errorf("output has %q:\n%s", w, r.Output)
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type m = map[string]any

func TestTools(t *testing.T) {
	e := newEnv(t)
	e.put("src/main.go", "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n")
	e.put("src/util/util.go", "package util\n// a.b matches literally\n")
	e.put("README.md", "# title\nfoo foo\n")
	e.put(".git/config", "[core]\n")
	e.put("bin.dat", "ab\x00cd")
	if err := os.Symlink("/etc", filepath.Join(e.root, "etc_link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src", filepath.Join(e.root, "src_link")); err != nil {
		t.Fatal(err)
	}

	t.Run("Tools", func(t *testing.T) {
		names := []string{}
		for _, tl := range e.set.Tools() {
			var schema map[string]any
			if err := json.Unmarshal(tl.Schema, &schema); err != nil || schema["type"] != "object" || tl.Description == "" {
				t.Errorf("tool %s: schema %s, err %v", tl.Name, tl.Schema, err)
			}
			names = append(names, tl.Name)
		}
		if got := strings.Join(names, ","); got != "list_files,read_file,write_file,edit_file,search,shell" {
			t.Errorf("names %s", got)
		}
	})

	t.Run("BadCalls", func(t *testing.T) {
		e.run(t, []tc{
			{name: "unknown tool", tool: "rm_rf", args: m{}, isError: true, want: []string{`unknown tool "rm_rf"`, "read_file"}},
			{name: "malformed JSON", tool: "read_file", args: `{"path":`, isError: true, want: []string{"malformed arguments"}},
			{name: "not an object", tool: "read_file", args: `[1]`, isError: true, want: []string{"must be a JSON object"}},
			{name: "missing field", tool: "read_file", args: m{}, isError: true, want: []string{`missing required field "path"`}},
			{name: "wrong type", tool: "read_file", args: m{"path": 3}, isError: true, want: []string{`field "path" must be a string`}},
			{name: "wrong int type", tool: "list_files", args: m{"depth": "2"}, isError: true, want: []string{`field "depth" must be an integer`}},
			{name: "unknown field", tool: "list_files", args: m{"dir": "."}, isError: true, want: []string{`unknown field "dir"`}},
			{name: "trailing data", tool: "list_files", args: `{} {}`, isError: true, want: []string{"trailing data"}},
			{name: "write missing content", tool: "write_file", args: m{"path": "a"}, isError: true, want: []string{`"content"`}},
			{name: "edit missing new", tool: "edit_file", args: m{"path": "a", "old_string": "x"}, isError: true, want: []string{`"new_string"`}},
			{name: "search missing pattern", tool: "search", args: m{}, isError: true, want: []string{`"pattern"`}},
			{name: "shell missing command", tool: "shell", args: m{}, isError: true, want: []string{`"command"`}},
		})
	})

	t.Run("Escapes", func(t *testing.T) {
		var tests []tc
		for _, p := range []string{"../x", "/etc/passwd", "src/../../x", "..", "etc_link/passwd", "etc_link"} {
			tests = append(tests,
				tc{name: "read " + p, tool: "read_file", args: m{"path": p}, isError: true, want: []string{"root"}, not: []string{"root:x:0"}},
				tc{name: "write " + p, tool: "write_file", args: m{"path": p, "content": "pwned"}, isError: true, want: []string{"root"}},
				tc{name: "edit " + p, tool: "edit_file", args: m{"path": p, "old_string": "root", "new_string": "x"}, isError: true, want: []string{"root"}},
				tc{name: "list " + p, tool: "list_files", args: m{"path": p}, isError: true, want: []string{"root"}},
				tc{name: "search " + p, tool: "search", args: m{"pattern": "root", "path": p}, isError: true, want: []string{"root"}, not: []string{"root:x:0"}},
			)
		}
		tests = append(tests, tc{name: "write through dangling symlink out", tool: "write_file", args: m{"path": "etc_link/lathe-pwned", "content": "x"}, isError: true, want: []string{"outside the session root"}})
		e.run(t, tests)
		if _, err := os.Stat("/etc/lathe-pwned"); err == nil {
			t.Error("a write escaped to the host's /etc")
		}
	})

	t.Run("ListFiles", func(t *testing.T) {
		e.run(t, []tc{
			{name: "root", tool: "list_files", args: m{}, want: []string{"README.md\n", "src/\n", "src/main.go\n", "src/util/\n", ".git/\n", "etc_link@\n", "src_link@\n"}, not: []string{"util.go", ".git/config"}},
			{name: "depth 3", tool: "list_files", args: m{"depth": 3}, want: []string{"src/util/util.go\n"}},
			{name: "subdir", tool: "list_files", args: m{"path": "src", "depth": 1}, want: []string{"main.go\n", "util/\n"}},
			{name: "through inner symlink", tool: "list_files", args: m{"path": "src_link"}, want: []string{"main.go\n"}},
			{name: "missing", tool: "list_files", args: m{"path": "nope"}, isError: true, want: []string{"no such directory: nope"}},
			{name: "a file", tool: "list_files", args: m{"path": "README.md"}, isError: true, want: []string{"not a directory"}},
			{name: "bad depth", tool: "list_files", args: m{"depth": 0}, isError: true, want: []string{"depth must be between 1 and 10"}},
		})
		for i := range tools.MaxListEntries + 5 {
			e.put(fmt.Sprintf("many/f%04d", i), "")
		}
		e.run(t, []tc{{name: "capped", tool: "list_files", args: m{"path": "many"}, want: []string{"f0999\n", "[… 5 more entries not shown"}, not: []string{"f1000"}}})
	})

	t.Run("ReadFile", func(t *testing.T) {
		var long strings.Builder
		for i := 1; i <= 30000; i++ {
			fmt.Fprintf(&long, "line %d %s\n", i, strings.Repeat("x", 20))
		}
		e.put("long.txt", long.String())
		e.run(t, []tc{
			{name: "numbered", tool: "read_file", args: m{"path": "src/main.go"}, want: []string{"     1\tpackage main\n", "     4\t\tprintln(\"hi\")\n"}, not: []string{"stopped"}},
			{name: "window", tool: "read_file", args: m{"path": "README.md", "offset_line": 2, "limit_lines": 1}, want: []string{"     2\tfoo foo\n"}, not: []string{"title"}},
			{name: "limit notice", tool: "read_file", args: m{"path": "src/main.go", "limit_lines": 2}, want: []string{"stopped at limit_lines; the file has 5 lines; continue with offset_line=3"}},
			{name: "byte cap", tool: "read_file", args: m{"path": "long.txt", "limit_lines": 100000}, want: []string{"stopped at the 256 KiB limit; the file has 30000 lines"}, not: []string{"line 30000 "}},
			{name: "past end", tool: "read_file", args: m{"path": "README.md", "offset_line": 9}, isError: true, want: []string{"past the end", "2 lines"}},
			{name: "missing", tool: "read_file", args: m{"path": "nope.txt"}, isError: true, want: []string{"no such file: nope.txt"}},
			{name: "directory", tool: "read_file", args: m{"path": "src"}, isError: true, want: []string{"is a directory"}},
			{name: "binary", tool: "read_file", args: m{"path": "bin.dat"}, isError: true, want: []string{"binary file (5 bytes)"}},
			{name: "bad offset", tool: "read_file", args: m{"path": "README.md", "offset_line": 0}, isError: true, want: []string{"offset_line must be 1 or more"}},
		})
		r := e.call("read_file", m{"path": "long.txt", "limit_lines": 100000})
		if len(r.Output) > tools.MaxReadBytes+200 {
			t.Errorf("read_file returned %d bytes", len(r.Output))
		}
	})

	t.Run("WriteRead", func(t *testing.T) {
		tricky := "quotes ' \" and $(touch pwned) and `touch pwned2` $HOME\n\ttab\r\nunicode: héllo 世界 🚀\\n\nno trailing newline"
		r := e.call("write_file", m{"path": "deep/new/dir/tricky.txt", "content": tricky})
		if r.IsError || !strings.Contains(r.Output, "created deep/new/dir/tricky.txt") {
			t.Fatalf("write: %+v", r)
		}
		if got := e.get("deep/new/dir/tricky.txt"); got != tricky {
			t.Errorf("host file %q, want %q", got, tricky)
		}
		for _, p := range []string{"pwned", "pwned2", "deep/new/dir/pwned"} {
			if _, err := os.Stat(filepath.Join(e.root, p)); err == nil {
				t.Errorf("content was executed: %s exists", p)
			}
		}
		r = e.call("read_file", m{"path": "deep/new/dir/tricky.txt"})
		if r.IsError || !strings.Contains(r.Output, "     3\tunicode: héllo 世界 🚀\\n\n") || !strings.Contains(r.Output, "     4\tno trailing newline\n") || !strings.Contains(r.Output, "$(touch pwned) and `touch pwned2`") {
			t.Errorf("read back: %+v", r)
		}
		e.put("mode.sh", "old")
		os.Chmod(filepath.Join(e.root, "mode.sh"), 0o755)
		r = e.call("write_file", m{"path": "mode.sh", "content": ""})
		if r.IsError || !strings.Contains(r.Output, "overwrote mode.sh (0 bytes)") || e.get("mode.sh") != "" {
			t.Errorf("overwrite: %+v", r)
		}
		if fi, err := os.Stat(filepath.Join(e.root, "mode.sh")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("mode after overwrite: %v %v", fi.Mode(), err)
		}
		r = e.call("write_file", m{"path": "src_link/via_link.go", "content": "x"})
		if r.IsError || e.get("src/via_link.go") != "x" {
			t.Errorf("write through an inner symlink: %+v", r)
		}
		e.run(t, []tc{
			{name: "onto a directory", tool: "write_file", args: m{"path": "src", "content": "x"}, isError: true, want: []string{"src is a directory"}},
			{name: "root", tool: "write_file", args: m{"path": ".", "content": "x"}, isError: true, want: []string{"workspace root"}},
			{name: "under a file", tool: "write_file", args: m{"path": "README.md/x", "content": "x"}, isError: true, want: []string{"cannot create directory README.md"}},
		})
		left, _ := filepath.Glob(filepath.Join(e.root, "*", ".lathe-*"))
		left2, _ := filepath.Glob(filepath.Join(e.root, ".lathe-*"))
		if len(left)+len(left2) > 0 {
			t.Errorf("temporary files left: %v %v", left, left2)
		}
	})

	t.Run("EditFile", func(t *testing.T) {
		e.put("edit.txt", "alpha $(x) 'q'\nbeta\nbeta\n")
		e.run(t, []tc{
			{name: "zero matches", tool: "edit_file", args: m{"path": "edit.txt", "old_string": "gamma", "new_string": "x"}, isError: true, want: []string{"0 matches"}},
			{name: "two matches", tool: "edit_file", args: m{"path": "edit.txt", "old_string": "beta", "new_string": "x"}, isError: true, want: []string{"matches 2 times"}},
			{name: "one match", tool: "edit_file", args: m{"path": "edit.txt", "old_string": "alpha $(x) 'q'", "new_string": "ALPHA \"`y`\" 世界"}, want: []string{"replaced 1 occurrence in edit.txt"}},
			{name: "replace all", tool: "edit_file", args: m{"path": "edit.txt", "old_string": "beta\n", "new_string": "", "replace_all": true}, want: []string{"replaced 2 occurrences"}},
			{name: "empty old", tool: "edit_file", args: m{"path": "edit.txt", "old_string": "", "new_string": "x"}, isError: true, want: []string{"old_string is empty"}},
			{name: "identical", tool: "edit_file", args: m{"path": "edit.txt", "old_string": "a", "new_string": "a"}, isError: true, want: []string{"identical"}},
			{name: "missing file", tool: "edit_file", args: m{"path": "nope", "old_string": "a", "new_string": "b"}, isError: true, want: []string{"no such file: nope"}},
			{name: "directory", tool: "edit_file", args: m{"path": "src", "old_string": "a", "new_string": "b"}, isError: true, want: []string{"is a directory"}},
			{name: "bad replace_all", tool: "edit_file", args: m{"path": "edit.txt", "old_string": "a", "new_string": "b", "replace_all": "yes"}, isError: true, want: []string{`"replace_all" must be a boolean`}},
		})
		if got, want := e.get("edit.txt"), "ALPHA \"`y`\" 世界\n"; got != want {
			t.Errorf("host file %q, want %q", got, want)
		}
	})

	t.Run("Search", func(t *testing.T) {
		e.run(t, []tc{
			{name: "regex", tool: "search", args: m{"pattern": "a.b"}, want: []string{"src/util/util.go:2:// a.b matches literally"}, not: []string{".git"}},
			{name: "regex matches more", tool: "search", args: m{"pattern": "fo+ fo+"}, want: []string{"README.md:2:foo foo"}},
			{name: "literal", tool: "search", args: m{"pattern": "fo+", "literal": true}, want: []string{"no matches"}},
			{name: "literal hit", tool: "search", args: m{"pattern": "(\"hi\")", "literal": true}, want: []string{"src/main.go:4:"}},
			{name: "glob", tool: "search", args: m{"pattern": "package", "glob": "util*"}, want: []string{"src/util/util.go:1:"}, not: []string{"main.go"}},
			{name: "path", tool: "search", args: m{"pattern": "package", "path": "src/util"}, want: []string{"src/util/util.go:1:"}, not: []string{"main.go"}},
			{name: "option-like pattern", tool: "search", args: m{"pattern": "--help"}, want: []string{"no matches"}},
			{name: "bad regex", tool: "search", args: m{"pattern": "a(", "path": "src"}, isError: true, want: []string{"search:"}},
			{name: "missing path", tool: "search", args: m{"pattern": "x", "path": "nope"}, isError: true, want: []string{"no such file or directory: nope"}},
		})
		var many strings.Builder
		for i := range 250 {
			fmt.Fprintf(&many, "needle %d\n", i)
		}
		e.put("needles.txt", many.String())
		e.run(t, []tc{{name: "capped", tool: "search", args: m{"pattern": "needle", "path": "needles.txt"}, want: []string{"needles.txt:200:needle 199\n", "[… 50 more matches not shown"}, not: []string{"needle 200"}}})
	})

	t.Run("Shell", func(t *testing.T) {
		e.run(t, []tc{
			{name: "ok", tool: "shell", args: m{"command": "echo out; echo err >&2; pwd"}, want: []string{"out\n", "err\n", e.root + "\n", "[exit code 0]"}},
			{name: "exit code", tool: "shell", args: m{"command": "echo bye; exit 7"}, isError: true, want: []string{"bye\n[exit code 7]"}},
			{name: "empty", tool: "shell", args: m{"command": "  "}, isError: true, want: []string{"command is empty"}},
			{name: "bad timeout", tool: "shell", args: m{"command": "true", "timeout_seconds": 601}, isError: true, want: []string{"between 1 and 600"}},
			{name: "truncated", tool: "shell", args: m{"command": "echo START; head -c 200000 /dev/zero | tr '\\0' x; echo; echo END"}, want: []string{"START\n", "bytes truncated …]", "END\n[exit code 0]"}},
		})
		r := e.call("shell", m{"command": "touch made-in-sandbox"})
		if _, err := os.Stat(filepath.Join(e.root, "made-in-sandbox")); r.IsError || err != nil {
			t.Errorf("shell file on host: %+v %v", r, err)
		}
		r = e.call("shell", m{"command": "head -c 200000 /dev/zero | tr '\\0' x"})
		if len(r.Output) > tools.MaxShellOutput+200 {
			t.Errorf("shell output %d bytes", len(r.Output))
		}
	})

	t.Run("ShellTimeout", func(t *testing.T) {
		start := time.Now()
		// The background child holds stdout open: only a tree kill ends it.
		r := e.call("shell", m{"command": "echo started; (sleep 30; echo late) & sleep 30", "timeout_seconds": 1})
		if !r.IsError || !strings.Contains(r.Output, "started\n") || !strings.Contains(r.Output, "timed out after 1s") || strings.Contains(r.Output, "late") {
			t.Errorf("timeout: %+v", r)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("timeout took %v", d)
		}
		for _, p := range processes(t, e.sb) {
			if strings.HasPrefix(p, "sleep 30") {
				t.Errorf("left after the kill: %s", p)
			}
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := contextWithCancel(t)
		cancel()
		r := e.set.Call(ctx, "shell", json.RawMessage(`{"command":"true"}`))
		if !r.IsError || !strings.Contains(r.Output, "context canceled") {
			t.Errorf("cancelled call: %+v", r)
		}
	})
}
