package automations

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The built-in tools a tool node may call beside the MCP tools, listed in
// GET /api/tools. Each does its work in the daemon, at once, with no side
// effect outside its answer.
var BuiltinTools = map[string]func(args json.RawMessage) (string, error){
	// lathe__echo {text}: answers text.
	"lathe__echo": textArg,
	// lathe__sha256 {text}: the SHA-256 of text, in hex.
	"lathe__sha256": func(args json.RawMessage) (string, error) {
		text, err := textArg(args)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256([]byte(text))
		return hex.EncodeToString(sum[:]), nil
	},
	// lathe__json_get {json, path}: the value at a dotted path ("a.0.b")
	// of the JSON document json; a string value comes unquoted.
	"lathe__json_get": func(args json.RawMessage) (string, error) {
		var a struct {
			JSON string `json:"json"`
			Path string `json:"path"`
		}
		if err := strictArgs(args, &a); err != nil {
			return "", err
		}
		var v any
		if err := json.Unmarshal([]byte(a.JSON), &v); err != nil {
			return "", fmt.Errorf("json is not a JSON document: %v", err)
		}
		if a.Path != "" {
			for seg := range strings.SplitSeq(a.Path, ".") {
				switch c := v.(type) {
				case map[string]any:
					var ok bool
					if v, ok = c[seg]; !ok {
						return "", fmt.Errorf("path %q: no key %q", a.Path, seg)
					}
				case []any:
					i, err := strconv.Atoi(seg)
					if err != nil || i < 0 || i >= len(c) {
						return "", fmt.Errorf("path %q: no index %q", a.Path, seg)
					}
					v = c[i]
				default:
					return "", fmt.Errorf("path %q: %q is inside a scalar", a.Path, seg)
				}
			}
		}
		if s, ok := v.(string); ok {
			return s, nil
		}
		out, err := json.Marshal(v)
		return string(out), err
	},
}

func strictArgs(args json.RawMessage, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("arguments: %v", err)
	}
	return nil
}

// textArg reads the arguments {text} (required) of a built-in tool.
func textArg(args json.RawMessage) (string, error) {
	var a struct {
		Text *string `json:"text"`
	}
	if err := strictArgs(args, &a); err != nil {
		return "", err
	}
	if a.Text == nil {
		return "", fmt.Errorf("text is required")
	}
	return *a.Text, nil
}
