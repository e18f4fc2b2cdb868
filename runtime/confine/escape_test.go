package confine_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"lathe/runtime/confine"
)

// TestEscapes: os.Root's refusals of a way out are escapes, whatever led
// out; other errors are not.
func TestEscapes(t *testing.T) {
	dir := t.TempDir()
	os.Symlink("/etc", filepath.Join(dir, "abs"))
	os.Symlink("../..", filepath.Join(dir, "up"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, p := range []string{"..", "abs/passwd", "up/x"} {
		if _, err := root.Stat(p); !confine.Escapes(err) {
			t.Errorf("Stat(%q): %v, want an escape", p, err)
		}
	}
	_, err = root.Stat("missing")
	for _, err := range []error{err, fs.ErrNotExist, nil} {
		if confine.Escapes(err) {
			t.Errorf("Escapes(%v) is true", err)
		}
	}
}
