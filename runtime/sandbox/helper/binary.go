package helper

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ErrBinary is the class of a build that cannot serve as the helper.
var ErrBinary = errors.New("unusable sandbox helper")

// Binary is a build of lathe fit to run as the helper in any Linux image
// of its architecture: a static Linux ELF executable.
type Binary struct {
	// Path is the binary on the daemon's host.
	Path string
	// Arch is its architecture, in GOARCH's names ("amd64", "arm64").
	Arch string

	hash func() (string, error)
}

// machines names the ELF machines the helper can be built for.
var machines = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_386:     "386",
	elf.EM_ARM:     "arm",
	elf.EM_RISCV:   "riscv64",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
}

// Open checks that path is a static Linux executable and returns it. A
// dynamically linked build (one that names an ELF interpreter, as a cgo
// build does) would need the image's libc, so it is refused with the fix.
func Open(path string) (*Binary, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBinary, path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return nil, fmt.Errorf("%w: %s is not an executable", ErrBinary, path)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		interp, _ := io.ReadAll(io.LimitReader(p.Open(), 256))
		return nil, fmt.Errorf("%w: %s is dynamically linked (it needs %s), and Lathe runs it inside sandboxes of any image: "+
			"build lathe with `make build`, which builds it static (CGO_ENABLED=0 go build ./cmd/lathe)",
			ErrBinary, path, strings.TrimRight(string(interp), "\x00"))
	}
	arch, ok := machines[f.Machine]
	if !ok {
		return nil, fmt.Errorf("%w: %s is built for %s, which Lathe does not know", ErrBinary, path, f.Machine)
	}
	b := &Binary{Path: path, Arch: arch}
	b.hash = sync.OnceValues(func() (string, error) { return fileHash(path) })
	return b, nil
}

// Hash is the SHA-256 of the binary's content, in hex (read once).
func (b *Binary) Hash() (string, error) { return b.hash() }

func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Stage makes dir/lathe this binary, for a driver to mount dir into its
// sandboxes, and returns it there. The file there is replaced whole, by a
// rename, only when its content differs, so that a sandbox that mounts dir
// always sees one complete build: the current one. A hard link costs
// nothing; across file systems it is a copy.
func Stage(b *Binary, dir string) (*Binary, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the sandbox's users read it
		return nil, err
	}
	dst := filepath.Join(dir, "lathe")
	if same, err := sameContent(b, dst); err != nil || same {
		if err != nil {
			return nil, err
		}
		return Open(dst)
	}
	tmp := filepath.Join(dir, ".lathe.tmp")
	os.Remove(tmp)
	if err := os.Link(b.Path, tmp); err != nil {
		if err := copyFile(b.Path, tmp); err != nil {
			os.Remove(tmp)
			return nil, fmt.Errorf("stage the sandbox helper in %s: %w", dir, err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return Open(dst)
}

// sameContent reports whether dst already holds b.
func sameContent(b *Binary, dst string) (bool, error) {
	src, err := os.Stat(b.Path)
	if err != nil {
		return false, err
	}
	fi, err := os.Stat(dst)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if os.SameFile(src, fi) {
		return true, nil
	}
	if fi.Size() != src.Size() {
		return false, nil
	}
	want, err := b.Hash()
	if err != nil {
		return false, err
	}
	got, err := fileHash(dst)
	return got == want, err
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
