package commands

import (
	"fmt"
	"path"
	"strings"
)

// MaxPathBytes is Linux's PATH_MAX, the longest client path accepted.
const MaxPathBytes = 4096

// CleanPath validates a client path relative to the Session root and
// returns it clean and slash-separated: "" and "." name the root and come
// back as "."; anything else comes back without ".", empty or trailing
// elements. Absolute paths, NUL bytes and ".." elements are refused, so the
// result never starts with "/" nor contains a ".." element. A backslash is
// an ordinary file-name byte on Linux and is kept as one.
func CleanPath(p string) (string, error) {
	switch {
	case len(p) > MaxPathBytes:
		return "", fmt.Errorf("%w: path is %d bytes, over the %d-byte limit", ErrInvalid, len(p), MaxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%w: path must not contain NUL bytes", ErrInvalid)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w: path %q must be relative to the session root, not absolute", ErrInvalid, p)
	}
	for elem := range strings.SplitSeq(p, "/") {
		if elem == ".." {
			return "", fmt.Errorf("%w: path %q must not contain \"..\" elements", ErrInvalid, p)
		}
	}
	if p == "" {
		return ".", nil
	}
	return path.Clean(p), nil
}
