package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds the nodes one decode visits, so that aliases cannot expand a
// small file into a huge amount of work.
const maxNodes = 1 << 16

// decoder walks a yaml.Node tree against the yaml tags of a Go value. Unlike
// yaml.v3's own decoder it names the full dotted key in every error, and it
// replaces maps instead of merging into them.
type decoder struct {
	budget int
}

// decode stores n into v, which must be addressable. path is the dotted key of n.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	if d.budget--; d.budget < 0 {
		return fmt.Errorf("%s: too many values or aliases (line %d)", orTop(path), n.Line)
	}
	if n.Kind == yaml.AliasNode {
		return d.decode(n.Alias, v, path)
	}
	if isNull(n) {
		// As in yaml.v3: null empties a list or map and leaves anything else as is.
		if k := v.Kind(); k == reflect.Slice || k == reflect.Map {
			v.SetZero()
		}
		return nil
	}
	if v.Type() == credentialType && n.Kind == yaml.ScalarNode {
		return d.decode(n, v.FieldByName("Key"), path) // a bare secret
	}
	switch v.Kind() {
	case reflect.Struct:
		return d.mapping(n, v, path, func(key string, line int, val *yaml.Node) error {
			f, ok := fieldByTag(v, key)
			if !ok {
				return fmt.Errorf("unknown key %q (line %d)", join(path, key), line)
			}
			return d.decode(val, f, join(path, key))
		})
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		err := d.mapping(n, v, path, func(key string, _ int, val *yaml.Node) error {
			elem := reflect.New(v.Type().Elem()).Elem()
			if err := d.decode(val, elem, join(path, key)); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(key), elem)
			return nil
		})
		if err == nil {
			v.Set(m)
		}
		return err
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return typeError(n, v, path)
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	default:
		if n.Kind != yaml.ScalarNode || !tagFits(n.ShortTag(), v.Kind()) || n.Decode(v.Addr().Interface()) != nil {
			return typeError(n, v, path)
		}
		return nil
	}
}

var credentialType = reflect.TypeFor[Credential]()

// tagFits refuses the conversions yaml.v3 would make silently: 1.5 into an
// integer (truncated) and yes/on/off into a boolean.
func tagFits(tag string, k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int64:
		return tag == "!!int"
	case reflect.Float64:
		return tag == "!!int" || tag == "!!float"
	case reflect.Bool:
		return tag == "!!bool"
	}
	return true
}

// mapping checks that n is a mapping with unique plain keys and calls f for
// each key, its line and its value.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string, f func(key string, line int, val *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return typeError(n, v, path)
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		line := k.Line
		if k.Kind == yaml.AliasNode {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: keys must be plain strings (line %d)", orTop(path), line)
		}
		if seen[k.Value] {
			return fmt.Errorf("duplicate key %q (line %d)", join(path, k.Value), line)
		}
		seen[k.Value] = true
		if err := f(k.Value, line, n.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// fieldByTag returns the field of struct v whose yaml tag names key.
func fieldByTag(v reflect.Value, key string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == key {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// typeError says what v wants and what n holds. It quotes a scalar only when
// v wants a boolean or a number, so a secret never reaches the message.
func typeError(n *yaml.Node, v reflect.Value, path string) error {
	want, quote := "a value", false
	switch v.Kind() {
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

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
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
