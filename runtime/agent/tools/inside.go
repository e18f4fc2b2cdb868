package tools

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The file tools' half inside the sandbox: `lathe sandbox-helper files
// TOOL ROOT REL ARGS…` (runtime/sandbox/helper), run by the Set for each
// call (files.go). A refusal the model can act on is exit code 3 with its
// message on stderr; the output is stdout. Nothing here needs the image:
// no shell, no coreutils, no Python.

// FilesCommand is the helper command that runs one file tool.
const FilesCommand = "files"

// toolError is a refusal in words for the model (exit code 3).
type toolError string

func (e toolError) Error() string { return string(e) }

func refuse(format string, a ...any) error { return toolError(fmt.Sprintf(format, a...)) }

// Files is the helper command FilesCommand.
func Files(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 3 {
		fmt.Fprintln(stderr, "usage: files TOOL ROOT REL ARGS…")
		return 2
	}
	tool, root, rel, rest := args[0], args[1], args[2], args[3:]
	out := bufio.NewWriterSize(stdout, 64<<10)
	err := runFile(tool, root, rel, rest, stdin, out)
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 3
	}
	return 0
}

func runFile(tool, root, rel string, args []string, stdin io.Reader, out *bufio.Writer) error {
	want := map[string]int{"list_files": 2, "read_file": 3, "write_file": 0, "edit_file": 0, "search": 4}
	n, ok := want[tool]
	if !ok {
		return fmt.Errorf("unknown file tool %q", tool)
	}
	if len(args) != n {
		return fmt.Errorf("%s takes %d arguments, not %d", tool, n, len(args))
	}
	absRoot, target, err := under(root, rel)
	if err != nil {
		return err
	}
	switch tool {
	case "list_files":
		return listInside(out, target, rel, atoi(args[0]), atoi(args[1]))
	case "read_file":
		return readInside(out, target, rel, atoi(args[0]), atoi(args[1]), atoi(args[2]))
	case "write_file":
		return writeInside(out, absRoot, target, rel, stdin)
	case "edit_file":
		return editInside(out, target, rel, stdin)
	}
	return searchInside(out, absRoot, target, rel, args[0], args[1], args[2], atoi(args[3]))
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// listInside lists target to depth: every entry below it, paths relative
// to it in byte order, directories with "/" and symlinks with "@"; .git
// is listed, not entered; symlinks are not followed.
func listInside(out *bufio.Writer, target, rel string, depth, max int) error {
	fi, err := os.Stat(target)
	if err != nil {
		return refuse("no such directory: %s", rel)
	}
	if !fi.IsDir() {
		return refuse("%s is a file, not a directory; use read_file", rel)
	}
	type entry struct {
		rel  string
		mark string
	}
	var all []entry
	var walk func(dir, prefix string, level int)
	walk = func(dir, prefix string, level int) {
		es, _ := os.ReadDir(dir) // what cannot be read is left out, as find leaves it
		for _, e := range es {
			r := prefix + e.Name()
			switch t := e.Type(); {
			case t.IsDir():
				all = append(all, entry{r, "/"})
				if level < depth && e.Name() != ".git" {
					walk(filepath.Join(dir, e.Name()), r+"/", level+1)
				}
			case t&fs.ModeSymlink != 0:
				all = append(all, entry{r, "@"})
			default:
				all = append(all, entry{r, ""})
			}
		}
	}
	walk(target, "", 1)
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.rel, b.rel) })
	if len(all) == 0 {
		out.WriteString("(empty directory)\n")
	}
	for i, e := range all {
		if i == max {
			fmt.Fprintf(out, "[… %d more entries not shown; list a subdirectory or lower the depth …]\n", len(all)-max)
			break
		}
		out.WriteString(e.rel + e.mark + "\n")
	}
	return nil
}

// maxLineChars is where read_file cuts a line.
const maxLineChars = 2000

// readInside prints target's lines from off, at most lim lines and maxb
// bytes, numbered, with a notice of where it stopped.
func readInside(out *bufio.Writer, target, rel string, off, lim, maxb int) error {
	fi, err := os.Stat(target)
	if err != nil {
		return refuse("no such file: %s", rel)
	}
	if fi.IsDir() {
		return refuse("%s is a directory; use list_files", rel)
	}
	f, err := os.Open(target)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	if head, _ := r.Peek(8192); bytes.IndexByte(head, 0) >= 0 {
		return refuse("%s is a binary file (%d bytes); not shown", rel, fi.Size())
	}
	var shown []byte
	count, lineno, stopLine := 0, 0, 0
	stopWhy := ""
	for {
		line, err := readLine(r, 4*maxLineChars+4) // past 2000 runes of any width
		if len(line) == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		lineno++
		if lineno < off || stopWhy != "" {
			continue
		}
		if count >= lim {
			stopWhy, stopLine = "limit_lines", lineno
			continue
		}
		text := []rune(string(bytes.TrimRight(bytes.TrimSuffix(line, []byte("\n")), "\r")))
		s := string(text)
		if len(text) > maxLineChars {
			s = string(text[:maxLineChars]) + " [… line cut at 2000 characters …]"
		}
		entry := fmt.Sprintf("%6d\t%s\n", lineno, s)
		if len(shown)+len(entry) > maxb {
			stopWhy, stopLine = "the 256 KiB limit", lineno
			continue
		}
		shown = append(shown, entry...)
		count++
	}
	if lineno == 0 {
		out.WriteString("(empty file)\n")
		return nil
	}
	if off > lineno {
		return refuse("offset_line %d is past the end of %s (%d lines)", off, rel, lineno)
	}
	out.Write(shown)
	if stopWhy != "" {
		fmt.Fprintf(out, "[… stopped at %s; the file has %d lines; continue with offset_line=%d …]\n", stopWhy, lineno, stopLine)
	}
	return nil
}

// readLine reads one line, its "\n" included, keeping at most keep bytes
// of it: the rest of a longer line is read and dropped.
func readLine(r *bufio.Reader, keep int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if room := keep - len(line); room > 0 {
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// writeInside replaces target with stdin through a temporary file beside
// it, creating the parents, keeping an existing file's mode.
func writeInside(out *bufio.Writer, absRoot, target, rel string, stdin io.Reader) error {
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		return refuse("%s is a directory", rel)
	}
	dir := path.Dir(target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return refuse("cannot create directory %s", strings.TrimPrefix(dir, strings.TrimSuffix(absRoot, "/")+"/"))
	}
	verb, mode := "created", fs.FileMode(0o644)
	if fi, err := os.Stat(target); err == nil {
		verb, mode = "overwrote", fi.Mode()
	}
	if err := replaceFile(target, ".lathe-write.", mode, func(w io.Writer) error {
		_, err := io.Copy(w, stdin)
		return err
	}); err != nil {
		return err
	}
	out.WriteString(verb + "\n")
	return nil
}

// editInside replaces in target per the JSON {old, new, all} on stdin and
// prints how many times.
func editInside(out *bufio.Writer, target, rel string, stdin io.Reader) error {
	var a struct {
		Old string `json:"old"`
		New string `json:"new"`
		All bool   `json:"all"`
	}
	if err := json.NewDecoder(stdin).Decode(&a); err != nil {
		return fmt.Errorf("the edit: %w", err)
	}
	if a.Old == "" {
		return refuse("old_string is empty")
	}
	fi, err := os.Stat(target)
	if err != nil {
		return refuse("no such file: %s (use write_file to create it)", rel)
	}
	if fi.IsDir() {
		return refuse("%s is a directory", rel)
	}
	data, err := os.ReadFile(target)
	if err != nil {
		return err
	}
	old := []byte(a.Old)
	n := bytes.Count(data, old)
	switch {
	case n == 0:
		return refuse("old_string not found in %s (0 matches); read the file and copy the text exactly", rel)
	case n > 1 && !a.All:
		return refuse("old_string matches %d times in %s; add surrounding context to make it unique, or set replace_all", n, rel)
	}
	limit := 1
	if a.All {
		limit = -1
	}
	data = bytes.Replace(data, old, []byte(a.New), limit)
	if err := replaceFile(target, ".lathe-edit.", fi.Mode(), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintln(out, n)
	return nil
}

// replaceFile writes a temporary file beside target (prefix and a random
// tag) with fill, gives it mode, and renames it over target; on failure
// the temporary file goes.
func replaceFile(target, prefix string, mode fs.FileMode, fill func(io.Writer) error) error {
	tag := make([]byte, 6)
	rand.Read(tag)
	tmp := filepath.Join(filepath.Dir(target), prefix+hex.EncodeToString(tag))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, mode.Perm())
	}
	if err == nil {
		err = os.Rename(tmp, target)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// maxMatchLine is where a search match's line is cut, in bytes.
const maxMatchLine = 500

// searchInside prints "path:line:text" for every line of the files under
// target (or target itself) that matches, as `grep -rnIHs
// --exclude-dir=.git` from the root did: paths as the root's relatives
// ("./…" below the root itself), binary files (a NUL in their first 32
// KiB) skipped, symlinks below target not followed, every line of pattern
// an alternative. mode is "-E" (a regular expression) or "-F" (a fixed
// string); glob, when set, keeps the files whose name matches it.
func searchInside(out *bufio.Writer, absRoot, target, rel, pattern, mode, glob string, max int) error {
	fi, err := os.Stat(target)
	if err != nil {
		return refuse("no such file or directory: %s", rel)
	}
	match, err := matcher(pattern, mode == "-F")
	if err != nil {
		return err
	}
	if glob != "" {
		if _, err := path.Match(glob, ""); err != nil {
			return refuse("bad glob %q: %v", glob, err)
		}
	}
	p := strings.TrimPrefix(strings.TrimPrefix(target, absRoot), "/")
	if p == "" {
		p = "."
	}
	found := 0
	searchFile := func(file, name string) {
		if glob != "" {
			if ok, _ := path.Match(glob, path.Base(name)); !ok {
				return
			}
		}
		f, err := os.Open(file)
		if err != nil {
			return // unreadable: left out, as grep -s leaves it
		}
		defer f.Close()
		r := bufio.NewReaderSize(f, 64<<10)
		if head, _ := r.Peek(32 << 10); bytes.IndexByte(head, 0) >= 0 {
			return
		}
		for lineno := 1; ; lineno++ {
			line, err := r.ReadBytes('\n')
			if len(line) == 0 && err != nil {
				return
			}
			line = bytes.TrimSuffix(line, []byte("\n"))
			if match(line) {
				if found++; found <= max {
					if len(line) > maxMatchLine {
						cut := maxMatchLine
						for cut > 0 && !utf8.RuneStart(line[cut]) {
							cut--
						}
						line = append(line[:cut:cut], " [… cut …]"...)
					}
					fmt.Fprintf(out, "%s:%d:%s\n", name, lineno, line)
				}
			}
			if err != nil {
				return
			}
		}
	}
	var walk func(dir, name string)
	walk = func(dir, name string) {
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			switch t := e.Type(); {
			case t.IsDir():
				if e.Name() != ".git" {
					walk(filepath.Join(dir, e.Name()), name+"/"+e.Name())
				}
			case t.IsRegular():
				searchFile(filepath.Join(dir, e.Name()), name+"/"+e.Name())
			}
		}
	}
	switch {
	case fi.IsDir() && path.Base(target) == ".git":
	case fi.IsDir():
		walk(target, p)
	case fi.Mode().IsRegular():
		searchFile(target, p)
	}
	switch {
	case found == 0:
		out.WriteString("no matches\n")
	case found > max:
		fmt.Fprintf(out, "[… %d more matches not shown; narrow the pattern, path or glob …]\n", found-max)
	}
	return nil
}

// matcher is the test of a line: any of pattern's lines, as a fixed
// string or a regular expression.
func matcher(pattern string, literal bool) (func([]byte) bool, error) {
	alts := strings.Split(pattern, "\n")
	if literal {
		return func(line []byte) bool {
			for _, a := range alts {
				if bytes.Contains(line, []byte(a)) {
					return true
				}
			}
			return false
		}, nil
	}
	res := make([]*regexp.Regexp, len(alts))
	for i, a := range alts {
		re, err := regexp.Compile(a)
		if err != nil {
			return nil, refuse("bad pattern: %v", err)
		}
		res[i] = re
	}
	return func(line []byte) bool {
		for _, re := range res {
			if re.Match(line) {
				return true
			}
		}
		return false
	}, nil
}
