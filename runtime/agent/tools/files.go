package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"lathe/runtime/confine"
)

const listDesc = `List the files and directories under a directory of the workspace, recursively up to a depth. Directories end in "/", symlinks in "@". The .git directory is listed but not entered. At most 1000 entries are shown; narrow the path or depth for more.`

const listSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory relative to the workspace root; default \".\" (the root). Absolute paths and \"..\" are refused."},
    "depth": {"type": "integer", "minimum": 1, "maximum": 10, "description": "How many levels to descend; default 2."}
  },
  "additionalProperties": false
}`

func (s *Set) listFiles(ctx context.Context, raw json.RawMessage) Result {
	var a struct {
		Path  *string `json:"path"`
		Depth *int    `json:"depth"`
	}
	if err := decode("list_files", raw, &a); err != nil {
		return fail("%v", err)
	}
	rel, err := confine.Rel(deref(a.Path))
	if err != nil {
		return fail("list_files: %v", err)
	}
	depth := 2
	if a.Depth != nil {
		depth = *a.Depth
		if depth < 1 || depth > 10 {
			return fail("list_files: depth must be between 1 and 10, got %d", depth)
		}
	}
	out, res := s.inside(ctx, "list_files", rel, nil, strconv.Itoa(depth), strconv.Itoa(MaxListEntries))
	if res != nil {
		return *res
	}
	return Result{Output: out}
}

const readDesc = `Read a text file of the workspace. Lines come numbered ("   12\t<line>"); the numbers are not part of the file. Shows up to limit_lines lines (default 2000) from offset_line, within 256 KiB; lines over 2000 characters are cut. A notice says when more follows and which offset_line continues.`

const readSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File relative to the workspace root."},
    "offset_line": {"type": "integer", "minimum": 1, "description": "First line to show, 1-based; default 1."},
    "limit_lines": {"type": "integer", "minimum": 1, "description": "Most lines to show; default 2000."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

func (s *Set) readFile(ctx context.Context, raw json.RawMessage) Result {
	var a struct {
		Path   *string `json:"path"`
		Offset *int    `json:"offset_line"`
		Limit  *int    `json:"limit_lines"`
	}
	if err := decode("read_file", raw, &a); err != nil {
		return fail("%v", err)
	}
	if a.Path == nil {
		return missing("read_file", "path")
	}
	rel, err := confine.Rel(*a.Path)
	if err != nil {
		return fail("read_file: %v", err)
	}
	off, lim := 1, 2000
	if a.Offset != nil {
		if off = *a.Offset; off < 1 {
			return fail("read_file: offset_line must be 1 or more, got %d", off)
		}
	}
	if a.Limit != nil {
		if lim = *a.Limit; lim < 1 {
			return fail("read_file: limit_lines must be 1 or more, got %d", lim)
		}
	}
	out, res := s.inside(ctx, "read_file", rel, nil, strconv.Itoa(off), strconv.Itoa(lim), strconv.Itoa(MaxReadBytes))
	if res != nil {
		return *res
	}
	return Result{Output: out}
}

const writeDesc = `Create a file of the workspace, or replace its whole content. Missing parent directories are created. The write is atomic. Give the complete content; to change part of a file, prefer edit_file.`

const writeSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File relative to the workspace root."},
    "content": {"type": "string", "description": "The complete new content of the file, exactly as it should be stored."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`

func (s *Set) writeFile(ctx context.Context, raw json.RawMessage) Result {
	var a struct {
		Path    *string `json:"path"`
		Content *string `json:"content"`
	}
	if err := decode("write_file", raw, &a); err != nil {
		return fail("%v", err)
	}
	if a.Path == nil {
		return missing("write_file", "path")
	}
	if a.Content == nil {
		return missing("write_file", "content")
	}
	rel, err := confine.Rel(*a.Path)
	if err != nil {
		return fail("write_file: %v", err)
	}
	if rel == "." {
		return fail("write_file: path is the workspace root; name a file")
	}
	// The content arrives on stdin, into a temporary file beside the target
	// that then replaces it, keeping an existing file's mode (inside.go).
	out, res := s.inside(ctx, "write_file", rel, strings.NewReader(*a.Content))
	if res != nil {
		return *res
	}
	return Result{Output: fmt.Sprintf("%s %s (%d bytes)", strings.TrimSpace(out), rel, len(*a.Content))}
}

const editDesc = `Replace an exact string in a file of the workspace. old_string must match the file's text exactly, whitespace and indentation included (without read_file's line numbers). It must match exactly once unless replace_all is true; otherwise the edit fails and says how many times it matched, so add surrounding lines to make it unique.`

const editSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File relative to the workspace root."},
    "old_string": {"type": "string", "minLength": 1, "description": "The exact text to replace."},
    "new_string": {"type": "string", "description": "The text to put in its place; may be empty to delete."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one; default false."}
  },
  "required": ["path", "old_string", "new_string"],
  "additionalProperties": false
}`

func (s *Set) editFile(ctx context.Context, raw json.RawMessage) Result {
	var a struct {
		Path       *string `json:"path"`
		Old        *string `json:"old_string"`
		New        *string `json:"new_string"`
		ReplaceAll *bool   `json:"replace_all"`
	}
	if err := decode("edit_file", raw, &a); err != nil {
		return fail("%v", err)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"path", a.Path != nil}, {"old_string", a.Old != nil}, {"new_string", a.New != nil}} {
		if !f.set {
			return missing("edit_file", f.name)
		}
	}
	rel, err := confine.Rel(*a.Path)
	if err != nil {
		return fail("edit_file: %v", err)
	}
	if *a.Old == "" {
		return fail("edit_file: old_string is empty; to create or replace a whole file use write_file")
	}
	if *a.Old == *a.New {
		return fail("edit_file: old_string and new_string are identical; nothing to change")
	}
	in, err := json.Marshal(map[string]any{"old": *a.Old, "new": *a.New, "all": a.ReplaceAll != nil && *a.ReplaceAll})
	if err != nil {
		return fail("edit_file: %v", err)
	}
	out, res := s.inside(ctx, "edit_file", rel, strings.NewReader(string(in)))
	if res != nil {
		return *res
	}
	n := strings.TrimSpace(out)
	if n == "1" {
		return Result{Output: fmt.Sprintf("replaced 1 occurrence in %s", rel)}
	}
	return Result{Output: fmt.Sprintf("replaced %s occurrences in %s", n, rel)}
}

const searchDesc = `Search file contents in the workspace with grep, recursively. Prints "path:line:text" for each matching line; binary files and .git are skipped. pattern is a POSIX extended regular expression unless literal is true. At most 200 matches are shown.`

const searchSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "Extended regular expression (grep -E), or a fixed string when literal is true."},
    "path": {"type": "string", "description": "Directory or file to search, relative to the workspace root; default \".\"."},
    "glob": {"type": "string", "description": "Only search files whose name matches this glob, e.g. \"*.go\" (matched against the file name, not the whole path)."},
    "literal": {"type": "boolean", "description": "Treat pattern as a fixed string; default false."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`

func (s *Set) search(ctx context.Context, raw json.RawMessage) Result {
	var a struct {
		Pattern *string `json:"pattern"`
		Path    *string `json:"path"`
		Glob    *string `json:"glob"`
		Literal *bool   `json:"literal"`
	}
	if err := decode("search", raw, &a); err != nil {
		return fail("%v", err)
	}
	if a.Pattern == nil {
		return missing("search", "pattern")
	}
	if *a.Pattern == "" {
		return fail("search: pattern is empty")
	}
	rel, err := confine.Rel(deref(a.Path))
	if err != nil {
		return fail("search: %v", err)
	}
	mode := "-E"
	if a.Literal != nil && *a.Literal {
		mode = "-F"
	}
	out, res := s.inside(ctx, "search", rel, nil, *a.Pattern, mode, deref(a.Glob), strconv.Itoa(MaxSearchMatches))
	if res != nil {
		return *res
	}
	return Result{Output: out}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
