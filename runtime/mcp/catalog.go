package mcp

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
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
}

// ErrUnknownSlug: the catalog has no such entry.
var ErrUnknownSlug = fmt.Errorf("unknown catalog entry")

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
// ErrInvalid. Public lists the non-secret values, for the audit trail.
func (e Entry) Config(name string, values map[string]string) (cfg Config, public map[string]string, err error) {
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
