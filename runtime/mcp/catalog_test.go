package mcp_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"lathe/runtime/mcp"
)

func TestCatalogEntries(t *testing.T) {
	var slugs []string
	for _, e := range mcp.Catalog() {
		slugs = append(slugs, e.Slug)
		if e.Name == "" || e.Description == "" || (e.Transport != mcp.Stdio && e.Transport != mcp.HTTP) || e.Values == nil {
			t.Errorf("entry %+v is incomplete", e)
		}
		// Every placeholder names a declared value.
		for _, s := range append(slices.Clone(e.Args), e.URL) {
			for _, part := range strings.Split(s, "{{")[1:] {
				key, _, _ := strings.Cut(part, "}}")
				if !slices.ContainsFunc(e.Values, func(v mcp.Value) bool { return v.Key == key }) {
					t.Errorf("%s uses {{%s}}, which it does not declare", e.Slug, key)
				}
			}
		}
	}
	// Every package a stdio entry fetches (npx -y, uvx) is pinned to an
	// exact version (issue 23, finding 5).
	pinned := regexp.MustCompile(`^(@[a-z0-9-]+/)?[a-z0-9-]+@[0-9]+(\.[0-9]+)+$`)
	for _, e := range mcp.Catalog() {
		if e.Command != "npx" && e.Command != "uvx" {
			continue
		}
		pkg := e.Args[0]
		if e.Command == "npx" {
			pkg = e.Args[1]
		}
		if !pinned.MatchString(pkg) {
			t.Errorf("%s runs %s %v: the package %q is not pinned to an exact version", e.Slug, e.Command, e.Args, pkg)
		}
	}
	for _, want := range []string{"filesystem", "memory", "everything", "fetch", "git"} {
		if !slices.Contains(slugs, want) {
			t.Errorf("the catalog lacks %s", want)
		}
	}
}

func TestCatalogConfig(t *testing.T) {
	files, root := t.TempDir(), t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(files, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/root/.bashrc", filepath.Join(files, "bashrc.json")); err != nil {
		t.Fatal(err)
	}
	fsArgs := func(root string) []string {
		return []string{"-y", "@modelcontextprotocol/server-filesystem@2026.8.31", root}
	}
	for _, tc := range []struct {
		slug   string
		values map[string]string
		err    string // "" accepts
		args   []string
		env    map[string]string
		public map[string]string
	}{
		{slug: "filesystem", values: map[string]string{"root": root}, args: fsArgs(root), public: map[string]string{"root": root}},
		// Issue 23, finding 7: path values.
		{slug: "filesystem", values: map[string]string{"root": "/"}, err: "the whole file system"},
		{slug: "filesystem", values: map[string]string{"root": "srv/shared"}, err: "must be an absolute, clean path"},
		{slug: "filesystem", values: map[string]string{"root": root + "/../x"}, err: "must be an absolute, clean path"},
		{slug: "filesystem", values: map[string]string{"root": "--help"}, err: "must not start with '-'"},
		{slug: "filesystem", values: map[string]string{"root": "~root/.ssh"}, err: "~ is not expanded"},
		{slug: "filesystem", values: map[string]string{"root": root + "/missing"}, err: "is not an existing directory"},
		{slug: "memory", values: map[string]string{"memory_file": "/root/.bashrc"}, err: "must be inside"},
		{slug: "memory", values: map[string]string{"memory_file": filepath.Join(files, "link", "m.json")}, err: "must be inside"},
		{slug: "memory", values: map[string]string{"memory_file": filepath.Join(files, "bashrc.json")}, err: "is not a regular file"},
		{slug: "memory", values: map[string]string{"memory_file": filepath.Join(files, "m.json")}, env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(files, "m.json")}, public: map[string]string{"memory_file": filepath.Join(files, "m.json")}},
		{slug: "filesystem", values: nil, err: `needs the value "root"`},
		{slug: "filesystem", values: map[string]string{"root": " "}, err: "must not be empty"},
		{slug: "filesystem", values: map[string]string{"root": "/a", "mode": "rw"}, err: `takes no value "mode"`},
		{slug: "filesystem", values: map[string]string{"root": "/a\n--evil"}, err: "one line"},
		{slug: "memory", values: nil, args: []string{"-y", "@modelcontextprotocol/server-memory@2026.8.31"}, public: map[string]string{}},
		{slug: "github", values: map[string]string{"token": "ghp_secret"}, env: map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret"}, public: map[string]string{}},
	} {
		e, err := mcp.CatalogEntry(tc.slug)
		if err != nil {
			t.Fatal(err)
		}
		cfg, public, err := e.Config("s", tc.values, files)
		if tc.err != "" {
			if !errors.Is(err, mcp.ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %v: %v, want ErrInvalid with %q", tc.slug, tc.values, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %v: %v", tc.slug, tc.values, err)
			continue
		}
		if tc.args != nil && !slices.Equal(cfg.Args, tc.args) {
			t.Errorf("%s args = %v, want %v", tc.slug, cfg.Args, tc.args)
		}
		for k, v := range tc.env {
			if cfg.Env[k] != v {
				t.Errorf("%s env %s = %q, want %q", tc.slug, k, cfg.Env[k], v)
			}
		}
		if len(public) != len(tc.public) {
			t.Errorf("%s public values = %v, want %v", tc.slug, public, tc.public)
		}
		for k, v := range public {
			if tc.public[k] != v || strings.Contains(v, "secret") {
				t.Errorf("%s public values = %v, want %v", tc.slug, public, tc.public)
			}
		}
	}
	if _, err := mcp.CatalogEntry("nope"); !errors.Is(err, mcp.ErrUnknownSlug) {
		t.Errorf("an unknown slug: %v", err)
	}
}
