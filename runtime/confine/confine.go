// Package confine is the one rule for a client-given path inside a Session
// root, shared by the file routes (transport), git (commands) and the
// Agent's tools (runtime/agent/tools). It is a leaf: it imports no project
// package.
//
// Rel is lexical. It never touches the filesystem, so it cannot see
// symlinks; every caller resolves the path it returns under the root at the
// moment of access and refuses a resolution that leaves the root (os.Root in
// transport, `realpath -m` inside the sandbox in the tools). Rel's job is to
// make the lexical path and that resolution agree element by element, so
// that the check at access time is the only one that can still fail.
//
// The rules, each with its reason:
//   - At most MaxPathBytes bytes: Linux's PATH_MAX. A longer path cannot
//     name a file, and the bound caps the work done on outside input.
//   - No NUL byte: the kernel ends a path at NUL, so the path checked here
//     would not be the one opened; git's stdin pathspecs are NUL-separated,
//     so one path would become two.
//   - Not absolute: a client path names a place in the Session root. "/etc"
//     is refused rather than rebased to "etc", so that a client confused
//     about the root finds out instead of touching another file.
//   - No ".." element anywhere, even one that cleans away ("a/../b"): path
//     cleaning drops "a/.." lexically, but the kernel climbs from where "a"
//     leads, which differs when "a" is a symlink to a directory. Without
//     ".." the lexical path and the resolved one climb nowhere.
//   - "" and "." name the root and come back as ".". Anything else comes
//     back clean: slash-separated, without "." or empty elements and
//     without a trailing slash, so one file has one spelling (git
//     pathspecs, journal records and audit lines compare equal).
//   - A backslash is an ordinary file-name byte on Linux and is kept.
//   - No rule about ".git": the Agent's shell tool can run any command in
//     the sandbox, and git runs with hooks and other repository-configured
//     programs disabled (runtime/git's safe config), so refusing ".git"
//     here would guard nothing. list_files merely does not descend into it.
package confine

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// MaxPathBytes is the longest path Rel accepts: Linux's PATH_MAX.
const MaxPathBytes = 4096

// Refusals. Rel wraps exactly one of them; callers wrap it again in their own
// class (an invalid request).
var (
	// ErrTooLong refuses a path over MaxPathBytes.
	ErrTooLong = errors.New("path is over the 4096-byte limit")
	// ErrNUL refuses a path holding a NUL byte.
	ErrNUL = errors.New("path must not contain NUL bytes")
	// ErrAbsolute refuses an absolute path.
	ErrAbsolute = errors.New("path must be relative to the session root, not absolute")
	// ErrDotDot refuses a path with a ".." element.
	ErrDotDot = errors.New(`path must not contain ".." elements; name it from the session root`)
)

// Rel checks a client path relative to a Session root and returns it clean,
// or "." for the root; see the package doc for the rules. On error the
// result is "".
func Rel(p string) (string, error) {
	switch {
	case len(p) > MaxPathBytes:
		return "", fmt.Errorf("%w (%d bytes)", ErrTooLong, len(p))
	case strings.IndexByte(p, 0) >= 0:
		return "", ErrNUL
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w: %q", ErrAbsolute, p)
	}
	for elem := range strings.SplitSeq(p, "/") {
		if elem == ".." {
			return "", fmt.Errorf("%w: %q", ErrDotDot, p)
		}
	}
	if p == "" {
		return ".", nil
	}
	return path.Clean(p), nil
}
