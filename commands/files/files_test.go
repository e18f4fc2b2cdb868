package files

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"lathe/commands/core"
	"lathe/commands/environments"
)

// TestCleanPath: the rule itself is runtime/confine's (tested and fuzzed
// there); commands adds only the error class.
func TestCleanPath(t *testing.T) {
	if got, err := core.CleanPath("./a//b/"); err != nil || got != "a/b" {
		t.Errorf("CleanPath(%q) = %q, %v; want \"a/b\"", "./a//b/", got, err)
	}
	for _, p := range []string{"/etc", "a/../b", "a\x00", strings.Repeat("a", core.MaxPathBytes+1)} {
		if got, err := core.CleanPath(p); got != "" || !errors.Is(err, core.ErrInvalid) {
			t.Errorf("CleanPath(%.20q) = %q, %v; want ErrInvalid", p, got, err)
		}
	}
}

// rootTree builds, under a fresh directory:
//
//	outside/secret          a file outside the root
//	root/a.txt              "alpha", mode 0640
//	root/sub/b.txt
//	root/deep/x/y/z.txt
//	root/in-link -> a.txt
//	root/in-chain -> in-link
//	root/sub-link -> sub
//	root/up-link -> sub/../a.txt
//	root/dirlink/..-link -> ../a.txt   (dirlink -> deep/x, so: deep/a.txt)
//	root/out-rel -> ../outside/secret
//	root/out-abs -> <outside>/secret
//	root/out-missing -> ../outside/nope
//	root/out-dir -> ../outside
//	root/abs-in -> <root>/a.txt        (absolute, though inside)
//	root/dangling -> nope
//	root/loop -> loop
func rootTree(t *testing.T) (rootDir, outside string) {
	t.Helper()
	base := t.TempDir()
	rootDir, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{outside, filepath.Join(rootDir, "sub"), filepath.Join(rootDir, "deep", "x", "y")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{
		filepath.Join(outside, "secret"):                  "secret",
		filepath.Join(rootDir, "a.txt"):                   "alpha",
		filepath.Join(rootDir, "sub", "b.txt"):            "beta",
		filepath.Join(rootDir, "deep", "x", "y", "z.txt"): "zed",
		filepath.Join(rootDir, "deep", "a.txt"):           "deep alpha",
	} {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(rootDir, "a.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"in-link":     "a.txt",
		"in-chain":    "in-link",
		"sub-link":    "sub",
		"up-link":     "sub/../a.txt",
		"dirlink":     "deep/x",
		"out-rel":     "../outside/secret",
		"out-abs":     filepath.Join(outside, "secret"),
		"out-missing": "../outside/nope",
		"out-dir":     "../outside",
		"abs-in":      filepath.Join(rootDir, "a.txt"),
		"dangling":    "nope",
		"loop":        "loop",
	} {
		if err := os.Symlink(target, filepath.Join(rootDir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../a.txt", filepath.Join(rootDir, "deep", "x", "up")); err != nil {
		t.Fatal(err)
	}
	return rootDir, outside
}

// TestRootConfinement pins the os.Root behaviour the file routes rely on.
func TestRootConfinement(t *testing.T) {
	rootDir, _ := rootTree(t)
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, tc := range []struct {
		path string
		want string // the content, or "escape", "notexist", "loop", "notdir"
	}{
		{"a.txt", "alpha"},
		{"sub/b.txt", "beta"},
		{"in-link", "alpha"},
		{"in-chain", "alpha"},
		{"sub-link/b.txt", "beta"},
		{"up-link", "alpha"},
		{"dirlink/y/z.txt", "zed"},
		{"dirlink/up", "deep alpha"}, // ".." climbs from deep/x, not from the root
		{"out-rel", "escape"},
		{"out-abs", "escape"},
		{"out-missing", "escape"}, // same answer whether the target exists or not
		{"out-dir/secret", "escape"},
		{"abs-in", "escape"}, // absolute targets are refused even inside
		{"../outside/secret", "escape"},
		{"/etc/passwd", "escape"},
		{"dangling", "notexist"},
		{"missing", "notexist"},
		{"loop", "loop"},
		{"a.txt/x", "notdir"},
	} {
		data, err := root.ReadFile(tc.path)
		var got string
		switch {
		case err == nil:
			got = string(data)
		case environments.IsEscape(err):
			got = "escape"
		case errors.Is(err, fs.ErrNotExist):
			got = "notexist"
		case errors.Is(err, syscall.ELOOP):
			got = "loop"
		case errors.Is(err, syscall.ENOTDIR):
			got = "notdir"
		default:
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("ReadFile(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
	if environments.IsEscape(fs.ErrNotExist) || environments.IsEscape(nil) {
		t.Error("isEscape is true for another error")
	}
}

func testFiles() *Files {
	return &Files{&environments.Sandboxes{Core: &core.Core{Log: slog.New(slog.DiscardHandler)}}}
}

func TestResolveTarget(t *testing.T) {
	rootDir, _ := rootTree(t)
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	s := testFiles()
	for _, tc := range []struct {
		path, want string
		class      error
	}{
		{"a.txt", "a.txt", nil},
		{"in-chain", "a.txt", nil},
		{"sub-link/b.txt", "sub-link/b.txt", nil}, // directories are os.Root's to resolve
		{"dirlink/up", "dirlink/../a.txt", nil},   // unclean on purpose
		{"out-rel", "", core.ErrForbidden},
		{"out-abs", "", core.ErrForbidden},
		{"out-missing", "", core.ErrForbidden},
		{"out-dir/secret", "", core.ErrForbidden},
		{"abs-in", "", core.ErrForbidden},
		{"dangling", "", core.ErrNotFound},
		{"loop", "", core.ErrInvalid},
	} {
		got, err := s.resolveTarget(environments.LocalFS{R: root}, tc.path)
		switch {
		case tc.class == nil && (err != nil || got != tc.want):
			t.Errorf("resolveTarget(%q) = %q, %v, want %q", tc.path, got, err, tc.want)
		case tc.class != nil && !errors.Is(err, tc.class):
			t.Errorf("resolveTarget(%q) = %q, %v, want class %v", tc.path, got, err, tc.class)
		case tc.class == core.ErrForbidden && (strings.Contains(err.Error(), "outside/") || !strings.Contains(err.Error(), "resolves outside the session root")):
			t.Errorf("resolveTarget(%q): %v leaks the target or lacks the reason", tc.path, err)
		}
	}
	if _, err := os.ReadFile(filepath.Join(rootDir, "deep", "a.txt")); err != nil {
		t.Fatal(err)
	}
}

func TestReplaceFile(t *testing.T) {
	rootDir, outside := rootTree(t)
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	s := testFiles()

	target, err := s.resolveTarget(environments.LocalFS{R: root}, "in-chain")
	if err != nil {
		t.Fatal("in-chain did not resolve")
	}
	old, err := root.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	out, err := environments.ReplaceFile(root, target, old, []byte("new alpha"))
	if err != nil {
		t.Fatal(err)
	}
	if out.Size() != 9 || out.ModTime().IsZero() || !out.Mode().IsRegular() {
		t.Errorf("replaceFile = %+v", out)
	}
	if b, _ := os.ReadFile(filepath.Join(rootDir, "a.txt")); string(b) != "new alpha" {
		t.Errorf("a.txt = %q", b)
	}
	for _, link := range []string{"in-link", "in-chain"} {
		if fi, err := os.Lstat(filepath.Join(rootDir, link)); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink: %v", link, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(rootDir, "a.txt")); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640 kept", fi.Mode().Perm())
	}

	// A ".." after a symlinked directory climbs from its real place.
	target, err = s.resolveTarget(environments.LocalFS{R: root}, "dirlink/up")
	if err != nil {
		t.Fatal("dirlink/up did not resolve")
	}
	old, _ = root.Stat(target)
	if _, err := environments.ReplaceFile(root, target, old, []byte("deep beta")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(rootDir, "deep", "a.txt")); string(b) != "deep beta" {
		t.Errorf("deep/a.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Errorf("the outside file changed: %q", b)
	}

	// No temporary file is left anywhere.
	_ = filepath.WalkDir(rootDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(d.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

func TestNewTreeEntryTypes(t *testing.T) {
	rootDir, _ := rootTree(t)
	if err := syscall.Mkfifo(filepath.Join(rootDir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for name, want := range map[string]string{"a.txt": entryFile, "sub": entryDir, "sub-link": entrySymlink, "out-dir": entrySymlink, "fifo": entryOther} {
		fi, err := root.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		if e := newTreeEntry("d", fi); e.Type != want || e.Path != "d/"+name || e.Name != name {
			t.Errorf("%s: %+v, want type %s", name, e, want)
		}
	}
	fi, _ := root.Lstat("a.txt")
	if e := newTreeEntry(".", fi); e.Path != "a.txt" || e.Mode != "0640" || e.Size != 5 {
		t.Errorf("root entry: %+v", e)
	}
}

// escapeError is os.Root's refusal of a path that leaves it.
func escapeError(t *testing.T) error {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_, err = root.Lstat("..")
	return err
}

func TestPathError(t *testing.T) {
	s := testFiles()
	for _, tc := range []struct {
		err   error
		class error // nil: an internal error
		msg   string
	}{
		{escapeError(t), core.ErrForbidden, `path "p" resolves outside the session root`},
		{&fs.PathError{Op: "openat", Path: "x", Err: syscall.ENOENT}, core.ErrNotFound, `"p" does not exist in the session root`},
		{&fs.PathError{Op: "openat", Path: "x", Err: syscall.ENOTDIR}, core.ErrInvalid, `a parent of "p" is not a directory`},
		{&fs.PathError{Op: "openat", Path: "x", Err: syscall.ELOOP}, core.ErrInvalid, "too many levels of symbolic links"},
		{&fs.PathError{Op: "openat", Path: "x", Err: syscall.ENAMETOOLONG}, core.ErrInvalid, "too long a path"},
		{&fs.PathError{Op: "openat", Path: "x", Err: syscall.EACCES}, core.ErrForbidden, `permission denied on "p"`},
		{&fs.PathError{Op: "write", Path: "/host/secret/path", Err: syscall.ENOSPC}, nil, `cannot access "p": no space left on device`},
	} {
		err := s.pathError("p", tc.err)
		classed := false
		for _, c := range []error{core.ErrForbidden, core.ErrNotFound, core.ErrInvalid} {
			classed = classed || errors.Is(err, c)
		}
		if (tc.class == nil && classed) || (tc.class != nil && !errors.Is(err, tc.class)) || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "/host") {
			t.Errorf("pathError(%v) = %v, want class %v and %q", tc.err, err, tc.class, tc.msg)
		}
	}
}
