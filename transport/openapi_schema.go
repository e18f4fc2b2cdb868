package transport

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/swaggest/jsonschema-go"
)

// The object schemas of the OpenAPI document say what the wire holds:
//
//   - every object a struct becomes has additionalProperties: false. The
//     decoder refuses an unknown member at any depth of a request body
//     (decode.go), and encoding/json writes a struct's fields and no other;
//   - a request body's required members are its fields tagged
//     required:"true", which the route's handler refuses to go without
//     (the decoder requires none of its own). A required pointer field is
//     not null either: the handler reads null as left out;
//   - a response's required members are the fields encoding/json always
//     writes: those without omitempty or omitzero, outside an embedded
//     pointer (a nil one writes none of its fields).
//
// A type that is both (a PUT's body that its GET answers) is a request
// type here: its schema is one component, and a member a client may leave
// out must not be required of it.

// wireShapes is the schema interceptor for the rules above; requests are
// the struct types the request bodies and /ws commands reach.
func wireShapes(requests map[reflect.Type]bool) jsonschema.InterceptSchemaFunc {
	return func(params jsonschema.InterceptSchemaParams) (bool, error) {
		if !params.Processed || !params.Value.IsValid() {
			return false, nil
		}
		t := params.Value.Type()
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		sch := params.Schema
		if t.Kind() != reflect.Struct || sch.Properties == nil || !sch.HasType(jsonschema.Object) || ownJSON(t) {
			return false, nil
		}
		sch.WithAdditionalProperties(jsonschema.SchemaOrBool{TypeBoolean: new(bool)})
		if requests[t] {
			for f := range t.Fields() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if p, ok := sch.Properties[name]; ok && f.Tag.Get("required") == "true" && f.Type.Kind() == reflect.Pointer {
					sch.Properties[name] = notNull(p)
				}
			}
			return false, nil
		}
		for _, name := range alwaysWritten(t) {
			if _, ok := sch.Properties[name]; ok && !slices.Contains(sch.Required, name) {
				sch.Required = append(sch.Required, name)
			}
		}
		return false, nil
	}
}

// notNull is p without the null that allowNull let a pointer be.
func notNull(p jsonschema.SchemaOrBool) jsonschema.SchemaOrBool {
	sch := p.TypeObject
	switch {
	case sch == nil:
	case len(sch.AnyOf) == 2 && sch.AnyOf[1].TypeObject != nil && sch.AnyOf[1].TypeObject.HasType(jsonschema.Null):
		return sch.AnyOf[0]
	case sch.Type != nil && len(sch.Type.SliceOfSimpleTypeValues) > 0:
		types := slices.DeleteFunc(slices.Clone(sch.Type.SliceOfSimpleTypeValues), func(t jsonschema.SimpleType) bool { return t == jsonschema.Null })
		c := *sch
		c.Type = &jsonschema.Type{SliceOfSimpleTypeValues: types}
		if len(types) == 1 {
			c.Type = &jsonschema.Type{SimpleTypes: &types[0]}
		}
		return c.ToSchemaOrBool()
	}
	return p
}

// ownJSON reports whether t encodes or decodes itself (a method of its own
// or of an embedded field's), so its fields say nothing of its JSON.
func ownJSON(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(reflect.TypeFor[json.Marshaler]()) || p.Implements(reflect.TypeFor[json.Unmarshaler]())
}

// alwaysWritten are the JSON names of the fields encoding/json writes for
// every value of struct type t, embedded structs' promoted ones included.
func alwaysWritten(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" {
			if f.Type.Kind() == reflect.Struct {
				out = append(out, alwaysWritten(f.Type)...)
			}
			continue // an embedded pointer may be nil
		}
		if !f.IsExported() || slices.ContainsFunc(strings.Split(opts, ","), func(o string) bool { return o == "omitempty" || o == "omitzero" }) {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// structTypes adds to seen the struct types v's type reaches through its
// fields, pointers, slices, arrays and maps.
func structTypes(t reflect.Type, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for f := range t.Fields() {
		structTypes(f.Type, seen)
	}
}

// requestTypes are the struct types of the route table's request bodies
// and of the /ws commands.
func requestTypes() map[reflect.Type]bool {
	seen := map[reflect.Type]bool{}
	for _, rt := range Routes() {
		if rt.Request != nil {
			structTypes(reflect.TypeOf(rt.Request), seen)
		}
	}
	for _, c := range (&handlers{}).wsCommands() {
		if c.Request != nil {
			structTypes(reflect.TypeOf(c.Request), seen)
		}
	}
	return seen
}
