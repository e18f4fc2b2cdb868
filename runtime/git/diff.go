package git

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// FileDiff is the change of one file in a `git diff` patch: its extended
// header and its hunks. A type change (a file becoming a symlink) comes as
// two FileDiffs of the same path: a deletion, then a creation.
type FileDiff struct {
	// NewFile and Deleted mark a creation (from /dev/null) and a deletion.
	NewFile, Deleted bool
	// FileMode is the mode of a created or deleted file ("100644").
	FileMode string
	// OldMode and NewMode are set when only the mode changed.
	OldMode, NewMode string
	// Renamed and Copied mark a rename or copy; From and To are the raw
	// names of its "rename from"/"copy from" lines (C-quoted by git when
	// they hold unusual bytes).
	Renamed, Copied bool
	From, To        string
	// Binary marks a change git shows without text ("Binary files … differ").
	Binary bool
	Hunks  []Hunk

	// gitLine is the "diff --git" line; minus and plus are the names of the
	// "---" and "+++" lines exactly as printed (with their a/ b/ prefixes,
	// quoted when git quotes, and the tab git adds after a name with a space).
	gitLine, minus, plus string
}

// Hunk is one "@@" section of a file's diff.
type Hunk struct {
	// Header is the "@@ -a,b +c,d @@ section" line.
	Header                                 string
	OldStart, OldLines, NewStart, NewLines int
	// Lines are the hunk's lines exactly as printed, without their "\n":
	// each starts with ' ', '+', '-' or '\' ("\ No newline at end of
	// file"), or is empty (a blank context line, under
	// diff.suppressBlankEmpty). A CRLF file's lines keep their "\r".
	Lines []string
}

// Parse errors.
var (
	// ErrMalformedDiff: the text is not a patch as git prints it.
	ErrMalformedDiff = errors.New("malformed diff")
)

// ParseDiff parses the output of `git diff` (or `git diff --no-index`)
// run with --no-color, --no-ext-diff and the a/ b/ prefixes. Hunk bodies are
// read by the line counts of their headers, so a removed line that reads
// "-- x" or "++ y" is never taken for a file header.
func ParseDiff(data []byte) ([]FileDiff, error) {
	lines := splitLines(data)
	var out []FileDiff
	for i := 0; i < len(lines); {
		if !strings.HasPrefix(lines[i], "diff --git ") {
			return nil, fmt.Errorf("%w: line %d is %q, not a \"diff --git\" header", ErrMalformedDiff, i+1, clip(lines[i]))
		}
		fd := FileDiff{gitLine: lines[i]}
		i++
		for ; i < len(lines) && !strings.HasPrefix(lines[i], "diff --git ") && !strings.HasPrefix(lines[i], "@@ "); i++ {
			if err := fd.headerLine(lines[i]); err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrMalformedDiff, i+1, err)
			}
			if fd.Binary && lines[i] == "GIT binary patch" {
				// The base85 data runs to the next file; it never holds a space.
				for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "diff --git ") {
					i++
				}
			}
		}
		if fd.NewFile && fd.Deleted || (fd.NewFile || fd.Deleted) && (fd.Renamed || fd.Copied) || fd.Renamed && fd.Copied {
			return nil, fmt.Errorf("%w: the header of %q contradicts itself", ErrMalformedDiff, clip(fd.gitLine))
		}
		for i < len(lines) && strings.HasPrefix(lines[i], "@@ ") {
			if fd.Binary || fd.plus == "" || fd.minus == "" {
				return nil, fmt.Errorf("%w: line %d: a hunk without \"---\" and \"+++\" lines", ErrMalformedDiff, i+1)
			}
			h, n, err := parseHunk(lines[i:])
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrMalformedDiff, i+1, err)
			}
			fd.Hunks = append(fd.Hunks, h)
			i += n
		}
		out = append(out, fd)
	}
	return out, nil
}

// splitLines splits on "\n" only, so "\r" stays part of its line; a final
// "\n" ends the last line rather than starting an empty one.
func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	s := string(bytes.TrimSuffix(data, []byte("\n")))
	return strings.Split(s, "\n")
}

// headerLine takes one extended header line of fd.
func (fd *FileDiff) headerLine(l string) error {
	cut := func(prefix string) (string, bool) { return strings.CutPrefix(l, prefix) }
	if v, ok := cut("new file mode "); ok {
		fd.NewFile, fd.FileMode = true, v
	} else if v, ok := cut("deleted file mode "); ok {
		fd.Deleted, fd.FileMode = true, v
	} else if v, ok := cut("old mode "); ok {
		fd.OldMode = v
	} else if v, ok := cut("new mode "); ok {
		fd.NewMode = v
	} else if v, ok := cut("rename from "); ok {
		fd.Renamed, fd.From = true, v
	} else if v, ok := cut("rename to "); ok {
		fd.Renamed, fd.To = true, v
	} else if v, ok := cut("copy from "); ok {
		fd.Copied, fd.From = true, v
	} else if v, ok := cut("copy to "); ok {
		fd.Copied, fd.To = true, v
	} else if v, ok := cut("--- "); ok {
		fd.minus = v
	} else if v, ok := cut("+++ "); ok {
		fd.plus = v
	} else if strings.HasPrefix(l, "Binary files ") && strings.HasSuffix(l, " differ") || l == "GIT binary patch" {
		fd.Binary = true
	} else if !strings.HasPrefix(l, "index ") && !strings.HasPrefix(l, "similarity index ") && !strings.HasPrefix(l, "dissimilarity index ") {
		return fmt.Errorf("unknown extended header line %q", clip(l))
	}
	return nil
}

// parseHunk reads the hunk that starts at lines[0] and returns it with the
// number of lines it spans.
func parseHunk(lines []string) (Hunk, int, error) {
	h := Hunk{Header: lines[0]}
	var err error
	if h.OldStart, h.OldLines, h.NewStart, h.NewLines, err = parseHunkHeader(lines[0]); err != nil {
		return h, 0, err
	}
	old, new := h.OldLines, h.NewLines
	n := 1
	for old > 0 || new > 0 {
		if n == len(lines) {
			return h, 0, fmt.Errorf("hunk %q ends early: %d old and %d new lines missing", clip(h.Header), old, new)
		}
		l := lines[n]
		switch {
		case l == "" || l[0] == ' ':
			old--
			new--
		case l[0] == '-':
			old--
		case l[0] == '+':
			new--
		case l[0] == '\\':
		default:
			return h, 0, fmt.Errorf("hunk %q has a line %q that is not context, addition, removal nor a no-newline mark", clip(h.Header), clip(l))
		}
		if old < 0 || new < 0 {
			return h, 0, fmt.Errorf("hunk %q holds more lines than its header counts", clip(h.Header))
		}
		n++
	}
	if n < len(lines) && strings.HasPrefix(lines[n], "\\") {
		n++ // the last line's "\ No newline at end of file"
	}
	h.Lines = lines[1:n:n]
	return h, n, nil
}

// parseHunkHeader parses "@@ -a[,b] +c[,d] @@[ section]".
func parseHunkHeader(l string) (oldStart, oldLines, newStart, newLines int, err error) {
	rest, ok := strings.CutPrefix(l, "@@ -")
	end := strings.Index(rest, " @@")
	if !ok || end < 0 {
		return 0, 0, 0, 0, fmt.Errorf("malformed hunk header %q", clip(l))
	}
	oldR, newR, ok := strings.Cut(rest[:end], " +")
	if !ok {
		return 0, 0, 0, 0, fmt.Errorf("malformed hunk header %q", clip(l))
	}
	if oldStart, oldLines, err = parseRange(oldR); err == nil {
		newStart, newLines, err = parseRange(newR)
	}
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("malformed hunk header %q: %v", clip(l), err)
	}
	return oldStart, oldLines, newStart, newLines, nil
}

// maxLines bounds a hunk range, far above any real file.
const maxLines = 1 << 30

func parseRange(s string) (start, n int, err error) {
	a, b, hasCount := strings.Cut(s, ",")
	n = 1
	if start, err = strconv.Atoi(a); err == nil && hasCount {
		n, err = strconv.Atoi(b)
	}
	if err != nil || start < 0 || n < 0 || start > maxLines || n > maxLines || a == "" || a[0] == '+' || hasCount && b[0] == '+' {
		return 0, 0, fmt.Errorf("bad range %q", s)
	}
	return start, n, nil
}

// clip shortens text quoted in an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Patch builds the patch that applies hunk i of fd alone: fd's header with
// that one hunk. A creation or deletion keeps its header, so the hunk
// creates or deletes the file; a rename or copy becomes a change of the new
// path, and a mode change is left out, so that only the hunk's lines move.
// The hunk's lines are copied byte for byte.
func (fd FileDiff) Patch(i int) ([]byte, error) {
	switch {
	case fd.Binary:
		return nil, ErrBinary
	case i < 0 || i >= len(fd.Hunks):
		return nil, fmt.Errorf("%w: hunk %d of %d", ErrNoHunk, i, len(fd.Hunks))
	}
	var b bytes.Buffer
	switch {
	case fd.NewFile:
		fmt.Fprintf(&b, "%s\nnew file mode %s\n--- /dev/null\n+++ %s\n", fd.gitLine, fd.FileMode, fd.plus)
	case fd.Deleted:
		fmt.Fprintf(&b, "%s\ndeleted file mode %s\n--- %s\n+++ /dev/null\n", fd.gitLine, fd.FileMode, fd.minus)
	case fd.Renamed || fd.Copied:
		to := strings.TrimSuffix(fd.plus, "\t")
		from, ok := swapPrefix(to)
		if !ok {
			return nil, fmt.Errorf("%w: the new name %q lacks the b/ prefix", ErrMalformedDiff, clip(fd.plus))
		}
		tab := fd.plus[len(to):]
		fmt.Fprintf(&b, "diff --git %s %s\n--- %s%s\n+++ %s\n", from, to, from, tab, fd.plus)
	default:
		fmt.Fprintf(&b, "%s\n--- %s\n+++ %s\n", fd.gitLine, fd.minus, fd.plus)
	}
	h := fd.Hunks[i]
	b.WriteString(h.Header)
	b.WriteByte('\n')
	for _, l := range h.Lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// swapPrefix turns a "b/…" name, plain or C-quoted, into its "a/…" twin.
func swapPrefix(name string) (string, bool) {
	if rest, ok := strings.CutPrefix(name, "b/"); ok {
		return "a/" + rest, true
	}
	if rest, ok := strings.CutPrefix(name, `"b/`); ok {
		return `"a/` + rest, true
	}
	return "", false
}
