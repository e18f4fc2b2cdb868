package transport

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// requestSchema is the JSON pointer of a route's request body schema.
func requestSchema(rt Route) string {
	return "/paths/" + pointerToken(openAPIPath(rt.Path)) + "/" + strings.ToLower(rt.Method) +
		"/requestBody/content/" + pointerToken(mediaJSON) + "/schema"
}

// TestOpenAPIRequestBodiesAsDecoded holds the request schemas to what the
// server does with a body: an unknown member is refused by the decoder and
// the schema; {} is refused by the route (400, before any command runs)
// exactly when its schema requires a member.
func TestOpenAPIRequestBodiesAsDecoded(t *testing.T) {
	s, err := documentSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range Routes() {
		if rt.Request == nil {
			continue
		}
		t.Run(rt.Method+" "+rt.Path, func(t *testing.T) {
			sch, err := s.schema(requestSchema(rt))
			if err != nil {
				t.Fatal(err)
			}
			unknown := `{"no_such_member": 1}`
			if err := sch.Validate(map[string]any{"no_such_member": json.Number("1")}); err == nil && reflect.TypeOf(rt.Request).Kind() == reflect.Struct {
				t.Errorf("the schema takes %s, which the decoder refuses", unknown)
			}
			f := &fake{}
			r := httptest.NewRequest(rt.Method, samplePath(rt.Path), strings.NewReader("{}"))
			r.Host = "localhost:8080"
			r.Header.Set("x-api-key", testKey)
			r.Header.Set("Content-Type", mediaJSON)
			w := httptest.NewRecorder()
			fakeServer(t, f).ServeHTTP(w, r)
			if w.Code == http.StatusNotFound {
				return // a route the fake's Server leaves out (no Attempt sets)
			}
			refused := w.Code == http.StatusBadRequest
			if schemaRefused := sch.Validate(map[string]any{}) != nil; refused != schemaRefused {
				t.Errorf("{} answered %d %s; the schema refuses it: %v", w.Code, w.Body, schemaRefused)
			}
		})
	}
}

// TestOpenAPIResponsesRequireWhatIsSent holds each response schema's
// required members to the members encoding/json writes for the body
// type's zero value (the ones it writes for every value), and its other
// members to none.
// resolve is the schema object at pointer, its $refs followed.
func (s *openAPISchemas) resolve(pointer string) map[string]any {
	var v any = s.doc
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		v = v.(map[string]any)[tok]
	}
	m, _ := v.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		return s.resolve(strings.TrimPrefix(ref, "#"))
	}
	return m
}

func TestOpenAPIResponsesRequireWhatIsSent(t *testing.T) {
	s, err := documentSchemas()
	if err != nil {
		t.Fatal(err)
	}
	requests := requestTypes()
	for _, rt := range Routes() {
		typ := reflect.TypeOf(rt.Response)
		if typ == nil || typ.Kind() != reflect.Struct || requests[typ] || ownJSON(typ) || rt.Status == http.StatusNoContent || rt.Method == http.MethodHead {
			continue
		}
		t.Run(rt.Method+" "+rt.Path, func(t *testing.T) {
			pointer, err := s.responseSchema(rt.Method, rt.Path, rt.Status)
			if err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(reflect.New(typ).Elem().Interface())
			if err != nil {
				t.Fatal(err)
			}
			var written map[string]json.RawMessage
			if err := json.Unmarshal(data, &written); err != nil {
				t.Fatal(err)
			}
			schema := s.resolve(pointer)
			required, _ := schema["required"].([]any)
			var got []string
			for _, r := range required {
				got = append(got, r.(string))
			}
			want := slices.Sorted(maps.Keys(written))
			if slices.Sort(got); !slices.Equal(got, want) {
				t.Errorf("%s: required %v, want the members always written: %v", typ, got, want)
			}
			if schema["additionalProperties"] != false {
				t.Errorf("%s: additionalProperties %v, want false", typ, schema["additionalProperties"])
			}
		})
	}
}
