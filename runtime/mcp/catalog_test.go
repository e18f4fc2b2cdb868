package mcp_test

import (
	"errors"
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
	for _, want := range []string{"filesystem", "memory", "everything", "fetch", "git"} {
		if !slices.Contains(slugs, want) {
			t.Errorf("the catalog lacks %s", want)
		}
	}
}

func TestCatalogConfig(t *testing.T) {
	for _, tc := range []struct {
		slug   string
		values map[string]string
		err    string // "" accepts
		args   []string
		env    map[string]string
		public map[string]string
	}{
		{slug: "filesystem", values: map[string]string{"root": "/srv/shared"}, args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/shared"}, public: map[string]string{"root": "/srv/shared"}},
		{slug: "filesystem", values: nil, err: `needs the value "root"`},
		{slug: "filesystem", values: map[string]string{"root": " "}, err: "must not be empty"},
		{slug: "filesystem", values: map[string]string{"root": "/a", "mode": "rw"}, err: `takes no value "mode"`},
		{slug: "filesystem", values: map[string]string{"root": "/a\n--evil"}, err: "one line"},
		{slug: "memory", values: nil, args: []string{"-y", "@modelcontextprotocol/server-memory"}, public: map[string]string{}},
		{slug: "memory", values: map[string]string{"memory_file": "/tmp/m.json"}, env: map[string]string{"MEMORY_FILE_PATH": "/tmp/m.json"}, public: map[string]string{"memory_file": "/tmp/m.json"}},
		{slug: "github", values: map[string]string{"token": "ghp_secret"}, env: map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret"}, public: map[string]string{}},
	} {
		e, err := mcp.CatalogEntry(tc.slug)
		if err != nil {
			t.Fatal(err)
		}
		cfg, public, err := e.Config("s", tc.values)
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
