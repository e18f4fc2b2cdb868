package helper

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// install is `sandbox-helper install HASH PATH`: the last step of copying
// the helper into a Docker Engine's volume (runtime/sandbox/docker), run
// by the copy itself as the main process of a short-lived container. PATH
// is this binary under a temporary name; once its content is HASH it
// takes the name "lathe" beside it, by a rename, so that a sandbox never
// runs a copy cut short. Other temporary copies there (of a copy a killed
// daemon left) go.
func install(args []string, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: install HASH PATH")
		return 2
	}
	want, path := args[0], args[1]
	got, err := fileHash(path)
	if err != nil {
		fmt.Fprintln(stderr, "install:", err)
		return 1
	}
	if got != want {
		fmt.Fprintf(stderr, "install: %s has content %s, not %s\n", path, got, want)
		os.Remove(path)
		return 1
	}
	dir := filepath.Dir(path)
	if err := os.Rename(path, filepath.Join(dir, "lathe")); err != nil {
		fmt.Fprintln(stderr, "install:", err)
		return 1
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	if es, err := os.ReadDir(dir); err == nil {
		for _, e := range es {
			if strings.HasPrefix(e.Name(), TempPrefix) {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	return 0
}

// TempPrefix begins the name of a copy of the helper on its way in.
const TempPrefix = ".lathe-"
