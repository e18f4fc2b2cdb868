package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodeTarget is a body with the field shapes routes use.
type decodeTarget struct {
	Name   *string         `json:"name"`
	Paths  []string        `json:"paths"`
	Budget struct{ N int } `json:"budget"`
	Values map[string]any  `json:"values"`
}

func TestDecodeJSON(t *testing.T) {
	const jsonCT = "application/json"
	for _, tc := range []struct {
		name     string
		ct       string
		body     string
		optional bool
		status   int    // 0: accepted
		err      string // part of the error message
		want     string // the decoded Name, when accepted
	}{
		{name: "an object", ct: jsonCT, body: `{"name":"a"}`, want: "a"},
		{name: "charset utf-8", ct: "application/json; charset=utf-8", body: `{"name":"a"}`, want: "a"},
		{name: "any letter case", ct: "Application/JSON; Charset=UTF-8", body: `{"name":"a"}`, want: "a"},
		{name: "spaces around the parameter", ct: "application/json ;charset = \"utf-8\"", body: `{"name":"a"}`, want: "a"},
		{name: "a real surrogate pair", ct: jsonCT, body: `{"name":"\ud83d\ude00"}`, want: "😀"},
		{name: "the same key in sibling objects", ct: jsonCT, body: `{"values":{"a":{"x":1},"b":{"x":2}}}`},
		{name: "a key equal to a value", ct: jsonCT, body: `{"name":"values","values":{"name":"name"}}`, want: "values"},

		{name: "no Content-Type", body: `{"name":"a"}`, status: 415, err: "needs Content-Type: application/json"},
		{name: "text/plain", ct: "text/plain", body: `{"name":"a"}`, status: 415, err: `not "text/plain"`},
		{name: "a form", ct: "application/x-www-form-urlencoded", body: `{"name":"a"}`, status: 415, err: "must be application/json"},
		{name: "multipart", ct: "multipart/form-data; boundary=x", body: `{"name":"a"}`, status: 415, err: "must be application/json"},
		{name: "another charset", ct: "application/json; charset=latin1", body: `{"name":"a"}`, status: 415, err: "only charset=utf-8"},
		{name: "another parameter", ct: "application/json; v=2", body: `{"name":"a"}`, status: 415, err: "only charset=utf-8"},
		{name: "a JSON suffix type", ct: "application/merge-patch+json", body: `{"name":"a"}`, status: 415, err: "must be application/json"},
		{name: "a malformed Content-Type", ct: "application/json; charset", body: `{"name":"a"}`, status: 415, err: "must be application/json"},
		{name: "null needs the Content-Type too", body: `null`, optional: true, status: 415},

		{name: "a duplicate key", ct: jsonCT, body: `{"name":"a","name":"b"}`, status: 400, err: `the key "name" twice`},
		{name: "a duplicate key, one escaped", ct: jsonCT, body: `{"name":"a","n\u0061me":"b"}`, status: 400, err: `the key "name" twice`},
		{name: "a duplicate key deep down", ct: jsonCT, body: `{"values":{"a":[{"x":1,"x":2}]}}`, status: 400, err: `the key "x" twice`},
		{name: "a duplicate key after a nested object", ct: jsonCT, body: `{"values":{"k":{"k":1}},"values":{}}`, status: 400, err: `the key "values" twice`},
		{name: "many keys", ct: jsonCT, body: manyKeys(100, ""), want: ""},
		{name: "many keys, one twice past the first 32", ct: jsonCT, body: manyKeys(100, "k7"), status: 400, err: `the key "k7" twice`},
		{name: "many keys, one twice within the first 32", ct: jsonCT, body: manyKeys(20, "k3"), status: 400, err: `the key "k3" twice`},
		{name: "invalid UTF-8 in a value", ct: jsonCT, body: "{\"name\":\"a\xffb\"}", status: 400, err: "invalid UTF-8"},
		{name: "invalid UTF-8 in a key", ct: jsonCT, body: "{\"values\":{\"\xc3\x28\":1}}", status: 400, err: "invalid UTF-8"},
		{name: "a lone high surrogate", ct: jsonCT, body: `{"name":"\ud83d"}`, status: 400, err: "invalid surrogate pair"},
		{name: "a lone low surrogate", ct: jsonCT, body: `{"name":"\ude00x"}`, status: 400, err: "invalid surrogate pair"},
		{name: "a high surrogate before another escape", ct: jsonCT, body: `{"name":"\ud83d\n"}`, status: 400, err: "invalid surrogate pair"},
		{name: "an unknown field", ct: jsonCT, body: `{"nme":"a"}`, status: 400, err: `unknown field "nme"`},
		{name: "a wrong type", ct: jsonCT, body: `{"paths":"a"}`, status: 400, err: `field "paths" must be an array, not string`},
		{name: "a wrong type in a list", ct: jsonCT, body: `{"paths":["a",2]}`, status: 400, err: `field "paths[1]" must be a string, not number`},
		{name: "a fraction for an integer", ct: jsonCT, body: `{"budget":{"N":1.5}}`, status: 400, err: `field "budget.N" must be an integer`},
		{name: "an unknown field deep down", ct: jsonCT, body: `{"budget":{"M":1}}`, status: 400, err: `unknown field "budget.M"`},
		{name: "a name in another letter case", ct: jsonCT, body: `{"Name":"a"}`, status: 400, err: `unknown field "Name"`},
		{name: "not an object", ct: jsonCT, body: `["a"]`, status: 400, err: "must be a JSON object, not array"},
		{name: "trailing data", ct: jsonCT, body: `{"name":"a"} {}`, status: 400, err: "after top-level value"},
		{name: "a trailing brace", ct: jsonCT, body: `{"name":"a"}}`, status: 400, err: "after top-level value"},
		{name: "truncated", ct: jsonCT, body: `{"name":`, status: 400, err: "truncated"},
		{name: "not JSON", ct: jsonCT, body: `{name}`, status: 400, err: "not valid JSON"},
		{name: "nested 9,000 deep", ct: jsonCT, body: `{"values":{"a":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}}`, status: 400, err: "nests too deeply"},

		{name: "required: empty", body: ``, status: 400, err: "request body is empty; a JSON object is required"},
		{name: "required: whitespace", ct: jsonCT, body: " \n\t", status: 400, err: "request body is empty"},
		{name: "required: null", ct: jsonCT, body: `null`, status: 400, err: "request body is null; a JSON object is required"},
		{name: "required: {} is an object", ct: jsonCT, body: `{}`},
		{name: "optional: empty", body: ``, optional: true},
		{name: "optional: empty with a Content-Type", ct: "text/plain", body: ``, optional: true},
		{name: "optional: null", ct: jsonCT, body: ` null `, optional: true},
		{name: "optional: an object", ct: jsonCT, body: `{"name":"b"}`, optional: true, want: "b"},
		{name: "optional: still strict", ct: jsonCT, body: `{"name":"b","name":"c"}`, optional: true, status: 400, err: "twice"},

		{name: "over the cap", ct: jsonCT, body: `{"name":"` + strings.Repeat("x", maxJSONBytes) + `"}`, status: 413, err: "exceeds the 1048576-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunked := range []bool{false, true} {
				var body io.Reader = strings.NewReader(tc.body)
				if chunked {
					body = io.MultiReader(body) // hides the length
				}
				r := httptest.NewRequest(http.MethodPost, "/x", body)
				if tc.ct != "" {
					r.Header.Set("Content-Type", tc.ct)
				}
				var v decodeTarget
				decode := decodeJSON
				if tc.optional {
					decode = decodeOptionalJSON
				}
				err := decode(r, &v)
				switch {
				case tc.status == 0 && err != nil:
					t.Fatalf("chunked %v: %v", chunked, err)
				case tc.status == 0:
					if got := ptrString(v.Name); got != tc.want {
						t.Errorf("name = %q, want %q", got, tc.want)
					}
				case err == nil:
					t.Fatalf("chunked %v: accepted, want %d", chunked, tc.status)
				case statusOf(err) != tc.status || !strings.Contains(errorMessage(err), tc.err):
					t.Fatalf("chunked %v: %d %q, want %d with %q", chunked, statusOf(err), errorMessage(err), tc.status, tc.err)
				}
			}
		})
	}
}

// manyKeys is {"values":{"k0":0,…,"k<n-1>":n-1}}, with again repeated at
// the end when it is not "".
func manyKeys(n int, again string) string {
	var b strings.Builder
	b.WriteString(`{"values":{"nested":{"k0":0}`)
	for i := range n {
		fmt.Fprintf(&b, `,"k%d":%d`, i, i)
	}
	if again != "" {
		fmt.Fprintf(&b, `,%q:0`, again)
	}
	b.WriteString(`}}`)
	return b.String()
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// FuzzDecodeJSON: the decoder never panics; what it accepts is valid UTF-8
// JSON with no key twice in one object; and on valid JSON its duplicate
// check agrees with a walk through encoding/json's tokens.
func FuzzDecodeJSON(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a"}`, `{"name":"a","name":"b"}`, `{"values":{"a":[{"x":1,"x":2}]}}`, `{"name":"\ud83d\ude00"}`,
		`{"name":"\ud83d"}`, "{\"name\":\"\xff\"}", `null`, ``, `{"values":{"k\"":1,"k\u0022":2}}`, `[{"a":1},{"a":1}]`,
	} {
		f.Add("application/json", []byte(seed), false)
	}
	f.Add("application/json", []byte(manyKeys(40, "k1")), false)
	f.Add("text/plain; charset=utf-8", []byte(`{}`), true)
	f.Fuzz(func(t *testing.T, contentType string, body []byte, optional bool) {
		var v decodeTarget
		err := parseJSONBody(contentType, body, &v, optional)
		if err != nil {
			if s := statusOf(err); s != 400 && s != 415 {
				t.Fatalf("status %d for %v", s, err)
			}
		} else if len(trimJSONSpace(body)) != 0 && string(trimJSONSpace(body)) != "null" {
			if !utf8.Valid(body) || !json.Valid(body) {
				t.Fatalf("accepted %q", body)
			}
			if dup, twice := tokenDuplicate(body); twice {
				t.Fatalf("accepted %q with the key %q twice", body, dup)
			}
		}
		if !json.Valid(body) {
			return
		}
		var anything any
		strict := decodeStrict("body", body, &anything)
		dup, twice := tokenDuplicate(body)
		switch {
		case strict == nil && twice:
			t.Fatalf("%q: the key %q twice, not seen", body, dup)
		case strict != nil && strings.Contains(strict.Error(), "twice") && !twice:
			t.Fatalf("%q: %v, but no key is there twice", body, strict)
		}
	})
}

// tokenDuplicate returns a key found twice in one object of data, a valid
// JSON text, by walking encoding/json's tokens, and whether there is one
// (the key may be "").
func tokenDuplicate(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func() *string
	walk = func() *string {
		tok, err := dec.Token()
		if err != nil {
			panic(fmt.Sprintf("valid JSON: %v", err))
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			var dup *string
			for dec.More() {
				k, _ := dec.Token()
				key := k.(string)
				if seen[key] && dup == nil {
					dup = &key
				}
				seen[key] = true
				if d := walk(); dup == nil {
					dup = d
				}
			}
			dec.Token() // }
			return dup
		case json.Delim('['):
			var dup *string
			for dec.More() {
				if d := walk(); dup == nil {
					dup = d
				}
			}
			dec.Token() // ]
			return dup
		}
		return nil
	}
	if dup := walk(); dup != nil {
		return *dup, true
	}
	return "", false
}

// A JSON body's 415 is an error class like the others.
func TestUnsupportedMediaTypeClass(t *testing.T) {
	err := checkJSONContentType("text/plain")
	if !errors.Is(err, errUnsupportedMediaType) || statusOf(err) != http.StatusUnsupportedMediaType {
		t.Fatalf("%v: status %d", err, statusOf(err))
	}
	w := httptest.NewRecorder()
	fail(w, err)
	if w.Code != 415 || !strings.HasPrefix(w.Body.String(), `{"error":"Content-Type must be application/json`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}
