package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/commands/core"
	"lathe/commands/environments"

	"lathe/journal/events"
)

func TestTreePath(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		class    error
	}{
		{in: "a/b.txt", want: "a/b.txt"},
		{in: "./a//b/", want: "a/b"},
		{in: ".gitignore", want: ".gitignore"},
		{in: "a/.github/x", want: "a/.github/x"},
		{in: "", class: core.ErrInvalid},
		{in: ".", class: core.ErrInvalid},
		{in: "./", class: core.ErrInvalid},
		{in: "../x", class: core.ErrInvalid},
		{in: "/etc/passwd", class: core.ErrInvalid},
		{in: ".git", class: core.ErrForbidden},
		{in: ".git/config", class: core.ErrForbidden},
		{in: "sub/.git/HEAD", class: core.ErrForbidden},
		{in: ".GIT/hooks", class: core.ErrForbidden},
	} {
		got, err := treePath("path", tc.in)
		switch {
		case tc.class == nil && (err != nil || got != tc.want):
			t.Errorf("treePath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.class != nil && !errors.Is(err, tc.class):
			t.Errorf("treePath(%q) = %q, %v; want %v", tc.in, got, err, tc.class)
		}
	}
}

// TestTreeChanges runs create, rename and delete on a real root with
// symlinks in and out of it: each either makes its change and names it in
// its event, or changes nothing and answers its error class.
func TestTreeChanges(t *testing.T) {
	s := testFiles()
	type op func(root *os.Root) (any, events.Payload, error)
	create := func(rel, kind string) op {
		return func(root *os.Root) (any, events.Payload, error) {
			return s.createEntry(environments.LocalFS{R: root}, rel, kind, noIntent)
		}
	}
	rename := func(from, to string) op {
		return func(root *os.Root) (any, events.Payload, error) {
			return s.renameIn(environments.LocalFS{R: root}, from, to, noIntent)
		}
	}
	remove := func(rel string, recursive bool) op {
		return func(root *os.Root) (any, events.Payload, error) {
			return s.deleteIn(environments.LocalFS{R: root}, rel, recursive, noIntent)
		}
	}
	for _, tc := range []struct {
		name  string
		op    op
		event events.Payload // nil: refused
		class error
		after map[string]string // path → "file", "dir", "absent", "link" or the content
	}{
		{name: "create a file", op: create("sub/new.txt", KindFile), event: events.FileCreated{Path: "sub/new.txt"}, after: map[string]string{"sub/new.txt": ""}},
		{name: "create a folder", op: create("sub/new", KindDir), event: events.FolderCreated{Path: "sub/new"}, after: map[string]string{"sub/new": "dir"}},
		{name: "create over a file", op: create("a.txt", KindFile), class: core.ErrConflict, after: map[string]string{"a.txt": "alpha"}},
		{name: "create over a dangling link", op: create("dangling", KindDir), class: core.ErrConflict, after: map[string]string{"dangling": "link"}},
		{name: "create without a parent", op: create("nope/x", KindFile), class: core.ErrNotFound, after: map[string]string{"nope": "absent"}},
		{name: "create under a file", op: create("a.txt/x", KindFile), class: core.ErrInvalid},
		{name: "create through a link to outside", op: create("out-dir/x", KindFile), class: core.ErrForbidden},
		{name: "create through a link inside", op: create("sub-link/c.txt", KindFile), event: events.FileCreated{Path: "sub-link/c.txt"}, after: map[string]string{"sub/c.txt": ""}},
		{name: "rename a file", op: rename("a.txt", "sub/a.txt"), event: events.FileRenamed{From: "a.txt", To: "sub/a.txt", Kind: "file"},
			after: map[string]string{"a.txt": "absent", "sub/a.txt": "alpha"}},
		{name: "rename a folder", op: rename("deep", "deeper"), event: events.FileRenamed{From: "deep", To: "deeper", Kind: "dir"},
			after: map[string]string{"deep": "absent", "deeper/x/y/z.txt": "zed"}},
		{name: "rename a link moves the link", op: rename("out-rel", "sub/out"), event: events.FileRenamed{From: "out-rel", To: "sub/out", Kind: "symlink"},
			after: map[string]string{"sub/out": "link"}},
		{name: "rename over an entry", op: rename("a.txt", "sub/b.txt"), class: core.ErrConflict, after: map[string]string{"a.txt": "alpha", "sub/b.txt": "beta"}},
		{name: "rename a missing entry", op: rename("nope", "x"), class: core.ErrNotFound},
		{name: "rename into a missing folder", op: rename("a.txt", "nope/a.txt"), class: core.ErrNotFound, after: map[string]string{"a.txt": "alpha"}},
		{name: "rename to outside", op: rename("a.txt", "out-dir/a.txt"), class: core.ErrForbidden, after: map[string]string{"a.txt": "alpha"}},
		{name: "delete a file", op: remove("a.txt", false), event: events.FileDeleted{Path: "a.txt", Kind: "file"}, after: map[string]string{"a.txt": "absent"}},
		{name: "delete a link, not its target", op: remove("in-link", false), event: events.FileDeleted{Path: "in-link", Kind: "symlink"},
			after: map[string]string{"in-link": "absent", "a.txt": "alpha"}},
		{name: "delete a link to outside", op: remove("out-dir", false), event: events.FileDeleted{Path: "out-dir", Kind: "symlink"}, after: map[string]string{"out-dir": "absent"}},
		{name: "delete a full folder", op: remove("sub", false), class: core.ErrConflict, after: map[string]string{"sub/b.txt": "beta"}},
		{name: "delete a full folder recursively", op: remove("deep", true), event: events.FileDeleted{Path: "deep", Kind: "dir", Recursive: true},
			after: map[string]string{"deep": "absent", "a.txt": "alpha"}},
		{name: "delete a missing entry", op: remove("nope", true), class: core.ErrNotFound},
		{name: "delete through a link to outside", op: remove("out-dir/secret", false), class: core.ErrForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, outside := rootTree(t)
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			_, ev, err := tc.op(root)
			switch {
			case tc.class == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.class != nil && !errors.Is(err, tc.class):
				t.Fatalf("error %v, want class %v", err, tc.class)
			case tc.class != nil && ev != nil:
				t.Errorf("a refusal returned event %#v", ev)
			case tc.class == nil && ev != tc.event:
				t.Errorf("event %#v, want %#v", ev, tc.event)
			}
			if err != nil && strings.Contains(err.Error(), dir) {
				t.Errorf("error %q names the host path", err)
			}
			for p, want := range tc.after {
				if got := describe(filepath.Join(dir, p)); got != want {
					t.Errorf("%s is %q, want %q", p, got, want)
				}
			}
			if got := describe(filepath.Join(outside, "secret")); got != "secret" {
				t.Errorf("outside/secret is %q", got)
			}
		})
	}
}

// describe names what is at p: "absent", "dir", "link", or a file's content.
func describe(p string) string {
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return "absent"
	case fi.IsDir():
		return "dir"
	case fi.Mode()&os.ModeSymlink != 0:
		return "link"
	}
	b, _ := os.ReadFile(p)
	return string(b)
}

func noIntent() error { return nil }
