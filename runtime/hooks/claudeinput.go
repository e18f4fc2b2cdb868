package hooks

import (
	"encoding/json"
	"path"
)

// claudeFields adds to a sandbox tool's input the fields Claude Code's
// counterpart tool has (docs/design/toolchain.md), beside Lathe's own, so
// that a script written for Claude Code reads what it expects:
// `tool_input.file_path` (absolute, under dir, the checkout where the
// hook runs) for the file tools, `timeout` in milliseconds for shell,
// `offset`/`limit` for read_file. A field already there is left alone;
// an input that is not an object, or a path that is not relative and
// clean, adds nothing.
func claudeFields(tool, dir string, input json.RawMessage) json.RawMessage {
	if _, ok := ClaudeCodeNames[tool]; !ok || len(input) == 0 {
		return input
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(input, &m) != nil || m == nil {
		return input
	}
	add := func(k string, v any) {
		if _, ok := m[k]; ok {
			return
		}
		if b, err := json.Marshal(v); err == nil {
			m[k] = b
		}
	}
	switch tool {
	case "write_file", "edit_file", "read_file":
		var p string
		if json.Unmarshal(m["path"], &p) == nil && p != "" && dir != "" && !path.IsAbs(p) && path.Clean(p) == p && !hasDotDot(p) {
			add("file_path", path.Join(dir, p))
		}
		if tool == "read_file" {
			if v, ok := m["offset_line"]; ok {
				add("offset", v)
			}
			if v, ok := m["limit_lines"]; ok {
				add("limit", v)
			}
		}
	case "shell":
		var s float64
		if json.Unmarshal(m["timeout_seconds"], &s) == nil && s > 0 {
			add("timeout", int64(s*1000))
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return input
	}
	return b
}

// hasDotDot reports whether the slash path p climbs out of where it starts.
func hasDotDot(p string) bool {
	return p == ".." || len(p) > 2 && p[:3] == "../"
}
