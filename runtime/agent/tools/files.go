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
	body := `[ -e "$target" ] || { echo "no such directory: $rel" >&2; exit 3; }
[ -d "$target" ] || { echo "$rel is a file, not a directory; use read_file" >&2; exit 3; }
find "$target" -mindepth 1 -maxdepth "$1" \( -name .git -type d -printf '%y\t%P\n' -prune \) -o -printf '%y\t%P\n' |
  LC_ALL=C sort -t "$(printf '\t')" -k2 |
  awk -F '\t' -v max="$2" '
    NR <= max { s = $2; if ($1 == "d") s = s "/"; else if ($1 == "l") s = s "@"; print s }
    END {
      if (NR == 0) print "(empty directory)"
      if (NR > max) printf "[… %d more entries not shown; list a subdirectory or lower the depth …]\n", NR - max
    }'
`
	out, res := s.script(ctx, "list_files", rel, body, nil, strconv.Itoa(depth), strconv.Itoa(MaxListEntries))
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

// readPy prints numbered lines of argv[1] from line argv[2], at most argv[3]
// lines and argv[4] bytes, with notices; exit 3 with a message on stderr.
const readPy = `import os, sys
path, off, lim, maxb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rel = sys.argv[5]
def fail(msg):
    sys.stderr.write(msg + "\n"); sys.exit(3)
if os.path.isdir(path): fail(rel + " is a directory; use list_files")
if not os.path.exists(path): fail("no such file: " + rel)
out, used, shown, lineno, stop = [], 0, 0, 0, None
with open(path, "rb") as f:
    if b"\0" in f.read(8192):
        fail("%s is a binary file (%d bytes); not shown" % (rel, os.path.getsize(path)))
    f.seek(0)
    for line in f:
        lineno += 1
        if lineno < off or stop:
            continue
        if shown >= lim:
            stop = ("limit", lineno); continue
        text = line.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
        if len(text) > 2000:
            text = text[:2000] + " [… line cut at 2000 characters …]"
        entry = ("%6d\t%s\n" % (lineno, text)).encode("utf-8", "replace")
        if used + len(entry) > maxb:
            stop = ("bytes", lineno); continue
        out.append(entry); used += len(entry); shown += 1
if lineno == 0:
    sys.stdout.write("(empty file)\n"); sys.exit(0)
if off > lineno:
    fail("offset_line %d is past the end of %s (%d lines)" % (off, rel, lineno))
w = sys.stdout.buffer
w.write(b"".join(out))
if stop:
    why = "the 256 KiB limit" if stop[0] == "bytes" else "limit_lines"
    w.write(("[… stopped at %s; the file has %d lines; continue with offset_line=%d …]\n" % (why, lineno, stop[1])).encode())
`

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
	body := `exec python3 -c "$1" "$target" "$2" "$3" "$4" "$rel"`
	out, res := s.script(ctx, "read_file", rel, body, nil, readPy, strconv.Itoa(off), strconv.Itoa(lim), strconv.Itoa(MaxReadBytes))
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
	// that then replaces it, keeping an existing file's mode.
	body := `[ -d "$target" ] && { echo "$rel is a directory" >&2; exit 3; }
dir=$(dirname -- "$target")
mkdir -p -- "$dir" 2>/dev/null || { echo "cannot create directory ${dir#$root/}" >&2; exit 3; }
tmp=$(mktemp -- "$dir/.lathe-write.XXXXXX") || exit 3
trap 'rm -f -- "$tmp"' EXIT
cat > "$tmp" || exit 3
if [ -e "$target" ]; then chmod --reference="$target" -- "$tmp"; verb=overwrote; else chmod 644 -- "$tmp"; verb=created; fi
mv -f -- "$tmp" "$target" || exit 3
trap - EXIT
echo "$verb"
`
	out, res := s.script(ctx, "write_file", rel, body, strings.NewReader(*a.Content))
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

// editPy replaces in argv[1] per the JSON {old, new, all} on stdin, writes
// atomically keeping the mode, and prints the number of replacements.
const editPy = `import json, os, sys, tempfile
path, rel = sys.argv[1], sys.argv[2]
a = json.loads(sys.stdin.buffer.read())
def fail(msg):
    sys.stderr.write(msg + "\n"); sys.exit(3)
if os.path.isdir(path): fail(rel + " is a directory")
try:
    with open(path, "rb") as f: data = f.read()
except FileNotFoundError:
    fail("no such file: %s (use write_file to create it)" % rel)
s = data.decode("utf-8", "surrogateescape")
n = s.count(a["old"])
if n == 0:
    fail("old_string not found in %s (0 matches); read the file and copy the text exactly" % rel)
if n > 1 and not a["all"]:
    fail("old_string matches %d times in %s; add surrounding context to make it unique, or set replace_all" % (n, rel))
s = s.replace(a["old"], a["new"]) if a["all"] else s.replace(a["old"], a["new"], 1)
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".lathe-edit.")
try:
    with os.fdopen(fd, "wb") as f: f.write(s.encode("utf-8", "surrogateescape"))
    os.chmod(tmp, os.stat(path).st_mode & 0o7777)
    os.replace(tmp, path)
except BaseException:
    os.unlink(tmp); raise
print(n)
`

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
	body := `exec python3 -c "$1" "$target" "$rel"`
	out, res := s.script(ctx, "edit_file", rel, body, strings.NewReader(string(in)), editPy)
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
	// grep runs from the root on the relative path so that results read as
	// workspace paths; awk counts past the cap so grep is never cut off.
	body := `[ -e "$target" ] || { echo "no such file or directory: $rel" >&2; exit 3; }
cd -- "$root" || exit 3
p=${target#"$root"}; p=${p#/}; [ -n "$p" ] || p=.
inc=(); [ -n "$3" ] && inc=(--include="$3")
grep -rnIHs --exclude-dir=.git "$2" "${inc[@]}" -e "$1" -- "$p" |
  awk -v max="$4" '
    NR <= max { if (length($0) > 500) $0 = substr($0, 1, 500) " [… cut …]"; print }
    END { if (NR > max) printf "[… %d more matches not shown; narrow the pattern, path or glob …]\n", NR - max }'
st=${PIPESTATUS[0]}
if [ "$st" -eq 1 ]; then echo "no matches"; exit 0; fi
if [ "$st" -ne 0 ]; then exit 3; fi
`
	out, res := s.script(ctx, "search", rel, body, nil, *a.Pattern, mode, deref(a.Glob), strconv.Itoa(MaxSearchMatches))
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
