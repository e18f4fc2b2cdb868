package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"lathe/commands/core"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"lathe/runtime/jsonlimit"
)

// The one strict JSON decoder of every HTTP route that takes a JSON body,
// and of the /ws commands.
//
// A body is read whole (at most maxJSONBytes) and must be exactly one JSON
// object: Content-Type application/json (charset utf-8 or none), valid
// UTF-8, no \u escape naming a lone UTF-16 surrogate, no object key twice at
// any depth, no unknown field, no trailing data, nested at most
// jsonlimit.MaxDepth levels. encoding/json (v1) would replace invalid bytes
// with U+FFFD and let the last of two keys win, so a stored value could
// differ from what the client meant; encoding/json/v2 refuses all of these
// by default (RejectUnknownMembers is the one option set), and names the
// member at fault. It is experimental in Go 1.26 (GOEXPERIMENT=jsonv2) and
// stable in Go 1.27; github.com/go-json-experiment/json is its upstream,
// and aliases it where the standard library has it.
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
		return fmt.Errorf("%w: request body of %d bytes exceeds the %d-byte limit", core.ErrTooLarge, r.ContentLength, maxJSONBytes)
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.Body = http.MaxBytesReader(nil, r.Body, maxJSONBytes)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return fmt.Errorf("%w: request body is too large: it exceeds the %d-byte limit", core.ErrTooLarge, maxJSONBytes)
		}
		return fmt.Errorf("%w: read request body: %v", core.ErrInvalid, err)
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
	return decodeStrict("request body", body, v, json.RejectUnknownMembers(true))
}

// decodeStrict decodes data, one JSON value, into v under the rules above
// (unknown members are refused only with json.RejectUnknownMembers). what
// names data in the error, of class commands.ErrInvalid.
func decodeStrict(what string, data []byte, v any, opts ...json.Options) error {
	if err := jsonlimit.Check(data, jsonlimit.Limits{Depth: jsonlimit.MaxDepth}); err != nil {
		return fmt.Errorf("%w: %s: %v", core.ErrInvalid, what, err)
	}
	err := json.Unmarshal(data, v, opts...)
	if err == nil {
		return nil
	}
	var syntax *jsontext.SyntacticError
	var semantic *json.SemanticError
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &syntax):
		return fmt.Errorf("%w: %s has the key %q twice in one object", core.ErrInvalid, what, syntax.JSONPointer.LastToken())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: %s is truncated JSON", core.ErrInvalid, what)
	case errors.As(err, &syntax):
		return fmt.Errorf("%w: %s is not valid JSON (offset %d): %v", core.ErrInvalid, what, syntax.ByteOffset, syntax.Err)
	case errors.As(err, &semantic) && errors.Is(err, json.ErrUnknownName):
		return fmt.Errorf("%w: %s has an unknown field %q", core.ErrInvalid, what, jsonField(semantic.JSONPointer))
	case errors.As(err, &semantic) && semantic.JSONPointer == "":
		return fmt.Errorf("%w: %s must be a JSON object, not %s", core.ErrInvalid, what, jsonKindName(semantic.JSONKind))
	case errors.As(err, &semantic) && semantic.GoType != nil && semantic.Err == nil:
		return fmt.Errorf("%w: field %q must be %s, not %s", core.ErrInvalid, jsonField(semantic.JSONPointer), jsonKind(semantic.GoType), jsonKindName(semantic.JSONKind))
	case errors.As(err, &semantic) && semantic.GoType != nil:
		return fmt.Errorf("%w: field %q must be %s: %v", core.ErrInvalid, jsonField(semantic.JSONPointer), jsonKind(semantic.GoType), semantic.Err)
	default:
		return fmt.Errorf("%w: %s: %v", core.ErrInvalid, what, err)
	}
}

// noBody answers an empty or null body by the route's rule.
func noBody(optional bool, what string) error {
	if optional {
		return nil
	}
	return fmt.Errorf("%w: request body is %s; a JSON object is required", core.ErrInvalid, what)
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

// jsonKindName names a JSON kind for error messages.
func jsonKindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	}
	return k.String() // null, string, number
}

// jsonField names the member p points to as a dotted path, with an array
// index in brackets: budget.limit, lanes[0].temp.
func jsonField(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		switch {
		case tok != "" && strings.Trim(tok, "0123456789") == "":
			b.WriteString("[" + tok + "]")
		case b.Len() > 0:
			b.WriteString("." + tok)
		default:
			b.WriteString(tok)
		}
	}
	return b.String()
}
