package mcp

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"lathe/runtime/errs"
)

// The bundled catalog: real, widely used MCP servers an operator can
// install into the live registry with a few values.
//
//go:embed catalog.json
var catalogJSON []byte

// Entry is one catalog server. {{key}} in Args and Env is replaced by the
// value of key; a value marked Secret goes only where it is written (the
// server's environment) and is never shown.
type Entry struct {
	Slug        string            `json:"slug"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Transport   string            `json:"transport"`
	Command     string            `json:"command,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	URL         string            `json:"url,omitempty"`
	Values      []Value           `json:"values"`
}

// Value is one value an entry takes.
type Value struct {
	Key         string `json:"key"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
	Secret      bool   `json:"secret"`
	// Path is PathDirectory or PathFile for a value that names a path on
	// the daemon host (checkPath), "" otherwise.
	Path string `json:"path,omitempty"`
}

// Path kinds of a Value.
const (
	// PathDirectory: an absolute path of an existing directory, not /.
	PathDirectory = "directory"
	// PathFile: an absolute path of a file inside the files directory.
	PathFile = "file"
)

// ErrUnknownSlug: the catalog has no such entry.
var ErrUnknownSlug = errs.New(errs.NotFound, "unknown catalog entry")

// Catalog returns the bundled catalog.
func Catalog() []Entry {
	var out []Entry
	if err := json.Unmarshal(catalogJSON, &out); err != nil {
		panic("mcp: the bundled catalog is malformed: " + err.Error())
	}
	return out
}

// CatalogEntry returns one entry by slug.
func CatalogEntry(slug string) (Entry, error) {
	for _, e := range Catalog() {
		if e.Slug == slug {
			return e, nil
		}
	}
	return Entry{}, fmt.Errorf("%w: %q", ErrUnknownSlug, slug)
}

// maxValueBytes bounds one install value.
const maxValueBytes = 4096

// Config renders the entry as a server named name with the operator's
// values: an unknown key, a missing required value or a malformed value is
// ErrInvalid. A file value must lie inside filesDir (the daemon's
// mcp.files_dir). Public lists the non-secret values, for the audit trail.
func (e Entry) Config(name string, values map[string]string, filesDir string) (cfg Config, public map[string]string, err error) {
	known := map[string]Value{}
	for _, v := range e.Values {
		known[v.Key] = v
	}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		v, ok := known[k]
		switch {
		case !ok:
			return Config{}, nil, fmt.Errorf("%w: %s takes no value %q (it takes %s)", ErrInvalid, e.Slug, k, e.keys())
		case len(values[k]) > maxValueBytes || strings.ContainsAny(values[k], "\x00\n\r"):
			return Config{}, nil, fmt.Errorf("%w: value %q must be one line of at most %d bytes", ErrInvalid, k, maxValueBytes)
		case v.Required && strings.TrimSpace(values[k]) == "":
			return Config{}, nil, fmt.Errorf("%w: value %q of %s must not be empty", ErrInvalid, k, e.Slug)
		}
		if err := checkPath(v, values[k], filesDir); err != nil {
			return Config{}, nil, err
		}
	}
	public = map[string]string{}
	var secrets []string
	for _, v := range e.Values {
		val, ok := values[v.Key]
		if v.Required && !ok {
			return Config{}, nil, fmt.Errorf("%w: %s needs the value %q: %s", ErrInvalid, e.Slug, v.Key, v.Description)
		}
		if v.Secret {
			if val != "" {
				secrets = append(secrets, val)
			}
		} else if ok {
			public[v.Key] = val
		}
	}
	fill := func(s string) string {
		for _, v := range e.Values {
			s = strings.ReplaceAll(s, "{{"+v.Key+"}}", values[v.Key])
		}
		return s
	}
	cfg = Config{Name: name, Transport: e.Transport, Command: e.Command, URL: fill(e.URL), Secrets: secrets}
	for _, a := range e.Args {
		if a = fill(a); a != "" {
			cfg.Args = append(cfg.Args, a)
		}
	}
	if len(e.Env) > 0 {
		cfg.Env = map[string]string{}
		for k, v := range e.Env {
			if v = fill(v); v != "" {
				cfg.Env[k] = v
			}
		}
	}
	return cfg, public, cfg.Validate()
}

func (e Entry) keys() string {
	if len(e.Values) == 0 {
		return "none"
	}
	var ks []string
	for _, v := range e.Values {
		ks = append(ks, v.Key)
	}
	return strings.Join(ks, ", ")
}

// checkPath checks a path value: absolute (so neither an option like
// --help nor a ~user path a shell would expand), cleaned, and then a
// directory that exists and is not the root, or a file inside filesDir
// that is not a symbolic link, under a directory that resolves inside it.
// An empty value is the server's default and passes.
func checkPath(v Value, val, filesDir string) error {
	if v.Path == "" || val == "" {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: value %q: "+format, append([]any{ErrInvalid, v.Key}, args...)...)
	}
	switch {
	case strings.HasPrefix(val, "-"):
		return bad("a path must not start with '-'")
	case strings.HasPrefix(val, "~"):
		return bad("~ is not expanded; give the absolute path")
	case !filepath.IsAbs(val) || filepath.Clean(val) != val:
		return bad("%q must be an absolute, clean path", val)
	}
	switch v.Path {
	case PathDirectory:
		if val == "/" {
			return bad("the whole file system is not a directory to give a server")
		}
		if fi, err := os.Stat(val); err != nil || !fi.IsDir() {
			return bad("%q is not an existing directory", val)
		}
	case PathFile:
		if filesDir == "" {
			return bad("no files directory is configured (mcp.files_dir)")
		}
		root, err := filepath.EvalSymlinks(filesDir)
		if err != nil {
			return bad("the files directory: %v", err)
		}
		dir, err := filepath.EvalSymlinks(filepath.Dir(val))
		if err != nil || (dir != root && !strings.HasPrefix(dir, root+string(filepath.Separator))) {
			return bad("%q must be inside %s (mcp.files_dir)", val, filesDir)
		}
		if fi, err := os.Lstat(val); err == nil && !fi.Mode().IsRegular() {
			return bad("%q exists and is not a regular file", val)
		}
	}
	return nil
}
