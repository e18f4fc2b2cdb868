package hooks

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// A script written for Claude Code reads its tool's own fields: they come
// beside Lathe's, never over them, and never for a path that climbs out.
func TestClaudeFields(t *testing.T) {
	for _, c := range []struct {
		name, tool, in, want string
	}{
		{"write", "write_file", `{"path":"src/a.go","content":"x"}`, `{"content":"x","file_path":"/w/src/a.go","path":"src/a.go"}`},
		{"edit", "edit_file", `{"path":"a.go","old_string":"a","new_string":"b"}`, `{"file_path":"/w/a.go","new_string":"b","old_string":"a","path":"a.go"}`},
		{"read", "read_file", `{"path":"a.go","offset_line":3,"limit_lines":10}`, `{"file_path":"/w/a.go","limit":10,"limit_lines":10,"offset":3,"offset_line":3,"path":"a.go"}`},
		{"shell timeout in ms", "shell", `{"command":"ls","timeout_seconds":2.5}`, `{"command":"ls","timeout":2500,"timeout_seconds":2.5}`},
		{"shell without timeout", "shell", `{"command":"ls"}`, `{"command":"ls"}`},
		{"a field already there stays", "write_file", `{"path":"a","file_path":"mine"}`, `{"file_path":"mine","path":"a"}`},
		{"climbing path: no file_path", "write_file", `{"path":"../etc/passwd"}`, `{"path":"../etc/passwd"}`},
		{"absolute path: no file_path", "read_file", `{"path":"/etc/passwd"}`, `{"path":"/etc/passwd"}`},
		{"unclean path: no file_path", "read_file", `{"path":"a/../../b"}`, `{"path":"a/../../b"}`},
		{"an MCP tool is as it came", "mcp__t__echo", `{"path":"a"}`, `{"path":"a"}`},
		{"not an object", "write_file", `"oops"`, `"oops"`},
		{"null", "write_file", `null`, `null`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := claudeFields(c.tool, "/w", json.RawMessage(c.in))
			if string(got) != c.want {
				t.Errorf("claudeFields(%s, %s) = %s, want %s", c.tool, c.in, got, c.want)
			}
		})
	}
}

// Whatever a model sends as a tool's input, the hook's input stays valid
// JSON and keeps every field as it came.
func FuzzClaudeFields(f *testing.F) {
	f.Add("write_file", `{"path":"a/b","content":"x"}`)
	f.Add("shell", `{"command":"ls","timeout_seconds":1e308}`)
	f.Add("read_file", `{"path":"..","offset_line":"x"}`)
	f.Fuzz(func(t *testing.T, tool, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		got := claudeFields(tool, "/w", json.RawMessage(in))
		if !json.Valid(got) {
			t.Fatalf("%s → invalid %s", in, got)
		}
		var before, after map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &before) == nil && json.Unmarshal(got, &after) == nil {
			for k, v := range before {
				if w, ok := after[k]; !ok || !jsonEqual(v, w) {
					t.Fatalf("field %s changed: %s → %s", k, v, w)
				}
			}
		}
	})
}

// jsonEqual compares two JSON values as a reader sees them (a number out
// of float range by its text).
func jsonEqual(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	var u, v any
	if json.Unmarshal(a, &u) != nil || json.Unmarshal(b, &v) != nil {
		return x.String() == y.String()
	}
	return reflect.DeepEqual(u, v)
}
