package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"lathe/commands"
	"lathe/runtime/jsonlimit"
)

// The one strict JSON decoder of every HTTP route that takes a JSON body.
//
// A body is read whole (at most maxJSONBytes) and must be exactly one JSON
// object: Content-Type application/json (charset utf-8 or none), valid
// UTF-8, no \u escape naming a lone UTF-16 surrogate, no object key twice at
// any depth, no unknown field, no trailing data. encoding/json alone would
// replace invalid bytes with U+FFFD and let the last of two keys win, so a
// stored value could differ from what the client meant.
//
// An empty body and a JSON null are the same thing, "no body": a route
// whose body is required (decodeJSON) refuses both with 400; a route whose
// every field is optional (decodeOptionalJSON) takes both as {}.

// maxJSONBytes caps every JSON request body. The Guard's cap is higher
// (attachment uploads), so the decoder enforces this one itself.
const maxJSONBytes = 1 << 20

// errUnsupportedMediaType is the class of a JSON body sent under another
// Content-Type; it maps to 415.
var errUnsupportedMediaType = errors.New("unsupported media type")

// decodeJSON decodes the request's required JSON object body into v. Errors
// are of class commands.ErrInvalid (400), errUnsupportedMediaType (415) or
// commands.ErrTooLarge (413).
func decodeJSON(r *http.Request, v any) error {
	return decodeBody(r, v, false)
}

// decodeOptionalJSON is decodeJSON for a route whose body may be left out:
// an empty body or null leaves v as it is, as {} would.
func decodeOptionalJSON(r *http.Request, v any) error {
	return decodeBody(r, v, true)
}

func decodeBody(r *http.Request, v any, optional bool) error {
	if r.ContentLength > maxJSONBytes {
		return fmt.Errorf("%w: request body of %d bytes exceeds the %d-byte limit", commands.ErrTooLarge, r.ContentLength, maxJSONBytes)
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.Body = http.MaxBytesReader(nil, r.Body, maxJSONBytes)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return fmt.Errorf("%w: request body is too large: it exceeds the %d-byte limit", commands.ErrTooLarge, maxJSONBytes)
		}
		return fmt.Errorf("%w: read request body: %v", commands.ErrInvalid, err)
	}
	return parseJSONBody(r.Header.Get("Content-Type"), body, v, optional)
}

// parseJSONBody is decodeBody after the read: contentType is the request's
// header ("" when absent).
func parseJSONBody(contentType string, body []byte, v any, optional bool) error {
	if len(trimJSONSpace(body)) == 0 {
		return noBody(optional, "empty")
	}
	if err := checkJSONContentType(contentType); err != nil {
		return err
	}
	if string(trimJSONSpace(body)) == "null" {
		return noBody(optional, "null")
	}
	if !utf8.Valid(body) {
		return fmt.Errorf("%w: request body is not valid UTF-8", commands.ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Errorf("%w: request body is truncated JSON", commands.ErrInvalid)
		case errors.As(err, &syntax):
			return fmt.Errorf("%w: request body is not valid JSON (offset %d): %v", commands.ErrInvalid, syntax.Offset, err)
		case errors.As(err, &typ) && typ.Field == "":
			return fmt.Errorf("%w: request body must be a JSON object, not %s", commands.ErrInvalid, typ.Value)
		case errors.As(err, &typ):
			return fmt.Errorf("%w: field %q must be %s, not %s", commands.ErrInvalid, typ.Field, jsonKind(typ.Type), typ.Value)
		default:
			return fmt.Errorf("%w: %v", commands.ErrInvalid, err)
		}
	}
	if len(trimJSONSpace(body[dec.InputOffset():])) != 0 {
		return fmt.Errorf("%w: request body has data after the JSON object", commands.ErrInvalid)
	}
	return checkJSONStrict(body)
}

// noBody answers an empty or null body by the route's rule.
func noBody(optional bool, what string) error {
	if optional {
		return nil
	}
	return fmt.Errorf("%w: request body is %s; a JSON object is required", commands.ErrInvalid, what)
}

// trimJSONSpace trims JSON's four whitespace bytes.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// checkJSONContentType accepts application/json with no parameter or only
// charset=utf-8, in any letter case.
func checkJSONContentType(header string) error {
	if header == "" {
		return fmt.Errorf("%w: a JSON body needs Content-Type: application/json", errUnsupportedMediaType)
	}
	mediaType, params, err := mime.ParseMediaType(header)
	if err != nil || mediaType != "application/json" {
		return fmt.Errorf("%w: Content-Type must be application/json, not %q", errUnsupportedMediaType, header)
	}
	for name, value := range params {
		if name != "charset" || !strings.EqualFold(value, "utf-8") {
			return fmt.Errorf("%w: Content-Type application/json takes only charset=utf-8, not %q", errUnsupportedMediaType, header)
		}
	}
	return nil
}

// checkJSONStrict reports nesting past jsonlimit.MaxDepth (issue 23), a
// key that appears twice in one object, at any depth, and a \u escape that names a lone UTF-16 surrogate (which
// encoding/json would store as U+FFFD). data must be valid JSON; on other
// input it returns some answer without panicking.
func checkJSONStrict(data []byte) error {
	if err := jsonlimit.Check(data, jsonlimit.Limits{Depth: jsonlimit.MaxDepth}); err != nil {
		return fmt.Errorf("%w: request body: %v", commands.ErrInvalid, err)
	}
	// The keys of the open objects, innermost last, share one slice of
	// views into data; an object with many keys moves to a set.
	type container struct {
		object    bool
		expectKey bool
		start     int // its first key in keys
		set       map[string]struct{}
	}
	const maxScan = 32
	var stackBuf [8]container
	var keysBuf [32][]byte
	stack, keys := stackBuf[:0], keysBuf[:0]
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{':
			stack = append(stack, container{object: true, expectKey: true, start: len(keys)})
		case '[':
			stack = append(stack, container{start: len(keys)})
		case '}', ']':
			if n := len(stack); n > 0 {
				keys = keys[:stack[n-1].start]
				stack = stack[:n-1]
			}
		case ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].expectKey = true
			}
		case '"':
			end, escaped, err := scanJSONString(data, i)
			if err != nil || end == len(data) {
				return err // an unterminated string is not JSON
			}
			if n := len(stack); n > 0 && stack[n-1].expectKey {
				top := &stack[n-1]
				top.expectKey = false
				key := data[i+1 : end]
				if escaped {
					var k string
					if err := json.Unmarshal(data[i:end+1], &k); err != nil {
						return fmt.Errorf("%w: request body has a malformed key: %v", commands.ErrInvalid, err)
					}
					key = []byte(k)
				}
				dup := false
				switch {
				case top.set != nil:
					_, dup = top.set[string(key)]
					top.set[string(key)] = struct{}{}
				case len(keys)-top.start < maxScan:
					for _, k := range keys[top.start:] {
						dup = dup || bytes.Equal(k, key)
					}
					keys = append(keys, key)
				default:
					top.set = make(map[string]struct{}, 2*maxScan)
					for _, k := range keys[top.start:] {
						top.set[string(k)] = struct{}{}
					}
					keys = keys[:top.start]
					_, dup = top.set[string(key)]
					top.set[string(key)] = struct{}{}
				}
				if dup {
					return fmt.Errorf("%w: request body has the key %q twice in one object", commands.ErrInvalid, key)
				}
			}
			i = end
		}
	}
	return nil
}

// scanJSONString scans the string that starts with the quote at data[start]
// and returns the index of its closing quote (len(data) if unterminated) and
// whether it holds an escape. It refuses a lone surrogate escape.
func scanJSONString(data []byte, start int) (end int, escaped bool, err error) {
	for i := start + 1; i < len(data); i++ {
		switch data[i] {
		case '"':
			return i, escaped, nil
		case '\\':
			escaped = true
			i++
			if i >= len(data) || data[i] != 'u' {
				continue
			}
			r := hex4(data, i+1)
			i += 4
			switch {
			case r >= 0xD800 && r <= 0xDBFF: // a high surrogate: a low one must follow
				if i+2 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' {
					if lo := hex4(data, i+3); lo >= 0xDC00 && lo <= 0xDFFF {
						i += 6
						continue
					}
				}
				fallthrough
			case r >= 0xDC00 && r <= 0xDFFF:
				return 0, false, fmt.Errorf("%w: request body has a \\u escape naming a lone UTF-16 surrogate", commands.ErrInvalid)
			}
		}
	}
	return len(data), escaped, nil
}

// hex4 decodes the four hex digits at data[at:], or returns -1.
func hex4(data []byte, at int) rune {
	if at < 0 || at+4 > len(data) {
		return -1
	}
	var r rune
	for _, c := range data[at : at+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}

// jsonKind names the JSON kind a Go type decodes from, for error messages.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another JSON type"
}
