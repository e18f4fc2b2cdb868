package transport

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
		if typ == nil || typ.Kind() != reflect.Struct || typ.NumField() == 0 || requests[typ] || ownJSON(typ) || rt.Status == http.StatusNoContent || rt.Method == http.MethodHead {
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

// TestOpenAPIWSFrames validates every frame of the golden frame sequences
// (the live stream's and a turn replay's) against the ws.frame union, and
// holds the unions to the wire's names: a frame kind the server never
// sends, or a command without what its handler requires, is refused.
func TestOpenAPIWSFrames(t *testing.T) {
	s, err := documentSchemas()
	if err != nil {
		t.Fatal(err)
	}
	frame, err := s.schema("/components/schemas/" + wsFrameUnion)
	if err != nil {
		t.Fatal(err)
	}
	var frames []json.RawMessage
	live, err := os.ReadFile(filepath.Join("testdata", "live_frames.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(live)) {
		frames = append(frames, json.RawMessage(line))
	}
	replay, err := os.ReadFile(filepath.Join("testdata", "turn_replay.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Frames []struct{ Frame json.RawMessage }
	}
	if err := json.Unmarshal(replay, &r); err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Frames {
		frames = append(frames, f.Frame)
	}
	kinds := map[string]bool{}
	for _, f := range frames {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(f))
		if err != nil {
			t.Fatal(err)
		}
		kinds[v.(map[string]any)["kind"].(string)] = true
		if err := frame.Validate(v); err != nil {
			t.Errorf("frame %s: %v", f, err)
		}
	}
	if len(kinds) < 15 {
		t.Fatalf("the golden files hold only the kinds %v", slices.Sorted(maps.Keys(kinds)))
	}
	documented := s.resolve("/components/schemas/" + wsFrameUnion)["discriminator"].(map[string]any)["mapping"].(map[string]any)
	for kind := range kinds {
		if documented[kind] == nil {
			t.Errorf("kind %q is sent but has no ws.frame.%s", kind, kind)
		}
	}

	command, err := s.schema("/components/schemas/" + wsCommandUnion)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what, msg string
		sch       *jsonschema.Schema
		ok        bool
	}{
		{"the wire's approval frame", `{"kind":"mcp-approval-resolved","approval_id":"A","decision":"allow"}`, frame, true},
		{"the old name of the approval frame", `{"kind":"approval-resolved","approval_id":"A","decision":"allow"}`, frame, false},
		{"a frame without its kind", `{"approval_id":"A","decision":"allow"}`, frame, false},
		{"a frame with a member it never has", `{"kind":"mcp-approval-resolved","approval_id":"A","decision":"allow","x":1}`, frame, false},
		{"an approval", `{"cmd":"mcp-approve","approval_id":"A","decision":"allow"}`, command, true},
		{"an approval of nothing", `{"cmd":"mcp-approve","decision":"allow"}`, command, false},
		{"a ping", `{"cmd":"ping"}`, command, true},
		{"an unknown command", `{"cmd":"reboot"}`, command, false},
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(tc.msg))
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.sch.Validate(v); (err == nil) != tc.ok {
			t.Errorf("%s, %s: valid %v, want %v: %v", tc.what, tc.msg, err == nil, tc.ok, err)
		}
	}
}
