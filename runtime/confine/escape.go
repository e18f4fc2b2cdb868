package confine

import (
	"errors"
	"io/fs"
	"os"
	"sync"
)

// Escapes reports whether err is os.Root's refusal of a path that
// resolves outside its root (a ".." above it, an absolute symlink, a
// symlink that leads out).
func Escapes(err error) bool {
	sentinel := errPathEscapes()
	return sentinel != nil && errors.Is(err, sentinel)
}

// errPathEscapes is the error os.Root gives for a path that leaves it. The
// os package does not export it, so it is taken from os.Root itself: ".."
// from any root escapes lexically, without touching the filesystem beyond
// opening "/".
var errPathEscapes = sync.OnceValue(func() error {
	root, err := os.OpenRoot("/")
	if err != nil {
		return nil
	}
	defer root.Close()
	_, err = root.Lstat("..")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return nil
})
