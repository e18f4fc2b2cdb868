// Package project reads the host filesystem for the folder picker
// (GET /api/fs/list) and the project probe (GET /api/fs/project).
//
// Everything here is read-only and bounded. The package imports nothing else
// from Lathe: transport adds the runtime capability fields to a Project, and
// maps the sentinel errors below to HTTP status codes.
package project

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"lathe/runtime/errs"
)

// ErrNotFound means a requested path does not exist.
var ErrNotFound = errs.New(errs.NotFound, "not found")

// ErrNotDirectory means a requested path exists but is not a directory.
var ErrNotDirectory = errs.New(errs.Invalid, "not a directory")

// ErrInvalid means a request or a file is malformed: a path that is empty,
// relative or contains NUL, or a devcontainer.json that cannot be used.
var ErrInvalid = errs.New(errs.Invalid, "invalid")

const (
	// guidanceName is the file collected from a project and its ancestors.
	guidanceName = "LATHE.md"
	// maxGuidanceSize caps the content returned for one guidance file.
	maxGuidanceSize = 64 << 10
)

// devcontainerNames are the locations probed for a devcontainer, in order.
var devcontainerNames = []string{
	filepath.Join(".devcontainer", "devcontainer.json"),
	".devcontainer.json",
}

// lockfiles maps a lockfile to the setup command it suggests, in the order
// they are reported.
var lockfiles = []struct{ file, command string }{
	{"package-lock.json", "npm ci"},
	{"pnpm-lock.yaml", "pnpm install --frozen-lockfile"},
	{"yarn.lock", "yarn install --frozen-lockfile"},
	{"go.sum", "go mod download"},
	{"Cargo.lock", "cargo fetch"},
	{"requirements.txt", "pip install -r requirements.txt"},
	{"poetry.lock", "poetry install"},
	{"uv.lock", "uv sync"},
	{"Gemfile.lock", "bundle install"},
}

// Listing is one level of the folder picker.
type Listing struct {
	Path    string  `json:"path"`             // canonical: absolute, symlinks resolved
	Parent  string  `json:"parent,omitempty"` // empty at "/"
	Entries []Entry `json:"entries"`          // never nil
}

// Entry is a child directory in a Listing.
type Entry struct {
	Name      string `json:"name"`
	Path      string `json:"path"` // canonical; a symlink's target
	IsGitRepo bool   `json:"is_git_repo"`
}

// Project is what the probe learns about a directory.
type Project struct {
	Path         string        `json:"path"` // canonical
	IsGitRepo    bool          `json:"is_git_repo"`
	Devcontainer *Devcontainer `json:"devcontainer"` // nil when absent
	// Guidance holds the LATHE.md files of the directory and its ancestors,
	// the root's first and the directory's own last. Never nil.
	Guidance []Guidance `json:"guidance"`
	// DetectedSetup holds commands suggested by lockfiles in the directory.
	// They are suggestions only: no default policy ever approves them.
	// Never nil.
	DetectedSetup []SetupCandidate `json:"detected_setup"`
}

// Guidance is one LATHE.md file.
type Guidance struct {
	Path      string `json:"path"`
	Content   string `json:"content"`   // at most 64 KiB
	Truncated bool   `json:"truncated"` // the file is larger than Content
}

// SetupCandidate is a setup command suggested by a file in the project.
type SetupCandidate struct {
	Command string `json:"command"`
	Source  string `json:"source"` // always "lockfile"
	File    string `json:"file"`   // base name, e.g. "package-lock.json"
}

// ListDirs lists the child directories of dir, sorted by name. An empty dir
// means the daemon user's home. Dot-directories are hidden unless hidden is
// true. Symlinks to directories are listed with their resolved path; entries
// that cannot be read or resolved are skipped.
func ListDirs(dir string, hidden bool) (Listing, error) {
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Listing{}, fmt.Errorf("home directory: %w", err)
		}
		dir = home
	}
	dir, err := canonicalDir(dir)
	if err != nil {
		return Listing{}, err
	}
	des, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return Listing{}, fmt.Errorf("list %q: %w", dir, err)
	}
	l := Listing{Path: dir, Entries: []Entry{}}
	if parent := filepath.Dir(dir); parent != dir {
		l.Parent = parent
	}
	for _, de := range des {
		name := de.Name()
		if !hidden && strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		switch {
		case de.IsDir():
		case de.Type()&fs.ModeSymlink != 0:
			if path, err = filepath.EvalSymlinks(path); err != nil || !isDir(path) {
				continue
			}
		default:
			continue
		}
		l.Entries = append(l.Entries, Entry{Name: name, Path: path, IsGitRepo: isGitRepo(path)})
	}
	return l, nil
}

// Probe reports what Lathe can learn about dir: whether it is a Git
// repository, its devcontainer, the guidance files above it and the setup
// commands its lockfiles suggest. A devcontainer.json that exists but cannot
// be read or parsed is an error naming the file.
func Probe(dir string) (Project, error) {
	dir, err := canonicalDir(dir)
	if err != nil {
		return Project{}, err
	}
	p := Project{
		Path:          dir,
		IsGitRepo:     isGitRepo(dir),
		Guidance:      guidance(dir),
		DetectedSetup: []SetupCandidate{},
	}
	if p.Devcontainer, err = FindDevcontainer(dir); err != nil {
		return Project{}, err
	}
	for _, lf := range lockfiles {
		if isRegular(filepath.Join(dir, lf.file)) {
			p.DetectedSetup = append(p.DetectedSetup, SetupCandidate{Command: lf.command, Source: "lockfile", File: lf.file})
		}
	}
	return p, nil
}

// canonicalDir checks that dir is a usable absolute path and returns it with
// symlinks resolved. "~" is not expanded: it is a relative path.
func canonicalDir(dir string) (string, error) {
	switch {
	case dir == "":
		return "", fmt.Errorf("empty path: %w", ErrInvalid)
	case strings.IndexByte(dir, 0) >= 0:
		return "", fmt.Errorf("path %q contains NUL: %w", dir, ErrInvalid)
	case !filepath.IsAbs(dir):
		return "", fmt.Errorf("path %q is not absolute: %w", dir, ErrInvalid)
	}
	canon, err := filepath.EvalSymlinks(filepath.Clean(dir))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return "", fmt.Errorf("path %q: %w", dir, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("path %q: %w", dir, err)
	}
	fi, err := os.Stat(canon)
	if err != nil {
		return "", fmt.Errorf("path %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("path %q: %w", dir, ErrNotDirectory)
	}
	return canon, nil
}

// FindDevcontainer reads the first devcontainer file found in dir
// (.devcontainer/devcontainer.json, then .devcontainer.json), or returns
// nil when there is none.
func FindDevcontainer(dir string) (*Devcontainer, error) {
	for _, name := range devcontainerNames {
		path := filepath.Join(dir, name)
		if !isRegular(path) {
			continue
		}
		data, truncated, err := readBounded(path, maxDevcontainerSize)
		if err != nil {
			return nil, fmt.Errorf("read %q: %w", path, err)
		}
		if truncated {
			return nil, fmt.Errorf("%q is larger than %d bytes: %w", path, maxDevcontainerSize, ErrInvalid)
		}
		dc, err := ParseDevcontainer(data)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", path, err)
		}
		dc.Path = path
		return &dc, nil
	}
	return nil, nil
}

// guidance collects the LATHE.md files from the filesystem root down to dir.
// Only regular files are read (a symlinked LATHE.md is ignored), and a file
// that cannot be read is skipped.
func guidance(dir string) []Guidance {
	var found []Guidance
	for d := dir; ; d = filepath.Dir(d) {
		path := filepath.Join(d, guidanceName)
		if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
			if data, truncated, err := readBounded(path, maxGuidanceSize); err == nil {
				if truncated {
					data = trimPartialRune(data)
				}
				found = append(found, Guidance{Path: path, Content: string(data), Truncated: truncated})
			}
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	// Collected nearest first; report the root's first.
	out := make([]Guidance, 0, len(found))
	for i := len(found) - 1; i >= 0; i-- {
		out = append(out, found[i])
	}
	return out
}

// readBounded reads at most max bytes of path, and reports whether the file
// held more.
func readBounded(path string, max int64) (data []byte, truncated bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > max {
		return data[:max], true, nil
	}
	return data, false, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence left at the end of b by
// truncation.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0; i++ {
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// isGitRepo reports whether dir holds a .git directory, or a .git file as
// in a linked worktree or a submodule.
func isGitRepo(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ".git"))
	return err == nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func isRegular(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
