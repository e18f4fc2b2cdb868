package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v4"
	"go.yaml.in/yaml/v4/plugin/loaderlimits"
	"go.yaml.in/yaml/v4/plugin/mergekey"
)

// maxNodes bounds the values one decode constructs, aliases expanded, so
// that aliases cannot turn a small file into a huge amount of work.
const maxNodes = 1 << 16

// errTooManyNodes is the refusal of a file past maxNodes.
var errTooManyNodes = errors.New("too many values or aliases")

// strict are the decoding rules, all the YAML library's own: an unknown key
// or a key twice in one mapping is an error, merge keys (<<) are plain keys
// (so unknown), and at most maxNodes values are constructed.
var strict = []yaml.Option{
	yaml.WithKnownFields(),
	yaml.WithUniqueKeys(),
	yaml.WithPlugin(
		mergekey.New(mergekey.WithDisable(true)),
		loaderlimits.New(loaderlimits.AliasFunc(func(_, constructed int) error {
			if constructed > maxNodes {
				return errTooManyNodes
			}
			return nil
		})),
	),
}

// UnmarshalYAML reads a bare secret or {key, name}.
func (c *Credential) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Load(&c.Key, strict...)
	}
	type plain Credential // without this method
	return n.Load((*plain)(c), strict...)
}

// explain turns an error of the library's decode of root into Config into
// one that names the dotted key and its line. The library reports where it
// failed (line and column) but not the key, and its own message may quote
// a value, which could be a secret.
func explain(err error, root *yaml.Node) error {
	var le *yaml.LoadError
	switch {
	case !errors.As(err, &le):
		return err
	case errors.Is(err, errTooManyNodes):
		return fmt.Errorf("%w (line %d)", errTooManyNodes, le.Mark.Line)
	case le.Stage == yaml.ResolverStage: // its message quotes the value
		return errors.New("yaml: a value does not fit its explicit tag (such as !!int on a word)")
	case le.Stage != yaml.ConstructorStage || root == nil:
		return fmt.Errorf("yaml: %s (line %d)", le.Message, le.Mark.Line)
	}
	at, ok := locate(root, reflect.TypeFor[Config](), "", le.Mark)
	switch {
	case !ok:
		return fmt.Errorf("a value the configuration cannot hold (line %d)", le.Mark.Line)
	case at.key && at.node.Kind != yaml.ScalarNode:
		return fmt.Errorf("%s: keys must be plain strings (line %d)", orTop(at.parent), at.node.Line)
	case at.key && at.twice:
		return fmt.Errorf("duplicate key %q (line %d)", at.path, at.node.Line)
	case at.key:
		return fmt.Errorf("unknown key %q (line %d)", at.path, at.node.Line)
	default:
		return typeError(at.node, at.typ, at.path)
	}
}

// located is the node an error points at: a mapping key (twice: one the
// same mapping already had), or a value of Go type typ; path is its
// dotted key, parent its mapping's.
type located struct {
	node         *yaml.Node
	key, twice   bool
	typ          reflect.Type
	path, parent string
}

// locate finds the node at m under n, a value of type t at path. A
// mapping or list starts where its first entry does, so the one at m is
// the outermost whose kind t cannot hold, or a key, or a scalar.
func locate(n *yaml.Node, t reflect.Type, path string, m yaml.Mark) (located, bool) {
	if n.Line == m.Line && n.Column == m.Column && (n.Kind == yaml.ScalarNode || !holds(t, n.Kind)) {
		return located{node: n, typ: t, path: path}, true
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kpath := join(path, k.Value)
			if k.Line == m.Line && k.Column == m.Column {
				twice := false
				for j := 0; j < i; j += 2 {
					twice = twice || n.Content[j].Value == k.Value
				}
				return located{node: k, key: true, twice: twice, path: kpath, parent: path}, true
			}
			if at, ok := locate(v, member(t, k.Value), kpath, m); ok {
				return at, true
			}
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			if at, ok := locate(item, member(t, ""), fmt.Sprintf("%s[%d]", path, i), m); ok {
				return at, true
			}
		}
	}
	return located{}, false
}

// holds reports whether a value of type t is read from a node of kind k.
func holds(t reflect.Type, k yaml.Kind) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return k == yaml.MappingNode
	case reflect.Slice:
		return k == yaml.SequenceNode
	}
	return false
}

// member is the type of t's member key (a struct field by its yaml tag, a
// map's or a list's element; what a pointer points to), or nil.
func member(t reflect.Type, key string) reflect.Type {
	m := memberOf(t, key)
	for m != nil && m.Kind() == reflect.Pointer {
		m = m.Elem()
	}
	return m
}

func memberOf(t reflect.Type, key string) reflect.Type {
	switch {
	case t == nil:
		return nil
	case t.Kind() == reflect.Map || t.Kind() == reflect.Slice:
		return t.Elem()
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name == key {
				return t.Field(i).Type
			}
		}
	}
	return nil
}

// typeError says what t wants and what n holds. It quotes a scalar only
// when t is a boolean or a number, so a secret never reaches the message.
func typeError(n *yaml.Node, t reflect.Type, path string) error {
	want, quote := "a value", false
	kind := reflect.Invalid
	if t != nil {
		kind = t.Kind()
	}
	if t == credentialType {
		kind = reflect.String // a bare secret
	}
	switch kind {
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want, quote = "a boolean (true or false)", true
	case reflect.Int, reflect.Int64:
		want, quote = "an integer", true
	case reflect.Float64:
		want, quote = "a number", true
	case reflect.Slice:
		want = "a list"
	case reflect.Struct, reflect.Map:
		want = "a mapping"
	}
	got := "a single value"
	switch {
	case n.Kind == yaml.MappingNode:
		got = "a mapping"
	case n.Kind == yaml.SequenceNode:
		got = "a list"
	case quote:
		got = fmt.Sprintf("%q", n.Value)
	}
	return fmt.Errorf("%s: want %s, got %s (line %d)", orTop(path), want, got, n.Line)
}

var credentialType = reflect.TypeFor[Credential]()

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// hasKey reports whether mapping n has key.
func hasKey(n *yaml.Node, key string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// join appends key to a dotted path. Keys that are not plain words, such as
// "openai/gpt-4.1", are bracketed: prices[openai/gpt-4.1].
func join(path, key string) string {
	switch {
	case path == "":
		return key
	case plainKey.MatchString(key):
		return path + "." + key
	default:
		return path + "[" + key + "]"
	}
}

func orTop(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}
